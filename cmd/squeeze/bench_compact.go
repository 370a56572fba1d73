package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/codec"
)

func init() {
	registerBench(command{Name: "compact", Summary: "memory saved by recompressing s2-written JSON documents with strong codecs (squeeze compact)", Run: runBenchCompact})
}

const benchCompactUsage = `
Usage: squeeze bench compact [flags]

What "squeeze compact" buys: for each size, writes --keys generated JSON
documents (those of "bench redis") with the fast --write codec, as an
application's hot path would, then runs the compaction (package compact,
the same code as "squeeze compact") to each target codec and reports the
Redis MEMORY USAGE per key uncompressed, as written and after compaction,
and the compaction's throughput (keys/s and MB/s of documents, over SCAN,
reads, re-encoding and the compare-and-set writes). Every key is checked to
decode to its document afterwards.

A target ending in +dict compresses with a zstd dictionary trained per size
on other generated documents of that size, never on the measured ones.

Without --redis it starts a throwaway redis-server. With --redis it writes
and deletes keys under squeeze:bench: only.

--json prints an array of rows: size_bytes, keys, write_codec, codec,
memory_raw_bytes, memory_before_bytes, memory_after_bytes,
memory_saved_pct_written, memory_saved_pct_compacted, compaction_saved_pct,
seconds, keys_per_s, mb_per_s.

Examples:
  squeeze bench compact
  squeeze bench compact --quick
  squeeze bench compact --sizes 47.5kB --codecs zstd:3,zstd:19,brotli:11 --keys 50 --json
  squeeze bench compact --write zstd:1 --codecs zstd:19,zstd:9+dict
`

func runBenchCompact(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "bench compact", benchCompactUsage)
	url := addBenchRedisFlag(fs, "measure on this Redis")
	sizes := fs.String("sizes", "16.6kB,47.5kB,221.9kB,4.2MB", "document sizes")
	keys := fs.Int("keys", 0, "documents per size (default: about 8 MB of them, between 4 and 200)")
	write := fs.String("write", "s2", "codec the documents are written with (the hot path)")
	targets := fs.String("codecs", strings.Join(bench.DefaultCompactTargets, ","), "codecs to compact to (a +dict suffix adds a trained dictionary, zstd only)")
	workers := fs.Int("workers", 1, "encode on this many CPUs during compaction")
	quick := fs.Bool("quick", false, "a short run: sizes 16.6kB and 221.9kB, 8 documents each, zstd:9 and zstd:9+dict")
	jsonOut := fs.Bool("json", false, "print a JSON array of result rows instead of a table")
	report := fs.String("report", "", "write an HTML report with a chart, JSON and CSV into this directory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("bench compact: unexpected argument %q", fs.Arg(0))
	}
	if err := checkReportDir(*report); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["sizes"] {
			*sizes = "16.6kB,221.9kB"
		}
		if !set["keys"] {
			*keys = 8
		}
		if !set["codecs"] {
			*targets = "zstd:9,zstd:9+dict"
		}
	}
	o := bench.CompactOptions{Keys: *keys, Workers: *workers}
	var err error
	if o.Sizes, err = bench.ParseSizes(*sizes); err != nil {
		return usageError("bench compact: --sizes: %v", err)
	}
	for _, s := range o.Sizes {
		if s <= 0 || s > 64<<20 {
			return usageError("bench compact: --sizes: %s is not between 1 byte and 64 MiB", bench.FormatSize(int64(s)))
		}
	}
	if o.Write, err = codec.ParseAlgorithm(*write); err != nil {
		return usageError("bench compact: --write: %v", err)
	}
	for _, t := range strings.Split(*targets, ",") {
		t = strings.TrimSpace(t)
		if _, _, err := bench.ParseCompactTarget(t); err != nil {
			return usageError("bench compact: --codecs: %v", err)
		}
		o.Targets = append(o.Targets, t)
	}
	if *keys < 0 || *keys > 100000 {
		return usageError("bench compact: --keys %d must be between 1 and 100000 (0: the default)", *keys)
	}
	if *workers <= 0 {
		return usageError("bench compact: --workers must be positive, got %d", *workers)
	}
	rdb, stop, err := connectRedis(ctx, e, *url)
	if err != nil {
		return err
	}
	defer stop()
	o.Client = rdb
	b := newBar(e, len(o.Sizes)*len(o.Targets), "bench compact")
	o.Progress = b.step
	start := time.Now()
	rows, err := bench.RunCompact(ctx, o)
	b.finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stderr, "bench compact: %d rows in %s\n", len(rows), time.Since(start).Round(100*time.Millisecond))
	if *report != "" {
		r := bench.CompactReport("squeeze bench "+strings.Join(append([]string{"compact"}, args...), " "), rows)
		if err := bench.WriteReport(*report, r); err != nil {
			return err
		}
		defer fmt.Fprintf(e.Stderr, "report: %s\n", reportPath(*report))
	}
	if *jsonOut {
		return writeJSON(e.Stdout, rows)
	}
	printCompactRows(e.Stdout, rows)
	return nil
}

func printCompactRows(w io.Writer, rows []bench.CompactRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "MEMORY USAGE per key, and memory saved against the uncompressed documents:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "size\tkeys\traw\twritten %s\tsaved\tcompacted to\tafter\tsaved\tcompaction saved\tkeys/s\tMB/s\t\n", rows[0].Write)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.1f%%\t%s\t%s\t%.1f%%\t%.1f%%\t%.1f\t%.1f\t\n",
			bench.FormatSize(int64(r.SizeBytes)), r.Keys, bench.FormatSize(int64(r.RawMemory)),
			bench.FormatSize(int64(r.BeforeMemory)), r.SavedWritePct, r.Target,
			bench.FormatSize(int64(r.AfterMemory)), r.SavedCompactPct, r.CompactionPct, r.KeysPerSec, r.MBPerSec)
	}
	tw.Flush()
}
