package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
	"github.com/squeeze-kv/squeeze/proxy"
)

func init() {
	registerBench(command{Name: "redis", Summary: "read/write time and Redis memory with and without compression, per codec and value size", Run: runBenchRedis})
}

const benchRedisUsage = `Usage:
  squeeze bench redis [--redis URL] [--path direct,library,proxy] [--codecs LIST]
      [--sizes 0,16.6kB,47.5kB,221.9kB,4.2MB] [--iterations 1,10,100,1000]
      [--repeat 10] [--corpus PATH] [--dict] [--compact-to zstd:9] [--quick]
      [--portable] [--report DIR] [--json] [--targets]

How much slower do reads and writes get, and how much Redis memory is
saved, when values are compressed? This study answers it on your machine.
It repeats a published one from 2013, in which a Ruby program stored text
files (empty, 16.6 kB, 47.5 kB, 221.9 kB and 4.2 MB) in Redis with and
without zlib, and extends it to squeeze's codecs: read-only, write-only
and read-write (one write per read) workloads at those five value sizes,
each without compression and with each codec, timed over 1 to 1000
iterations and repeated; the median is reported with the slowdown against
no compression on the same path. Memory is measured in Redis: MEMORY
USAGE per key, and what deleting the keys frees of INFO used_memory and
used_memory_dataset.

Paths:
  direct   go-redis alone, no squeeze (the plain baseline)
  library  squeeze's codec in-process around go-redis: encode before SET,
           decode after GET (what the squeeze Go library does)
  proxy    through the squeeze proxy, started in-process on a loopback port in
           front of the same Redis, one per codec (go-redis talks to it)

Without --redis it starts a throwaway redis-server on a free loopback port and
stops it at the end. With --redis it only writes keys starting with
"squeeze:bench:" and deletes them when done. Values are generated JSON API
documents unless --corpus gives a file (cut or repeated to each size).

--dict adds each zstd codec with a trained dictionary ("zstd:1+dict") on the
library path and in the memory table: one dictionary per size, trained on
other generated documents of that size, never on the measured ones (what
"squeeze dict train" does with your keys).

--compact-to adds memory rows "at rest" (codec "s2:default->zstd:9"): keys
written with the default codec, as the proxy and the library write them, then
recompressed by the same code as "squeeze compact" does cold keys, and
measured again. Fast writes and a small footprint for data that stays: give
several codecs to compare (zstd:9,brotli:9), "zstd:9+dict" for a dictionary
trained per size on other documents (what "squeeze dict train" and "squeeze
compact --dict" do), or none to leave the rows out. The memory rows write
distinct values, as real keys hold: other generated documents of each size,
or other cuts of the --corpus file.

--portable measures the portable profile's codec (what squeeze proxy
--portable writes: snappy, which programs in other languages read) beside
the default (s2) in the same run, and adds a table of what it costs: time
per operation as a ratio, per path, workload and size, and the memory each
saves.

The tables open with what the run recommends, as "squeeze demo" does:
the codec to write with, what to compact cold keys to, and below which
size a dictionary pays (with --dict). --targets adds the figures squeeze
was built to reach, checked on this run, and the slowdowns the 2013 study
reported beside the measured ones: for squeeze's developers. The --report always
has them, folded, at its end.

--json prints one array, a row per cell: path, codec, workload (read, write,
readwrite), size_bytes, iterations, repeats, total_ms, ns_per_op (median),
slowdown_pct (against none on the same path and iteration count; no_baseline
is true, and slowdown_pct 0, when that none cell was skipped by --budget),
memory_saved_pct. The memory table is in the --report's results.json.

Examples:
  squeeze bench redis --quick
  squeeze bench redis --quick --report ./report && xdg-open ./report/index.html
  squeeze bench redis --redis redis://127.0.0.1:6379 --codecs zstd:1,lz4,zlib:6 --json
  squeeze bench redis --sizes 16.6kB,4.2MB --iterations 1,100 --repeat 5
  squeeze bench redis --quick --codecs zstd:1,zlib:6 --dict
  squeeze bench redis --sizes 16.6kB,47.5kB --compact-to zstd:9,zstd:9+dict,brotli:9
  squeeze bench redis --path library,proxy --portable --compact-to none

`

func runBenchRedis(ctx context.Context, e env, args []string) error {
	run, err := parseBenchRedis(e, args)
	if err != nil {
		return err
	}
	res, info, err := run.measure(ctx, e, "bench redis")
	if err != nil {
		return err
	}
	if info.idle != "" {
		fmt.Fprintln(e.Stderr, "bench redis: note: "+info.idle)
	}
	if run.report != "" {
		r := run.newReport(res, "squeeze bench redis", "squeeze bench "+strings.Join(append([]string{"redis"}, args...), " "), info)
		if err := bench.WriteReport(run.report, r); err != nil {
			return err
		}
		defer fmt.Fprintf(e.Stderr, "report: %s\n", reportPath(run.report))
	}
	if run.json {
		return writeJSON(e.Stdout, res.Rows)
	}
	if a := bench.Recommend(res.Rows, res.Memory); a != nil {
		printRecommendation(e.Stdout, a, "What to use, from this run:")
		fmt.Fprintln(e.Stdout)
	}
	printRedisTables(e.Stdout, res, run.targets)
	if run.portable {
		printPortableCost(e.Stdout, res)
	}
	return nil
}

// redisRun is one "bench redis" run, its flags parsed and checked.
type redisRun struct {
	o       bench.RedisOptions
	url     string
	corpus  string
	report  string
	json    bool
	targets bool
	dict    bool
	// portable: the portable profile's codec is measured beside the
	// default, and its cost printed (--portable).
	portable bool
}

func parseBenchRedis(e env, args []string) (*redisRun, error) {
	fs := newFlagSet(e, "bench redis", benchRedisUsage)
	url := addBenchRedisFlag(fs, "measure on this Redis")
	paths := fs.String("path", "direct,library,proxy", "paths to measure: direct, library, proxy")
	codecs := fs.String("codecs", "s2,zstd:1,zlib:6", "codecs on the library path besides none (s2 is squeeze's default, zlib:6 what the 2013 study used)")
	sizes := fs.String("sizes", "0,16.6kB,47.5kB,221.9kB,4.2MB", "value sizes")
	iters := fs.String("iterations", "1,10,100,1000", "iteration counts per timed run")
	repeat := fs.Int("repeat", 10, "repeats per cell (the median is reported)")
	budget := fs.Duration("budget", 2*time.Second, "time budget per cell; larger iteration counts predicted beyond it are skipped")
	corpus := fs.String("corpus", "", "file whose bytes make the values (default: generated JSON documents)")
	quick := fs.Bool("quick", false, "a run under a minute: iterations 1,10,100, 3 repeats, 600ms budget per cell")
	report := fs.String("report", "", "write an HTML report with charts, JSON and CSV into this directory")
	jsonOut := fs.Bool("json", false, "print a JSON array of result rows instead of tables")
	dict := fs.Bool("dict", false, "also measure each zstd codec with a dictionary trained per size on other generated documents")
	compactTo := fs.String("compact-to", "zstd:9", "codecs the default codec's keys are compacted to for the memory rows at rest (none: no such rows)")
	portable := fs.Bool("portable", false, "also measure the portable profile's codec ("+codec.PortableDefault.String()+") beside the default ("+codec.DefaultAlgorithm.String()+"), and print what it costs in time and memory")
	targets := fs.Bool("targets", false, "also print the figures squeeze was built to reach and the 2013 study's slowdowns (for squeeze's developers)")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usageError("bench redis: unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["iterations"] {
			*iters = "1,10,100"
		}
		if !set["repeat"] {
			*repeat = 3
		}
		if !set["budget"] {
			*budget = 600 * time.Millisecond
		}
	}
	run := &redisRun{url: *url, corpus: *corpus, report: *report, json: *jsonOut, targets: *targets, dict: *dict, portable: *portable}
	o := bench.RedisOptions{Repeats: *repeat, CellBudget: *budget, Dict: *dict}
	var err error
	if o.Paths, err = parsePaths(*paths); err != nil {
		return nil, err
	}
	if o.Codecs, err = bench.ParseAlgorithms(*codecs); err != nil {
		return nil, usageError("bench redis: --codecs: %v", err)
	}
	if *portable {
		for _, a := range []codec.Algorithm{codec.PortableDefault, codec.DefaultAlgorithm} {
			if !slices.Contains(o.Codecs, a) {
				o.Codecs = append([]codec.Algorithm{a}, o.Codecs...)
			}
		}
	}
	if *compactTo != "none" && *compactTo != "" {
		for _, t := range strings.Split(*compactTo, ",") {
			t = strings.TrimSpace(t)
			if _, _, err := bench.ParseCompactTarget(t); err != nil {
				return nil, usageError("bench redis: --compact-to: %v", err)
			}
			if strings.HasSuffix(t, bench.DictSuffix) && *corpus != "" {
				return nil, usageError("bench redis: --compact-to %s trains on generated documents and cannot be combined with --corpus", t)
			}
			o.CompactTo = append(o.CompactTo, t)
		}
	}
	if o.Sizes, err = bench.ParseSizes(*sizes); err != nil {
		return nil, usageError("bench redis: --sizes: %v", err)
	}
	for _, s := range o.Sizes {
		if s > 256<<20 {
			return nil, usageError("bench redis: --sizes: %s is above the 256 MiB this study allows", bench.FormatSize(int64(s)))
		}
	}
	if o.Iterations, err = parseInts(*iters); err != nil {
		return nil, usageError("bench redis: --iterations: %v", err)
	}
	if *repeat <= 0 || *repeat > 1000 {
		return nil, usageError("bench redis: --repeat %d must be between 1 and 1000", *repeat)
	}
	if *budget <= 0 {
		return nil, usageError("bench redis: --budget must be positive")
	}
	if *dict && *corpus != "" {
		return nil, usageError("bench redis: --dict trains on generated documents and cannot be combined with --corpus; for your data, run \"squeeze dict train\"")
	}
	if *corpus != "" {
		if st, err := os.Stat(*corpus); err == nil && st.IsDir() {
			return nil, usageError("bench redis: --corpus %s is a directory; give one file (its bytes make every value)", *corpus)
		}
		c, err := bench.LoadCorpus([]string{*corpus}, 0)
		if err != nil {
			return nil, err
		}
		data := c.Samples[0].Data
		o.Value = func(size int) []byte { return bench.CorpusValue(data, size) }
		o.MemoryValue = func(size, i int) []byte { return bench.CorpusValueAt(data, i*size, size) }
	}
	if err := checkReportDir(*report); err != nil {
		return nil, err
	}
	run.o = o
	return run, nil
}

// runInfo is what a run learnt besides its rows.
type runInfo struct {
	// idle is the note on this machine's idle policy, "" when it does not
	// skew latencies.
	idle string
	// version is the Redis server's version, "" when INFO does not say.
	version string
}

// measure runs the study, with a progress bar named name on a terminal
// and a line on stderr when done.
func (run *redisRun) measure(ctx context.Context, e env, name string) (res bench.RedisResult, info runInfo, err error) {
	rdb, stop, err := connectRedis(ctx, e, run.url)
	if err != nil {
		return res, info, err
	}
	defer stop()
	o := run.o
	o.Client = rdb
	b := newBar(e, 1, name)
	o.Progress = func(done, total int) {
		if b.pb != nil && b.pb.GetMax() != total {
			b.pb.ChangeMax(total)
		}
		b.step(done, total)
	}
	start := time.Now()
	info.version = redisVersion(ctx, rdb)
	res, err = bench.RunRedis(ctx, o)
	b.finish()
	if err != nil {
		return res, info, err
	}
	fmt.Fprintf(e.Stderr, "%s: %d cells in %s", name, len(res.Rows), time.Since(start).Round(100*time.Millisecond))
	if len(res.Skipped) > 0 {
		fmt.Fprintf(e.Stderr, "; %d skipped by the %v budget per cell (largest: %s)", len(res.Skipped), o.CellBudget, res.Skipped[len(res.Skipped)-1])
	}
	fmt.Fprintln(e.Stderr)
	info.idle = bench.ReadIdlePolicy().Note()
	return res, info, nil
}

// redisVersion is the server's redis_version, "" when INFO does not say.
func redisVersion(ctx context.Context, rdb *redis.Client) string {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return ""
}

// newReport is the report of a run: the measurements, the notes that
// explain them, and the figures to reach at its end.
func (run *redisRun) newReport(res bench.RedisResult, title, command string, info runInfo) bench.Report {
	def := codec.DefaultAlgorithm.String()
	r := bench.Report{
		Title: title, Command: command, Values: run.values(info),
		Redis: res.Rows, Memory: res.Memory, Targets: bench.CheckTargets(res, def),
		Notes: []string{fmt.Sprintf("Values: %s. Repeats per cell: %d (median reported). Cells predicted above %v were skipped: %d.",
			valueSource(run.corpus), run.o.Repeats, run.o.CellBudget, len(res.Skipped))},
	}
	if info.idle != "" {
		r.Notes = append(r.Notes, info.idle)
	}
	if note := bench.MemoryContext(res, def); note != "" {
		r.TargetNotes = append(r.TargetNotes, note)
	}
	if run.dict {
		r.Notes = append(r.Notes, "Codecs ending in +dict compress with a zstd dictionary trained per size on other generated documents of that size (library path and memory only).")
	}
	return r
}

// values says what the run's values were and where they were measured:
// "generated JSON API documents of 1 kB-4.2 MB, Redis 7.0.15".
func (run *redisRun) values(info runInfo) string {
	s := valueSource(run.corpus)
	if sz := run.o.Sizes; len(sz) > 0 {
		lo, hi := slices.Min(sz), slices.Max(sz)
		s += " of " + bench.FormatSize(int64(lo))
		if hi != lo {
			s += "-" + bench.FormatSize(int64(hi))
		}
	}
	if info.version != "" {
		s += ", Redis " + info.version
	}
	return s
}

func valueSource(corpus string) string {
	if corpus == "" {
		return "generated JSON API documents"
	}
	return "bytes of " + corpus
}

func parsePaths(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		switch p {
		case "":
			continue
		case bench.PathDirect, bench.PathLibrary, bench.PathProxy:
			out = append(out, p)
		default:
			return nil, usageError("bench redis: --path: unknown path %q (direct, library, proxy)", p)
		}
	}
	if len(out) == 0 {
		return nil, usageError("bench redis: --path is empty")
	}
	return out, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 || n > 10_000_000 {
			return nil, fmt.Errorf("invalid count %q (a whole number from 1 to 10000000)", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list %q", s)
	}
	return out, nil
}

// connectRedis connects to url, or starts a throwaway redis-server when url
// is empty. stop closes the client and stops the server.
func connectRedis(ctx context.Context, e env, url string) (*redis.Client, func(), error) {
	release := func() {}
	if url == "" {
		dir, err := os.MkdirTemp("", "squeeze-bench-")
		if err != nil {
			return nil, nil, err
		}
		srv, err := testutil.Start(dir)
		if err != nil {
			os.RemoveAll(dir)
			return nil, nil, fmt.Errorf("start throwaway redis-server: %w", err)
		}
		// While we own a server, a closed output pipe (squeeze ... | head)
		// must not kill squeeze before it stops the server: with SIGPIPE
		// notified, such writes fail with EPIPE instead.
		pipe := make(chan os.Signal, 1)
		signal.Notify(pipe, syscall.SIGPIPE)
		release = func() {
			srv.Stop()
			os.RemoveAll(dir)
			signal.Stop(pipe)
		}
		url = srv.URL()
		fmt.Fprintf(e.Stderr, "started a throwaway redis-server on %s\n", srv.Addr)
	}
	rdb, err := openRedis(ctx, url, 30*time.Second)
	if err != nil {
		release()
		return nil, nil, err
	}
	return rdb, func() { rdb.Close(); release() }, nil
}

// redisProbeTimeout bounds how long a command waits for a Redis server
// named by the user to answer its first PING (a variable for tests).
var redisProbeTimeout = 5 * time.Second

// openRedis parses rawURL (a usage error when it does not parse), opens a
// client whose commands time out after ioTimeout (0: go-redis's defaults),
// and checks within redisProbeTimeout that a Redis server answers PING, so
// that an unreachable or silent address fails fast with a clear message
// instead of a bare "i/o timeout" from the first real command. Messages
// name the address without its password (redactURL, in proxy.go).
func openRedis(ctx context.Context, rawURL string, ioTimeout time.Duration) (*redis.Client, error) {
	rawURL, err := normalizeRedisURL(rawURL)
	if err != nil {
		return nil, usageError("--redis %s: %v", redactURL(rawURL), err)
	}
	// newClient builds the client; probe: no retries, short timeouts.
	var newClient func(probe bool) *redis.Client
	if strings.HasPrefix(rawURL, "sentinel://") {
		u, err := proxy.ParseUpstream(rawURL)
		if err != nil {
			return nil, usageError("--redis %s: %v", redactURL(rawURL), err)
		}
		if _, err := proxy.ResolveMaster(ctx, u, redisProbeTimeout); err != nil {
			return nil, fmt.Errorf("redis at %s: %w", redactURL(rawURL), err)
		}
		newClient = func(probe bool) *redis.Client {
			fo := &redis.FailoverOptions{MasterName: u.Master, SentinelAddrs: u.Sentinels, SentinelPassword: u.SentinelPassword,
				Username: u.Username, Password: u.Password, DB: u.DB}
			if probe {
				fo.DialTimeout, fo.ReadTimeout, fo.WriteTimeout = redisProbeTimeout, redisProbeTimeout, redisProbeTimeout
				fo.MaxRetries, fo.PoolSize = -1, 1
			} else if ioTimeout > 0 {
				fo.ReadTimeout, fo.WriteTimeout = ioTimeout, ioTimeout
			}
			return redis.NewFailoverClient(fo)
		}
	} else {
		opt, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, usageError("--redis %s: %v", redactURL(rawURL), err)
		}
		if err := applyRedisTLSEnv(opt.TLSConfig); err != nil {
			return nil, err
		}
		newClient = func(probe bool) *redis.Client {
			o := *opt
			if probe {
				o.DialTimeout, o.ReadTimeout, o.WriteTimeout = redisProbeTimeout, redisProbeTimeout, redisProbeTimeout
				o.MaxRetries, o.PoolSize = -1, 1
				// One dial attempt: go-redis's default of 5 dial retries 100 ms
				// apart would turn "connection refused" into a probe timeout.
				o.DialerRetries = 1
			} else if ioTimeout > 0 {
				o.ReadTimeout, o.WriteTimeout = ioTimeout, ioTimeout
			}
			return redis.NewClient(&o)
		}
	}
	probe := newClient(true)
	pctx, cancel := context.WithTimeout(ctx, redisProbeTimeout)
	err = probe.Ping(pctx).Err()
	cancel()
	probe.Close()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			return nil, fmt.Errorf("redis at %s: no reply to PING within %v (is a Redis server listening there?)", redactURL(rawURL), redisProbeTimeout)
		}
		return nil, fmt.Errorf("redis at %s: %w", redactURL(rawURL), err)
	}
	return newClient(false), nil
}

// openClusterOr opens a Redis Cluster client when cluster is set (the URL
// names one node, more with ?addr=host:port; see go-redis's
// ParseClusterURL), and otherwise what openRedis opens, refusing a
// cluster node (refuseClusterNode). Commands that walk keys (advise,
// compact, dict train) then visit every master.
func openClusterOr(ctx context.Context, rawURL string, cluster bool) (redis.UniversalClient, error) {
	if !cluster {
		rdb, err := openRedis(ctx, rawURL, 0)
		if err != nil {
			return nil, err
		}
		if err := refuseClusterNode(ctx, rdb, rawURL); err != nil {
			rdb.Close()
			return nil, err
		}
		return rdb, nil
	}
	rawURL, err := normalizeRedisURL(rawURL)
	if err != nil {
		return nil, usageError("--redis %s: %v", redactURL(rawURL), err)
	}
	opt, err := redis.ParseClusterURL(rawURL)
	if err != nil {
		return nil, usageError("--redis %s: %v", redactURL(rawURL), err)
	}
	if err := applyRedisTLSEnv(opt.TLSConfig); err != nil {
		return nil, err
	}
	opt.DialTimeout = redisProbeTimeout
	cc := redis.NewClusterClient(opt)
	pctx, cancel := context.WithTimeout(ctx, redisProbeTimeout)
	defer cancel()
	if err := cc.ForEachMaster(pctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
		cc.Close()
		if strings.Contains(err.Error(), "cluster support disabled") {
			return nil, usageError("--cluster: %s is not a node of a Redis Cluster (%v); drop --cluster", redactURL(rawURL), err)
		}
		return nil, fmt.Errorf("redis cluster at %s: %w", redactURL(rawURL), err)
	}
	return cc, nil
}

// refuseClusterNode returns a usage error when rdb, opened without
// --cluster, is a node of a Redis Cluster (INFO cluster says
// cluster_enabled:1): a node holds the keys of its own slots only, and
// the keys squeeze itself shares (dictionaries, script prefixes) live on
// whichever node owns their slot, so a command that walks keys or reads
// those would see part of the data, or fail with MOVED. A server that
// refuses INFO (an ACL without it) is taken for a plain Redis.
func refuseClusterNode(ctx context.Context, rdb *redis.Client, rawURL string) error {
	info, err := rdb.Info(ctx, "cluster").Result()
	if err != nil || !strings.Contains(info, "cluster_enabled:1") {
		return nil
	}
	return usageError("%s is a node of a Redis Cluster (cluster_enabled:1), which holds the keys of its own slots only: add --cluster to reach the keys of every master", redactURL(rawURL))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// printRedisTables prints, per workload and size, the time per operation at
// the largest iteration count measured, the slowdown, and the memory table.
func printRedisTables(w io.Writer, res bench.RedisResult, targets bool) {
	type key struct {
		path, codec, wl string
		size            int
	}
	last := map[key]bench.RedisRow{}
	var order []key
	for _, r := range res.Rows {
		k := key{r.Path, r.Codec, r.Workload, r.SizeBytes}
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		// The largest iteration count with a baseline: a row whose "none"
		// cell was skipped by the budget has no slowdown to show.
		if r.NoBaseline && last[k].Iterations > 0 {
			continue
		}
		if r.Iterations >= last[k].Iterations || last[k].NoBaseline {
			last[k] = r
		}
	}
	seedFor := func(wl string, size int) string {
		for _, s := range bench.SeedSlowdowns {
			if s.Workload == wl && (s.SizeBytes == size || s.SizeBytes > 0 && absf(float64(size-s.SizeBytes)) <= 0.02*float64(s.SizeBytes)) {
				return fmt.Sprintf("%+.1f%%", s.SlowdownPct)
			}
		}
		return ""
	}
	fmt.Fprintln(w, "Time per operation (median of repeats, at the largest iteration count measured)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if targets {
		fmt.Fprintln(tw, "Workload\tSize\tPath\tCodec\tIterations\tµs/op\tSlowdown\t2013 study, zlib\tMemory saved\t")
	} else {
		fmt.Fprintln(tw, "Workload\tSize\tPath\tCodec\tIterations\tµs/op\tSlowdown\tMemory saved\t")
	}
	for _, k := range order {
		r := last[k]
		slow, seedCol := "", ""
		if r.Codec != "none" && r.NoBaseline {
			slow = "n/a"
		} else if r.Codec != "none" {
			slow = fmt.Sprintf("%+.1f%%", r.SlowdownPct)
			if r.Codec == "zlib:6" && r.Path == bench.PathLibrary {
				seedCol = seedFor(r.Workload, r.SizeBytes)
			}
		}
		if targets {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.1f\t%s\t%s\t%.1f%%\t\n", r.Workload, bench.FormatSize(int64(r.SizeBytes)), r.Path, r.Codec,
				r.Iterations, r.NsPerOp/1e3, slow, seedCol, r.MemorySavedPct)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.1f\t%s\t%.1f%%\t\n", r.Workload, bench.FormatSize(int64(r.SizeBytes)), r.Path, r.Codec,
				r.Iterations, r.NsPerOp/1e3, slow, r.MemorySavedPct)
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "\nMemory in Redis per key")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "Size\tCodec\tStored bytes\tMEMORY USAGE\tused_memory delta\tdataset delta\tSaved (MEMORY USAGE)\tSaved (used_memory)\tSaved (dataset)\t")
	for _, m := range res.Memory {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.0f\t%.0f\t%.1f%%\t%.1f%%\t%.1f%%\t\n", bench.FormatSize(int64(m.SizeBytes)), m.Codec, m.StoredBytes,
			m.MemoryUsageBytes, m.UsedMemoryDeltaBytes, m.DatasetDeltaBytes, m.SavedPct, m.UsedMemorySavedPct, m.DatasetSavedPct)
	}
	tw.Flush()
	if !targets {
		return
	}
	fmt.Fprintln(w, "\n"+bench.SeedSentence)
	printTargets(w, bench.CheckTargets(res, codec.DefaultAlgorithm.String()))
	if note := bench.MemoryContext(res, codec.DefaultAlgorithm.String()); note != "" {
		fmt.Fprintln(w, note)
	}
}

// printTargets prints the figures squeeze was built to reach, with their verdicts.
func printTargets(w io.Writer, checks []bench.TargetCheck) {
	if len(checks) == 0 {
		return
	}
	fmt.Fprintln(w, "\nFigures to reach (the goals squeeze was built to meet)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Target\tSize\tMeasured\tResult\t")
	for _, c := range checks {
		verdict := "met"
		if !c.Pass {
			verdict = "NOT met"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", c.Target, bench.FormatSize(int64(c.SizeByte)), c.Measured, verdict)
	}
	tw.Flush()
}

func absf(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}
