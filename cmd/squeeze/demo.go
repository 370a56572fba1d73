package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/units"
)

func init() {
	register(command{Name: "demo", Summary: "see squeeze work in a minute: round trip through Redis, then bench redis --quick with a report", Run: runDemo})
}

const demoUsage = `Usage:
  squeeze demo [--redis URL] [--report DIR]
  squeeze demo --write-sample FILE [--sample-size SIZE] [--seed N]

Shows what squeeze does, in under a minute, on a fresh machine:
  1. compresses a generated 221.9 kB JSON document with the default codec,
     stores it in Redis, reads it back and checks it byte for byte;
  2. runs "squeeze bench redis --quick --report DIR": read and write time with
     and without compression, and the memory Redis uses, as a table and an
     HTML report (charts, JSON, CSV) that opens from disk.

Without --redis it starts a throwaway redis-server on a free loopback port
(Debian: apt-get install -y redis-server) and stops it at the end; it does
not read SQUEEZE_REDIS, which names the Redis holding your data.

--write-sample writes the demo's generated JSON document to FILE (- for
standard output) and exits, touching no Redis: data to try the other
commands and the guides on (squeeze bench codecs --corpus FILE, redis-cli
-x SET). --sample-size and --seed make other documents, the same for the
same size and seed.

Examples:
  squeeze demo
  squeeze demo --report /tmp/squeeze-report
  squeeze demo --redis redis://127.0.0.1:6379
  squeeze demo --write-sample doc.json
  squeeze demo --write-sample - --sample-size 4KB --seed 7 | redis-cli -x SET doc:7

`

func runDemo(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "demo", demoUsage)
	url := addBenchRedisFlag(fs, "use this Redis")
	report := fs.String("report", "report", "directory for the HTML report")
	sample := fs.String("write-sample", "", "write the generated JSON document to this `FILE` (- for standard output) and exit")
	sampleSize := units.SizeFlag(demoDocSize)
	fs.Var(&sampleSize, "sample-size", "size of the --write-sample document (e.g. 4KB, 1MiB)")
	seed := fs.Uint64("seed", bench.DefaultSeed, "seed of the --write-sample document: another seed, another document")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("demo: unexpected argument %q", fs.Arg(0))
	}
	if *sample != "" {
		return writeSample(e, *sample, int(sampleSize), *seed)
	}
	if set := flagsSet(fs); set["sample-size"] || set["seed"] {
		return usageError("demo: --sample-size and --seed go with --write-sample")
	}
	if err := checkReportDir(*report); err != nil {
		return err
	}
	rdb, stop, err := connectRedis(ctx, e, *url) // starts a throwaway server when url is empty
	if err != nil {
		return err
	}
	defer stop()
	if *url == "" {
		*url = "redis://" + rdb.Options().Addr
	}

	// 1. One value, end to end.
	doc := bench.JSONDocument(bench.DefaultSeed, demoDocSize)
	enc, err := codec.NewEncoder(codec.DefaultAlgorithm)
	if err != nil {
		return err
	}
	dec, err := codec.NewDecoder()
	if err != nil {
		return err
	}
	// Five round trips; the median time of each half is shown.
	key := bench.KeyPrefix + "demo"
	var stored, got, back []byte
	var up, down []float64
	for i := 0; i < 5; i++ {
		t0 := time.Now()
		stored = enc.AppendEncode(stored[:0], doc)
		if err := rdb.Set(ctx, key, stored, 0).Err(); err != nil {
			return fmt.Errorf("SET %s: %w", key, err)
		}
		t1 := time.Now()
		if got, err = rdb.Get(ctx, key).Bytes(); err != nil {
			return fmt.Errorf("GET %s: %w", key, err)
		}
		if back, err = dec.AppendDecode(back[:0], got); err != nil {
			return fmt.Errorf("decode %s: %w", key, err)
		}
		t2 := time.Now()
		if !bytes.Equal(back, doc) {
			return fmt.Errorf("BUG: the document read back differs from the one written")
		}
		up = append(up, t1.Sub(t0).Seconds())
		down = append(down, t2.Sub(t1).Seconds())
	}
	usage, err := rdb.MemoryUsage(ctx, key, 0).Result()
	if err != nil {
		return fmt.Errorf("MEMORY USAGE %s: %w", key, err)
	}
	rdb.Del(ctx, key)
	h, err := codec.ParseHeader(got)
	if err != nil {
		return fmt.Errorf("stored value: %w", err)
	}
	fmt.Fprintf(e.Stdout, "1. Round trip of a %s JSON document with %s:\n", bench.FormatSize(int64(len(doc))), enc.Algorithm())
	fmt.Fprintf(e.Stdout, "   stored %d bytes (%.1f%% smaller; Redis MEMORY USAGE %d bytes), frame v%d codec %s, original length %d\n",
		len(stored), bench.SavedPct(float64(len(stored)), float64(len(doc))), usage, h.Version, h.ID, h.OriginalLen)
	fmt.Fprintf(e.Stdout, "   compress + SET %v, GET + decompress %v (medians of 5), read back byte for byte equal\n\n",
		time.Duration(bench.Median(up)*1e9).Round(time.Microsecond), time.Duration(bench.Median(down)*1e9).Round(time.Microsecond))

	// 2. The seed study, quick.
	fmt.Fprintf(e.Stdout, "2. squeeze bench redis --quick --report %s\n\n", *report)
	if err := runBenchRedis(ctx, e, []string{"--redis", *url, "--quick", "--report", *report}); err != nil {
		return err
	}
	abs, err := filepath.Abs(filepath.Join(*report, "index.html"))
	if err != nil {
		abs = filepath.Join(*report, "index.html")
	}
	fmt.Fprintf(e.Stdout, "\nReport: %s (open it in a browser; it needs no network)\n", abs)
	return nil
}

// demoDocSize is the size of the demo's document, one of the seed study's.
const demoDocSize = 221900

// maxSampleSize bounds --sample-size: a sample is for trying things out.
const maxSampleSize = 256 << 20

// writeSample writes the generated JSON document of size bytes and seed to
// path, or to standard output for "-".
func writeSample(e env, path string, size int, seed uint64) error {
	if size < 64 || size > maxSampleSize {
		return usageError("--sample-size must be between 64 bytes and 256MiB, got %d bytes", size)
	}
	doc := bench.JSONDocument(seed, size)
	if path == "-" {
		_, err := e.Stdout.Write(doc)
		return err
	}
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(e.Stderr, "wrote %s: a generated JSON document of %s (seed %d)\n", path, bench.FormatSize(int64(size)), seed)
	return nil
}

// flagsSet returns the names of the flags given on the command line.
func flagsSet(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
