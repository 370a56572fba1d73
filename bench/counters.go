package bench

// This file is the "squeeze bench counters" study: memory and increment
// throughput of day-wise counters in four layouts (issue 4, seed
// 002_98e52fa48332ac25.txt).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/counters"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// Counter layouts compared by RunCounters.
const (
	// CountersLayoutList is the seed's first layout: a list of decimal
	// counters per entity, incremented by a Lua script (LINDEX + LSET).
	CountersLayoutList = "list-lua"
	// CountersLayoutHex is the seed's second layout: 4 hex characters per
	// day in the "counts" field of a hash, rewritten by the seed's Lua script.
	CountersLayoutHex = "hex-hash-lua"
	// CountersLayoutKeys is one string key per counter, incremented by INCRBY.
	CountersLayoutKeys = "key-per-counter"
	// CountersLayoutPacked is counters.Store: one pre-sized BITFIELD string
	// per entity, incremented by BITFIELD INCRBY.
	CountersLayoutPacked = "packed-bitfield"
)

// Increment drivers of RunCounters.
const (
	CountersDriverRESP    = "resp"
	CountersDriverGoRedis = "go-redis"
)

// CountersLayouts lists every layout in the order RunCounters measures them.
var CountersLayouts = []string{CountersLayoutList, CountersLayoutHex, CountersLayoutKeys, CountersLayoutPacked}

// CountersListScript is the list layout's increment. The seed does not print
// its "old script"; this is the direct way to do it: ARGV[1] is the 0-based
// day, ARGV[2] the delta; it returns the new value.
const CountersListScript = `
local i = tonumber(ARGV[1])
local n = tonumber(redis.call('LINDEX', KEYS[1], i)) + tonumber(ARGV[2])
redis.call('LSET', KEYS[1], i, n)
return n
`

// CountersHexScript is the seed's hex-in-hash script as printed, with two
// fixes so that it can run at all: its HSET is given the field name it omits
// (as printed, Redis rejects it with "wrong number of arguments"), and it
// adds the delta instead of subtracting it. ARGV[1] is the 1-based day.
const CountersHexScript = `
local getData = function(str, index)
    local count = str:sub(index*4 -3, index*4)
    return tonumber("0x"..count)
end
local setData = function(str, index, data)
    local str1, str2
    if index == 1 then
        str1 = ""
    else
        str1 = str:sub(1, index*4 - 4)
    end
    if index*4 == string.len(str) then
        str2 = ""
    else
        str2 = str:sub(index*4 + 1, string.len(str))
    end
    local newcount = string.format('%04X', tonumber(data))
    return str1 .. newcount .. str2
end
local dayindex = tonumber(ARGV[1])
local delta = tonumber(ARGV[2])
local strval = redis.call('hget', KEYS[1], "counts")
local count = getData(strval, dayindex)
strval = setData(strval, dayindex, count + delta)
redis.call('hset', KEYS[1], "counts", strval)
return count + delta
`

// CountersConfig configures RunCounters. Zero fields take the defaults in
// brackets.
type CountersConfig struct {
	// RedisURL is the server to measure. Empty starts a fresh throwaway
	// redis-server (testutil.Start) per layout in Dir. A given server must
	// have an empty database: each layout is loaded into it, measured and
	// removed with FLUSHDB.
	RedisURL string
	// Dir holds the throwaway servers' files [os.TempDir()].
	Dir string
	// Layouts to measure [CountersLayouts].
	Layouts []string
	// Entities [100000] and Days [365]: counters are Entities x Days u16.
	Entities int
	Days     int
	// Clients is the number of parallel connections incrementing [50].
	Clients int
	// Pipeline is the depth of the pipelined runs [16]; every layout is
	// also measured without pipelining. 1 measures only unpipelined.
	Pipeline int
	// Ops bounds the increments of one measurement [200000], Duration its
	// time [20s]; whichever comes first ends it.
	Ops      int
	Duration time.Duration
	// Driver sends the increments: CountersDriverRESP [default], a lean
	// client writing pre-encoded commands on raw connections, so that on a
	// small machine the figures measure the server's cost per layout rather
	// than the Go client's, as the seed's redis-benchmark did; or
	// CountersDriverGoRedis, go-redis with the counters package's own API.
	Driver string
	// Unix connects to the throwaway servers over their unix socket
	// instead of TCP loopback: less kernel work per round trip, so the
	// unpipelined figures show more of the server's cost per command.
	// With RedisURL, use a unix:// URL instead.
	Unix bool
	// Rounds splits each measurement into this many parts [4], run in
	// turn across layouts (interleaved when each layout has its own
	// server), so that a change in the machine's background load does not
	// favour one layout.
	Rounds int
	// Seed makes the loaded values and the increment targets reproducible.
	Seed uint64
	// Progress, if set, is called as work completes: stage names the layout
	// and step ("packed-bitfield load"), done of total units.
	Progress func(stage string, done, total int64)
}

// CountersRow is one measurement: a layout, its memory cost, and its
// increment rate with a number of clients and a pipeline depth.
type CountersRow struct {
	Layout          string  `json:"layout"`
	Entities        int     `json:"entities"`
	Days            int     `json:"days"`
	UsedMemoryDelta int64   `json:"used_memory_delta"` // bytes, over the bulk load
	BytesPerCounter float64 `json:"bytes_per_counter"`
	Clients         int     `json:"clients"`
	Pipeline        int     `json:"pipeline"` // 1 = no pipelining
	Driver          string  `json:"driver"`
	Network         string  `json:"network"` // tcp or unix
	Ops             int64   `json:"ops"`
	Seconds         float64 `json:"seconds"`
	OpsPerS         float64 `json:"ops_per_s"`
	// MemoryVsHex and SpeedVsHex compare with the hex-hash-lua row of the
	// same pipeline depth in the same run (hex bytes / these bytes, these
	// ops/s / hex ops/s); 0 when that layout was not measured.
	MemoryVsHex float64 `json:"memory_vs_hex"`
	SpeedVsHex  float64 `json:"speed_vs_hex"`
}

func (c *CountersConfig) defaults() {
	if len(c.Layouts) == 0 {
		c.Layouts = CountersLayouts
	}
	if c.Entities <= 0 {
		c.Entities = 100000
	}
	if c.Days <= 0 {
		c.Days = 365
	}
	if c.Clients <= 0 {
		c.Clients = 50
	}
	if c.Pipeline <= 0 {
		c.Pipeline = 16
	}
	if c.Ops <= 0 {
		c.Ops = 200000
	}
	if c.Duration <= 0 {
		c.Duration = 20 * time.Second
	}
	if c.Rounds <= 0 {
		c.Rounds = 4
	}
	if c.Driver == "" {
		c.Driver = CountersDriverRESP
	}
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
}

// Validate reports a configuration RunCounters would refuse (an unknown
// layout or driver, more than 16384 days) without connecting to anything,
// so that a command line can reject it as bad usage.
func (c CountersConfig) Validate() error {
	for _, l := range c.Layouts {
		if !validLayout(l) {
			return fmt.Errorf("bench counters: unknown layout %q (want %s)", l, strings.Join(CountersLayouts, ", "))
		}
	}
	if c.Driver != "" && c.Driver != CountersDriverRESP && c.Driver != CountersDriverGoRedis {
		return fmt.Errorf("bench counters: unknown driver %q (want %s or %s)", c.Driver, CountersDriverRESP, CountersDriverGoRedis)
	}
	if c.Days > 16384 {
		return fmt.Errorf("bench counters: %d days is more than this study's 16384", c.Days)
	}
	return nil
}

// RunCounters loads Entities x Days counters in each layout into a fresh
// database, records the used_memory delta, then measures increments of
// random (entity, day) counters with Clients parallel connections, one
// command at a time and in Pipeline-deep pipelines, in Rounds interleaved
// rounds. Rows come in layout order, unpipelined before pipelined. Any
// command error stops the run.
func RunCounters(ctx context.Context, cfg CountersConfig) ([]CountersRow, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	depths := []int{1}
	if cfg.Pipeline > 1 {
		depths = append(depths, cfg.Pipeline)
	}
	type acc struct {
		ops  int64
		secs float64
	}
	var rows []CountersRow
	// measure runs the rounds of the given targets, interleaved, and
	// appends their rows.
	measure := func(targets []*countersTarget) error {
		sums := make([][]acc, len(targets))
		for i := range sums {
			sums[i] = make([]acc, len(depths))
		}
		rc := cfg
		rc.Ops = max(1, cfg.Ops/cfg.Rounds)
		rc.Duration = cfg.Duration / time.Duration(cfg.Rounds)
		for round := 0; round < cfg.Rounds; round++ {
			for i, t := range targets {
				for j, depth := range depths {
					ops, secs, err := t.incr(ctx, rc, depth)
					if err != nil {
						return fmt.Errorf("bench counters %s: increments (pipeline %d): %w", t.layout, depth, err)
					}
					sums[i][j].ops += ops
					sums[i][j].secs += secs
				}
			}
		}
		for i, t := range targets {
			for j, depth := range depths {
				a := sums[i][j]
				rows = append(rows, CountersRow{
					Layout: t.layout, Entities: cfg.Entities, Days: cfg.Days,
					UsedMemoryDelta: t.delta, BytesPerCounter: float64(t.delta) / (float64(cfg.Entities) * float64(cfg.Days)),
					Clients: cfg.Clients, Pipeline: depth, Driver: cfg.Driver, Network: t.opt.Network, Ops: a.ops, Seconds: a.secs, OpsPerS: float64(a.ops) / a.secs,
				})
			}
		}
		return nil
	}
	if cfg.RedisURL == "" {
		// A fresh server per layout, all loaded first, then measured in
		// interleaved rounds so that background load on the machine falls
		// on every layout alike.
		var targets []*countersTarget
		defer func() {
			for _, t := range targets {
				t.close()
			}
		}()
		for _, layout := range cfg.Layouts {
			t, err := prepareCounters(ctx, cfg, layout)
			if err != nil {
				return nil, fmt.Errorf("bench counters %s: %w", layout, err)
			}
			targets = append(targets, t)
		}
		if err := measure(targets); err != nil {
			return rows, err
		}
	} else {
		// One server: each layout in turn in the empty database.
		for _, layout := range cfg.Layouts {
			t, err := prepareCounters(ctx, cfg, layout)
			if err != nil {
				return rows, fmt.Errorf("bench counters %s: %w", layout, err)
			}
			err = measure([]*countersTarget{t})
			t.close()
			if err != nil {
				return rows, err
			}
		}
	}
	for i := range rows {
		for _, h := range rows {
			if h.Layout == CountersLayoutHex && h.Pipeline == rows[i].Pipeline {
				if rows[i].BytesPerCounter > 0 {
					rows[i].MemoryVsHex = h.BytesPerCounter / rows[i].BytesPerCounter
				}
				if h.OpsPerS > 0 {
					rows[i].SpeedVsHex = rows[i].OpsPerS / h.OpsPerS
				}
			}
		}
	}
	return rows, nil
}

func validLayout(l string) bool {
	for _, k := range CountersLayouts {
		if k == l {
			return true
		}
	}
	return false
}

// countersTarget is one layout loaded into a database, ready for
// increments.
type countersTarget struct {
	layout  string
	opt     *redis.Options
	rdb     *redis.Client
	delta   int64 // used_memory delta over the load
	closers []func()
}

func (t *countersTarget) close() {
	for i := len(t.closers) - 1; i >= 0; i-- {
		t.closers[i]()
	}
	t.closers = nil
}

func (t *countersTarget) incr(ctx context.Context, cfg CountersConfig, depth int) (int64, float64, error) {
	if cfg.Driver == CountersDriverRESP {
		return countersIncrRESP(ctx, t.opt, t.rdb, cfg, t.layout, depth)
	}
	return countersIncr(ctx, t.rdb, cfg, t.layout, depth)
}

// prepareCounters connects to cfg.RedisURL, or starts a fresh server,
// checks the database is empty, loads the layout and measures its memory.
func prepareCounters(ctx context.Context, cfg CountersConfig, layout string) (_ *countersTarget, err error) {
	t := &countersTarget{layout: layout}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	url := cfg.RedisURL
	if url == "" {
		dir, err := os.MkdirTemp(cfg.Dir, "squeeze-bench-counters-")
		if err != nil {
			return nil, err
		}
		t.closers = append(t.closers, func() { os.RemoveAll(dir) })
		srv, err := testutil.Start(dir, "--enable-debug-command", "yes") // DEBUG HTSTATS: see settledRehashMemory
		if err != nil {
			return nil, err
		}
		t.closers = append(t.closers, srv.Stop)
		url = srv.URL()
		if cfg.Unix {
			if srv.Socket == "" {
				return nil, errors.New("the throwaway server has no unix socket (path too long?)")
			}
			url = "unix://" + srv.Socket
		}
	}
	t.opt, err = redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	t.opt.PoolSize = cfg.Clients + 8
	t.opt.PipelinePoolSize = cfg.Clients + 8
	t.rdb = redis.NewClient(t.opt)
	t.closers = append(t.closers, func() { t.rdb.Close() })
	n, err := t.rdb.DBSize(ctx).Result()
	if err != nil {
		return nil, err
	}
	if n != 0 {
		return nil, fmt.Errorf("database of %s holds %d keys; the study loads and flushes its own, so it needs an empty database (pick one, e.g. redis://host:6379/15)", url, n)
	}
	if cfg.RedisURL != "" {
		t.closers = append(t.closers, func() { t.rdb.FlushDB(context.WithoutCancel(ctx)) })
	}
	before, _, err := usedMemory(ctx, t.rdb)
	if err != nil {
		return nil, err
	}
	if err := countersLoad(ctx, t.rdb, cfg, layout); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	after, err := settledRehashMemory(ctx, t.rdb)
	if err != nil {
		return nil, err
	}
	t.delta = after - before
	return t, nil
}

// settledRehashMemory waits (at most 30 s) for the keyspace's incremental
// rehash to finish, so that the delta counts one hash table, then reads
// used_memory.
func settledRehashMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		s, err := rdb.Do(ctx, "DEBUG", "HTSTATS", "0").Text()
		if err != nil || !strings.Contains(s, "Rehashing") && !strings.Contains(s, "rehashing target") {
			break // settled, or DEBUG is disabled (then measure now)
		}
		time.Sleep(200 * time.Millisecond)
	}
	used, _, err := usedMemory(ctx, rdb)
	return used, err
}

func entityKey(e int) string { return "e:" + strconv.Itoa(e) }

// countersValue is the loaded value of a counter: deterministic, u16, and
// in the range of day counts such as the seed's 280, 150, 250, 560.
func countersValue(seed uint64, e, d int) int64 {
	x := seed ^ uint64(e)*0x9E3779B97F4A7C15 ^ uint64(d)*0xC2B2AE3D27D4EB4F
	x ^= x >> 29
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 32
	return int64(x % 1000)
}

// countersLoad bulk-loads every entity in the layout with 4 pipelined
// loaders.
func countersLoad(ctx context.Context, rdb *redis.Client, cfg CountersConfig, layout string) error {
	store, err := counters.New(rdb, counters.Config{Prefix: "e:", Type: counters.U16, Slots: cfg.Days})
	if err != nil {
		return err
	}
	const loaders = 4
	batch := 1000
	if layout == CountersLayoutKeys {
		batch = max(1, 20000/cfg.Days) // entities per pipeline: ~20k SETs
	}
	var next, done atomic.Int64
	total := int64(cfg.Entities)
	stage := layout + " load"
	var wg sync.WaitGroup
	errc := make(chan error, loaders)
	for w := 0; w < loaders; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vals := make([]int64, cfg.Days)
			for {
				lo := int(next.Add(int64(batch))) - batch
				if lo >= cfg.Entities || ctx.Err() != nil {
					return
				}
				hi := min(lo+batch, cfg.Entities)
				_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
					for e := lo; e < hi; e++ {
						for d := range vals {
							vals[d] = countersValue(cfg.Seed, e, d)
						}
						key := entityKey(e)
						switch layout {
						case CountersLayoutList:
							args := make([]any, len(vals))
							for d, v := range vals {
								args[d] = v
							}
							p.RPush(ctx, key, args...)
						case CountersLayoutHex:
							hex, err := counters.AppendHex(nil, vals)
							if err != nil {
								return err
							}
							p.HSet(ctx, key, "counts", hex)
						case CountersLayoutKeys:
							args := make([]any, 0, 2*len(vals))
							for d, v := range vals {
								args = append(args, key+":"+strconv.Itoa(d), v)
							}
							p.MSet(ctx, args...)
						case CountersLayoutPacked:
							img, err := store.Encode(nil, vals)
							if err != nil {
								return err
							}
							p.Set(ctx, key, img, 0)
						}
					}
					return nil
				})
				if err != nil {
					errc <- err
					return
				}
				if cfg.Progress != nil {
					cfg.Progress(stage, done.Add(int64(hi-lo)), total)
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	return ctx.Err()
}

// countersIncr runs the increments of one measurement and returns how many
// completed and in how many seconds.
func countersIncr(ctx context.Context, rdb *redis.Client, cfg CountersConfig, layout string, depth int) (int64, float64, error) {
	store, err := counters.New(rdb, counters.Config{Prefix: "e:", Type: counters.U16, Slots: cfg.Days, Overflow: counters.OverflowFail})
	if err != nil {
		return 0, 0, err
	}
	var script *redis.Script
	switch layout {
	case CountersLayoutList:
		script = redis.NewScript(CountersListScript)
	case CountersLayoutHex:
		script = redis.NewScript(CountersHexScript)
	}
	if script != nil {
		if err := script.Load(ctx, rdb).Err(); err != nil {
			return 0, 0, err
		}
	}
	// build appends the command for one increment of counter (e, d).
	build := func(dst []any, e, d int) []any {
		key := entityKey(e)
		switch layout {
		case CountersLayoutList:
			return append(dst, "EVALSHA", script.Hash(), 1, key, d, 1)
		case CountersLayoutHex:
			return append(dst, "EVALSHA", script.Hash(), 1, key, d+1, 1)
		case CountersLayoutKeys:
			return append(dst, "INCRBY", key+":"+strconv.Itoa(d), 1)
		default:
			return store.IncrArgs(dst, strconv.Itoa(e), d, 1)
		}
	}
	check := func(c *redis.Cmd) error {
		if layout == CountersLayoutPacked {
			_, err := counters.IncrResult(c)
			return err
		}
		return c.Err()
	}

	return runIncrLoad(ctx, cfg, layout, depth, cfg.Clients, func(c int) func(k int) error {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(c)+uint64(depth)<<32))
		cmds := make([]*redis.Cmd, depth)
		return func(k int) error {
			var err error
			if depth == 1 {
				cmds[0] = redis.NewCmd(ctx, build(make([]any, 0, 8), rng.IntN(cfg.Entities), rng.IntN(cfg.Days))...)
				_ = rdb.Process(ctx, cmds[0])
			} else {
				_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
					for i := 0; i < k; i++ {
						cmds[i] = redis.NewCmd(ctx, build(make([]any, 0, 8), rng.IntN(cfg.Entities), rng.IntN(cfg.Days))...)
						_ = p.Process(ctx, cmds[i])
					}
					return nil
				})
			}
			for _, cmd := range cmds[:k] {
				if e := check(cmd); e != nil && err == nil {
					err = e
				}
			}
			return err
		}
	})
}

// runIncrLoad runs workers that each send batches of up to depth increments
// (newBatch(w) returns worker w's function that sends k increments and waits
// for their replies) until cfg.Ops are issued, cfg.Duration has passed or ctx
// ends. It returns the increments done and the seconds taken; the first
// worker error stops the run.
func runIncrLoad(ctx context.Context, cfg CountersConfig, layout string, depth, workers int, newBatch func(w int) func(k int) error) (int64, float64, error) {
	var issued, done atomic.Int64
	budget := int64(cfg.Ops)
	deadline := time.Now().Add(cfg.Duration)
	stage := layout + " incr x" + strconv.Itoa(depth)
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			batch := newBatch(w)
			for ctx.Err() == nil && time.Now().Before(deadline) {
				n := issued.Add(int64(depth))
				if n-int64(depth) >= budget {
					return
				}
				k := int(min(int64(depth), budget-(n-int64(depth))))
				if err := batch(k); err != nil {
					errc <- err
					return
				}
				d := done.Add(int64(k))
				if cfg.Progress != nil && (d/int64(depth))%64 == 0 {
					cfg.Progress(stage, d, budget)
				}
			}
		}(w)
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	close(errc)
	if err := <-errc; err != nil {
		return done.Load(), secs, err
	}
	if cfg.Progress != nil {
		cfg.Progress(stage, done.Load(), budget)
	}
	return done.Load(), secs, ctx.Err()
}

// CountersReport turns the counters study's rows into a report: the table,
// and charts of bytes per counter and increments per second per layout.
func CountersReport(command string, rows []CountersRow) Report {
	r := Report{Title: "squeeze bench counters", Command: command,
		Tables: []Table{{Name: "counters", Title: "Counters: memory and increments per second", Rows: rows}}}
	if len(rows) == 0 {
		return r
	}
	var layouts []string
	var pipes []int
	for _, row := range rows {
		if !contains(layouts, row.Layout) {
			layouts = append(layouts, row.Layout)
		}
		if !containsInt(pipes, row.Pipeline) {
			pipes = append(pipes, row.Pipeline)
		}
	}
	mem := BarChart{Name: "counters-memory", Title: "Bytes per counter",
		Caption: fmt.Sprintf("used_memory delta over the bulk load of %d entities x %d days, per counter.", rows[0].Entities, rows[0].Days),
		YLabel:  "bytes per counter", Groups: layouts, Series: []BarSeries{{Label: "bytes per counter"}}}
	speed := BarChart{Name: "counters-speed", Title: "Increments per second",
		Caption: fmt.Sprintf("%d clients, %s driver over %s, by pipeline depth.", rows[0].Clients, rows[0].Driver, rows[0].Network),
		YLabel:  "increments per second", Groups: layouts}
	for _, l := range layouts {
		v := 0.0
		for _, row := range rows {
			if row.Layout == l {
				v = row.BytesPerCounter
				break
			}
		}
		mem.Series[0].Values = append(mem.Series[0].Values, v)
	}
	for _, p := range pipes {
		ser := BarSeries{Label: fmt.Sprintf("pipeline %d", p)}
		for _, l := range layouts {
			v := 0.0
			for _, row := range rows {
				if row.Layout == l && row.Pipeline == p {
					v = row.OpsPerS
				}
			}
			ser.Values = append(ser.Values, v)
		}
		speed.Series = append(speed.Series, ser)
	}
	r.Bars = []BarChart{mem, speed}
	return r
}
