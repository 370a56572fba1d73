package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/codec"
)

// redis-py's Lock release and extend scripts (redis/lock.py), the pattern
// every lock library uses: compare the stored token in Lua.
const (
	lockRelease = `
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        redis.call('del', KEYS[1])
        return 1
    `
	lockExtend = `
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        local expiration = redis.call('pttl', KEYS[1])
        if not expiration then
            expiration = 0
        end
        if expiration < 0 then
            return 0
        end

        local newttl = ARGV[2]
        if ARGV[3] == "0" then
            newttl = ARGV[2] + expiration
        end
        redis.call('pexpire', KEYS[1], newttl)
        return 1
    `
)

// TestScripts_Lock: a lock with a 300-byte compressible token, stored
// compressed, extended and released with redis.NewScript; the next lock
// under the same prefix is stored as written.
func TestScripts_Lock(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, Config{MinSize: -1})
	token := big("token")[:300]
	if err := p.hooked.SetNX(ctx, "lock:orders", token, 10e9).Err(); err != nil {
		t.Fatal(err)
	}
	mustFramed(t, p.plain.Get(ctx, "lock:orders").Val(), "the lock's token")
	extend, release := redis.NewScript(lockExtend), redis.NewScript(lockRelease)
	if n, err := extend.Run(ctx, p.hooked, []string{"lock:orders"}, token, 60000, "1").Int(); err != nil || n != 1 {
		t.Fatalf("extend = %d, %v", n, err)
	}
	if ms := p.plain.PTTL(ctx, "lock:orders").Val().Milliseconds(); ms <= 10000 {
		t.Fatalf("PTTL after extend = %d ms", ms)
	}
	if n, err := release.Run(ctx, p.hooked, []string{"lock:orders"}, "another token").Int(); err != nil || n != 0 {
		t.Fatalf("release with another token = %d, %v", n, err)
	}
	if n, err := release.Run(ctx, p.hooked, []string{"lock:orders"}, token).Int(); err != nil || n != 1 {
		t.Fatalf("release = %d, %v", n, err)
	}
	if p.plain.Exists(ctx, "lock:orders").Val() != 0 {
		t.Fatal("the lock is still held")
	}
	p.hooked.SetNX(ctx, "lock:invoices", token, 10e9)
	if codec.IsFramed([]byte(p.plain.Get(ctx, "lock:invoices").Val())) {
		t.Fatal("a key under a prefix scripts use was stored compressed")
	}
	if !p.plain.SIsMember(ctx, ScriptPrefixesKey, "lock:").Val() {
		t.Fatalf("%s lacks lock:", ScriptPrefixesKey)
	}
	// SCRIPT LOAD answers the SHA-1 of the script as written; EVALSHA and
	// SCRIPT EXISTS take it.
	sha, err := p.hooked.ScriptLoad(ctx, lockRelease).Result()
	if err != nil || sha != release.Hash() {
		t.Fatalf("SCRIPT LOAD = %q, %v; want %q", sha, err, release.Hash())
	}
	if ex, err := p.hooked.ScriptExists(ctx, sha, strings.Repeat("0", 40)).Result(); err != nil || !ex[0] || ex[1] {
		t.Fatalf("SCRIPT EXISTS = %v, %v", ex, err)
	}
}

// TestScripts_CompareAndDelete: a hash field and list elements written
// compressed, compared in Lua and inside Redis (LREM).
func TestScripts_CompareAndDelete(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, Config{MinSize: -1})
	v1, v2 := big("one"), big("two")
	p.hooked.HSet(ctx, "jobs:h", "a", v1, "b", v2)
	p.hooked.RPush(ctx, "queue:l", v1, v2, v1)
	mustFramed(t, p.plain.HGet(ctx, "jobs:h", "b").Val(), "hash field")
	hdel := `if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end return 0`
	if n, err := p.hooked.Eval(ctx, hdel, []string{"jobs:h"}, "b", v2).Int(); err != nil || n != 1 {
		t.Fatalf("compare-and-delete on a hash field = %d, %v", n, err)
	}
	if n, err := p.hooked.Eval(ctx, `return redis.call('LREM', KEYS[1], 0, ARGV[1])`, []string{"queue:l"}, v1).Int(); err != nil || n != 2 {
		t.Fatalf("LREM in a script = %d, %v", n, err)
	}
	if p.plain.HLen(ctx, "jobs:h").Val() != 1 || p.plain.LLen(ctx, "queue:l").Val() != 1 {
		t.Fatal("wrong elements left")
	}
}

// TestScripts_Undeclared: reading a compressed value at a key the script
// does not declare is an error naming it: alone, in a pipeline, in MULTI.
func TestScripts_Undeclared(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, Config{MinSize: -1})
	p.hooked.Set(ctx, "cache:page", big("page"), 0)
	const script = `return redis.call('GET', 'cache:page')`
	const want = "squeeze: script read a compressed value at cache:page, which it does not declare in KEYS"
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", what, err, want)
		}
	}
	check("alone", p.hooked.Eval(ctx, script, nil).Err())
	var c1, c2 *redis.Cmd
	p.hooked.Pipelined(ctx, func(pl redis.Pipeliner) error { c1 = pl.Eval(ctx, script, nil); return nil })
	check("pipeline", c1.Err())
	p.hooked.TxPipelined(ctx, func(pl redis.Pipeliner) error { c2 = pl.Eval(ctx, script, nil); return nil })
	check("MULTI", c2.Err())
	// A declared key holding a frame in a pipeline: the prologue's error
	// too (the hook makes keys plain before scripts sent alone only).
	var c3 *redis.Cmd
	p.hooked.Set(ctx, "doc:a", big("doc"), 0)
	p.hooked.Pipelined(ctx, func(pl redis.Pipeliner) error {
		c3 = pl.Eval(ctx, `return redis.call('GET', KEYS[1])`, []string{"doc:a"})
		return nil
	})
	if err := c3.Err(); err == nil || !strings.Contains(err.Error(), "compressed value at declared key doc:a") {
		t.Errorf("declared key in a pipeline: %v", err)
	}
	// Alone, it runs; then, in a pipeline, too.
	if got, err := p.hooked.Eval(ctx, `return redis.call('GET', KEYS[1])`, []string{"doc:a"}).Text(); err != nil || got != big("doc") {
		t.Errorf("declared key alone: %.40q, %v", got, err)
	}
	p.hooked.Pipelined(ctx, func(pl redis.Pipeliner) error {
		c3 = pl.Eval(ctx, `return redis.call('GET', KEYS[1])`, []string{"doc:a"})
		return nil
	})
	if got, err := c3.Text(); err != nil || got != big("doc") {
		t.Errorf("declared key in a pipeline after: %.40q, %v", got, err)
	}
	if errors.Is(c3.Err(), ErrUnsupported) {
		t.Error("scripts are no longer refused")
	}
}

// TestScripts_ValkeyServer: where scripts reach redis as server too
// (Valkey), server.call is guarded as redis.call is: a declared key reads
// decoded, a compressed value at an undeclared key is an error naming it,
// in scripts and in functions. Elsewhere it skips (scripts/test-valkey9.sh
// runs it).
func TestScripts_ValkeyServer(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, Config{})
	if p.plain.EvalRO(ctx, "return type(rawget(_G, 'server'))", nil).Val() != "table" {
		t.Skip("the server's scripts have no server global")
	}
	h := p.hooked
	v := big("valkey")
	h.Set(ctx, "doc", v, 0)
	h.Set(ctx, "other", v, 0)
	mustFramed(t, p.plain.Get(ctx, "other").Val(), "SET")
	if got, err := h.Eval(ctx, "return server.call('GET', KEYS[1])", []string{"doc"}).Text(); err != nil || got != v {
		t.Errorf("server.call GET of a declared key = %.40q, %v", got, err)
	}
	if err := h.Eval(ctx, "return server.call('GET', 'other')", nil).Err(); err == nil || !strings.Contains(err.Error(), "other") {
		t.Errorf("server.call GET of an undeclared compressed value: %v, want the guard's error", err)
	}
	lib := "#!lua name=vk\nserver.register_function('vk_get', function(keys) return server.call('GET', 'other') end)"
	if err := h.FunctionLoad(ctx, lib).Err(); err != nil {
		t.Fatal(err)
	}
	if err := h.FCall(ctx, "vk_get", nil).Err(); err == nil || !strings.Contains(err.Error(), "other") {
		t.Errorf("a function's server.call of an undeclared compressed value: %v, want the guard's error", err)
	}
}

// TestScripts_ReadOnlyDecoded: EVAL_RO and EVALSHA_RO write nothing, as
// through the proxy: the values at their declared keys are handed to the
// script decoded, the stored frames stay, and no prefix is learned (saving
// it would be a write).
func TestScripts_ReadOnlyDecoded(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range exactConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			p := newPair(t, cfg.cfg)
			h := p.hooked
			v := big("readonly")
			h.Set(ctx, "ro:doc", v, 0)
			h.HSet(ctx, "ro:h", "f", v)
			stored := p.plain.Get(ctx, "ro:doc").Val()
			mustFramed(t, stored, "SET")
			get := "return {redis.call('GET', KEYS[1]), redis.call('HGET', KEYS[2], 'f'), ARGV[1], #ARGV}"
			want := fmt.Sprint([]any{v, v, "arg", int64(1)})
			if got, err := h.EvalRO(ctx, get, []string{"ro:doc", "ro:h"}, "arg").Result(); err != nil || fmt.Sprint(got) != want {
				t.Errorf("EVAL_RO = %.80q, %v", fmt.Sprint(got), err)
			}
			sha := h.ScriptLoad(ctx, get).Val()
			if got, err := h.EvalShaRO(ctx, sha, []string{"ro:doc", "ro:h"}, "arg").Result(); err != nil || fmt.Sprint(got) != want {
				t.Errorf("EVALSHA_RO = %.80q, %v", fmt.Sprint(got), err)
			}
			if p.plain.Get(ctx, "ro:doc").Val() != stored {
				t.Error("a read-only script's key was rewritten")
			}
			if p.plain.SIsMember(ctx, ScriptPrefixesKey, "ro:").Val() {
				t.Error("a read-only script's prefix was learned")
			}
			// An undeclared compressed value is still the guard's error.
			if err := h.EvalRO(ctx, "return redis.call('GET', 'ro:doc')", nil).Err(); err == nil || !strings.Contains(err.Error(), "ro:doc") {
				t.Errorf("EVAL_RO of an undeclared key: %v", err)
			}
		})
	}
}

// TestScripts_FunctionUnguarded: FCALL and FCALL_RO of a function whose
// library was loaded without squeeze (by a plain client) never hand it a
// compressed value: alone, in a pipeline and in a transaction they fail
// with an error that says to load the library through squeeze, and
// nothing is sent. Loaded again through the hook, its functions read
// declared keys as written, and an undeclared compressed key is the
// guard's error.
func TestScripts_FunctionUnguarded(t *testing.T) {
	ctx := context.Background()
	const lib = "#!lua name=plainlib\n" +
		"redis.register_function('pl_arg', function(keys, args) return redis.call('GET', args[1]) end)\n" +
		"redis.register_function{function_name='pl_get', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}\n"
	forConfigs(t, func(t *testing.T, p pair) {
		v := big("fn")
		p.hooked.Set(ctx, "fn:doc", v, 0)
		stored := p.plain.Get(ctx, "fn:doc").Val()
		mustFramed(t, stored, "SET")
		if err := p.plain.FunctionLoad(ctx, lib).Err(); err != nil {
			t.Fatal(err)
		}
		refused := func(what string, got any, err error) {
			t.Helper()
			if err == nil || !strings.Contains(err.Error(), "was not loaded through squeeze") || !errors.Is(err, ErrUnsupported) {
				t.Errorf("%s = %.40v, %v: want the error that says to load the library through squeeze", what, got, err)
			}
			noFrame(t, what, fmt.Sprint(got))
		}
		got, err := p.hooked.FCall(ctx, "pl_arg", nil, "fn:doc").Result()
		refused("FCALL reading an undeclared key", got, err)
		got, err = p.hooked.FCall(ctx, "PL_GET", []string{"fn:doc"}).Result()
		refused("FCALL", got, err)
		got, err = p.hooked.FCallRO(ctx, "pl_get", []string{"fn:doc"}).Result()
		refused("FCALL_RO", got, err)
		got, err = p.hooked.Do(ctx, "FCALL", "pl_get", 1, "fn:doc").Result()
		refused("Do FCALL", got, err)
		var pc *redis.Cmd
		var pg *redis.StringCmd
		p.hooked.Pipelined(ctx, func(pl redis.Pipeliner) error {
			pc = pl.FCall(ctx, "pl_get", []string{"fn:doc"})
			pg = pl.Get(ctx, "fn:doc")
			return nil
		})
		refused("FCALL in a pipeline", pc.Val(), pc.Err())
		if s, err := pg.Result(); err != nil || s != v {
			t.Errorf("GET after it in the pipeline = %.20q, %v", s, err)
		}
		p.hooked.TxPipelined(ctx, func(pl redis.Pipeliner) error {
			pc = pl.FCall(ctx, "pl_get", []string{"fn:doc"})
			return nil
		})
		refused("FCALL in a transaction", pc.Val(), pc.Err())
		if p.plain.Get(ctx, "fn:doc").Val() != stored {
			t.Error("the key of a function that was not run was rewritten")
		}
		// A function Redis does not have: Redis's own error.
		if err := p.hooked.FCall(ctx, "no_such_function", nil).Err(); err == nil || strings.Contains(err.Error(), "squeeze") {
			t.Errorf("FCALL of a function Redis does not have: %v, want Redis's error", err)
		}
		// Loaded again through the hook: guarded.
		if err := p.hooked.FunctionLoadReplace(ctx, lib).Err(); err != nil {
			t.Fatal(err)
		}
		if err := p.hooked.FCall(ctx, "pl_arg", nil, "fn:doc").Err(); err == nil || !strings.Contains(err.Error(), "which it does not declare in KEYS") {
			t.Errorf("FCALL reading an undeclared key, guarded: %v", err)
		}
		if s, err := p.hooked.FCallRO(ctx, "pl_get", []string{"fn:doc"}).Text(); err != nil || s != v {
			t.Errorf("FCALL_RO, guarded = %.20q, %v", s, err)
		}
		p.hooked.TxPipelined(ctx, func(pl redis.Pipeliner) error {
			pc = pl.FCall(ctx, "pl_arg", []string{"fn:plain"}, "fn:plain")
			return nil
		})
		if err := pc.Err(); err != redis.Nil {
			t.Errorf("FCALL in a transaction, guarded = %v, want nil", err)
		}
	})
}

// TestScripts_ReadOnlyDuringPause: during CLIENT PAUSE ... WRITE, FCALL_RO,
// FCALL of a function flagged no-writes, and EVAL and EVALSHA of a script
// flagged no-writes on a compressed key run at once, as on Redis, and see
// the value as written: the hook writes nothing for them (a write would
// wait for the pause to end, and rewrite the key), and the key stays
// stored compressed.
func TestScripts_ReadOnlyDuringPause(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, exactConfigs[0].cfg)
	h := p.hooked
	v := big("pause")
	h.Set(ctx, "ro:doc", v, 0)
	stored := p.plain.Get(ctx, "ro:doc").Val()
	mustFramed(t, stored, "SET")
	const lib = "#!lua name=rolib\nredis.register_function{function_name='ro_get', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}\n"
	if err := h.FunctionLoad(ctx, lib).Err(); err != nil {
		t.Fatal(err)
	}
	const get = "#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1])"
	sha, err := h.ScriptLoad(ctx, get).Result()
	if err != nil {
		t.Fatal(err)
	}
	// Long enough that a call held by it would come back after it ended,
	// and find the key rewritten.
	if err := p.plain.Do(ctx, "CLIENT", "PAUSE", 3000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cmd  *redis.Cmd
	}{
		{"FCALL_RO", h.FCallRO(ctx, "ro_get", []string{"ro:doc"})},
		{"FCALL no-writes", h.FCall(ctx, "ro_get", []string{"ro:doc"})},
		{"EVAL no-writes", h.Eval(ctx, get, []string{"ro:doc"})},
		{"EVALSHA no-writes", h.EvalSha(ctx, sha, []string{"ro:doc"})},
	} {
		if s, err := c.cmd.Text(); err != nil || s != v {
			t.Errorf("%s during the pause = %.20q, %v", c.name, s, err)
		}
	}
	if err := p.plain.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	if p.plain.Get(ctx, "ro:doc").Val() != stored {
		t.Error("a read-only script's key was rewritten")
	}
	if p.plain.SIsMember(ctx, ScriptPrefixesKey, "ro:").Val() {
		t.Error("a read-only script's prefix was learned")
	}
}
