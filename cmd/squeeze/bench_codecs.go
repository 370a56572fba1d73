package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/internal/rediscluster"
)

func init() {
	registerBench(command{Name: "codecs", Summary: "codec table (time, size, MB/s, ratio) on your files, a live Redis or built-in data", Run: runBenchCodecs})
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

const benchCodecsUsage = `Usage:
  squeeze bench codecs [--corpus PATH]... [--block SIZE | --whole] [--codecs LIST] [--json]
  squeeze bench codecs --from-redis URL [--cluster] [--sample N] [--codecs LIST] [--json]

Compresses and decompresses every value with each codec and level, checks
that every value comes back byte for byte, and prints the table the HBase
codec study (HBASE-26330) made famous: total compress time, result bytes,
improvement, compress and decompress MB/s, and ratio.

Without --corpus or --from-redis it runs on a built-in generated corpus
(JSON API documents, web and app logs, HTML pages, English prose; 1 kB to
256 kB values, about 1.4 MB) that is the same on every machine.

--json prints one array, a row per codec and level: codec, level, algorithm,
slow, samples, input_bytes, output_bytes, stored_raw, ratio, improvement_pct,
compress_ms, decompress_ms, compress_mb_s, decompress_mb_s, rounds.

Examples:
  squeeze bench codecs
  squeeze bench codecs --corpus doc.json --codecs zstd:1,zstd:3,lz4,s2   # doc.json: yours, or squeeze demo --write-sample doc.json
  squeeze bench codecs --corpus ./dumps/ --block 64KiB --json > table.json
  squeeze bench codecs --from-redis redis://127.0.0.1:6379/0 --sample 500
  squeeze bench codecs --from-redis redis://10.0.0.5:7000 --cluster   # every master of a cluster
  squeeze bench codecs --codecs all --report ./report

`

func runBenchCodecs(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "bench codecs", benchCodecsUsage)
	var corpus stringList
	fs.Var(&corpus, "corpus", "file or directory to compress (repeatable); default: the built-in corpus")
	block := fs.String("block", "", "cut files into values of this size (e.g. 4KiB, 64KiB, 1MB)")
	whole := fs.Bool("whole", false, "each file is one value (the default for --corpus)")
	codecs := fs.String("codecs", bench.DefaultCodecList, `codecs to measure, comma-separated NAME or NAME:LEVEL, or "all"`)
	jsonOut := fs.Bool("json", false, "print a JSON array of result rows instead of a table")
	fromRedis := fs.String("from-redis", "", "sample values from this live Redis (read-only: SCAN, GET, HGETALL)")
	sample := fs.Int("sample", 200, "with --from-redis: how many values to sample")
	cluster := fs.Bool("cluster", false, "with --from-redis naming a node of a Redis Cluster: sample the keys of every master")
	minTime := fs.Duration("time", 300*time.Millisecond, "measure each codec at least this long (whole rounds over the corpus)")
	seed := fs.Uint64("seed", bench.DefaultSeed, "seed of the built-in corpus")
	report := fs.String("report", "", "also write an HTML report with charts, JSON and CSV into this directory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("bench codecs: unexpected argument %q (files go after --corpus)", fs.Arg(0))
	}
	if *block != "" && *whole {
		return usageError("bench codecs: --block and --whole exclude each other")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["sample"] && *fromRedis == "" {
		return usageError("bench codecs: --sample needs --from-redis")
	}
	if *cluster && *fromRedis == "" {
		return usageError("bench codecs: --cluster needs --from-redis")
	}
	if set["seed"] && (*fromRedis != "" || len(corpus) > 0) {
		return usageError("bench codecs: --seed is for the built-in corpus, not --corpus or --from-redis")
	}
	if *fromRedis != "" && len(corpus) > 0 {
		return usageError("bench codecs: use either --corpus or --from-redis, not both")
	}
	if *minTime <= 0 || *minTime > 10*time.Minute {
		return usageError("bench codecs: --time %v must be between 0 and 10m", *minTime)
	}
	algs, err := bench.ParseAlgorithms(*codecs)
	if err != nil {
		return usageError("bench codecs: --codecs: %v", err)
	}
	blockSize := 0
	if *block != "" {
		if blockSize, err = bench.ParseSize(*block); err != nil || blockSize == 0 {
			return usageError("bench codecs: --block: invalid size %q (examples: 4KiB, 64KiB, 1MB)", *block)
		}
	}

	if err := checkReportDir(*report); err != nil {
		return err
	}

	var c bench.Corpus
	switch {
	case *fromRedis != "":
		if *sample <= 0 || *sample > 1_000_000 {
			return usageError("bench codecs: --sample %d must be between 1 and 1000000", *sample)
		}
		rdb, err := openClusterOr(ctx, *fromRedis, *cluster)
		if err != nil {
			return err
		}
		defer rdb.Close()
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		c, err = sampleRedis(sctx, rdb, *sample)
		cancel()
		if err != nil {
			return fmt.Errorf("sample %s: %w", redactURL(*fromRedis), err)
		}
		c = c.Split(blockSize) // 0: values as they are
	case len(corpus) > 0:
		if c, err = bench.LoadCorpus(corpus, blockSize); err != nil {
			return err
		}
	default:
		c = bench.BuiltinCorpus(*seed)
		if blockSize > 0 {
			c = c.Split(blockSize)
		}
	}

	fmt.Fprintf(e.Stderr, "corpus %s: %d values, %s\n", c.Name, len(c.Samples), bench.FormatSize(c.Bytes()))
	bar := newBar(e, len(algs), "codecs")
	rows, err := bench.RunCodecs(ctx, c, algs, bench.CodecOptions{MinTime: *minTime, Progress: bar.step})
	bar.finish()
	if err != nil {
		return err
	}
	if *report != "" {
		r := bench.Report{Title: "squeeze bench codecs", Command: "squeeze bench " + strings.Join(append([]string{"codecs"}, args...), " "), Corpus: c.Name, Codecs: rows}
		if err := bench.WriteReport(*report, r); err != nil {
			return err
		}
		defer fmt.Fprintf(e.Stderr, "report: %s\n", reportPath(*report))
	}
	if *jsonOut {
		return writeJSON(e.Stdout, rows)
	}
	printCodecTable(e.Stdout, rows)
	return nil
}

func printCodecTable(w io.Writer, rows []bench.CodecResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "Codec\tLevel\tTime (ms)\tResult (bytes)\tImprovement\tCompress MB/s\tDecompress MB/s\tRatio\t")
	for _, r := range rows {
		level := r.Level
		if level == "" {
			level = "-"
		}
		if r.Slow {
			level += " (slow)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s\t%.2f%%\t%.1f\t%.1f\t%.2f\t\n", r.Codec, level, r.CompressMs,
			groupThousands(r.OutputBytes), r.ImprovementPct, r.CompressMBs, r.DecompressMBs, r.Ratio)
	}
	tw.Flush()
}

func groupThousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + groupThousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// checkReportDir creates dir and dir/charts and checks that a file can be
// written there, so that a bad --report fails before a long run instead of
// after it (when WriteReport would fail and the results were lost).
func checkReportDir(dir string) error {
	if dir == "" {
		return nil
	}
	// The directories this check creates are removed again, so that a run
	// that fails later (no Redis, a bad flag) leaves nothing behind; the
	// report writer creates them when there is a report to write.
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		created = append(created, d)
	}
	defer func() {
		for _, d := range created { // deepest first
			os.Remove(d)
		}
	}()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	f, err := os.CreateTemp(dir, ".squeeze-write-test-*")
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	f.Close()
	return os.Remove(f.Name())
}

func reportPath(dir string) string {
	return strings.TrimSuffix(dir, "/") + "/index.html"
}

// sampleRedis samples n values of a Redis, or of a cluster's masters,
// each for its share, in the order of their addresses.
func sampleRedis(ctx context.Context, rdb redis.UniversalClient, n int) (bench.Corpus, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return bench.SampleRedis(ctx, rdb.(*redis.Client), n)
	}
	masters, err := rediscluster.Masters(ctx, cc)
	if err != nil {
		return bench.Corpus{}, fmt.Errorf("cluster masters: %w", err)
	}
	slices.SortFunc(masters, func(a, b *redis.Client) int { return strings.Compare(a.Options().Addr, b.Options().Addr) })
	all := bench.Corpus{Name: "redis"}
	for i, m := range masters {
		share := n*(i+1)/len(masters) - len(all.Samples)
		if share <= 0 {
			continue
		}
		c, err := bench.SampleRedis(ctx, m, share)
		if err != nil && !errors.Is(err, bench.ErrEmptyCorpus) { // a master may hold no values
			return bench.Corpus{}, fmt.Errorf("node %s: %w", m.Options().Addr, err)
		}
		all.Samples = append(all.Samples, c.Samples...)
	}
	if len(all.Samples) == 0 {
		return bench.Corpus{}, fmt.Errorf("%w: no non-empty string or hash values on %d masters", bench.ErrEmptyCorpus, len(masters))
	}
	return all, nil
}
