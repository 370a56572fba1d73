package client

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/difftest"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

var (
	diffSteps = flag.Int("diff.steps", 1500, "steps of TestHook_Differential (raise for long runs)")
	diffSeed  = flag.Uint64("diff.seed", 0, "seed of TestHook_Differential (0: from the time, logged)")
)

// TestHook_Differential sends internal/difftest's seeded random commands
// (strings, hashes, lists, streams, commands that look inside values,
// pipelines sent command by command, transactions as go-redis's
// TxPipelined; values of 0 B to 1 MB) through
// go-redis with the hook to one Redis and through plain go-redis to
// another, and requires the same results. A command the hook refuses
// (ErrUnsupported: it would have to look inside a compressed value) is
// sent to neither; a transaction holding one is sent by neither.
func TestHook_Differential(t *testing.T) {
	seed := *diffSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -diff.seed=%d)", seed, seed)
	ctx := context.Background()
	ra, rb := testutil.StartRedis(t), testutil.StartRedis(t)
	plain := redis.NewClient(&redis.Options{Addr: ra.Addr, Protocol: 2, ReadTimeout: 10 * time.Second})
	hooked := redis.NewClient(&redis.Options{Addr: rb.Addr, Protocol: 2, ReadTimeout: 10 * time.Second})
	defer plain.Close()
	defer hooked.Close()
	// Per-prefix rules: some string keys (s:1, s:10, s:11 ...) raw, others
	// in minlz, lists in zstd, so MSET and list commands mix policies.
	rules := []Rule{
		{Prefix: "s:1", Encoder: mustEncoder(t, "none")},
		{Prefix: "s:2", Encoder: mustEncoder(t, "minlz")},
		{Prefix: "l:", Encoder: mustEncoder(t, "zstd:1")},
	}
	if _, err := Install(hooked, Config{Rules: rules}); err != nil {
		t.Fatal(err)
	}
	g := difftest.NewGenerator(difftest.Config{Seed: seed, MaxValue: 1 << 20,
		HashFieldExpiry: testutil.HasCommand(t, ra.Addr, "HSETEX"),  // Redis 8
		SetIf:           testutil.HasSetIf(t, ra.Addr),              // Valkey 8.1, Redis 8.4
		DelIfEq:         testutil.HasCommand(t, ra.Addr, "DELIFEQ"), // Valkey 9
		Msetex:          testutil.HasCommand(t, ra.Addr, "MSETEX"),  // Valkey 9.1, Redis 8.4
		Delex:           testutil.HasCommand(t, ra.Addr, "DIGEST"),  // Redis 8.4
		XaddRef:         testutil.HasXaddRef(t, ra.Addr)})           // Redis 8.2
	var hist []string
	refused, compared := 0, 0
	for step := 0; step < *diffSteps; step++ {
		cmds := g.Step()
		if cmds[0][0] == "MULTI" {
			if cmds[len(cmds)-1][0] != "EXEC" {
				continue // DISCARD: nothing to compare
			}
			body := cmds[1 : len(cmds)-1]
			for _, c := range body {
				hist = append(hist, difftest.Short(c))
			}
			hist = append(hist, "(transaction)")
			hb, _ := txRun(ctx, hooked, body)
			// A command the hook refused changed nothing: before sending
			// (the hook then sent none of the transaction), or, for a
			// comparison on a compressed value, when it ran. The plain
			// side runs the others.
			var kept [][]string
			var keptB []*redis.Cmd
			for i, c := range body {
				if errors.Is(hb[i].Err(), ErrUnsupported) {
					refused++
					continue
				}
				kept, keptB = append(kept, c), append(keptB, hb[i])
			}
			if len(kept) == 0 {
				continue
			}
			ha, _ := txRun(ctx, plain, kept)
			for i, c := range kept {
				compared++
				if ca, cb := canonical(c, ha[i]), canonical(c, keptB[i]); ca != cb {
					t.Fatalf("step %d, transaction command %d %s (seed %d):\nplain:  %.300s\nhooked: %.300s\nrecent: %s", step, i, difftest.Short(c), seed, ca, cb, strings.Join(hist[max(0, len(hist)-10):], " | "))
				}
			}
			continue
		}
		for _, c := range cmds {
			args := make([]any, len(c))
			for i, a := range c {
				args[i] = a
			}
			hist = append(hist, difftest.Short(c))
			b := hooked.Do(ctx, args...)
			if errors.Is(b.Err(), ErrUnsupported) {
				refused++
				continue
			}
			a := plain.Do(ctx, args...)
			compared++
			if ca, cb := canonical(c, a), canonical(c, b); ca != cb {
				t.Fatalf("step %d, %s (seed %d):\nplain:  %.300s\nhooked: %.300s\nrecent: %s", step, difftest.Short(c), seed, ca, cb, strings.Join(hist[max(0, len(hist)-10):], " | "))
			}
		}
	}
	if compared < *diffSteps || refused == 0 {
		t.Fatalf("compared %d commands, %d refused: the mix should have both", compared, refused)
	}
	t.Logf("%d commands compared, %d refused by the hook", compared, refused)
}

// txRun runs cmds in one MULTI/EXEC through go-redis's TxPipelined and
// returns each command's result.
func txRun(ctx context.Context, rdb *redis.Client, cmds [][]string) ([]*redis.Cmd, error) {
	out := make([]*redis.Cmd, len(cmds))
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range cmds {
			args := make([]any, len(c))
			for j, a := range c {
				args[j] = a
			}
			out[i] = p.Do(ctx, args...)
		}
		return nil
	})
	return out, err
}

// canonical renders a result for comparison: unordered replies sorted,
// positive TTLs as "positive".
func canonical(c []string, cmd *redis.Cmd) string {
	v, err := cmd.Result()
	if err != nil {
		return "error: " + err.Error()
	}
	switch strings.ToUpper(c[0]) {
	case "HGETALL":
		if l, ok := v.([]any); ok {
			var pairs []string
			for i := 0; i+1 < len(l); i += 2 {
				pairs = append(pairs, fmt.Sprintf("%q=%q", l[i], l[i+1]))
			}
			sort.Strings(pairs)
			return strings.Join(pairs, ",")
		}
	case "HKEYS", "HVALS", "SMEMBERS":
		if l, ok := v.([]any); ok {
			var items []string
			for _, e := range l {
				items = append(items, fmt.Sprintf("%q", e))
			}
			sort.Strings(items)
			return strings.Join(items, ",")
		}
	case "TTL", "PTTL":
		if n, ok := v.(int64); ok && n > 0 {
			return "positive"
		}
	case "HTTL", "HPTTL":
		if l, ok := v.([]any); ok {
			for i, e := range l {
				if n, ok := e.(int64); ok && n > 0 {
					l[i] = "positive"
				}
			}
		}
	}
	return fmt.Sprintf("%#v", v)
}

func mustEncoder(t *testing.T, alg string) *codec.Encoder {
	t.Helper()
	enc, err := codec.NewEncoder(codec.MustParseAlgorithm(alg), codec.WithMinSize(0))
	if err != nil {
		t.Fatal(err)
	}
	return enc
}
