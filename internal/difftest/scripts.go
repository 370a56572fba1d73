package difftest

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Script scenes (issue 32): seeded multi-client scenes around Lua scripts
// and functions, played on server A, then on server B, as RunMulti plays
// its own: scripts under client-side caching, read-only scripts during
// CLIENT PAUSE WRITE, scripts of ACL users with few rights, scripts run by
// SHA-1 (SCRIPT LOAD, EVALSHA, SCRIPT EXISTS, SCRIPT FLUSH) and function
// libraries loaded, called, listed with their code and deleted. Values
// are the generator's: compressible documents, random bytes, words and
// numbers.

// RunScripts plays cfg.Scenes script scenes on both servers and returns
// the first difference as a *Mismatch (Step is the scene, Index the
// recorded reply).
func RunScripts(addrA, addrB string, cfg MultiConfig) (int, error) {
	if cfg.MaxValue == 0 {
		cfg.MaxValue = 64 << 10
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	g := &scriptGen{multiGen{r: newMultiRand(cfg.Seed ^ 0x5c21975), max: cfg.MaxValue}, cfg.Seed}
	for i := 0; i < cfg.Scenes; i++ {
		sc := g.scene(i)
		ta, err := play(addrA, sc, cfg.Timeout)
		if err != nil {
			return i, fmt.Errorf("scene %d (%s) on A: %w", i, sc.name, err)
		}
		tb, err := play(addrB, sc, cfg.Timeout)
		if err != nil {
			return i, fmt.Errorf("scene %d (%s) on B: %w", i, sc.name, err)
		}
		for j := range max(len(ta), len(tb)) {
			var a, b string
			if j < len(ta) {
				a = ta[j]
			}
			if j < len(tb) {
				b = tb[j]
			}
			if a != b {
				return i, &Mismatch{Step: i, Commands: sc.describe(j), A: a, B: b}
			}
		}
	}
	return cfg.Scenes, nil
}

type scriptGen struct {
	multiGen
	seed uint64
}

func (g *scriptGen) scene(i int) scene {
	switch g.r.IntN(5) {
	case 0:
		return g.tracked(i)
	case 1:
		return g.paused(i)
	case 2:
		return g.aclUser(i)
	case 3:
		return g.bySHA(i)
	default:
		return g.library(i)
	}
}

// reads are scripts that read their keys (KEYS[1], KEYS[2]) or not.
var reads = []string{
	"return 1",
	"return redis.call('get', KEYS[1])",
	"return redis.call('mget', KEYS[1], KEYS[2])",
	"return {redis.call('exists', KEYS[1]), redis.call('strlen', KEYS[2])}",
	"local v = redis.call('get', KEYS[1]) if v then return string.len(v) end return -1",
}

// tracked: a RESP3 client with CLIENT TRACKING on runs a script that
// declares two keys and reads them or not; another client changes them;
// the invalidations arrive as on Redis, in their place.
func (g *scriptGen) tracked(i int) scene {
	sc := scene{name: "script tracking", clients: 2}
	k := func(j int) string { return "st:" + strconv.Itoa(i) + ":" + strconv.Itoa(j) }
	sc.acts = append(sc.acts,
		send(1, "SET", k(0), g.value()), read(1),
		send(1, "SET", k(1), g.value()), read(1),
		send(0, "HELLO", "3"), action{client: 0, read: true, hello: true},
		send(0, "CLIENT", "TRACKING", "ON"), read(0),
	)
	for range 1 + g.r.IntN(3) {
		cmd := "EVAL"
		if g.r.IntN(2) == 0 {
			cmd = "EVAL_RO"
		}
		sc.acts = append(sc.acts, send(0, cmd, reads[g.r.IntN(len(reads))], "2", k(0), k(1)),
			send(0, "PING"), action{client: 0, until: "PONG"})
		switch g.r.IntN(3) {
		case 0:
			sc.acts = append(sc.acts, send(1, "SET", k(g.r.IntN(2)), g.value()), read(1))
		case 1:
			sc.acts = append(sc.acts, send(1, "DEL", k(g.r.IntN(2))), read(1))
		}
	}
	sc.acts = append(sc.acts, send(0, "PING"), action{client: 0, until: "PONG"})
	return sc
}

// paused: during CLIENT PAUSE ... WRITE read-only scripts (EVAL_RO, a
// script flagged no-writes) and reads run at once, on Redis and through
// the proxy; the pause outlasts the scene's read timeout, so a script that
// waited for it fails the scene.
func (g *scriptGen) paused(i int) scene {
	sc := scene{name: "paused", clients: 3}
	k := func(j int) string { return "sp:" + strconv.Itoa(i) + ":" + strconv.Itoa(j) }
	sc.acts = append(sc.acts,
		send(1, "SET", k(0), g.value()), read(1),
		send(1, "SET", k(1), g.value()), read(1),
		send(2, "CLIENT", "PAUSE", "30000", "WRITE"), read(2),
	)
	for range 1 + g.r.IntN(3) {
		body := reads[g.r.IntN(len(reads))]
		if g.r.IntN(2) == 0 {
			sc.acts = append(sc.acts, send(0, "EVAL_RO", body, "2", k(0), k(1)), read(0))
		} else {
			sc.acts = append(sc.acts, send(0, "EVAL", "#!lua flags=no-writes\n"+body, "2", k(0), k(1)), read(0))
		}
		sc.acts = append(sc.acts, send(1, "GET", k(g.r.IntN(2))), read(1))
	}
	sc.acts = append(sc.acts, send(2, "CLIENT", "UNPAUSE"), read(2))
	return sc
}

// aclUser: a user who may run scripts and SET its keys (and sometimes GET
// them) runs scripts on a value another client wrote: what Redis allows
// succeeds, what it refuses fails alike.
func (g *scriptGen) aclUser(i int) scene {
	sc := scene{name: "acl user", clients: 2}
	user := "su" + strconv.FormatUint(g.seed, 10) + "x" + strconv.Itoa(i)
	k := "sa" + strconv.Itoa(i) + ":doc"
	rights := []string{"ACL", "SETUSER", user, "on", ">pw", "+@scripting", "+set", "~sa" + strconv.Itoa(i) + ":*"}
	if g.r.IntN(2) == 0 {
		rights = append(rights, "+get")
	}
	sc.acts = append(sc.acts,
		send(0, rights...), read(0),
		send(0, "SET", k, g.value()), read(0),
		send(1, "AUTH", user, "pw"), read(1),
	)
	for _, s := range [][]string{
		{"EVAL", "return redis.acl_check_cmd('set', KEYS[1], 1)", "1", k},
		{"EVAL", "return redis.call('get', KEYS[1])", "1", k},
		{"EVAL_RO", "return {#ARGV, #_G.ARGV, ARGV[1]}", "1", k, "a"},
		{"EVAL_RO", "return redis.call('get', KEYS[1])", "1", k},
		{"EVAL", "return redis.call('set', KEYS[1], ARGV[1])", "1", k, g.value()},
		{"EVAL", "return redis.call('set', KEYS[1], 'x')", "1", "other:" + strconv.Itoa(i)},
	} {
		if g.r.IntN(3) > 0 {
			sc.acts = append(sc.acts, send(1, s...), read(1))
		}
	}
	sc.acts = append(sc.acts, send(0, "ACL", "DELUSER", user), read(0))
	return sc
}

// sha1hex is a script's SHA-1 as EVALSHA takes it.
func sha1hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// bySHA: a script loaded with SCRIPT LOAD runs by its SHA-1 (EVALSHA,
// EVALSHA_RO), before and after another client changes its key; SCRIPT
// EXISTS; after SCRIPT FLUSH, NOSCRIPT and the body again.
func (g *scriptGen) bySHA(i int) scene {
	sc := scene{name: "by SHA-1", clients: 2}
	k := "sh:" + strconv.Itoa(i)
	body := reads[1+g.r.IntN(len(reads)-1)] + " -- " + strconv.Itoa(i)
	sha := sha1hex(body)
	sc.acts = append(sc.acts,
		send(1, "SET", k, g.value()), read(1),
		send(0, "SCRIPT", "LOAD", body), read(0),
		send(0, "EVALSHA", sha, "2", k, k), read(0),
		send(1, "SET", k, g.value()), read(1),
		send(0, "EVALSHA_RO", strings.ToUpper(sha), "2", k, k), read(0),
		send(0, "SCRIPT", "EXISTS", sha, sha1hex(body+" ")), read(0),
	)
	if g.r.IntN(3) == 0 {
		sc.acts = append(sc.acts,
			send(0, "SCRIPT", "FLUSH"), read(0),
			send(0, "EVALSHA", sha, "2", k, k), read(0),
			send(0, "EVAL", body, "2", k, k), read(0),
			send(0, "EVALSHA", sha, "2", k, k), read(0),
		)
	}
	return sc
}

// libraries are function libraries, valid and not, each with the
// functions f and g (if it loads).
var libraries = []string{
	"redis.register_function('f%d', function(keys, args) return redis.call('get', keys[1]) end)\n" +
		"redis.register_function{function_name='g%d', callback=function(keys, args) return {#args, redis.call('strlen', keys[1])} end, flags={'no-writes'}}",
	"redis.register_function('f%d', function(keys, args) redis.call = function() return 'hijacked' end return 1 end)\n" +
		"redis.register_function{function_name='g%d', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}",
	"redis.register_function('f%d', 'bad') redis.register_function('g%d', function() return 1 end)",
	"redis.register_function{function_name='f%d', callback='bad'} redis.register_function('g%d', function() return 1 end)",
	"redis.register_function('f%d', function() return 1 end, 1, 2) redis.register_function('g%d', function() return 1 end)",
	"redis.register_function('f%d', function(keys) return redis.pcall('set', keys[1], 'v') end)\n" +
		"redis.register_function{function_name='g%d', callback=function(keys) return redis.pcall('set', keys[1], 'v') end, flags={'no-writes'}}",
}

// library: a library is loaded (or refused), its functions called with
// FCALL and FCALL_RO on a value another client wrote, listed with their
// code, and deleted.
func (g *scriptGen) library(i int) scene {
	sc := scene{name: "library", clients: 2}
	lib := "sl" + strconv.Itoa(i)
	k := "sf:" + strconv.Itoa(i)
	code := "#!lua name=" + lib + "\n" + fmt.Sprintf(libraries[g.r.IntN(len(libraries))], i, i)
	f, gf := "f"+strconv.Itoa(i), "g"+strconv.Itoa(i)
	sc.acts = append(sc.acts,
		send(1, "SET", k, g.value()), read(1),
		send(0, "FUNCTION", "LOAD", "REPLACE", code), read(0),
		send(0, "FCALL", f, "1", k, "a"), read(0),
		send(0, "FCALL_RO", gf, "1", k, "a", "b"), read(0),
		send(0, "FCALL", f, "1", k), read(0),
		send(0, "FCALL", gf, "1", k), read(0),
		// Listed with one function: the order of several is the
		// server's hash order, which differs between two servers.
		send(0, "FUNCTION", "LOAD", "REPLACE", "#!lua name="+lib+"\nredis.register_function('"+f+"', function(keys) return redis.call('get', keys[1]) end)"), read(0),
		send(0, "FUNCTION", "LIST", "LIBRARYNAME", lib, "WITHCODE"), read(0),
		send(0, "FCALL", f, "1", k), read(0),
		send(0, "FUNCTION", "DELETE", lib), read(0),
	)
	return sc
}
