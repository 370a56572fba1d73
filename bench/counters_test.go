package bench

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/counters"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// countersTotal sums every counter of a layout.
func countersTotal(t *testing.T, ctx context.Context, rdb *redis.Client, cfg CountersConfig, layout string) int64 {
	t.Helper()
	store, _ := counters.New(rdb, counters.Config{Prefix: "e:", Slots: cfg.Days})
	var sum int64
	for e := 0; e < cfg.Entities; e++ {
		key := entityKey(e)
		var vals []int64
		var err error
		switch layout {
		case CountersLayoutList:
			var s []string
			if s, err = rdb.LRange(ctx, key, 0, -1).Result(); err == nil {
				vals, err = counters.ParseDecimalList(nil, s)
			}
		case CountersLayoutHex:
			var b []byte
			if b, err = rdb.HGet(ctx, key, "counts").Bytes(); err == nil {
				vals, err = counters.ParseHex(nil, b)
			}
		case CountersLayoutKeys:
			for d := 0; d < cfg.Days; d++ {
				v, err := rdb.Get(ctx, key+":"+strconv.Itoa(d)).Int64()
				if err != nil {
					t.Fatal(err)
				}
				vals = append(vals, v)
			}
		case CountersLayoutPacked:
			vals, err = store.AppendRange(ctx, nil, strconv.Itoa(e), 0, cfg.Days)
		}
		if err != nil {
			t.Fatalf("%s entity %d: %v", layout, e, err)
		}
		if len(vals) != cfg.Days {
			t.Fatalf("%s entity %d: %d values, want %d", layout, e, len(vals), cfg.Days)
		}
		for _, v := range vals {
			sum += v
		}
	}
	return sum
}

// TestCountersLayouts loads each layout, runs increments, and checks that
// every increment landed: the total of all counters grows by the number of
// increments reported.
func TestCountersLayouts(t *testing.T) {
	ctx := context.Background()
	cfg := CountersConfig{Entities: 40, Days: 30, Clients: 4, Pipeline: 4, Ops: 400, Seed: 7}
	cfg.defaults()
	for _, layout := range CountersLayouts {
		t.Run(layout, func(t *testing.T) {
			r := testutil.StartRedis(t)
			rdb := redis.NewClient(&redis.Options{Addr: r.Addr, PoolSize: 8})
			defer rdb.Close()
			if err := countersLoad(ctx, rdb, cfg, layout); err != nil {
				t.Fatal(err)
			}
			var want int64
			for e := 0; e < cfg.Entities; e++ {
				for d := 0; d < cfg.Days; d++ {
					want += countersValue(cfg.Seed, e, d)
				}
			}
			if got := countersTotal(t, ctx, rdb, cfg, layout); got != want {
				t.Fatalf("loaded total = %d, want %d", got, want)
			}
			opt, _ := redis.ParseURL(r.URL())
			resp := func(ctx context.Context, rdb *redis.Client, cfg CountersConfig, layout string, depth int) (int64, float64, error) {
				return countersIncrRESP(ctx, opt, rdb, cfg, layout, depth)
			}
			for _, depth := range []int{1, 4} {
				for name, incr := range map[string]func(context.Context, *redis.Client, CountersConfig, string, int) (int64, float64, error){"go-redis": countersIncr, "resp": resp} {
					ops, secs, err := incr(ctx, rdb, cfg, layout, depth)
					if err != nil || ops != int64(cfg.Ops) || secs <= 0 {
						t.Fatalf("%s depth %d: %d ops in %.3fs, %v", name, depth, ops, secs, err)
					}
					want += ops
				}
			}
			if got := countersTotal(t, ctx, rdb, cfg, layout); got != want {
				t.Fatalf("total after increments = %d, want %d", got, want)
			}
		})
	}
}

func TestRunCounters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	if testutil.ServerPath() == "" {
		t.Skip("redis-server not installed")
	}
	ctx := context.Background()
	var stages []string
	rows, err := RunCounters(ctx, CountersConfig{
		Entities: 50, Days: 20, Clients: 3, Pipeline: 4, Ops: 300, Dir: t.TempDir(),
		Progress: func(stage string, done, total int64) {
			if len(stages) == 0 || stages[len(stages)-1] != stage {
				stages = append(stages, stage)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2*len(CountersLayouts) {
		t.Fatalf("%d rows, want %d", len(rows), 2*len(CountersLayouts))
	}
	for _, r := range rows {
		if r.BytesPerCounter <= 0 || r.OpsPerS <= 0 || r.Ops != 300 || r.MemoryVsHex <= 0 || r.SpeedVsHex <= 0 {
			t.Errorf("implausible row %+v", r)
		}
	}
	if len(stages) == 0 || !strings.HasSuffix(stages[0], " load") {
		t.Errorf("progress stages = %q", stages)
	}

	// A given server with keys in the database is refused, not flushed.
	r := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	rdb.Set(ctx, "precious", "1", 0)
	if _, err := RunCounters(ctx, CountersConfig{RedisURL: r.URL(), Entities: 5, Days: 3, Clients: 1, Ops: 10}); err == nil || !strings.Contains(err.Error(), "empty database") {
		t.Fatalf("non-empty database: %v", err)
	}
	if rdb.Get(ctx, "precious").Val() != "1" {
		t.Fatal("the study touched a non-empty database")
	}
	// A given empty server: layouts run in turn and the database is left empty.
	r2 := testutil.StartRedis(t)
	rows, err = RunCounters(ctx, CountersConfig{RedisURL: r2.URL(), Entities: 20, Days: 7, Clients: 2, Pipeline: 4, Ops: 40, Driver: CountersDriverGoRedis})
	if err != nil || len(rows) != 2*len(CountersLayouts) {
		t.Fatalf("--redis run: %d rows, %v", len(rows), err)
	}
	for _, r := range rows {
		if r.Driver != CountersDriverGoRedis || r.Network != "tcp" || r.BytesPerCounter <= 0 {
			t.Errorf("row %+v", r)
		}
	}
	c2 := redis.NewClient(&redis.Options{Addr: r2.Addr})
	defer c2.Close()
	if n := c2.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("the study left %d keys on the given server", n)
	}
	if _, err := RunCounters(ctx, CountersConfig{Layouts: []string{"nope"}}); err == nil {
		t.Fatal("unknown layout accepted")
	}
}

// TestCountersRESP_Errors checks the lean driver reports error replies and
// BITFIELD's nil (a failed overflow) instead of counting them as done.
func TestCountersRESP_Errors(t *testing.T) {
	ctx := context.Background()
	r := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	opt, _ := redis.ParseURL(r.URL())
	cfg := CountersConfig{Entities: 3, Days: 4, Clients: 2, Ops: 10}
	cfg.defaults()
	// Nothing loaded: the hex script fails on a missing hash.
	if _, _, err := countersIncrRESP(ctx, opt, rdb, cfg, CountersLayoutHex, 2); err == nil || !strings.Contains(err.Error(), "redis: ") {
		t.Fatalf("hex on missing keys: %v", err)
	}
	// Packed series at the top of u16: the first increment overflows.
	s, _ := counters.New(rdb, counters.Config{Prefix: "e:", Slots: 4})
	for e := 0; e < 3; e++ {
		if err := s.Load(ctx, strconv.Itoa(e), []int64{65535, 65535, 65535, 65535}); err != nil {
			t.Fatal(err)
		}
	}
	if n, _, err := countersIncrRESP(ctx, opt, rdb, cfg, CountersLayoutPacked, 1); !errors.Is(err, counters.ErrOverflow) || n != 0 {
		t.Fatalf("packed overflow: %d done, %v", n, err)
	}
}
