package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/squeeze-kv/squeeze/archive"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/units"
)

func init() {
	register(command{Name: "archive", Summary: "keep a directory of files in one Redis hash, compressed; read single files (put, get, list, extract)", Run: runArchive})
}

const archiveUsage = `
Usage: squeeze archive <put|get|list|extract> [flags] KEY [arguments]

Keeps a directory of files in one Redis hash at KEY: each file is a field
named by its path (logs/2026-11-30/app.log), its value the file compressed
as a squeeze frame. Reading one file is one HGET and one decode, however
many files the archive holds (a zip reader must find the entry first), and
any client reads it through squeeze proxy with a plain HGET KEY PATH.

  put      store every regular file under DIR, replacing the archive at
           KEY whole and atomically (readers see the old files or the new)
  get      print one file to stdout
  list     the files with their sizes, stored sizes and codecs
  extract  write every file under DIR

Only contents are kept: not modes, owners, times or links (links and other
non-regular files are skipped and counted).

The Redis is --redis, else the environment variable SQUEEZE_REDIS, else
redis://127.0.0.1:6379. Flags may come before or after the arguments.

Examples:
  squeeze archive put --redis redis://127.0.0.1:6379 arc:reports ./reports
  squeeze archive get arc:reports 2026/11/summary.html > summary.html
  squeeze archive list --json arc:reports
  squeeze archive extract arc:reports ./restored
  SQUEEZE_REDIS=10.0.0.5:6379 squeeze archive list arc:reports
  redis-cli -p 6380 HGET arc:reports 2026/11/summary.html   # through the proxy

Run "squeeze archive <put|get|list|extract> --help" for the flags of each.
`

func runArchive(ctx context.Context, e env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) == 0 {
			fmt.Fprint(e.Stderr, strings.TrimLeft(archiveUsage, "\n"))
			return usageError("archive needs a subcommand: put, get, list or extract")
		}
		fmt.Fprint(e.Stdout, strings.TrimLeft(archiveUsage, "\n"))
		return flag.ErrHelp
	}
	sub, args := args[0], args[1:]
	usage := map[string]string{
		"put":     "\nUsage: squeeze archive put [flags] KEY DIR\n\nStores every regular file under DIR in the hash KEY, replacing it.\n\nExamples:\n  squeeze archive put --redis redis://127.0.0.1:6379 arc:reports ./reports\n  squeeze archive put --codec brotli:9 arc:site ./public\n  squeeze archive put --dict arc:pages ./pages   # many small files of one kind\n",
		"get":     "\nUsage: squeeze archive get [flags] KEY PATH\n\nPrints the file PATH of the archive KEY to stdout.\n\nExamples:\n  squeeze archive get arc:reports 2026/11/summary.html > summary.html\n",
		"list":    "\nUsage: squeeze archive list [flags] KEY\n\nLists the files of the archive KEY (reads it whole).\n\nExamples:\n  squeeze archive list arc:reports\n  squeeze archive list --json arc:reports\n",
		"extract": "\nUsage: squeeze archive extract [flags] KEY DIR\n\nWrites every file of the archive KEY under DIR.\n\nExamples:\n  squeeze archive extract arc:reports ./restored\n",
	}[sub]
	if usage == "" {
		return usageError("unknown archive subcommand %q (want put, get, list or extract)", sub)
	}
	fs := newFlagSet(e, "archive "+sub, usage)
	url := addRedisFlag(fs, "Redis server `URL`", localRedis)
	asJSON := fs.Bool("json", false, "print JSON for machines")
	codecName, dict := "", false
	if sub == "put" {
		fs.StringVar(&codecName, "codec", archive.DefaultAlgorithm.String(), "codec for the files (files that gain less than 10% stay raw)")
		fs.BoolVar(&dict, "dict", false, "train a zstd dictionary on the files, publish it in Redis (squeeze:dict:<id>) and compress with it: much smaller for many small files of one kind")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	want := map[string]int{"put": 2, "get": 2, "list": 1, "extract": 2}[sub]
	if fs.NArg() != want {
		return usageError("archive %s takes %d arguments, got %d (see squeeze archive %s --help)", sub, want, fs.NArg(), sub)
	}
	key := fs.Arg(0)
	var alg codec.Algorithm
	if sub == "put" {
		var err error
		if alg, err = codec.ParseAlgorithm(codecName); err != nil {
			return usageError("--codec: %v", err)
		}
		if dict && alg.ID != codec.IDZstd {
			return usageError("--dict works with zstd codecs, not %s", alg)
		}
		if st, err := os.Stat(fs.Arg(1)); err != nil || !st.IsDir() {
			return usageError("archive put: %s is not a directory", fs.Arg(1))
		}
	}
	u, err := resolveRedis(*url, localRedis)
	if err != nil {
		return err
	}
	*url = u
	rdb, err := openRedis(ctx, *url, 0)
	if err != nil {
		return err
	}
	defer rdb.Close()
	printStats := func(verb string, st archive.Stats) error {
		if *asJSON {
			return json.NewEncoder(e.Stdout).Encode(struct {
				archive.Stats
				Key      string  `json:"key"`
				SavedPct float64 `json:"saved_pct"`
			}{st, key, st.SavedPct()})
		}
		fmt.Fprintf(e.Stdout, "%s %d files (%s) %s %s in %s: %s stored, %.1f%% saved",
			verb, st.Files, units.FormatSize(st.Bytes), map[string]string{"stored": "in", "extracted": "from"}[verb], key,
			st.Elapsed.Round(time.Millisecond), units.FormatSize(st.Stored), st.SavedPct())
		if st.DictID != 0 {
			fmt.Fprintf(e.Stdout, "; with dictionary %d", st.DictID)
		}
		if st.Skipped > 0 {
			fmt.Fprintf(e.Stdout, "; %d non-regular files skipped", st.Skipped)
		}
		fmt.Fprintln(e.Stdout)
		return nil
	}
	switch sub {
	case "put":
		b := newBar(e, 1, "archiving")
		st, err := archive.Put(ctx, rdb, key, os.DirFS(fs.Arg(1)), archive.Options{Algorithm: alg, Dict: dict, Progress: b.step})
		b.finish()
		if err != nil {
			return err
		}
		return printStats("stored", st)
	case "get":
		data, err := archive.Get(ctx, rdb, nil, key, fs.Arg(1))
		if errors.Is(err, archive.ErrNotFound) {
			return fmt.Errorf("%w (squeeze archive list %s shows the paths)", atRedis(err, *url), key)
		}
		if err != nil {
			return err
		}
		_, err = e.Stdout.Write(data)
		return err
	case "list":
		list, err := archive.List(ctx, rdb, key)
		if err != nil {
			return atRedis(err, *url)
		}
		if *asJSON {
			enc := json.NewEncoder(e.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(list)
		}
		tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "size\tstored\tcodec\tpath")
		var size, stored int64
		for _, en := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", units.FormatSize(en.Size), units.FormatSize(en.Stored), en.Codec, en.Path)
			size += en.Size
			stored += en.Stored
		}
		fmt.Fprintf(tw, "%s\t%s\t\t%d files\n", units.FormatSize(size), units.FormatSize(stored), len(list))
		return tw.Flush()
	default: // extract
		st, err := archive.Extract(ctx, rdb, nil, key, fs.Arg(1))
		if err != nil {
			return atRedis(err, *url)
		}
		return printStats("extracted", st)
	}
}
