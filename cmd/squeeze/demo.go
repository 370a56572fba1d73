package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/units"
)

func init() {
	register(command{Name: "demo", Summary: "what to use on this machine, measured in a minute or two: codec, compaction, dictionary, with an HTML report", Run: runDemo})
}

const demoUsage = `Usage:
  squeeze demo [--redis URL] [--report DIR] [--sizes LIST]
  squeeze demo --write-sample FILE [--sample-size SIZE] [--seed N]

Answers "what should I use?" on this machine, in a minute or two: it
measures, on generated JSON documents of each size, the Redis memory each
codec saves and the time it adds to writes and reads (in the application,
and through the proxy), what compacting cold keys and a dictionary bring,
then prints the recommendation first and the figures behind it:

  write with X (memory saved, write and read time against no compression),
  compact cold keys to Y, use a dictionary for values under Z.

It also stores one 221.9 kB document through Redis and reads it back byte
for byte. It writes an HTML report into ./report (--report DIR) that
opens with the same answer and charts (memory saved per codec and size,
time against no compression, the trade-off with the choice marked), then
every figure; it opens from disk, without network. Every measured cell:
"squeeze bench redis --quick"; the figures squeeze was built to reach, for
its developers: "squeeze bench redis --targets".

Without --redis it starts a throwaway redis-server on a free loopback port
(Debian: apt-get install -y redis-server) and stops it at the end; it does
not read SQUEEZE_REDIS, which names the Redis holding your data.

--sizes gives the value sizes to measure (your values' sizes give the
answer for your data's sizes; default 1kB,4kB,16.6kB,47.5kB,221.9kB,4.2MB).

--write-sample writes the demo's generated JSON document to FILE (- for
standard output) and exits, touching no Redis: data to try the other
commands and the guides on (squeeze bench codecs --corpus FILE, redis-cli
-x SET). --sample-size and --seed make other documents, the same for the
same size and seed.

Examples:
  squeeze demo
  squeeze demo --report /tmp/squeeze-report
  squeeze demo --sizes 500B,2kB,8kB
  squeeze demo --redis redis://127.0.0.1:6379
  squeeze demo --write-sample doc.json
  squeeze demo --write-sample - --sample-size 4KB --seed 7 | redis-cli -x SET doc:7

`

// demoSizes are the value sizes the demo measures by default: small
// values, where a dictionary matters, then the seed study's sizes.
const demoSizes = "1kB,4kB,16.6kB,47.5kB,221.9kB,4.2MB"

func runDemo(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "demo", demoUsage)
	url := addBenchRedisFlag(fs, "use this Redis")
	report := fs.String("report", "report", "directory for the HTML report")
	sizes := fs.String("sizes", demoSizes, "value sizes to measure")
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
	sz, err := bench.ParseSizes(*sizes)
	if err != nil {
		return usageError("demo: --sizes: %v", err)
	}
	for _, s := range sz {
		if s < codec.DefaultMinSize {
			return usageError("demo: --sizes: squeeze stores values under %d bytes as they are; give sizes from %d bytes", codec.DefaultMinSize, codec.DefaultMinSize)
		}
		if s > 64<<20 {
			return usageError("demo: --sizes: %s is above the 64 MiB the demo allows", bench.FormatSize(int64(s)))
		}
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
	trip, err := demoRoundTrip(ctx, rdb)
	if err != nil {
		return err
	}

	// 2. The measurements the answer rests on.
	run, err := parseBenchRedis(e, []string{"--redis", *url, "--quick", "--dict", "--sizes", *sizes,
		"--compact-to", "zstd:9,zstd:9" + bench.DictSuffix, "--report", *report})
	if err != nil {
		return err
	}
	res, info, err := run.measure(ctx, e, "demo")
	if err != nil {
		return err
	}
	command := "squeeze demo"
	if len(args) > 0 {
		command += " " + strings.Join(args, " ")
	}
	r := run.newReport(res, "squeeze demo", command, info)
	r.Notes = append(r.Notes, trip)
	if err := bench.WriteReport(*report, r); err != nil {
		return err
	}

	// 3. The answer first, then what it rests on.
	a := bench.Recommend(res.Rows, res.Memory)
	if a == nil {
		return fmt.Errorf("demo: the run measured no codec to recommend")
	}
	out := e.Stdout
	printRecommendation(out, a, "What to use, measured on this machine ("+run.values(info)+"):")
	fmt.Fprint(out, "\n"+wrap(fmt.Sprintf("What it rests on (this run; times per operation in the application, %s path, median of %d repeats):", a.Path, run.o.Repeats), "", "", textWidth))
	printEvidence(out, res, a)
	fmt.Fprintln(out)
	fmt.Fprint(out, wrap(trip, "", "", textWidth))
	abs, err := filepath.Abs(filepath.Join(*report, "index.html"))
	if err != nil {
		abs = filepath.Join(*report, "index.html")
	}
	fmt.Fprintf(out, "\nReport with charts (open it in a browser; it needs no network):\n  %s\n", abs)
	fmt.Fprint(out, wrap("Every measured cell: squeeze bench redis --quick. The figures squeeze was built to reach, for its developers: squeeze bench redis --targets.", "", "", textWidth))
	if info.idle != "" {
		fmt.Fprint(out, "\n"+wrap(info.idle, "Note: ", "  ", textWidth))
	}
	return nil
}

// demoRoundTrip stores the demo's document with the default codec, reads
// it back five times, checks it byte for byte and says what it took.
func demoRoundTrip(ctx context.Context, rdb *redis.Client) (string, error) {
	doc := bench.JSONDocument(bench.DefaultSeed, demoDocSize)
	enc, err := codec.NewEncoder(codec.DefaultAlgorithm)
	if err != nil {
		return "", err
	}
	dec, err := codec.NewDecoder()
	if err != nil {
		return "", err
	}
	// Five round trips; the median time of each half is shown.
	key := bench.KeyPrefix + "demo"
	var stored, got, back []byte
	var up, down []float64
	for i := 0; i < 5; i++ {
		t0 := time.Now()
		stored = enc.AppendEncode(stored[:0], doc)
		if err := rdb.Set(ctx, key, stored, 0).Err(); err != nil {
			return "", fmt.Errorf("SET %s: %w", key, err)
		}
		t1 := time.Now()
		if got, err = rdb.Get(ctx, key).Bytes(); err != nil {
			return "", fmt.Errorf("GET %s: %w", key, err)
		}
		if back, err = dec.AppendDecode(back[:0], got); err != nil {
			return "", fmt.Errorf("decode %s: %w", key, err)
		}
		t2 := time.Now()
		if !bytes.Equal(back, doc) {
			return "", fmt.Errorf("BUG: the document read back differs from the one written")
		}
		up = append(up, t1.Sub(t0).Seconds())
		down = append(down, t2.Sub(t1).Seconds())
	}
	usage, err := rdb.MemoryUsage(ctx, key, 0).Result()
	if err != nil {
		return "", fmt.Errorf("MEMORY USAGE %s: %w", key, err)
	}
	rdb.Del(ctx, key)
	if _, err := codec.ParseHeader(got); err != nil {
		return "", fmt.Errorf("stored value: %w", err)
	}
	return fmt.Sprintf("One value end to end: a %s JSON document written with %s is stored in %d bytes (%.1f%% smaller; MEMORY USAGE %d bytes) and reads back byte for byte equal; compress + SET took %v, GET + decompress %v (medians of 5).",
		bench.FormatSize(int64(len(doc))), enc.Algorithm(), len(stored), bench.SavedPct(float64(len(stored)), float64(len(doc))), usage,
		time.Duration(bench.Median(up)*1e9).Round(time.Microsecond), time.Duration(bench.Median(down)*1e9).Round(time.Microsecond)), nil
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
