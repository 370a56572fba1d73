package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// inspectCase is one go-redis call of a command that looks inside stored
// values, run on keys under a prefix: seed writes its values, run makes
// the call, keys are what it may change.
type inspectCase struct {
	name string
	seed func(ctx context.Context, c *redis.Client, k func(string) string)
	run  func(ctx context.Context, c *redis.Client, k func(string) string) string
	keys []string
}

// inspectCases are the go-redis calls of APPEND, SETRANGE, the bit
// commands, LCS, LINSERT, LPOS, LREM and SORT, on compressed values, raw
// values and missing keys.
func inspectCases() []inspectCase {
	v1, v2 := big("inspect"), big("other")
	r := func(v any, err error) string { return fmt.Sprintf("%v | %v", v, err) }
	set := func(pairs ...string) func(ctx context.Context, c *redis.Client, k func(string) string) {
		return func(ctx context.Context, c *redis.Client, k func(string) string) {
			for i := 0; i+1 < len(pairs); i += 2 {
				c.Set(ctx, k(pairs[i]), pairs[i+1], 0)
			}
		}
	}
	list := func(key string, elems ...any) func(ctx context.Context, c *redis.Client, k func(string) string) {
		return func(ctx context.Context, c *redis.Client, k func(string) string) {
			c.RPush(ctx, k(key), elems...)
		}
	}
	none := func(context.Context, *redis.Client, func(string) string) {}
	return []inspectCase{
		{"APPEND", set("s", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.Append(ctx, k("s"), "tail").Result())
		}, []string{"s"}},
		{"APPEND new", none, func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.Append(ctx, k("n"), v2).Result())
		}, []string{"n"}},
		{"APPEND short", set("s", "ab"), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.Append(ctx, k("s"), "c").Result())
		}, []string{"s"}},
		{"APPEND magic", none, func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.Append(ctx, k("n"), "\xC1SQ plain bytes").Result())
		}, []string{"n"}},
		{"APPEND wrong type", list("l", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.Append(ctx, k("l"), "x").Result())
		}, []string{"l"}},
		{"SETRANGE", set("s", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.SetRange(ctx, k("s"), 5, "XYZ").Result())
		}, []string{"s"}},
		{"SETRANGE past end", set("s", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.SetRange(ctx, k("s"), int64(len(v1)+10), "XYZ").Result())
		}, []string{"s"}},
		{"SETRANGE new", none, func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.SetRange(ctx, k("n"), 3, v2).Result())
		}, []string{"n"}},
		{"SETRANGE empty", set("s", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.SetRange(ctx, k("s"), 3, "").Result())
		}, []string{"s"}},
		{"SETRANGE negative", set("s", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.SetRange(ctx, k("s"), -1, "x").Result())
		}, []string{"s"}},
		{"SETBIT", set("s", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.SetBit(ctx, k("s"), 7, 1).Result())
		}, []string{"s"}},
		{"SETBIT new", none, func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.SetBit(ctx, k("n"), 7, 1).Result())
		}, []string{"n"}},
		{"GETBIT", set("s", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.GetBit(ctx, k("s"), 3).Result())
		}, []string{"s"}},
		{"GETBIT missing", none, func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.GetBit(ctx, k("n"), 3).Result())
		}, nil},
		{"BITCOUNT", set("s", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.BitCount(ctx, k("s"), nil).Result())
		}, []string{"s"}},
		{"BITCOUNT range", set("s", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.BitCount(ctx, k("s"), &redis.BitCount{Start: 3, End: -5, Unit: redis.BitCountIndexBit}).Result())
		}, []string{"s"}},
		{"BITPOS", set("s", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.BitPos(ctx, k("s"), 0, 2, 40).Result())
		}, []string{"s"}},
		{"BITPOS span", set("s", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.BitPosSpan(ctx, k("s"), 1, 9, 200, "bit").Result())
		}, []string{"s"}},
		{"BITFIELD", set("s", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.BitField(ctx, k("s"), "GET", "u8", 0, "INCRBY", "i5", 100, 1, "OVERFLOW", "FAIL", "INCRBY", "u2", 102, 9).Result())
		}, []string{"s"}},
		{"BITFIELD wide", set("s", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.BitField(ctx, k("s"), "GET", "i64", 0, "SET", "u63", 64, 9007199254740993, "GET", "u63", 64).Result())
		}, []string{"s"}},
		{"BITFIELD_RO", set("s", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.BitFieldRO(ctx, k("s"), "u8", 0, "i64", 8).Result())
		}, []string{"s"}},
		{"BITOP AND", set("a", v1, "b", v2), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.BitOpAnd(ctx, k("d"), k("a"), k("b")).Result())
		}, []string{"a", "b", "d"}},
		{"BITOP OR", set("a", v1, "d", v2), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.BitOpOr(ctx, k("d"), k("a"), k("d")).Result())
		}, []string{"a", "d"}},
		{"BITOP XOR", set("a", v1, "b", "short"), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.BitOpXor(ctx, k("d"), k("a"), k("b")).Result())
		}, []string{"a", "b", "d"}},
		{"BITOP NOT", set("a", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.BitOpNot(ctx, k("d"), k("a")).Result())
		}, []string{"a", "d"}},
		{"LCS", set("a", v1, "b", v2), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.LCS(ctx, &redis.LCSQuery{Key1: k("a"), Key2: k("b")}).Result())
		}, []string{"a", "b"}},
		{"LCS LEN", set("a", v1, "b", v2), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.LCS(ctx, &redis.LCSQuery{Key1: k("a"), Key2: k("b"), Len: true}).Result())
		}, nil},
		{"LCS IDX", set("a", v1, "b", v2), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			m, err := c.LCS(ctx, &redis.LCSQuery{Key1: k("a"), Key2: k("b"), Idx: true, MinMatchLen: 4, WithMatchLen: true}).Result()
			return r(fmt.Sprintf("%+v", m), err)
		}, nil},
		{"LINSERT", list("l", v1, "x", v2), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.LInsert(ctx, k("l"), "BEFORE", v2, v1).Result())
		}, []string{"l"}},
		{"LINSERT BEFORE", list("l", v1, "x", v2), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.LInsertBefore(ctx, k("l"), "x", v2).Result())
		}, []string{"l"}},
		{"LINSERT AFTER", list("l", v1, "x", v2), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.LInsertAfter(ctx, k("l"), v1, "y").Result())
		}, []string{"l"}},
		{"LINSERT no pivot", list("l", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.LInsertAfter(ctx, k("l"), v2, "y").Result())
		}, []string{"l"}},
		{"LPOS", list("l", v1, v2, v1, v2), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.LPos(ctx, k("l"), v2, redis.LPosArgs{Rank: -1}).Result())
		}, []string{"l"}},
		{"LPOS none", list("l", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.LPos(ctx, k("l"), v2, redis.LPosArgs{}).Result())
		}, []string{"l"}},
		{"LPOS COUNT", list("l", v1, v2, v1, v2, v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.LPosCount(ctx, k("l"), v1, 0, redis.LPosArgs{MaxLen: 4}).Result())
		}, []string{"l"}},
		{"LREM", list("l", v1, v2, v1, "x", v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.LRem(ctx, k("l"), -2, v1).Result())
		}, []string{"l"}},
		{"LREM all", list("l", v1, v2, v1), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.LRem(ctx, k("l"), 0, v2).Result())
		}, []string{"l"}},
		{"SORT", list("l", "3", "1", "2"), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.Sort(ctx, k("l"), &redis.Sort{Order: "DESC"}).Result())
		}, []string{"l"}},
		{"SORT BY GET", func(ctx context.Context, c *redis.Client, k func(string) string) {
			c.RPush(ctx, k("l"), "1", "2", "3")
			for i, w := range []string{"30", "10", "20"} {
				c.Set(ctx, k(fmt.Sprint("w_", i+1)), w, 0)
				c.Set(ctx, k(fmt.Sprint("d_", i+1)), big(fmt.Sprint("d", i)), 0)
			}
		}, func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.Sort(ctx, k("l"), &redis.Sort{By: k("w_*"), Get: []string{"#", k("d_*"), k("missing_*")}}).Result())
		}, []string{"l"}},
		{"SORT_RO ALPHA", list("l", "10", "9", "100"), func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.SortRO(ctx, k("l"), &redis.Sort{Alpha: true, Offset: 1, Count: 2}).Result())
		}, []string{"l"}},
		{"SORT STORE", func(ctx context.Context, c *redis.Client, k func(string) string) {
			c.RPush(ctx, k("l"), "2", "1")
			c.Set(ctx, k("d_1"), v1, 0)
			c.Set(ctx, k("d_2"), v2, 0)
		}, func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.SortStore(ctx, k("l"), k("dst"), &redis.Sort{Get: []string{k("d_*")}}).Result())
		}, []string{"l", "dst"}},
		{"SORT interfaces", func(ctx context.Context, c *redis.Client, k func(string) string) {
			c.RPush(ctx, k("l"), "2", "1")
			c.Set(ctx, k("d_1"), v1, 0)
		}, func(ctx context.Context, c *redis.Client, k func(string) string) string {
			return r(c.SortInterfaces(ctx, k("l"), &redis.Sort{Get: []string{k("d_*")}}).Result())
		}, []string{"l"}},
	}
}

// state returns the values of keys under k as c reads them.
func state(ctx context.Context, c *redis.Client, k func(string) string, keys []string) string {
	var b strings.Builder
	for _, key := range keys {
		switch c.Type(ctx, k(key)).Val() {
		case "string":
			fmt.Fprintf(&b, "%s=%q ", key, c.Get(ctx, k(key)).Val())
		case "list":
			fmt.Fprintf(&b, "%s=%q ", key, c.LRange(ctx, k(key), 0, -1).Val())
		default:
			fmt.Fprintf(&b, "%s=none ", key)
		}
	}
	return b.String()
}

// TestInspect_Commands: APPEND, SETRANGE, the bit commands, LCS, LINSERT,
// LPOS, LREM and SORT, which the hook refused with ErrUnsupported, reply
// through the hook as plain go-redis replies on the same server, and
// leave the same values: the hooked client works on keys it wrote
// (compressed where the configuration compresses), the plain one on the
// same values written raw, in both configurations and in RESP2 and RESP3.
func TestInspect_Commands(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range exactConfigs {
		for _, proto := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/resp%d", cfg.name, proto), func(t *testing.T) {
				p := newPair(t, cfg.cfg, func(o *redis.Options) { o.Protocol = proto })
				plain := redis.NewClient(&redis.Options{Addr: p.r.Addr, Protocol: proto})
				t.Cleanup(func() { plain.Close() })
				for i, c := range inspectCases() {
					hk := func(s string) string { return fmt.Sprintf("h%d:%s", i, s) }
					pk := func(s string) string { return fmt.Sprintf("p%d:%s", i, s) }
					c.seed(ctx, p.hooked, hk)
					c.seed(ctx, plain, pk)
					got, want := c.run(ctx, p.hooked, hk), c.run(ctx, plain, pk)
					if got != want {
						t.Errorf("%s:\nhooked: %.300q\nplain:  %.300q", c.name, got, want)
						continue
					}
					if gs, ws := state(ctx, p.hooked, hk, c.keys), state(ctx, plain, pk, c.keys); gs != ws {
						t.Errorf("%s left:\nhooked: %.300q\nplain:  %.300q", c.name, gs, ws)
					}
				}
			})
		}
	}
}

// TestInspect_KeepsCompression: APPEND and SETRANGE store their result
// compressed, and SETBIT, BITFIELD and BITOP on a compressed value compress
// it again, where the configuration compresses every value.
func TestInspect_KeepsCompression(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, exactConfigs[0].cfg)
	h, pl := p.hooked, p.plain
	v := big("keep")
	for _, k := range []string{"a", "r", "b", "f", "src"} {
		h.Set(ctx, k, v, 0)
	}
	h.Append(ctx, "a", "more")
	h.Append(ctx, "new", v)
	h.SetRange(ctx, "r", 10, "xyz")
	h.SetBit(ctx, "b", 9, 1)
	h.BitField(ctx, "f", "SET", "u8", 0, 65)
	h.BitOpNot(ctx, "dst", "src")
	for _, k := range []string{"a", "new", "r", "b", "f", "dst"} {
		mustFramed(t, pl.Get(ctx, k).Val(), k)
	}
	if got := h.Get(ctx, "a").Val(); got != v+"more" {
		t.Errorf("APPEND: %.40q", got)
	}
}

// TestInspect_Pipelines: in a pipeline or transaction the commands run in
// one round trip; where a key holds a compressed value the script must
// decode first, the command fails with ErrUnsupported naming the key and
// changes nothing, and the others run. Raw values and missing keys are
// served there too, and SORT's check needs no second round.
func TestInspect_Pipelines(t *testing.T) {
	ctx := context.Background()
	for _, tx := range []bool{false, true} {
		t.Run(fmt.Sprint("tx=", tx), func(t *testing.T) {
			p := newPair(t, exactConfigs[0].cfg)
			h, pl := p.hooked, p.plain
			v := big("pipe")
			h.Set(ctx, "c", v, 0)
			h.RPush(ctx, "l", v, "x")
			pl.Set(ctx, "raw", "plain", 0)
			stored := pl.Get(ctx, "c").Val()
			run := h.Pipelined
			if tx {
				run = h.TxPipelined
			}
			var app, setbit, newbit, rawbit *redis.IntCmd
			var lrem, lpos *redis.IntCmd
			var sorted *redis.StringSliceCmd
			_, err := run(ctx, func(pipe redis.Pipeliner) error {
				app = pipe.Append(ctx, "c", "x")
				setbit = pipe.SetBit(ctx, "c", 3, 1)
				newbit = pipe.SetBit(ctx, "new", 7, 1)
				rawbit = pipe.BitCount(ctx, "raw", nil)
				lrem = pipe.LRem(ctx, "l", 0, "x")
				lpos = pipe.LPos(ctx, "l", v, redis.LPosArgs{})
				sorted = pipe.Sort(ctx, "l", &redis.Sort{Alpha: true})
				return nil
			})
			if err == nil {
				t.Fatal("pipeline error = nil, want the refused commands'")
			}
			for _, c := range []redis.Cmder{app, setbit} {
				if !errors.Is(c.Err(), ErrUnsupported) || !strings.Contains(c.Err().Error(), `"c"`) {
					t.Errorf("%v on a compressed value: %v, want ErrUnsupported naming the key", c.Args(), c.Err())
				}
			}
			if !errors.Is(sorted.Err(), ErrUnsupported) {
				t.Errorf("SORT ALPHA of compressed elements: %v, want ErrUnsupported", sorted.Err())
			}
			if pl.Get(ctx, "c").Val() != stored {
				t.Error("a refused command changed the value")
			}
			if newbit.Val() != 0 || newbit.Err() != nil || rawbit.Val() != 19 || rawbit.Err() != nil {
				t.Errorf("SETBIT new = %v, BITCOUNT raw = %v", newbit, rawbit)
			}
			// The element x is stored raw; the list search finds v's frame
			// by its header and checksum, in one round trip.
			if lrem.Val() != 1 || lrem.Err() != nil || lpos.Val() != 0 || lpos.Err() != nil {
				t.Errorf("LREM = %v, LPOS = %v", lrem, lpos)
			}
			if h.GetBit(ctx, "new", 7).Val() != 1 {
				t.Error("SETBIT in the pipeline did not run")
			}
		})
	}
}
