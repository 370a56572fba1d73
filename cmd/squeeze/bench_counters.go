package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/squeeze-kv/squeeze/bench"
)

func init() {
	registerBench(command{Name: "counters", Summary: "memory and increment rate of day counters: a list or hex strings updated by Lua vs packed BITFIELD", Run: runBenchCounters})
}

const benchCountersUsage = `
Usage: squeeze bench counters [flags]

Loads ENTITIES x DAYS u16 day counters in four layouts, each into a fresh
database, and reports:
  bytes_per_counter  used_memory delta over the bulk load / counters
  ops_per_s          increments of random counters by --clients parallel
                     connections, one at a time, then in pipelines
                     --pipeline deep
Layouts: list-lua (a list of decimal counters + LINDEX/LSET script),
hex-hash-lua (4 hex characters per day in a hash field, rewritten by a
Lua script, as a published article on packing counters into hex strings does),
key-per-counter (INCRBY), packed-bitfield (squeeze's counters package).
Ratios are against hex-hash-lua, measured in the same run. Increments are
sent by a lean client on raw connections (--driver resp), as the article's
redis-benchmark runs did, so that on a small machine the client's CPU does not hide
the server's cost per layout; --driver go-redis goes through go-redis and the
counters package instead.

Without --redis a throwaway redis-server is started per layout (it must be
installed); all are loaded first, then the increments run in --rounds
rounds interleaved across layouts, so that the machine's background load
falls on all alike. With --redis the database must be empty; the layouts run
one after the other and it is flushed after each. The default scale
(100000 x 365, one key per counter included) needs about 4 GiB of
RAM on the server; --quick needs a few hundred MB.

--json prints one array, a row per layout and pipeline depth: layout,
entities, days, used_memory_delta, bytes_per_counter, clients, pipeline,
driver, network (tcp or unix), ops, seconds, ops_per_s, memory_vs_hex and
speed_vs_hex (ratios against hex-hash-lua in the same run).

Examples:
  squeeze bench counters --quick
  squeeze bench counters
  squeeze bench counters --entities 10000 --days 90 --json
  squeeze bench counters --unix --layouts hex-hash-lua,packed-bitfield
  squeeze bench counters --redis redis://127.0.0.1:6380/15 --layouts hex-hash-lua,packed-bitfield
`

func runBenchCounters(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "bench counters", benchCountersUsage)
	url := fs.String("redis", "", fmt.Sprintf("measure this server (`URL`, empty database: redis://host:port/db, host:port, unix:///path.sock) instead of throwaway ones ($%s is not read)", envRedis))
	entities := fs.Int("entities", 100000, "entities (one series each)")
	days := fs.Int("days", 365, "counters per entity")
	clients := fs.Int("clients", 50, "parallel connections incrementing")
	pipeline := fs.Int("pipeline", 16, "pipeline depth of the pipelined runs (1: only unpipelined)")
	ops := fs.Int("ops", 200000, "increments per measurement (bound)")
	dur := fs.Duration("duration", 20*time.Second, "time per measurement (bound)")
	unix := fs.Bool("unix", false, "reach the throwaway servers over unix sockets instead of TCP loopback")
	rounds := fs.Int("rounds", 4, "split each measurement into this many rounds, interleaved across layouts")
	layouts := fs.String("layouts", strings.Join(bench.CountersLayouts, ","), "comma-separated layouts to measure")
	driver := fs.String("driver", bench.CountersDriverRESP, "increment client: resp (lean raw connections: measures the server) or go-redis (the counters package's API: measures client and server)")
	asJSON := fs.Bool("json", false, "print a JSON array of result rows instead of a table")
	quick := fs.Bool("quick", false, "a short run: 10000 entities x 90 days, 50000 increments or 5s per measurement, 2 rounds")
	report := fs.String("report", "", "write an HTML report with charts, JSON and CSV into this directory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("bench counters takes no arguments (got %q)", fs.Arg(0))
	}
	if err := checkReportDir(*report); err != nil {
		return err
	}
	if *entities <= 0 || *days <= 0 || *clients <= 0 || *pipeline <= 0 || *ops <= 0 || *dur <= 0 || *rounds <= 0 {
		return usageError("--entities, --days, --clients, --pipeline, --ops, --duration and --rounds must be positive")
	}
	var layoutList []string
	for _, l := range strings.Split(*layouts, ",") {
		layoutList = append(layoutList, strings.TrimSpace(l))
	}
	if *quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range map[string]struct {
			p *int
			n int
		}{"entities": {entities, 10000}, "days": {days, 90}, "ops": {ops, 50000}, "rounds": {rounds, 2}} {
			if !set[name] {
				*v.p = v.n
			}
		}
		if !set["duration"] {
			*dur = 5 * time.Second
		}
	}
	if err := (bench.CountersConfig{Layouts: layoutList, Driver: *driver, Days: *days}).Validate(); err != nil {
		return usageError("%v", err)
	}
	if *url != "" { // fail fast, and clearly, when nothing answers there
		u, err := normalizeRedisURL(*url)
		if err != nil {
			return usageError("--redis %s: %v", redactURL(*url), err)
		}
		*url = u
		rdb, err := openRedis(ctx, *url, 0)
		if err != nil {
			return err
		}
		rdb.Close()
	}
	cfg := bench.CountersConfig{
		RedisURL: *url, Entities: *entities, Days: *days, Clients: *clients,
		Pipeline: *pipeline, Ops: *ops, Duration: *dur, Layouts: layoutList, Driver: *driver, Rounds: *rounds, Unix: *unix,
	}
	if f, ok := e.Stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		cfg.Progress = newStageBar(f)
	}
	rows, err := bench.RunCounters(ctx, cfg)
	if cfg.Progress != nil {
		fmt.Fprintln(e.Stderr)
	}
	if err != nil {
		return err
	}
	if *report != "" {
		r := bench.CountersReport("squeeze bench "+strings.Join(append([]string{"counters"}, args...), " "), rows)
		if err := bench.WriteReport(*report, r); err != nil {
			return err
		}
		defer fmt.Fprintf(e.Stderr, "report: %s\n", reportPath(*report))
	}
	if *asJSON {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	printCountersRows(e.Stdout, rows)
	return nil
}

// newStageBar returns a Progress callback drawing one progress bar per stage.
func newStageBar(w io.Writer) func(stage string, done, total int64) {
	var mu sync.Mutex
	var bar *progressbar.ProgressBar
	cur := ""
	return func(stage string, done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		if stage != cur {
			if bar != nil {
				bar.Finish()
				fmt.Fprintln(w)
			}
			cur = stage
			bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription(fmt.Sprintf("%-28s", stage)),
				progressbar.OptionShowCount(),
				progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond))
		}
		bar.Set64(done)
	}
}

func printCountersRows(w io.Writer, rows []bench.CountersRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "layout\tbytes/counter\tmemory vs hex\tclients\tpipeline\tops/s\tspeed vs hex\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2fx\t%d\t%d\t%.0f\t%.2fx\t\n", r.Layout, r.BytesPerCounter, r.MemoryVsHex, r.Clients, r.Pipeline, r.OpsPerS, r.SpeedVsHex)
	}
	tw.Flush()
	if len(rows) > 0 {
		fmt.Fprintf(w, "%d entities x %d days, %s driver over %s; memory: used_memory delta over the load; ratios vs hex-hash-lua in this run\n", rows[0].Entities, rows[0].Days, rows[0].Driver, rows[0].Network)
	}
}
