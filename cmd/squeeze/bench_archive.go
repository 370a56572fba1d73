package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/squeeze-kv/squeeze/archive"
	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/codec"
)

func init() {
	registerBench(command{Name: "archive", Summary: "single files out of a zip against a squeeze archive in Redis, by number of files (as a published Ruby zip study did)", Run: runBenchArchive})
}

const benchArchiveUsage = `
Usage: squeeze bench archive [flags]

A published Ruby study zipped directories of 15.9 kB text files and read
single files back out of the zip, finding that the time to read one grows
with the number of files. This study builds archives of --files files of
--file-size bytes of generated prose, each as a zip (deflate, as zip tools
write) and as a squeeze archive (one Redis hash, package archive), and
times reading one random file, checked against the original:

  zip, opened per read   the study's open_one: open the zip, walk the
                         entries until the name matches, read it
  zip, kept open         the central directory read once, entries by name
  squeeze archive        HGET of the file's field, then decode
  ..., trained dictionary  the same, files compressed with a zstd dictionary
                         trained on them (archive put --dict; from 8 files;
                         its stored size includes the dictionary)

with the stored size (the zip file, or MEMORY USAGE of the hash). Reads are
interleaved across the layouts; times are medians.

Without --redis it starts a throwaway redis-server. With --redis it writes
and deletes the keys squeeze:bench:archive and squeeze:bench:archive-dict,
and publishes the dictionaries it trains (squeeze:dict:<id>, immutable, as
"squeeze dict train --publish" does).

--json prints an array of rows: layout, files, file_bytes, raw_bytes,
stored_bytes, saved_pct, read_us, reads.

Examples:
  squeeze bench archive
  squeeze bench archive --quick
  squeeze bench archive --files 10,100,1000,10000 --reads 500 --report ./report
`

func runBenchArchive(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "bench archive", benchArchiveUsage)
	url := addBenchRedisFlag(fs, "measure on this Redis")
	files := fs.String("files", "10,100,1000", "archive sizes, in files")
	fileSize := fs.Int("file-size", bench.DefaultArchiveFileSize, "bytes per file")
	reads := fs.Int("reads", 300, "single-file reads timed per layout and archive size")
	codecName := fs.String("codec", archive.DefaultAlgorithm.String(), "squeeze archive's codec")
	quick := fs.Bool("quick", false, "a short run: 10 and 100 files, 50 reads")
	jsonOut := fs.Bool("json", false, "print a JSON array of result rows instead of a table")
	report := fs.String("report", "", "write an HTML report with charts, JSON and CSV into this directory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("bench archive: unexpected argument %q", fs.Arg(0))
	}
	if err := checkReportDir(*report); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["files"] {
			*files = "10,100"
		}
		if !set["reads"] {
			*reads = 50
		}
	}
	c := bench.ArchiveConfig{FileSize: *fileSize, Reads: *reads}
	for _, s := range strings.Split(*files, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 || n > 1_000_000 {
			return usageError("bench archive: --files: %q is not a number of files between 1 and 1000000", s)
		}
		c.Files = append(c.Files, n)
	}
	if *fileSize <= 0 || *fileSize > 64<<20 {
		return usageError("bench archive: --file-size must be between 1 byte and 64 MiB, got %d", *fileSize)
	}
	if *reads <= 0 {
		return usageError("bench archive: --reads must be positive, got %d", *reads)
	}
	var err error
	if c.Algorithm, err = codec.ParseAlgorithm(*codecName); err != nil || c.Algorithm.ID == codec.IDNone {
		return usageError("bench archive: --codec: %q is not a compressing codec (%v)", *codecName, err)
	}
	rdb, stop, err := connectRedis(ctx, e, *url)
	if err != nil {
		return err
	}
	defer stop()
	c.Client = rdb
	b := newBar(e, len(c.Files), "bench archive")
	c.Progress = b.step
	start := time.Now()
	rows, err := bench.RunArchive(ctx, c)
	b.finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stderr, "bench archive: %d rows in %s\n", len(rows), time.Since(start).Round(100*time.Millisecond))
	if *report != "" {
		r := bench.ArchiveReport("squeeze bench "+strings.Join(append([]string{"archive"}, args...), " "), rows)
		if err := bench.WriteReport(*report, r); err != nil {
			return err
		}
		defer fmt.Fprintf(e.Stderr, "report: %s\n", reportPath(*report))
	}
	if *jsonOut {
		return writeJSON(e.Stdout, rows)
	}
	printArchiveRows(e.Stdout, rows)
	return nil
}

func printArchiveRows(w io.Writer, rows []bench.ArchiveRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "files\tlayout\tstored\tsaved\tread one file (median)\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.1f%%\t%.0f µs\t\n", r.Files, r.Layout, bench.FormatSize(r.StoredBytes), r.SavedPct, r.ReadUs)
	}
	tw.Flush()
	if len(rows) > 0 {
		fmt.Fprintf(w, "files of %s of generated prose; %d reads per row, each checked against the file\n", bench.FormatSize(int64(rows[0].FileBytes)), rows[0].Reads)
	}
}
