package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/codec"
)

// exactConfigs are the two configurations the hook is held exact in:
// every value compressed and every frame kept (the smallest MinSize and
// MinGain), and the defaults, both with zstd:1.
var exactConfigs = []struct {
	name string
	cfg  Config
}{
	{"all", Config{Algorithm: codec.MustParseAlgorithm("zstd:1"), MinSize: -1, MinGain: -1}},
	{"defaults", Config{Algorithm: codec.MustParseAlgorithm("zstd:1")}},
}

// forConfigs runs f with a hooked and a plain client on a new
// redis-server, once per configuration of exactConfigs.
func forConfigs(t *testing.T, f func(t *testing.T, p pair)) {
	for _, c := range exactConfigs {
		t.Run(c.name, func(t *testing.T) { f(t, newPair(t, c.cfg)) })
	}
}

// TestExact_GetToBuffer: GetToBuffer (a *redis.ZeroCopyStringCmd) reads
// the value into the caller's buffer as plain go-redis does: the decoded
// bytes, the same "buffer too small" error when they do not fit, alone
// and in pipelines, even where the stored frame is larger than the value.
func TestExact_GetToBuffer(t *testing.T) {
	ctx := context.Background()
	forConfigs(t, func(t *testing.T, p pair) {
		small := strings.Repeat("a", 1024)
		random := make([]byte, 10<<20) // incompressible: its frame, when kept, is larger
		rand.Read(random)
		huge := strings.Repeat(big("huge"), (10<<20)/len(big("huge")))
		for _, c := range []struct {
			key, val string
			bufLen   int
		}{
			{"small", small, 2048},
			{"exact", small, len(small)},
			{"random", string(random), len(random)},
			{"huge", huge, len(huge)},
		} {
			if err := p.hooked.Set(ctx, c.key, c.val, 0).Err(); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, c.bufLen)
			n, err := p.hooked.GetToBuffer(ctx, c.key, buf).Result()
			if err != nil || n != len(c.val) || string(buf[:n]) != c.val {
				t.Fatalf("%s: GetToBuffer = %d, %v, %.8q; want %d bytes", c.key, n, err, buf[:min(n, 8)], len(c.val))
			}
			var pc *redis.ZeroCopyStringCmd
			pbuf := make([]byte, c.bufLen)
			if _, err := p.hooked.Pipelined(ctx, func(pl redis.Pipeliner) error {
				pc = pl.GetToBuffer(ctx, c.key, pbuf)
				return nil
			}); err != nil || pc.Val() != len(c.val) || string(pc.Bytes()) != c.val {
				t.Fatalf("%s in a pipeline: %d, %v", c.key, pc.Val(), err)
			}
		}
		// Too small a buffer: plain go-redis's error for the same value.
		p.plain.Set(ctx, "ref", small, 0)
		want := p.plain.GetToBuffer(ctx, "ref", make([]byte, 100)).Err()
		tail := make([]byte, 200) // nothing written past len(buf)
		buf := tail[:100]
		if err := p.hooked.GetToBuffer(ctx, "small", buf).Err(); want == nil || err == nil || err.Error() != want.Error() {
			t.Fatalf("buffer too small: %v, want %v", err, want)
		}
		if strings.Contains(string(tail[100:]), "a") {
			t.Fatal("written past len(buf)")
		}
		if err := p.hooked.GetToBuffer(ctx, "missing", buf).Err(); err != redis.Nil {
			t.Fatalf("missing key: %v", err)
		}
		// The connection is still aligned.
		if got := p.hooked.Get(ctx, "small").Val(); got != small {
			t.Fatal("GET after GetToBuffer")
		}
	})
}

// marshaled is a value go-redis writes with MarshalBinary.
type marshaled struct{ s string }

func (m marshaled) MarshalBinary() ([]byte, error) { return []byte(m.s), nil }

// TestExact_ArgTypes: every argument type go-redis formats itself is
// stored as go-redis formats it (time.Time as RFC3339Nano, not its
// MarshalBinary), compressed or not: what a hooked client reads back, and
// what a plain client reads, are what plain go-redis would have stored.
func TestExact_ArgTypes(t *testing.T) {
	ctx := context.Background()
	ts := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	long := strings.Repeat("squeeze ", 20)
	ip := net.ParseIP("2001:db8::68")
	forConfigs(t, func(t *testing.T, p pair) {
		for i, v := range []any{ts, &ts, long, &long, []byte(long), 12345, int8(-7), uint64(1 << 60), 3.25, float32(1.5), true,
			time.Duration(1500), marshaled{long}, ip, nil} {
			f := fmt.Sprint("f", i)
			if err := p.hooked.HSet(ctx, "h", f, v).Err(); err != nil {
				t.Fatalf("%T: %v", v, err)
			}
			if err := p.plain.HSet(ctx, "ref", f, v).Err(); err != nil {
				t.Fatalf("%T: %v", v, err)
			}
			want := p.plain.HGet(ctx, "ref", f).Val()
			if got := p.hooked.HGet(ctx, "h", f).Val(); got != want {
				t.Errorf("%T: hooked reads %q, want %q", v, got, want)
			}
			if err := p.hooked.Set(ctx, "s", v, 0).Err(); err != nil {
				t.Fatalf("SET %T: %v", v, err)
			}
			if got := p.hooked.Get(ctx, "s").Val(); got != want {
				t.Errorf("SET %T: hooked reads %q, want %q", v, got, want)
			}
		}
	})
}

// noFrame fails when s holds the frame magic: a value passed through
// undecoded.
func noFrame(t *testing.T, what string, s string) {
	t.Helper()
	if strings.Contains(s, codec.Magic) {
		t.Errorf("%s: a compressed value passed through: %.60q", what, s)
	}
}

// TestExact_Streams: the stream replies that carry field values are
// decoded: XAUTOCLAIM with its deleted ids (XAutoClaimWithDeleted), XINFO
// STREAM (first and last entry) and XINFO STREAM FULL (entries), typed and
// through Do, in RESP2 and RESP3.
func TestExact_Streams(t *testing.T) {
	ctx := context.Background()
	forConfigs(t, func(t *testing.T, p pair) {
		v1, v2 := big("one"), big("two")
		p.hooked.XAdd(ctx, &redis.XAddArgs{Stream: "st", ID: "1-1", Values: []string{"f", v1}})
		p.hooked.XAdd(ctx, &redis.XAddArgs{Stream: "st", ID: "2-1", Values: []string{"f", v2, "g", "short"}})
		mustFramed(t, p.plain.XRange(ctx, "st", "-", "+").Val()[0].Values["f"].(string), "XADD")
		p.plain.XGroupCreate(ctx, "st", "g", "0")
		p.plain.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c1", Streams: []string{"st", ">"}})

		msgs, _, deleted, err := p.hooked.XAutoClaimWithDeleted(ctx, &redis.XAutoClaimArgs{Stream: "st", Group: "g", Consumer: "c2", Start: "0"}).Result()
		if err != nil || len(msgs) != 2 || msgs[0].Values["f"] != v1 || msgs[1].Values["f"] != v2 || len(deleted) != 0 {
			t.Errorf("XAutoClaimWithDeleted = %d messages, %v", len(msgs), err)
		}
		info, err := p.hooked.XInfoStream(ctx, "st").Result()
		if err != nil || info.FirstEntry.Values["f"] != v1 || info.LastEntry.Values["f"] != v2 || info.LastEntry.Values["g"] != "short" {
			t.Errorf("XInfoStream: %v", err)
		}
		full, err := p.hooked.XInfoStreamFull(ctx, "st", 10).Result()
		if err != nil || len(full.Entries) != 2 || full.Entries[0].Values["f"] != v1 || full.Entries[1].Values["f"] != v2 {
			t.Errorf("XInfoStreamFull: %v", err)
		}
		for _, proto := range []int{2, 3} {
			c := redis.NewClient(&redis.Options{Addr: p.r.Addr, Protocol: proto})
			defer c.Close()
			if _, err := Install(c, exactConfigs[0].cfg); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]any{{"XINFO", "STREAM", "st"}, {"XINFO", "STREAM", "st", "FULL"}} {
				got, err := c.Do(ctx, args...).Result()
				s := fmt.Sprint(got)
				if err != nil || !strings.Contains(s, v1) || !strings.Contains(s, v2) {
					t.Errorf("RESP%d %v: %v", proto, args, err)
				}
				noFrame(t, fmt.Sprint(args), s)
			}
		}
	})
}

// TestExact_FunctionListWithCode: FUNCTION LIST WITHCODE gives a library's
// code as it was loaded, not the guarded form Redis holds (typed and
// through Do, RESP2 and RESP3); a library loaded without the hook is
// listed as it is.
func TestExact_FunctionListWithCode(t *testing.T) {
	ctx := context.Background()
	const lib = "#!lua name=squeezelib\nredis.register_function('sq_get', function(keys) return redis.call('GET', keys[1]) end)\n"
	const plainLib = "#!lua name=plainlib\nredis.register_function('pl_one', function() return 1 end)\n"
	forConfigs(t, func(t *testing.T, p pair) {
		if err := p.hooked.FunctionLoad(ctx, lib).Err(); err != nil {
			t.Fatal(err)
		}
		if err := p.plain.FunctionLoad(ctx, plainLib).Err(); err != nil {
			t.Fatal(err)
		}
		libs, err := p.hooked.FunctionList(ctx, redis.FunctionListQuery{WithCode: true}).Result()
		if err != nil || len(libs) != 2 {
			t.Fatalf("FunctionList = %d libraries, %v", len(libs), err)
		}
		for _, l := range libs {
			want := map[string]string{"squeezelib": lib, "plainlib": plainLib}[l.Name]
			if l.Code != want {
				t.Errorf("FunctionList: %s's code is %d bytes, want the %d loaded: %.80q", l.Name, len(l.Code), len(want), l.Code)
			}
		}
		for _, proto := range []int{2, 3} {
			c := redis.NewClient(&redis.Options{Addr: p.r.Addr, Protocol: proto})
			defer c.Close()
			if _, err := Install(c, exactConfigs[0].cfg); err != nil {
				t.Fatal(err)
			}
			got, err := c.Do(ctx, "FUNCTION", "LIST", "LIBRARYNAME", "squeezelib", "WITHCODE").Result()
			if s := fmt.Sprint(got); err != nil || !strings.Contains(s, lib) || strings.Contains(s, "local redis") {
				t.Errorf("RESP%d Do FUNCTION LIST WITHCODE: %v: %.300s", proto, err, s)
			}
		}
		// The function still runs guarded.
		p.hooked.Set(ctx, "fk", big("f"), 0)
		if got, err := p.hooked.FCall(ctx, "sq_get", []string{"fk"}).Text(); err != nil || got != big("f") {
			t.Errorf("FCALL = %.20q, %v", got, err)
		}
	})
}

// TestExact_EvalShaUnguarded: EVALSHA of a script loaded without the hook
// (which the hook cannot guard: it never saw its body) is never run
// silently on compressed values: it fails with NOSCRIPT, alone, in a
// pipeline and in a transaction, so that clients send the body, which the
// hook guards: redis.NewScript's Run then reads a declared key decoded,
// and an undeclared one fails loudly.
func TestExact_EvalShaUnguarded(t *testing.T) {
	ctx := context.Background()
	const undeclared = `return redis.call('GET', 'cache:page')`
	const declared = `return redis.call('GET', KEYS[1])`
	forConfigs(t, func(t *testing.T, p pair) {
		v := big("page")[:300]
		p.hooked.Set(ctx, "cache:page", v, 0)
		mustFramed(t, p.plain.Get(ctx, "cache:page").Val(), "the value")
		sha := p.plain.ScriptLoad(ctx, undeclared).Val()
		shaDecl := p.plain.ScriptLoad(ctx, declared).Val()
		isNoScript := func(what string, err error) {
			t.Helper()
			if !redis.HasErrorPrefix(err, "NOSCRIPT") {
				t.Errorf("%s: %v, want a NOSCRIPT error", what, err)
			}
		}
		got, err := p.hooked.EvalSha(ctx, sha, nil).Text()
		isNoScript("EvalSha", err)
		noFrame(t, "EvalSha", got)
		if err := p.hooked.Do(ctx, "EVALSHA", sha, 0).Err(); err == nil || !strings.Contains(err.Error(), "was loaded through squeeze") {
			t.Errorf("Do EVALSHA: %v", err)
		} else if !errors.Is(err, ErrUnsupported) {
			t.Errorf("Do EVALSHA: %v does not wrap ErrUnsupported", err)
		}
		isNoScript("EvalShaRO", p.hooked.EvalShaRO(ctx, sha, nil).Err())
		var pc *redis.Cmd
		p.hooked.Pipelined(ctx, func(pl redis.Pipeliner) error { pc = pl.EvalSha(ctx, sha, nil); return nil })
		isNoScript("EvalSha in a pipeline", pc.Err())
		noFrame(t, "EvalSha in a pipeline", fmt.Sprint(pc.Val()))
		p.hooked.TxPipelined(ctx, func(pl redis.Pipeliner) error { pc = pl.EvalSha(ctx, sha, nil); return nil })
		if pc.Err() == nil {
			t.Error("EvalSha in a transaction ran")
		}
		if ex, err := p.hooked.ScriptExists(ctx, sha, shaDecl).Result(); err != nil || ex[0] || ex[1] {
			t.Errorf("SCRIPT EXISTS of scripts the hook cannot run = %v, %v", ex, err)
		}
		// The body, sent by Run after NOSCRIPT, runs guarded.
		if err := redis.NewScript(undeclared).Run(ctx, p.hooked, nil).Err(); err == nil || !strings.Contains(err.Error(), "which it does not declare in KEYS") {
			t.Errorf("Run, undeclared key: %v", err)
		}
		if got, err := redis.NewScript(declared).Run(ctx, p.hooked, []string{"cache:page"}).Text(); err != nil || got != v {
			t.Errorf("Run, declared key: %.20q, %v", got, err)
		}
		if got, err := p.hooked.EvalSha(ctx, shaDecl, []string{"cache:page"}).Text(); err != nil || got != v {
			t.Errorf("EvalSha after Run: %.20q, %v", got, err)
		}
	})
	// AllowScripts: sent as it is.
	p := newPair(t, Config{Algorithm: codec.MustParseAlgorithm("zstd:1"), AllowScripts: true})
	sha := p.plain.ScriptLoad(ctx, `return 7`).Val()
	if n, err := p.hooked.EvalSha(ctx, sha, nil).Int(); err != nil || n != 7 {
		t.Errorf("AllowScripts EvalSha = %d, %v", n, err)
	}
}

// TestExact_ScriptLoadEverywhere: a script loaded once through a hook runs
// by the SHA-1 SCRIPT LOAD answered from every client: a plain one, and a
// hooked one in another process (a Hook of its own), alone and in a
// pipeline, on a declared key read decoded.
func TestExact_ScriptLoadEverywhere(t *testing.T) {
	ctx := context.Background()
	const body = `return redis.call('GET', KEYS[1]) .. ARGV[1]`
	forConfigs(t, func(t *testing.T, p pair) {
		v := big("doc")
		p.hooked.Set(ctx, "doc:1", v, 0)
		sha, err := p.hooked.ScriptLoad(ctx, body).Result()
		if err != nil || sha != redis.NewScript(body).Hash() {
			t.Fatalf("SCRIPT LOAD = %q, %v", sha, err)
		}
		p.plain.Set(ctx, "plain:1", "raw", 0)
		if got, err := p.plain.EvalSha(ctx, sha, []string{"plain:1"}, "!").Text(); err != nil || got != "raw!" {
			t.Errorf("plain EVALSHA = %q, %v", got, err)
		}
		if ex := p.plain.ScriptExists(ctx, sha).Val(); len(ex) != 1 || !ex[0] {
			t.Errorf("plain SCRIPT EXISTS = %v", ex)
		}
		for _, pipelined := range []bool{false, true} {
			other := redis.NewClient(&redis.Options{Addr: p.r.Addr})
			defer other.Close()
			if _, err := Install(other, p.cfg); err != nil {
				t.Fatal(err)
			}
			var got string
			var err error
			if pipelined {
				var pc *redis.Cmd
				_, err = other.Pipelined(ctx, func(pl redis.Pipeliner) error { pc = pl.EvalSha(ctx, sha, []string{"doc:1"}, "!"); return nil })
				got = fmt.Sprint(pc.Val())
			} else {
				got, err = other.EvalSha(ctx, sha, []string{"doc:1"}, "!").Text()
			}
			if err != nil || got != v+"!" {
				t.Errorf("another hooked client's EVALSHA (pipelined %v) = %.20q, %v", pipelined, got, err)
			}
			if ex := other.ScriptExists(ctx, sha).Val(); len(ex) != 1 || !ex[0] {
				t.Errorf("another hooked client's SCRIPT EXISTS = %v", ex)
			}
		}
		// A SCRIPT LOAD in a pipeline and in a transaction loads both too.
		for i, run := range []func(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error){p.hooked.Pipelined, p.hooked.TxPipelined} {
			b := fmt.Sprintf("return %d", i)
			var lc *redis.StringCmd
			if _, err := run(ctx, func(pl redis.Pipeliner) error { lc = pl.ScriptLoad(ctx, b); return nil }); err != nil || lc.Val() != redis.NewScript(b).Hash() {
				t.Fatalf("pipelined SCRIPT LOAD = %q, %v", lc.Val(), err)
			}
			if n, err := p.plain.EvalSha(ctx, lc.Val(), nil).Int(); err != nil || n != i {
				t.Errorf("plain EVALSHA of a pipelined SCRIPT LOAD = %d, %v", n, err)
			}
		}
	})
}

// TestExact_FunctionLoadErrors: FUNCTION LOAD through the hook accepts and
// refuses the libraries Redis does, with Redis's errors (issue 32).
func TestExact_FunctionLoadErrors(t *testing.T) {
	ctx := context.Background()
	forConfigs(t, func(t *testing.T, p pair) {
		for _, body := range []string{
			"redis.register_function('f', 'bad')",
			"redis.register_function{function_name='f', callback='bad'}",
			"redis.register_function('f', function() end, 1, 2)",
			"redis.register_function('f')",
			"redis.register_function('f', function() return 1 end)",
		} {
			lib := "#!lua name=errlib\n" + body
			_, wantErr := p.plain.FunctionLoad(ctx, lib).Result()
			p.plain.FunctionFlush(ctx)
			_, gotErr := p.hooked.FunctionLoad(ctx, lib).Result()
			p.plain.FunctionFlush(ctx)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Errorf("FUNCTION LOAD %q through the hook: %v, Redis: %v", body, gotErr, wantErr)
			}
		}
	})
}
