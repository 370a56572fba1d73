package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// big is a compressible value well above the default minimum size.
func big(tag string) string {
	return strings.Repeat(`{"tag":"`+tag+`","note":"squeeze keeps more in the same RAM"},`, 40)
}

type pair struct {
	hooked, plain *redis.Client
	r             *testutil.Redis
	cfg           Config // the hook's
}

// newPair starts a redis-server and returns a client with the hook and a
// plain one on the same server.
func newPair(t *testing.T, cfg Config, opt ...func(*redis.Options)) pair {
	t.Helper()
	r := testutil.StartRedis(t)
	o := &redis.Options{Addr: r.Addr}
	for _, f := range opt {
		f(o)
	}
	hooked := redis.NewClient(o)
	if _, err := Install(hooked, cfg); err != nil {
		t.Fatal(err)
	}
	plain := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { hooked.Close(); plain.Close() })
	return pair{hooked, plain, r, cfg}
}

// mustFramed checks that what Redis holds is a frame, not the value.
func mustFramed(t *testing.T, stored string, what string) {
	t.Helper()
	if !codec.IsFramed([]byte(stored)) {
		t.Fatalf("%s: stored bytes are not a frame (%d bytes, %q...)", what, len(stored), stored[:min(len(stored), 20)])
	}
}

func TestHook_Families(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("resp%d", proto), func(t *testing.T) {
			ctx := context.Background()
			p := newPair(t, Config{}, func(o *redis.Options) { o.Protocol = proto })
			h, pl := p.hooked, p.plain
			v1, v2, v3 := big("one"), big("two"), big("three")

			// Strings.
			if err := h.Set(ctx, "s", v1, 0).Err(); err != nil {
				t.Fatal(err)
			}
			mustFramed(t, pl.Get(ctx, "s").Val(), "SET")
			if got := h.Get(ctx, "s").Val(); got != v1 {
				t.Fatalf("GET = %.30q", got)
			}
			h.SetNX(ctx, "snx", v2, 0)
			h.SetEx(ctx, "sex", v3, time.Hour)
			h.MSet(ctx, "m1", v1, "m2", "short", "m3", v3)
			mustFramed(t, pl.Get(ctx, "m3").Val(), "MSET")
			if pl.Get(ctx, "m2").Val() != "short" {
				t.Fatal("short value not stored raw")
			}
			got, err := h.MGet(ctx, "m1", "m2", "missing", "m3", "snx", "sex").Result()
			if err != nil || !slices.Equal(got, []any{v1, "short", nil, v3, v2, v3}) {
				t.Fatalf("MGET = %v", err)
			}
			if old := h.GetSet(ctx, "s", v2).Val(); old != v1 {
				t.Fatal("GETSET old value")
			}
			if old, err := h.SetArgs(ctx, "s", v3, redis.SetArgs{Get: true}).Result(); err != nil || old != v2 {
				t.Fatalf("SET GET = %.20q, %v", old, err)
			}
			if v := h.GetEx(ctx, "s", time.Hour).Val(); v != v3 {
				t.Fatal("GETEX")
			}
			if v := h.GetDel(ctx, "s").Val(); v != v3 {
				t.Fatal("GETDEL")
			}
			if err := h.Get(ctx, "s").Err(); !errors.Is(err, redis.Nil) {
				t.Fatalf("GET after GETDEL: %v", err)
			}

			// Hashes.
			h.HSet(ctx, "h", "a", v1, "b", "tiny", "c", v2)
			h.HSetNX(ctx, "h", "d", v3)
			h.HMSet(ctx, "h2", map[string]any{"x": v2})
			mustFramed(t, pl.HGet(ctx, "h", "a").Val(), "HSET")
			mustFramed(t, pl.HGet(ctx, "h", "d").Val(), "HSETNX")
			mustFramed(t, pl.HGet(ctx, "h2", "x").Val(), "HMSET")
			want := map[string]string{"a": v1, "b": "tiny", "c": v2, "d": v3}
			if m := h.HGetAll(ctx, "h").Val(); fmt.Sprint(m) != fmt.Sprint(want) {
				t.Fatal("HGETALL")
			}
			if v := h.HGet(ctx, "h", "c").Val(); v != v2 {
				t.Fatal("HGET")
			}
			if vs := h.HMGet(ctx, "h", "a", "zz", "d").Val(); !slices.Equal(vs, []any{v1, nil, v3}) {
				t.Fatal("HMGET")
			}
			vals := h.HVals(ctx, "h").Val()
			slices.Sort(vals)
			wantVals := []string{v1, "tiny", v2, v3}
			slices.Sort(wantVals)
			if !slices.Equal(vals, wantVals) {
				t.Fatal("HVALS")
			}
			for _, kv := range h.HRandFieldWithValues(ctx, "h", 4).Val() {
				if want[kv.Key] != kv.Value {
					t.Fatalf("HRANDFIELD WITHVALUES %s", kv.Key)
				}
			}
			page, _ := h.HScan(ctx, "h", 0, "*", 100).Val()
			for i := 0; i+1 < len(page); i += 2 {
				if want[page[i]] != page[i+1] {
					t.Fatalf("HSCAN %s", page[i])
				}
			}

			// Lists.
			h.RPush(ctx, "l", v1, "x", v2)
			h.LPush(ctx, "l", v3)
			h.RPushX(ctx, "l", v1)
			mustFramed(t, pl.LIndex(ctx, "l", 0).Val(), "LPUSH")
			if l := h.LRange(ctx, "l", 0, -1).Val(); !slices.Equal(l, []string{v3, v1, "x", v2, v1}) {
				t.Fatal("LRANGE")
			}
			h.LSet(ctx, "l", 2, v2)
			mustFramed(t, pl.LIndex(ctx, "l", 2).Val(), "LSET")
			if v := h.LIndex(ctx, "l", 2).Val(); v != v2 {
				t.Fatal("LINDEX")
			}
			if v := h.LPop(ctx, "l").Val(); v != v3 {
				t.Fatal("LPOP")
			}
			if vs := h.RPopCount(ctx, "l", 2).Val(); !slices.Equal(vs, []string{v1, v2}) {
				t.Fatal("RPOP count")
			}
			if v := h.LMove(ctx, "l", "l2", "LEFT", "RIGHT").Val(); v != v1 {
				t.Fatal("LMOVE")
			}
			mustFramed(t, pl.LIndex(ctx, "l2", 0).Val(), "LMOVE target")
			if kv := h.BLPop(ctx, time.Second, "nolist", "l2").Val(); !slices.Equal(kv, []string{"l2", v1}) {
				t.Fatal("BLPOP")
			}
			h.RPush(ctx, "l3", v1, v2)
			if k, vs, err := h.LMPop(ctx, "left", 5, "l3").Result(); err != nil || k != "l3" || !slices.Equal(vs, []string{v1, v2}) {
				t.Fatalf("LMPOP = %s, %v", k, err)
			}

			// Streams.
			id := h.XAdd(ctx, &redis.XAddArgs{Stream: "st", MaxLen: 100, Approx: true, Values: []any{"f", v1, "g", "small"}}).Val()
			h.XAdd(ctx, &redis.XAddArgs{Stream: "st", Values: map[string]any{"h": v2}})
			ents := pl.XRange(ctx, "st", "-", "+").Val()
			mustFramed(t, ents[0].Values["f"].(string), "XADD")
			if ents[0].Values["f"] == v1 || ents[0].Values["g"] != "small" {
				t.Fatal("XADD stored")
			}
			for _, msgs := range [][]redis.XMessage{
				h.XRange(ctx, "st", "-", "+").Val(),
				h.XRevRange(ctx, "st", "+", "-").Val(),
				h.XRead(ctx, &redis.XReadArgs{Streams: []string{"st", "0"}}).Val()[0].Messages,
			} {
				if len(msgs) != 2 {
					t.Fatalf("%d stream entries", len(msgs))
				}
				for _, m := range msgs {
					if m.ID == id && (m.Values["f"] != v1 || m.Values["g"] != "small") || m.ID != id && m.Values["h"] != v2 {
						t.Fatal("stream values not decoded")
					}
				}
			}
			h.XGroupCreate(ctx, "st", "g", "0")
			rg := h.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{"st", ">"}}).Val()
			if rg[0].Messages[0].Values["f"] != v1 {
				t.Fatal("XREADGROUP")
			}
			cl := h.XClaim(ctx, &redis.XClaimArgs{Stream: "st", Group: "g", Consumer: "d", Messages: []string{id}}).Val()
			if cl[0].Values["f"] != v1 {
				t.Fatal("XCLAIM")
			}
			ac, _ := h.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: "st", Group: "g", Consumer: "e", Start: "0"}).Val()
			if len(ac) == 0 || ac[0].Values["f"] != v1 {
				t.Fatal("XAUTOCLAIM")
			}
		})
	}
}

// TestHook_Do covers the generic Do path with RESP2 and RESP3 replies.
func TestHook_Do(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("resp%d", proto), func(t *testing.T) {
			ctx := context.Background()
			p := newPair(t, Config{}, func(o *redis.Options) { o.Protocol = proto })
			h := p.hooked
			v := big("do")
			if err := h.Do(ctx, "SET", "k", v).Err(); err != nil {
				t.Fatal(err)
			}
			mustFramed(t, p.plain.Get(ctx, "k").Val(), "Do SET")
			if got, _ := h.Do(ctx, "GET", "k").Text(); got != v {
				t.Fatal("Do GET")
			}
			h.Do(ctx, "HSET", "h", "f", v, "g", "x")
			all, err := h.Do(ctx, "HGETALL", "h").Result()
			if err != nil || !strings.Contains(fmt.Sprint(all), v) || strings.Contains(fmt.Sprint(all), "\xc1SQ") {
				t.Fatalf("Do HGETALL = %v", err)
			}
			h.Do(ctx, "RPUSH", "l", v, v)
			if got, _ := h.Do(ctx, "LRANGE", "l", 0, -1).StringSlice(); !slices.Equal(got, []string{v, v}) {
				t.Fatal("Do LRANGE")
			}
			h.Do(ctx, "XADD", "st", "MAXLEN", "~", 10, "*", "f", v)
			got, err := h.Do(ctx, "XREAD", "STREAMS", "st", "0").Result()
			if err != nil || !strings.Contains(fmt.Sprint(got), v) || strings.Contains(fmt.Sprint(got), "\xc1SQ") {
				t.Fatalf("Do XREAD = %v", err)
			}
			if n, err := h.Do(ctx, "STRLEN", "k").Int64(); err != nil || n != int64(len(v)) {
				t.Fatalf("Do STRLEN = %d, %v", n, err)
			}
			if got, _ := h.Do(ctx, "BLPOP", "l", 1).StringSlice(); len(got) != 2 || got[1] != v {
				t.Fatal("Do BLPOP")
			}
		})
	}
}

func TestHook_RawValuesReadAsIs(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, Config{})
	h, pl := p.hooked, p.plain
	values := []string{"", "plain text", big("written-by-an-old-client"), "\x00\x01\xff binary", "\xc1 not the magic"}
	for i, v := range values {
		k := fmt.Sprint("raw", i)
		pl.Set(ctx, k, v, 0)
		pl.HSet(ctx, "h"+k, "f", v)
		pl.RPush(ctx, "l"+k, v)
		pl.XAdd(ctx, &redis.XAddArgs{Stream: "x" + k, Values: []any{"f", v}})
		if got, err := h.Get(ctx, k).Result(); err != nil || got != v {
			t.Errorf("GET %q = %q, %v", v, got, err)
		}
		if got := h.HGet(ctx, "h"+k, "f").Val(); got != v {
			t.Errorf("HGET %q", v)
		}
		if got := h.LRange(ctx, "l"+k, 0, -1).Val(); len(got) != 1 || got[0] != v {
			t.Errorf("LRANGE %q", v)
		}
		if got := h.XRange(ctx, "x"+k, "-", "+").Val(); got[0].Values["f"] != v {
			t.Errorf("XRANGE %q", v)
		}
		if n := h.StrLen(ctx, k).Val(); n != int64(len(v)) {
			t.Errorf("STRLEN of raw %q = %d", v, n)
		}
	}
}

// TestHook_EveryCodec writes with each codec and reads back with a hook
// configured for another codec: the frame names its codec.
func TestHook_EveryCodec(t *testing.T) {
	ctx := context.Background()
	r := testutil.StartRedis(t)
	reader := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer reader.Close()
	if _, err := Install(reader, Config{Algorithm: codec.MustParseAlgorithm("lz4:fast")}); err != nil {
		t.Fatal(err)
	}
	plain := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer plain.Close()
	v := big("every codec")
	for _, alg := range codec.Algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			w := redis.NewClient(&redis.Options{Addr: r.Addr})
			defer w.Close()
			enc, err := codec.NewEncoder(alg, codec.WithMinSize(0), codec.WithMinGain(-1))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Install(w, Config{Encoder: enc}); err != nil {
				t.Fatal(err)
			}
			k := "k:" + alg.String()
			if err := w.Set(ctx, k, v, 0).Err(); err != nil {
				t.Fatal(err)
			}
			w.HSet(ctx, "h:"+k, "f", v)
			stored := plain.Get(ctx, k).Val()
			if alg.ID == codec.IDNone {
				if stored != v {
					t.Fatal("none: value not stored as it is")
				}
				return
			}
			hdr, err := codec.ParseHeader([]byte(stored))
			if err != nil || hdr.ID != alg.ID {
				t.Fatalf("stored header %+v, %v", hdr, err)
			}
			if got := reader.Get(ctx, k).Val(); got != v {
				t.Fatal("cross-codec GET differs")
			}
			if got := reader.HGet(ctx, "h:"+k, "f").Val(); got != v {
				t.Fatal("cross-codec HGET differs")
			}
			if n := reader.StrLen(ctx, k).Val(); n != int64(len(v)) {
				t.Fatalf("STRLEN = %d, want %d", n, len(v))
			}
		})
	}
}

func TestHook_Policy(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, Config{MinSize: 4096, MaxDecodedSize: 1000})
	v := big("policy") // ~2.4 KB: below MinSize
	p.hooked.Set(ctx, "small", v, 0)
	if got := p.plain.Get(ctx, "small").Val(); got != v {
		t.Fatal("value below MinSize was not stored raw")
	}
	// A frame declaring more than MaxDecodedSize is refused on read.
	enc, _ := codec.NewEncoder(codec.DefaultAlgorithm, codec.WithMinSize(0))
	p.plain.Set(ctx, "huge", enc.AppendEncode(nil, []byte(v)), 0)
	if err := p.hooked.Get(ctx, "huge").Err(); !errors.Is(err, codec.ErrTooLarge) {
		t.Fatalf("GET above MaxDecodedSize: %v, want ErrTooLarge", err)
	}
	if err := p.hooked.StrLen(ctx, "huge").Err(); !errors.Is(err, codec.ErrTooLarge) {
		t.Fatalf("STRLEN above MaxDecodedSize: %v, want ErrTooLarge", err)
	}
	// A corrupt frame is an error, never garbage.
	p.plain.Set(ctx, "bad", "\xc1SQ\x01\x01\x00\x05garbage", 0)
	var e *Error
	err := p.hooked.Get(ctx, "bad").Err()
	if !errors.Is(err, codec.ErrCorrupt) || !errors.As(err, &e) || e.Key != "bad" {
		t.Fatalf("GET corrupt: %v", err)
	}
	// Values that begin with the magic are wrapped, so they read back exactly.
	magic := "\xc1SQ but not a frame"
	p.hooked.Set(ctx, "m", magic, 0)
	if got, err := p.hooked.Get(ctx, "m").Result(); err != nil || got != magic {
		t.Fatalf("magic-prefixed value = %q, %v", got, err)
	}
	if _, err := NewHook(Config{MinGain: 2}); err == nil {
		t.Fatal("MinGain 2 accepted")
	}
	if _, err := NewHook(Config{MaxDecodedSize: -1}); err == nil {
		t.Fatal("negative MaxDecodedSize accepted")
	}
	// The caller's arguments are left as they were.
	cmd := p.hooked.Set(ctx, "args", v, 0)
	if cmd.Args()[2] != v {
		t.Fatal("SET args not restored")
	}
}

func TestHook_Unsupported(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, Config{Raw: func(k string) bool { return strings.HasPrefix(k, "raw:") }})
	h, pl := p.hooked, p.plain
	v := big("u")
	h.Set(ctx, "s", v, 0)
	h.RPush(ctx, "l", v)
	h.Set(ctx, "raw:s", v, 0)
	if pl.Get(ctx, "raw:s").Val() != v {
		t.Fatal("raw key compressed")
	}
	// Commands that look inside values run on them (inspect.go).
	for _, tt := range []struct {
		cmd  *redis.Cmd
		want any
	}{
		{h.Do(ctx, "BITFIELD", "s", "GET", "u8", 0), []any{int64(v[0])}},
		{h.Do(ctx, "GETBIT", "s", 1), int64(v[0] >> 6 & 1)},
		{h.Do(ctx, "LPOS", "l", v), int64(0)},
		{h.Do(ctx, "LCS", "s", "raw:s"), v},
		{h.Do(ctx, "BITOP", "AND", "raw:d", "raw:s", "s"), int64(len(v))},
	} {
		if got, err := tt.cmd.Result(); err != nil || fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%.40q = %.40q, %v; want %.40q", tt.cmd.Args(), got, err, tt.want)
		}
	}
	if pl.Get(ctx, "raw:d").Val() != v {
		t.Error("BITOP AND of a value with itself, into a raw key")
	}
	// SORT ALPHA would order the compressed bytes: refused.
	if err := h.Do(ctx, "SORT", "l", "ALPHA").Err(); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "ALPHA") {
		t.Errorf("SORT ALPHA of compressed elements: %v", err)
	}
	if err := h.Set(ctx, "ifeq", "IFEQ", 0).Err(); err != nil {
		t.Errorf("SET of the value IFEQ: %v", err)
	}
	h.Set(ctx, "app", v, 0)
	if n, err := h.Append(ctx, "app", "x").Result(); err != nil || n != int64(len(v)+1) || h.Get(ctx, "app").Val() != v+"x" {
		t.Errorf("typed APPEND: %d, %v", n, err)
	}
	// What go-redis cannot hand over decoded is refused before it is sent.
	var w strings.Builder
	if err := h.DoRawWriteTo(ctx, &w, "GET", "s").Err(); !errors.Is(err, ErrUnsupported) || w.Len() != 0 {
		t.Errorf("DoRawWriteTo GET: %v", err)
	}
	// Scripts run on the value (scripts.go).
	if got, err := h.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"s"}).Text(); err != nil || got != v {
		t.Errorf("EVAL GET on a compressed value = %.40q, %v", got, err)
	}
	// Served exactly: STRLEN and HSTRLEN report the original lengths.
	h.HSet(ctx, "h", "f", v, "g", "short")
	for _, tt := range []struct {
		cmd  *redis.IntCmd
		want int
	}{
		{h.StrLen(ctx, "s"), len(v)},
		{h.StrLen(ctx, "missing"), 0},
		{h.HStrLen(ctx, "h", "f"), len(v)},
		{h.HStrLen(ctx, "h", "g"), 5},
		{h.HStrLen(ctx, "h", "none"), 0},
		{h.StrLen(ctx, "raw:s"), len(v)},
	} {
		if n, err := tt.cmd.Result(); err != nil || n != int64(tt.want) {
			t.Errorf("%v = %d, %v; want %d", tt.cmd.Args(), n, err, tt.want)
		}
	}
	if err := h.StrLen(ctx, "l").Err(); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("STRLEN on a list: %v", err)
	}
	// Raw keys: byte-level commands pass, and see the bytes as stored.
	if n := h.Append(ctx, "raw:s", "!").Val(); n != int64(len(v)+1) {
		t.Fatalf("APPEND on raw key = %d", n)
	}
	if s := h.GetRange(ctx, "raw:s", -1, -1).Val(); s != "!" {
		t.Fatalf("GETRANGE on raw key = %q", s)
	}
	if err := h.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"raw:s"}).Err(); err != nil {
		t.Fatalf("EVAL on raw key: %v", err)
	}
	allow := newPair(t, Config{AllowScripts: true})
	if err := allow.hooked.Eval(ctx, "return 1", nil).Err(); err != nil {
		t.Fatalf("AllowScripts: %v", err)
	}
}

func TestHook_Pipelines(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, Config{})
	h, pl := p.hooked, p.plain
	v := big("pipe")
	for _, tx := range []bool{false, true} {
		t.Run(fmt.Sprint("tx=", tx), func(t *testing.T) {
			k := fmt.Sprint("p", tx, ":")
			run := h.Pipelined
			if tx {
				run = h.TxPipelined
			}
			var get *redis.StringCmd
			var hget *redis.StringCmd
			var strlen *redis.IntCmd
			var lr *redis.StringSliceCmd
			_, err := run(ctx, func(pipe redis.Pipeliner) error {
				pipe.Set(ctx, k+"s", v, 0)
				pipe.HSet(ctx, k+"h", "f", v)
				pipe.RPush(ctx, k+"l", v, "x")
				get = pipe.Get(ctx, k+"s")
				hget = pipe.HGet(ctx, k+"h", "f")
				strlen = pipe.StrLen(ctx, k+"s")
				lr = pipe.LRange(ctx, k+"l", 0, -1)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			mustFramed(t, pl.Get(ctx, k+"s").Val(), "pipelined SET")
			if get.Val() != v || hget.Val() != v || strlen.Val() != int64(len(v)) || !slices.Equal(lr.Val(), []string{v, "x"}) {
				t.Fatalf("pipelined replies not decoded: strlen %d", strlen.Val())
			}

			// A refused command: alone in a pipeline, the whole transaction
			// in MULTI. STRLEN into a type other than *redis.IntCmd cannot
			// be served (the hook answers it from a script's reply).
			var set *redis.StatusCmd
			strlen2 := redis.NewStringCmd(ctx, "strlen", k+"s")
			_, err = run(ctx, func(pipe redis.Pipeliner) error {
				set = pipe.Set(ctx, k+"t", v, 0)
				return pipe.Process(ctx, strlen2)
			})
			if !errors.Is(err, ErrUnsupported) || !errors.Is(strlen2.Err(), ErrUnsupported) {
				t.Fatalf("pipeline with STRLEN as a string: %v / %v", err, strlen2.Err())
			}
			exists := pl.Exists(ctx, k+"t").Val() == 1
			if tx && (exists || set.Err() == nil) {
				t.Fatal("transaction with a refused command was partly sent")
			}
			if !tx && (!exists || set.Err() != nil) {
				t.Fatalf("pipeline: the other command did not run: %v", set.Err())
			}
			// APPEND on a compressed value needs a second round trip: it
			// fails alone, changing nothing, and the others run.
			var app *redis.IntCmd
			stored := pl.Get(ctx, k+"s").Val()
			_, err = run(ctx, func(pipe redis.Pipeliner) error {
				set = pipe.Set(ctx, k+"u", v, 0)
				app = pipe.Append(ctx, k+"s", "x")
				return nil
			})
			if !errors.Is(err, ErrUnsupported) || !errors.Is(app.Err(), ErrUnsupported) || set.Err() != nil {
				t.Fatalf("pipeline with APPEND: %v / %v / %v", err, app.Err(), set.Err())
			}
			if pl.Get(ctx, k+"s").Val() != stored || pl.Exists(ctx, k+"u").Val() != 1 {
				t.Fatal("APPEND in a pipeline changed the value, or the other command did not run")
			}
			if set.Args()[2] != v {
				t.Fatal("args not restored")
			}
		})
	}
}

// startCluster starts a one-node Redis Cluster owning every slot.
func startCluster(t *testing.T) *testutil.Redis {
	t.Helper()
	r := testutil.StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer c.Close()
	ctx := context.Background()
	if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		info, _ := c.ClusterInfo(ctx).Result()
		if strings.Contains(info, "cluster_state:ok") {
			return r
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("cluster did not reach state ok")
	return nil
}

func TestHook_ClusterAndUniversal(t *testing.T) {
	ctx := context.Background()
	r := startCluster(t)
	plain := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer plain.Close()
	clients := map[string]redis.UniversalClient{
		"cluster":           redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{r.Addr}}),
		"universal-cluster": redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{r.Addr}, IsClusterMode: true}),
		"universal-single":  redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{r.Addr}}),
	}
	v := big("cluster")
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			defer c.Close()
			if _, err := Install(c, Config{}); err != nil {
				t.Fatal(err)
			}
			k := "{" + name + "}"
			if err := c.Set(ctx, k+"s", v, 0).Err(); err != nil {
				t.Fatal(err)
			}
			mustFramed(t, plain.Get(ctx, k+"s").Val(), name)
			if got := c.Get(ctx, k+"s").Val(); got != v {
				t.Fatal("GET")
			}
			var get *redis.StringCmd
			if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.HSet(ctx, k+"h", "f", v)
				get = p.HGet(ctx, k+"h", "f")
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if get.Val() != v {
				t.Fatal("MULTI HGET")
			}
			var lr *redis.StringSliceCmd
			if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.RPush(ctx, k+"l", v)
				lr = p.LRange(ctx, k+"l", 0, -1)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(lr.Val(), []string{v}) {
				t.Fatal("pipelined LRANGE")
			}
			if n := c.StrLen(ctx, k+"s").Val(); n != int64(len(v)) {
				t.Fatalf("STRLEN = %d", n)
			}
			if n, err := c.Append(ctx, k+"s", "x").Result(); err != nil || n != int64(len(v)+1) {
				t.Fatalf("APPEND: %d, %v", n, err)
			}
		})
	}
}

// TestHook_RawReplyZeroAllocs: replies that are not frames (values written
// raw, short values) cost the hook no allocation.
func TestHook_RawReplyZeroAllocs(t *testing.T) {
	h, err := NewHook(Config{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := redis.NewStringCmd(context.Background(), "get", "k")
	cmd.SetVal(big("raw"))
	p := prepared{name: "get"}
	if n := testing.AllocsPerRun(100, func() {
		if err := h.decodeReply(cmd, p); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations decoding a raw reply, want 0", n)
	}
}

// TestHook_Watch: optimistic transactions (WATCH + MULTI/EXEC through
// rdb.Watch) go through the hook too.
func TestHook_Watch(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, Config{})
	v := big("watch")
	p.hooked.Set(ctx, "w", v, 0)
	err := p.hooked.Watch(ctx, func(tx *redis.Tx) error {
		cur, err := tx.Get(ctx, "w").Result()
		if err != nil {
			return err
		}
		if cur != v {
			t.Fatalf("GET inside WATCH not decoded")
		}
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Set(ctx, "w", cur+cur, 0)
			return nil
		})
		return err
	}, "w")
	if err != nil {
		t.Fatal(err)
	}
	mustFramed(t, p.plain.Get(ctx, "w").Val(), "SET in WATCH transaction")
	if got := p.hooked.Get(ctx, "w").Val(); got != v+v {
		t.Fatal("value written in WATCH transaction differs")
	}
}

// TestHook_GetRange checks GETRANGE and SUBSTR on compressed values give
// exactly what Redis gives on the same value stored raw.
func TestHook_GetRange(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, Config{})
	v := big("range")
	p.hooked.Set(ctx, "c", v, 0)
	p.plain.Set(ctx, "r", v, 0)
	p.plain.Set(ctx, "short", "hello", 0)
	mustFramed(t, p.plain.Get(ctx, "c").Val(), "SET")
	n := int64(len(v))
	ranges := [][2]int64{{0, 3}, {0, -1}, {-5, -1}, {-1, -5}, {5, 2}, {n - 3, n + 100}, {-n - 10, 4}, {0, 0}, {n, n + 1}, {-3, 2}, {10, -10}}
	for _, r := range ranges {
		want := p.plain.GetRange(ctx, "r", r[0], r[1]).Val()
		got, err := p.hooked.GetRange(ctx, "c", r[0], r[1]).Result()
		if err != nil || got != want {
			t.Errorf("GETRANGE %v = %q, %v; want %q", r, got, err, want)
		}
		if sub, _ := p.hooked.Do(ctx, "SUBSTR", "c", r[0], r[1]).Text(); sub != want {
			t.Errorf("SUBSTR %v = %q; want %q", r, sub, want)
		}
		if got := p.hooked.GetRange(ctx, "short", r[0], r[1]).Val(); got != p.plain.GetRange(ctx, "short", r[0], r[1]).Val() {
			t.Errorf("GETRANGE on raw value %v = %q", r, got)
		}
	}
	if got := p.hooked.GetRange(ctx, "missing", 0, 10).Val(); got != "" {
		t.Errorf("GETRANGE missing = %q", got)
	}
	p.plain.RPush(ctx, "list", "x")
	if err := p.hooked.GetRange(ctx, "list", 0, 1).Err(); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("GETRANGE on a list: %v", err)
	}
	if err := p.hooked.Do(ctx, "GETRANGE", "c", "x", 1).Err(); err == nil || !strings.Contains(err.Error(), "not an integer") {
		t.Errorf("GETRANGE with a bad index: %v", err)
	}
	var gr *redis.StringCmd
	if _, err := p.hooked.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		gr = pipe.GetRange(ctx, "c", -5, -1)
		return nil
	}); err != nil || gr.Val() != v[n-5:] {
		t.Fatalf("GETRANGE in MULTI = %q, %v", gr.Val(), err)
	}
}

// TestHook_Rules: values follow the Encoder of their key's longest matching
// prefix, MSET values their own keys'; every value reads back as written.
func TestHook_Rules(t *testing.T) {
	ctx := context.Background()
	enc := func(alg string, opts ...codec.EncoderOption) *codec.Encoder {
		e, err := codec.NewEncoder(codec.MustParseAlgorithm(alg), opts...)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	p := newPair(t, Config{Rules: []Rule{
		{Prefix: "img:", Encoder: enc("none")},
		{Prefix: "doc:", Encoder: enc("zstd:3")},
		{Prefix: "doc:brotli:", Encoder: enc("brotli:1")},
	}})
	v := big("rules")
	p.hooked.Set(ctx, "img:1", v, 0)
	p.hooked.Set(ctx, "doc:1", v, 0)
	p.hooked.Set(ctx, "doc:brotli:1", v, 0)
	p.hooked.MSet(ctx, "img:2", v, "doc:2", v, "other", v)
	p.hooked.HSet(ctx, "doc:h", "f", v)
	p.hooked.RPush(ctx, "img:l", v)
	stored := func(s string) string {
		if !codec.IsFramed([]byte(s)) {
			return "raw"
		}
		h, err := codec.ParseHeader([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return h.ID.String()
	}
	for key, want := range map[string]string{
		"img:1": "raw", "doc:1": "zstd", "doc:brotli:1": "brotli", "img:2": "raw", "doc:2": "zstd",
		"other": codec.DefaultAlgorithm.ID.String(),
	} {
		if got := stored(p.plain.Get(ctx, key).Val()); got != want {
			t.Errorf("%s stored as %s, want %s", key, got, want)
		}
		if got := p.hooked.Get(ctx, key).Val(); got != v {
			t.Errorf("%s read back as %d bytes", key, len(got))
		}
	}
	if got := stored(p.plain.HGet(ctx, "doc:h", "f").Val()); got != "zstd" {
		t.Errorf("doc:h field stored as %s", got)
	}
	if got := stored(p.plain.LIndex(ctx, "img:l", 0).Val()); got != "raw" {
		t.Errorf("img:l element stored as %s", got)
	}
	for _, rules := range [][]Rule{{{Prefix: "", Encoder: enc("s2")}}, {{Prefix: "a", Encoder: nil}}, {{Prefix: "a", Encoder: enc("s2")}, {Prefix: "a", Encoder: enc("lz4")}}} {
		if _, err := NewHook(Config{Rules: rules}); err == nil {
			t.Errorf("rules %v accepted", rules)
		}
	}
}

// TestHook_HashFieldExpiry: Redis 8's HSETEX stores values compressed
// through the hook, and HGETEX and HGETDEL return them decoded. Skipped on
// servers without HSETEX; CI runs it in the Redis 8 pass
// (scripts/test-redis8.sh).
func TestHook_HashFieldExpiry(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, Config{})
	if !testutil.HasCommand(t, p.r.Addr, "HSETEX") {
		t.Skipf("%s has no HSETEX (Redis 8 has): scripts/test-redis8.sh runs this test", testutil.ServerPath())
	}
	h, pl := p.hooked, p.plain
	v1, v2 := big("one"), big("two")
	if n, err := h.HSetEX(ctx, "h", "a", v1, "b", "tiny").Result(); err != nil || n != 1 {
		t.Fatalf("HSETEX = %d, %v", n, err)
	}
	opts := &redis.HSetEXOptions{Condition: redis.HSetEXFXX, ExpirationType: redis.HSetEXExpirationEX, ExpirationVal: 100}
	if n, err := h.HSetEXWithArgs(ctx, "h", opts, "a", v2).Result(); err != nil || n != 1 {
		t.Fatalf("HSETEX FXX EX = %d, %v", n, err)
	}
	mustFramed(t, pl.HGet(ctx, "h", "a").Val(), "HSETEX")
	if got := pl.HGet(ctx, "h", "b").Val(); got != "tiny" {
		t.Fatalf("a short value is stored as %q", got)
	}
	if ttl := pl.HTTL(ctx, "h", "a").Val(); len(ttl) != 1 || ttl[0] < 90 || ttl[0] > 100 {
		t.Fatalf("HTTL = %v, want about 100", ttl)
	}
	if got := h.HGet(ctx, "h", "a").Val(); got != v2 {
		t.Fatalf("HGET = %.30q", got)
	}
	if got := h.HGetEX(ctx, "h", "a", "missing", "b").Val(); !slices.Equal(got, []string{v2, "", "tiny"}) {
		t.Fatalf("HGETEX = %.40q", got)
	}
	if got := h.HStrLen(ctx, "h", "a").Val(); got != int64(len(v2)) {
		t.Fatalf("HSTRLEN = %d, want %d", got, len(v2))
	}
	if got := h.HGetDel(ctx, "h", "a", "b").Val(); !slices.Equal(got, []string{v2, "tiny"}) {
		t.Fatalf("HGETDEL = %.40q", got)
	}
	if n := pl.Exists(ctx, "h").Val(); n != 0 {
		t.Fatalf("the hash is left after HGETDEL of every field: EXISTS = %d", n)
	}
	// Malformed: Redis's own error, nothing sent compressed.
	bad := h.Do(ctx, "HSETEX", "h", "NOSUCH", "FIELDS", "1", "a", v1)
	want := pl.Do(ctx, "HSETEX", "h", "NOSUCH", "FIELDS", "1", "a", v1)
	if bad.Err() == nil || bad.Err().Error() != want.Err().Error() {
		t.Fatalf("HSETEX NOSUCH: %v, want %v", bad.Err(), want.Err())
	}
}

// TestHook_Msetex: MSETEX (Redis 8.4, Valkey 9.1) stores the values of its
// pairs compressed through the hook, never its options; a malformed one
// gets the server's own error. Skipped on servers without MSETEX; CI runs
// it in the Valkey 9 pass (scripts/test-valkey9.sh).
// TestHook_XaddOptions: XADD's newer options (Redis 8.2's KEEPREF, DELREF
// and ACKED, Redis 8.6's IDMP) are skipped to find the values, so the
// fields stay as sent and the values are compressed; an option the hook
// does not know compresses nothing. Where the server lacks the options,
// its error comes back.
func TestHook_XaddOptions(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, Config{})
	h, pl := p.hooked, p.plain
	v1 := big("one")
	field := strings.Repeat("a long field name ", 10)
	keepref := h.Do(ctx, "XADD", "s", "KEEPREF", "1-1", field, v1)
	if keepref.Err() != nil {
		if err := pl.Do(ctx, "XADD", "s2", "KEEPREF", "1-1", field, v1).Err(); err == nil || err.Error() != keepref.Err().Error() {
			t.Fatalf("XADD KEEPREF: %v, server %v", keepref.Err(), err)
		}
		t.Skipf("%s has no XADD KEEPREF (Redis 8.2 has): the test-built.sh redis86 pass runs this test", testutil.ServerPath())
	}
	if err := h.Do(ctx, "XADD", "s", "ACKED", "MAXLEN", "~", 100, "1-2", "f", v1).Err(); err != nil {
		t.Fatal(err)
	}
	ents := pl.XRange(ctx, "s", "-", "+").Val()
	if len(ents) != 2 {
		t.Fatalf("stored %d entries, want 2", len(ents))
	}
	v, ok := ents[0].Values[field].(string)
	if !ok {
		t.Fatalf("the field name is not stored as sent: %.80q", ents[0].Values)
	}
	mustFramed(t, v, "XADD KEEPREF")
	mustFramed(t, ents[1].Values["f"].(string), "XADD ACKED MAXLEN")
	if got := h.XRange(ctx, "s", "-", "+").Val(); got[0].Values[field] != v1 || got[1].Values["f"] != v1 {
		t.Fatalf("XRANGE through the hook: %.200v", got)
	}
	// An option the hook does not know: nothing compressed, the server's error.
	got, want := h.Do(ctx, "XADD", "s", "NEWOPTION", "1-3", field, v1), pl.Do(ctx, "XADD", "s", "NEWOPTION", "1-3", field, v1)
	if got.Err() == nil || want.Err() == nil || got.Err().Error() != want.Err().Error() {
		t.Fatalf("XADD NEWOPTION: %v, server %v", got.Err(), want.Err())
	}
	// XREADGROUP ... CLAIM (Redis 8.4): entries carry their idle time and
	// delivery count after the fields; the values are still decoded.
	h.XGroupCreate(ctx, "s", "g", "0")
	h.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c1", Streams: []string{"s", ">"}, Count: 1})
	claim := h.Do(ctx, "XREADGROUP", "GROUP", "g", "c2", "CLAIM", 0, "COUNT", 5, "STREAMS", "s", ">")
	if claim.Err() == nil {
		if got := fmt.Sprint(claim.Val()); !strings.Contains(got, field+" "+v1) || strings.Contains(got, "\xc1SQ") {
			t.Fatalf("XREADGROUP CLAIM through the hook: %.200s", got)
		}
		// go-redis's own, which reads the idle time and count.
		time.Sleep(5 * time.Millisecond) // idle past the 1 ms below
		typed, err := h.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c3", Streams: []string{"s", ">"}, Claim: time.Millisecond}).Result()
		if err != nil || len(typed) != 1 || len(typed[0].Messages) == 0 || typed[0].Messages[0].Values[field] != v1 || typed[0].Messages[0].DeliveredCount == 0 {
			t.Fatalf("XReadGroup with Claim through the hook: %.200v, %v", typed, err)
		}
	} else if err := pl.Do(ctx, "XREADGROUP", "GROUP", "g", "c3", "CLAIM", 0, "STREAMS", "s", ">").Err(); err == nil || err.Error() != claim.Err().Error() {
		t.Fatalf("XREADGROUP CLAIM: %v, server %v", claim.Err(), err)
	}
	// Idempotent XADD (Redis 8.6): a repeat returns the first entry's id.
	id1 := h.Do(ctx, "XADD", "t", "IDMP", "producer", "msg-1", "*", "f", v1)
	if id1.Err() != nil {
		t.Logf("no IDMP here (Redis 8.6 has it): %v", id1.Err())
		return
	}
	id2 := h.Do(ctx, "XADD", "t", "IDMP", "producer", "msg-1", "*", "f", v1)
	if id1.Val() != id2.Val() || pl.XLen(ctx, "t").Val() != 1 {
		t.Fatalf("IDMP twice: %v then %v, %d entries", id1.Val(), id2.Val(), pl.XLen(ctx, "t").Val())
	}
	mustFramed(t, pl.XRange(ctx, "t", "-", "+").Val()[0].Values["f"].(string), "XADD IDMP")
}

func TestHook_Msetex(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, Config{})
	if !testutil.HasCommand(t, p.r.Addr, "MSETEX") {
		t.Skipf("%s has no MSETEX (Redis 8.4 and Valkey 9.1 have): scripts/test-valkey9.sh runs this test", testutil.ServerPath())
	}
	h, pl := p.hooked, p.plain
	v1, v2 := big("one"), big("two")
	if err := h.Do(ctx, "MSETEX", 3, "a", v1, "b", v2, "c", "tiny", "EX", 100).Err(); err != nil {
		t.Fatalf("MSETEX: %v", err)
	}
	mustFramed(t, pl.Get(ctx, "a").Val(), "MSETEX")
	mustFramed(t, pl.Get(ctx, "b").Val(), "MSETEX")
	if got := pl.Get(ctx, "c").Val(); got != "tiny" {
		t.Fatalf("a short value is stored as %q", got)
	}
	if ttl := pl.TTL(ctx, "b").Val(); ttl < 90*time.Second || ttl > 100*time.Second {
		t.Fatalf("TTL = %v, want about 100 s", ttl)
	}
	if got := h.MGet(ctx, "a", "b", "c").Val(); !slices.Equal(got, []any{v1, v2, "tiny"}) {
		t.Fatalf("MGET = %.40q", got)
	}
	// go-redis's own method, a map of values and options.
	args := redis.MSetEXArgs{Condition: redis.XX, Expiration: &redis.ExpirationOption{Mode: redis.PX, Value: 50000}}
	if n, err := h.MSetEX(ctx, args, map[string]any{"a": v2, "b": v1}).Result(); err != nil || n != 1 {
		t.Fatalf("MSetEX = %d, %v", n, err)
	}
	mustFramed(t, pl.Get(ctx, "a").Val(), "MSetEX")
	if got := h.MGet(ctx, "a", "b").Val(); !slices.Equal(got, []any{v2, v1}) {
		t.Fatalf("MGET after MSetEX = %.40q", got)
	}
	if ttl := pl.PTTL(ctx, "a").Val(); ttl <= 0 || ttl > 50*time.Second {
		t.Fatalf("PTTL = %v, want up to 50 s", ttl)
	}
	if err := h.Set(ctx, "a", v1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]any{{"MSETEX", 2, "a", v1}, {"MSETEX", "x", "a", v1}, {"MSETEX", 1, "a", v1, "EX"}} {
		got, want := h.Do(ctx, args...), pl.Do(ctx, args...)
		if got.Err() == nil || want.Err() == nil || got.Err().Error() != want.Err().Error() {
			t.Fatalf("%.30q: %v, want %v", args, got.Err(), want.Err())
		}
	}
	if got := h.Get(ctx, "a").Val(); got != v1 {
		t.Fatalf("a malformed MSETEX changed a: %.30q", got)
	}
}

// TestHook_Compare: SET with IFEQ or IFNE, DELEX with a condition, DIGEST and
// DELIFEQ compare (or hash) the value, compressed or not, atomically: every
// reply through the hook equals plain go-redis's on a second server that
// holds the same values raw, alone and in a transaction on raw values. In a
// pipeline or transaction a compressed value cannot be decoded first: the
// command fails with ErrUnsupported and changes nothing. The comparisons
// run on servers that have them (Valkey 8.1 and 9, Redis 8.4):
// scripts/test-valkey9.sh.
func TestHook_Compare(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, Config{})
	h, pl := p.hooked, p.plain
	doc, doc2, doc3 := big("doc"), big("doc2"), big("doc3")
	if err := h.Set(ctx, "doc", doc, 0).Err(); err != nil {
		t.Fatal(err)
	}
	mustFramed(t, pl.Get(ctx, "doc").Val(), "SET")
	stored := pl.Get(ctx, "doc").Val()
	pipe := h.Pipeline()
	cmds := []redis.Cmder{
		pipe.SetIFEQ(ctx, "doc", "x", doc, 0),
		pipe.Do(ctx, "DELIFEQ", "doc", doc),
		pipe.Do(ctx, "DIGEST", "doc"),
		pipe.Do(ctx, "DELEX", "doc", "IFEQ", doc),
	}
	pipe.Exec(ctx)
	for _, c := range cmds {
		if !errors.Is(c.Err(), ErrUnsupported) || !strings.Contains(c.Err().Error(), "doc") {
			t.Errorf("%.30q in a pipeline, on a compressed value: %v, want ErrUnsupported naming the key", c.Args(), c.Err())
		}
	}
	if pl.Get(ctx, "doc").Val() != stored {
		t.Fatal("a refused comparison changed the compressed value")
	}
	// A frame that fails its checksum: an error naming the key, and the
	// stored bytes stay as they were.
	bad := []byte(stored)
	hdr, err := codec.ParseHeader(bad)
	if err != nil || !hdr.HasChecksum {
		t.Fatalf("frame header: %+v %v", hdr, err)
	}
	bad[hdr.Len-1] ^= 0xFF
	pl.Set(ctx, "bad", bad, 0)
	for _, c := range []redis.Cmder{h.SetIFEQ(ctx, "bad", "x", doc, 0), h.Do(ctx, "DELIFEQ", "bad", doc)} {
		var e *Error
		if !errors.As(c.Err(), &e) || e.Key != "bad" || !errors.Is(c.Err(), codec.ErrChecksum) {
			t.Errorf("%.30q on a corrupt frame: %v, want a checksum error naming the key", c.Args(), c.Err())
		}
	}
	if pl.Get(ctx, "bad").Val() != string(bad) {
		t.Fatal("a comparison on a corrupt frame changed it")
	}
	// A server without a command gives its own error through the hook.
	for _, args := range [][]any{{"DELIFEQ", "doc", doc}, {"DIGEST", "doc"}, {"DELEX", "doc", "IFEQ", doc}} {
		if testutil.HasCommand(t, p.r.Addr, args[0].(string)) {
			continue
		}
		got, want := h.Do(ctx, args...).Err(), pl.Do(ctx, args...).Err()
		if got == nil || want == nil || got.Error() != want.Error() {
			t.Errorf("%s on a server without it: %v, want %v", args[0], got, want)
		}
	}
	if !testutil.HasSetIf(t, p.r.Addr) {
		t.Skipf("%s has no SET ... IFEQ (Valkey 8.1 and Redis 8.4 have): scripts/test-valkey9.sh runs the rest", testutil.ServerPath())
	}
	ref := redis.NewClient(&redis.Options{Addr: testutil.StartRedis(t).Addr})
	t.Cleanup(func() { ref.Close() })
	type result struct {
		val string
		err error
	}
	run := func(c *redis.Client) []result {
		c.FlushAll(ctx)
		var out []result
		add := func(cmd redis.Cmder) {
			v := ""
			switch x := cmd.(type) {
			case *redis.StatusCmd:
				v = x.Val()
			case *redis.StringCmd:
				v = x.Val()
			case *redis.IntCmd:
				v = fmt.Sprint(x.Val())
			case *redis.Cmd:
				v = fmt.Sprint(x.Val())
			case *redis.DigestCmd:
				v = fmt.Sprint(x.Val())
			case *redis.DurationCmd:
				v = x.Val().String()
			}
			out = append(out, result{v, cmd.Err()})
		}
		// A compressed document (raw on the reference server).
		c.Set(ctx, "doc", doc, 0)
		c.ExpireAt(ctx, "doc", time.Unix(4102444800, 0))
		add(c.SetIFEQ(ctx, "doc", doc2, doc3, redis.KeepTTL)) // not met: frame and expiry stay
		add(c.ExpireTime(ctx, "doc"))
		add(c.SetIFEQ(ctx, "doc", doc2, doc, redis.KeepTTL))
		add(c.Get(ctx, "doc"))
		add(c.ExpireTime(ctx, "doc"))
		add(c.SetIFEQGet(ctx, "doc", doc3, doc2, time.Hour))
		add(c.SetIFEQGet(ctx, "doc", doc, doc2, 0))
		add(c.Get(ctx, "doc"))
		add(c.SetIFEQ(ctx, "doc", "short", doc3, 0))
		add(c.Get(ctx, "doc"))
		// A raw lock token.
		c.Set(ctx, "lock", "token-1", 0)
		add(c.SetIFEQ(ctx, "lock", "token-2", "token-1", time.Minute))
		add(c.SetIFEQ(ctx, "lock", "token-3", "token-1", 0))
		add(c.SetIFEQGet(ctx, "lock", "token-3", "token-2", 0))
		add(c.SetIFEQ(ctx, "missing", "v", "v", 0))
		c.HSet(ctx, "h", "f", "v")
		add(c.SetIFEQ(ctx, "h", "v", "v", 0))
		tx := c.TxPipeline()
		a := tx.SetIFEQ(ctx, "lock", "token-4", "token-3", 0)
		b := tx.SetIFEQ(ctx, "lock", "token-5", "token-3", 0)
		tx.Exec(ctx)
		add(a)
		add(b)
		add(c.Get(ctx, "lock"))
		if testutil.HasCommand(t, p.r.Addr, "DELIFEQ") { // Valkey 9
			c.Set(ctx, "doc", doc, 0)
			add(c.Do(ctx, "DELIFEQ", "doc", doc2))
			add(c.Do(ctx, "DELIFEQ", "doc", doc))
			add(c.Do(ctx, "DELIFEQ", "lock", "token-4"))
			add(c.Do(ctx, "DELIFEQ", "h", "v"))
			add(c.Exists(ctx, "doc", "lock"))
		}
		if testutil.HasCommand(t, p.r.Addr, "DIGEST") { // Redis 8.4
			c.Set(ctx, "doc", doc, 0)
			add(c.Digest(ctx, "doc"))
			add(c.DelExArgs(ctx, "doc", redis.DelExArgs{Mode: "IFNE", MatchValue: doc}))
			add(c.DelExArgs(ctx, "doc", redis.DelExArgs{Mode: "IFEQ", MatchValue: doc}))
		}
		return out
	}
	got, want := run(h), run(ref)
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Fatalf("reply %d: through the hook %.60v, plain go-redis %.60v", i, got, want)
		}
	}
	t.Logf("%d replies equal", len(got))
	if n := len(got); n < 20 {
		t.Fatalf("only %d replies compared", n)
	}
	h.Set(ctx, "doc", doc, 0)
	h.SetIFEQ(ctx, "doc", doc2, doc3, 0) // not met
	mustFramed(t, pl.Get(ctx, "doc").Val(), "after a condition not met")
	h.SetIFEQ(ctx, "doc", doc2, doc, 0)
	mustFramed(t, pl.Get(ctx, "doc").Val(), "after SET IFEQ")
	if got := h.Get(ctx, "doc").Val(); got != doc2 {
		t.Fatalf("GET after SET IFEQ: %.30q", got)
	}
}

// TestHook_CompareConcurrent: SetIFEQ on a compressed document through the
// hook is a compare-and-set, as on the server: goroutines that each read a
// counter document and write it back incremented, only if it is unchanged,
// lose no increment and count none twice.
func TestHook_CompareConcurrent(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, Config{})
	if !testutil.HasSetIf(t, p.r.Addr) {
		t.Skipf("%s has no SET ... IFEQ (Valkey 8.1 and Redis 8.4 have): scripts/test-valkey9.sh runs this test", testutil.ServerPath())
	}
	h := p.hooked
	doc := func(n int) string { return fmt.Sprintf("%d|%s", n, big("counter")) }
	if err := h.Set(ctx, "ctr", doc(0), 0).Err(); err != nil {
		t.Fatal(err)
	}
	mustFramed(t, p.plain.Get(ctx, "ctr").Val(), "SET")
	const workers, tries = 4, 50
	won := make([]int, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range tries {
				v, err := h.Get(ctx, "ctr").Result()
				if err != nil {
					t.Errorf("GET: %v", err)
					return
				}
				num, _, _ := strings.Cut(v, "|")
				n, _ := strconv.Atoi(num)
				switch err := h.SetIFEQ(ctx, "ctr", doc(n+1), v, 0).Err(); {
				case err == nil:
					won[i]++
				case errors.Is(err, redis.Nil):
				default:
					t.Errorf("SetIFEQ: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range won {
		total += n
	}
	if got := h.Get(ctx, "ctr").Val(); got != doc(total) {
		t.Fatalf("after %d successful compare-and-sets the counter reads %.10q, want %.10q", total, got, doc(total))
	}
	if total == 0 {
		t.Fatal("no compare-and-set succeeded")
	}
	t.Logf("%d of %d compare-and-sets succeeded (%v)", total, workers*tries, won)
}
