package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/codec"
)

func init() {
	registerBench(command{Name: "docs", Summary: "upload/download time of large JSON documents per codec, on loopback and a shaped link", Run: runBenchDocs})
}

const benchDocsUsage = `Usage:
  squeeze bench docs [--redis URL] [--codecs LIST] [--sizes LIST] [--repeat N]
      [--path library,proxy] [--shaped auto|on|off] [--rate 1gbit] [--rtt 0.5ms]
      [--quick] [--report DIR] [--json] [--targets]

Repeats a published study ("Large documents in redis: is it worth
compressing them", JSON documents of a Node service) on your machine: JSON
documents from 100 kB to 20 MB are uploaded (compress + SET) and
downloaded (GET + decompress) with each codec, and the size above which
compression makes the transfer faster is reported per codec.

It measures on loopback, and, when run as root, over a constrained link that
it builds itself: a network namespace joined by a veth pair shaped with
tc netem (--rate, --rtt), with a redis-server inside the namespace. All of it
is removed at the end. Without root it says so and measures loopback only.
Kernels without netem get the rate alone (tc tbf with a 64 KiB bucket, so
that no more than one GSO packet passes ahead of the rate), and the report
says so.

--path proxy measures what an application in any language gets from a
squeeze proxy beside it: the application sends plain SET and GET to a proxy
on loopback (one per codec, in-process), and the proxy compresses and talks
to Redis over the link. Those rows carry path "proxy" and the link's name
with " via proxy"; the default path, library, compresses in the
application.

--targets adds the figure squeeze was built to reach on a shaped link
(the best codec at least twice as fast as none from 1 MB), checked on
this run: for squeeze's developers. The --report always has it, folded, at
its end.

--json prints one array, a row per link, path, codec and size: codec, link,
path, size_bytes, stored_bytes, repeats, upload_ms, download_ms (medians),
upload_change_pct, download_change_pct (against none), saved_pct,
compress_ms, decompress_ms.

Examples:
  squeeze bench docs --quick
  squeeze bench docs --rate 100mbit --rtt 2ms --report ./docs-report   # as root: the shaped link
  squeeze bench docs --shaped off --codecs brotli:1,zstd:1 --sizes 1MB,10MB --json
  squeeze bench docs --path library,proxy --codecs s2,zstd:1,brotli:1   # as root

`

var rateRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps)$`)

func runBenchDocs(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "bench docs", benchDocsUsage)
	url := addBenchRedisFlag(fs, "Redis for the loopback run")
	codecs := fs.String("codecs", bench.DefaultDocCodecs, "codecs to compare (none is always measured)")
	sizes := fs.String("sizes", "100kB,250kB,500kB,1MB,2MB,4MB,10MB,20MB", "document sizes")
	repeat := fs.Int("repeat", 5, "repeats per cell (the median is reported)")
	budget := fs.Duration("budget", 3*time.Second, "time budget per cell (at least one repeat always runs)")
	shaped := fs.String("shaped", "auto", "the shaped link: auto (when root), on (fail without root), off")
	rate := fs.String("rate", "1gbit", "bandwidth of the shaped link (tc syntax: 100mbit, 1gbit)")
	rtt := fs.Duration("rtt", 500*time.Microsecond, "round-trip time of the shaped link")
	corpus := fs.String("corpus", "", "file whose bytes make the documents (default: generated JSON)")
	paths := fs.String("path", "library", "library (the application compresses), proxy (a squeeze proxy beside it does), or both: library,proxy")
	quick := fs.Bool("quick", false, "a short run: sizes 100kB,1MB,4MB,10MB, 3 repeats")
	report := fs.String("report", "", "write an HTML report with charts, JSON and CSV into this directory")
	jsonOut := fs.Bool("json", false, "print a JSON array of result rows instead of tables")
	targets := fs.Bool("targets", false, "also print the figure squeeze was built to reach, checked on this run (for squeeze's developers)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("bench docs: unexpected argument %q", fs.Arg(0))
	}
	setFlags := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { setFlags[f.Name] = true })
	if *quick {
		if !setFlags["sizes"] {
			*sizes = "100kB,1MB,4MB,10MB"
		}
		if !setFlags["repeat"] {
			*repeat = 3
		}
	}
	algs, err := bench.ParseAlgorithms(*codecs)
	if err != nil {
		return usageError("bench docs: --codecs: %v", err)
	}
	szs, err := bench.ParseSizes(*sizes)
	if err != nil {
		return usageError("bench docs: --sizes: %v", err)
	}
	for _, s := range szs {
		if s == 0 || s > 256<<20 {
			return usageError("bench docs: --sizes: %s must be between 1 byte and 256 MiB", bench.FormatSize(int64(s)))
		}
	}
	var viaProxy []bool
	for _, p := range strings.Split(*paths, ",") {
		switch strings.TrimSpace(p) {
		case "library":
			viaProxy = append(viaProxy, false)
		case "proxy":
			viaProxy = append(viaProxy, true)
		default:
			return usageError("bench docs: --path %q: want library, proxy or library,proxy", p)
		}
	}
	if *repeat <= 0 || *repeat > 1000 {
		return usageError("bench docs: --repeat %d must be between 1 and 1000", *repeat)
	}
	if *budget <= 0 {
		return usageError("bench docs: --budget must be positive")
	}
	if *shaped != "auto" && *shaped != "on" && *shaped != "off" {
		return usageError("bench docs: --shaped %q: want auto, on or off", *shaped)
	}
	if !rateRE.MatchString(*rate) {
		return usageError("bench docs: --rate %q: want a tc rate such as 100mbit or 1gbit", *rate)
	}
	if *rtt < 0 || *rtt > 10*time.Second {
		return usageError("bench docs: --rtt %v must be between 0 and 10s", *rtt)
	}
	value := func(size int) []byte { return bench.JSONDocument(bench.DefaultSeed+uint64(size), size) }
	if *corpus != "" {
		if st, err := os.Stat(*corpus); err == nil && st.IsDir() {
			return usageError("bench docs: --corpus %s is a directory; give one file (its bytes make every value)", *corpus)
		}
		c, err := bench.LoadCorpus([]string{*corpus}, 0)
		if err != nil {
			return err
		}
		data := c.Samples[0].Data
		value = func(size int) []byte { return bench.CorpusValue(data, size) }
	}
	docs := map[int][]byte{}
	cached := func(size int) []byte {
		if d, ok := docs[size]; ok {
			return d
		}
		docs[size] = value(size)
		return docs[size]
	}

	type link struct {
		name string
		rdb  *redis.Client
		stop func()
	}
	var links []link
	defer func() {
		for _, l := range links {
			l.stop()
		}
	}()
	if err := checkReportDir(*report); err != nil {
		return err
	}
	rdb, stop, err := connectRedis(ctx, e, *url)
	if err != nil {
		return err
	}
	links = append(links, link{"loopback", rdb, stop})
	var notes []string
	if *shaped != "off" {
		l, err := bench.StartShapedLink(ctx, bench.LinkOptions{Rate: *rate, RTT: *rtt})
		switch {
		case err == nil:
			srdb := redis.NewClient(&redis.Options{Addr: l.Addr, ReadTimeout: 60 * time.Second, WriteTimeout: 60 * time.Second})
			links = append(links, link{l.Name, srdb, func() { srdb.Close(); l.Close() }})
			fmt.Fprintf(e.Stderr, "shaped link: redis-server at %s behind %s\n", l.Addr, l.Name)
			if l.Shaper == "tbf" {
				notes = append(notes, fmt.Sprintf("This kernel has no sch_netem: the shaped link limits the rate with tc tbf (a %d-byte bucket, about one GSO packet, so at most that much crosses ahead of the rate) and adds no delay.", l.Burst))
			}
		case errors.Is(err, bench.ErrNotRoot) && *shaped == "auto":
			fmt.Fprintf(e.Stderr, "bench docs: not root, so no shaped link (it needs network namespaces and tc); measuring loopback only\n")
			notes = append(notes, "Loopback only: the shaped link needs root.")
		default:
			return fmt.Errorf("shaped link: %w", err)
		}
	}

	perLink := 1 // RunDocs measures none first, as the baseline
	for _, a := range algs {
		if a.ID != codec.IDNone {
			perLink++
		}
	}
	b := newBar(e, len(links)*len(viaProxy)*len(szs)*perLink, "bench docs")
	var rows []bench.DocRow
	doneBefore := 0
	for _, l := range links {
		for _, proxied := range viaProxy {
			r, err := bench.RunDocs(ctx, bench.DocsOptions{
				Client: l.rdb, Link: l.name, Codecs: algs, Sizes: szs, Repeats: *repeat, CellBudget: *budget, Value: cached,
				Proxy:    proxied,
				Progress: func(done, total int) { b.step(doneBefore+done, 0) },
			})
			if err != nil {
				b.finish()
				return err
			}
			doneBefore += len(r)
			rows = append(rows, r...)
		}
	}
	b.finish()
	cross := bench.Crossovers(rows)
	if *report != "" {
		r := bench.Report{
			Title:   "squeeze bench docs",
			Command: "squeeze bench " + strings.Join(append([]string{"docs"}, args...), " "),
			Docs:    rows, Crossovers: cross, Notes: notes, Targets: bench.CheckDocTargets(rows),
		}
		if err := bench.WriteReport(*report, r); err != nil {
			return err
		}
		defer fmt.Fprintf(e.Stderr, "report: %s\n", reportPath(*report))
	}
	if *jsonOut {
		return writeJSON(e.Stdout, rows)
	}
	printDocTables(e.Stdout, rows, cross, *targets)
	return nil
}

func printDocTables(w io.Writer, rows []bench.DocRow, cross []bench.Crossover, targets bool) {
	var links, codecs []string
	var sizes []int
	cell := map[string]bench.DocRow{}
	for _, r := range rows {
		if !containsStr(links, r.Link) {
			links = append(links, r.Link)
		}
		if !containsStr(codecs, r.Codec) {
			codecs = append(codecs, r.Codec)
		}
		if !containsInt(sizes, r.SizeBytes) {
			sizes = append(sizes, r.SizeBytes)
		}
		cell[fmt.Sprint(r.Link, r.Codec, r.SizeBytes)] = r
	}
	for _, l := range links {
		dirs := []string{"upload (compress + SET)", "download (GET + decompress)"}
		if strings.HasSuffix(l, " via proxy") {
			dirs = []string{"upload (SET through the proxy)", "download (GET through the proxy)"}
		}
		for _, dir := range dirs {
			fmt.Fprintf(w, "%s, %s: median ms\n", l, dir)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprint(tw, "Size\t")
			for _, c := range codecs {
				fmt.Fprintf(tw, "%s\t", c)
			}
			fmt.Fprintln(tw)
			for _, s := range sizes {
				fmt.Fprintf(tw, "%s\t", bench.FormatSize(int64(s)))
				for _, c := range codecs {
					r := cell[fmt.Sprint(l, c, s)]
					v := r.UploadMs
					if strings.HasPrefix(dir, "download") {
						v = r.DownloadMs
					}
					fmt.Fprintf(tw, "%.2f\t", v)
				}
				fmt.Fprintln(tw)
			}
			tw.Flush()
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w, "Compression makes the transfer faster than none:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Link\tCodec\tUpload\tDownload\t")
	for i := 0; i+1 < len(cross); i += 2 {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", cross[i].Link, cross[i].Codec, crossText(cross[i].SizeBytes), crossText(cross[i+1].SizeBytes))
	}
	tw.Flush()
	if targets {
		printTargets(w, bench.CheckDocTargets(rows))
	}
}

func crossText(n int) string {
	if n < 0 {
		return "never (in the sizes measured)"
	}
	return "from " + bench.FormatSize(int64(n))
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
