package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/internal/luaguard"
	"github.com/squeeze-kv/squeeze/resp"
)

// The scripts of redis-py's Lock class (redis/lock.py), as the library
// sends them.
const (
	lockReleaseScript = `
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        redis.call('del', KEYS[1])
        return 1
    `
	lockExtendScript = `
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

// evalsha runs a script as redis-py's Script does: EVALSHA with the SHA-1
// of its text, and on NOSCRIPT SCRIPT LOAD, then EVALSHA again.
func evalsha(t *testing.T, c *rawConn, script string, args ...string) string {
	t.Helper()
	sha := scriptSHA(script)
	call := append([]string{"EVALSHA", sha}, args...)
	got := c.do(call...)
	if strings.HasPrefix(got, "-NOSCRIPT") {
		if loaded := c.do("SCRIPT", "LOAD", script); loaded != bulk(sha) {
			t.Fatalf("SCRIPT LOAD = %q, want the SHA-1 of the script %q", loaded, sha)
		}
		got = c.do(call...)
	}
	return got
}

// storedFramed reports whether Redis itself holds a frame at key (a string).
func storedFramed(t *testing.T, direct *rawConn, key string) bool {
	t.Helper()
	got := direct.do("GETRANGE", key, "0", "2")
	return got == bulk(string(magic))
}

// TestScripts_RedisPyLock: a lock with a 300-byte compressible token,
// acquired with SET NX PX through the proxy (stored compressed: no script
// has used its prefix yet), extended and released with redis-py's own
// scripts; the key is gone after. The next lock is stored plain.
func TestScripts_RedisPyLock(t *testing.T) {
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	token := compressible(300, 1)
	if got := p.do("SET", "lock:orders", token, "NX", "PX", "10000"); got != "+OK\r\n" {
		t.Fatalf("SET NX PX = %q", got)
	}
	if !storedFramed(t, direct, "lock:orders") {
		t.Fatalf("the token was not stored compressed: the test would not test anything")
	}
	if got := evalsha(t, p, lockExtendScript, "1", "lock:orders", token, "60000", "1"); got != ":1\r\n" {
		t.Fatalf("extend = %q, want :1", got)
	}
	if got := direct.do("PTTL", "lock:orders"); got <= ":10000\r\n" || len(got) < len(":10000\r\n") {
		t.Fatalf("PTTL after extend = %q, want more than 10 s", got)
	}
	if got := evalsha(t, p, lockReleaseScript, "1", "lock:orders", "someone else"); got != ":0\r\n" {
		t.Fatalf("release with another token = %q, want :0", got)
	}
	if got := evalsha(t, p, lockReleaseScript, "1", "lock:orders", token); got != ":1\r\n" {
		t.Fatalf("release = %q, want :1", got)
	}
	if got := direct.do("EXISTS", "lock:orders"); got != ":0\r\n" {
		t.Fatalf("EXISTS after release = %q, want :0", got)
	}
	// The prefix is learned: the next lock is stored as written, and the
	// prefix is kept in Redis for the next proxy.
	if got := p.do("SET", "lock:invoices", token, "NX", "PX", "10000"); got != "+OK\r\n" {
		t.Fatalf("SET NX PX = %q", got)
	}
	if storedFramed(t, direct, "lock:invoices") {
		t.Fatalf("a key under a prefix scripts use was stored compressed")
	}
	waitMember(t, direct, ScriptPrefixesKey, "lock:")
}

// waitMember waits, at most 5 s, until the set key has member.
func waitMember(t *testing.T, c *rawConn, key, member string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); c.do("SISMEMBER", key, member) != ":1\r\n"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s has no member %q after 5 s", key, member)
		}
	}
}

// TestScripts_CompareAndDelete: scripts that compare a hash field and a
// list element written (compressed) through the proxy, in Lua and inside
// Redis (LREM), find them.
func TestScripts_CompareAndDelete(t *testing.T) {
	v1, v2 := compressible(300, 1), compressible(300, 2)
	tests := []struct {
		name, key string
		setup     []string
		script    string
		args      []string
		want      string
		after     []string // a command run directly, and its reply
	}{
		{"hash field", "jobs:h", []string{"HSET", "jobs:h", "a", v1, "b", v2},
			`if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end return 0`,
			[]string{"b", v2}, ":1\r\n", []string{"HLEN", "jobs:h", ":1\r\n"}},
		{"hash field, another value", "jobs:h2", []string{"HSET", "jobs:h2", "a", v1},
			`if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end return 0`,
			[]string{"a", v2}, ":0\r\n", []string{"HLEN", "jobs:h2", ":1\r\n"}},
		{"list element in Lua", "queue:l", []string{"RPUSH", "queue:l", v1, v2, v1},
			`local all = redis.call('LRANGE', KEYS[1], 0, -1) for i, v in ipairs(all) do if v == ARGV[1] then redis.call('LSET', KEYS[1], i - 1, '') return redis.call('LREM', KEYS[1], 1, '') end end return 0`,
			[]string{v2}, ":1\r\n", []string{"LLEN", "queue:l", ":2\r\n"}},
		{"list element by LREM", "queue:l2", []string{"RPUSH", "queue:l2", v1, v2, v1},
			`return redis.call('LREM', KEYS[1], 0, ARGV[1])`,
			[]string{v1}, ":2\r\n", []string{"LLEN", "queue:l2", ":1\r\n"}},
	}
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.do(tc.setup...); strings.HasPrefix(got, "-") {
				t.Fatalf("%s = %q", tc.setup[0], got)
			}
			if got := p.do(append([]string{"EVAL", tc.script, "1", tc.key}, tc.args...)...); got != tc.want {
				t.Fatalf("EVAL = %q, want %q", got, tc.want)
			}
			if got := direct.do(tc.after[:len(tc.after)-1]...); got != tc.after[len(tc.after)-1] {
				t.Fatalf("%s = %q, want %q", tc.after[0], got, tc.after[len(tc.after)-1])
			}
		})
	}
}

// TestScripts_UndeclaredKey: a script that reads a compressed value at a
// key it does not declare gets an error that says so, alone, in a
// pipeline and in MULTI; never the frame.
func TestScripts_UndeclaredKey(t *testing.T) {
	e := startEnv(t)
	p := dialRaw(t, e.addr)
	v := compressible(300, 3)
	if got := p.do("SET", "cache:page", v); got != "+OK\r\n" {
		t.Fatal(got)
	}
	const script = `return redis.call('GET', 'cache:page')`
	const want = "-ERR squeeze: script read a compressed value at cache:page, which it does not declare in KEYS"
	t.Run("alone", func(t *testing.T) {
		if got := p.do("EVAL", script, "0"); !strings.HasPrefix(got, want) {
			t.Fatalf("EVAL = %q, want %q...", got, want)
		}
	})
	t.Run("pipeline", func(t *testing.T) {
		p.send([]string{"SET", "cache:other", v}, []string{"EVAL", script, "0"}, []string{"EVAL", `return redis.call('GET', KEYS[1])`, "1", "cache:page"}, []string{"PING"})
		for i, w := range []string{"+OK\r\n", want, bulk(v), "+PONG\r\n"} {
			if got := p.read(); !strings.HasPrefix(got, w) {
				t.Fatalf("reply %d = %.120q, want %.120q", i, got, w)
			}
		}
	})
	t.Run("MULTI", func(t *testing.T) {
		p.send([]string{"SET", "multi:third", v})
		if got := p.read(); got != "+OK\r\n" {
			t.Fatal(got)
		}
		p.send([]string{"MULTI"}, []string{"EVAL", `return redis.call('GET', 'multi:third')`, "0"}, []string{"EXEC"})
		if got := p.read(); got != "+OK\r\n" {
			t.Fatal(got)
		}
		if got := p.read(); got != "+QUEUED\r\n" {
			t.Fatal(got)
		}
		got := p.read()
		if !strings.HasPrefix(got, "*1\r\n"+"-ERR squeeze: script read a compressed value at multi:third, which it does not declare") {
			t.Fatalf("EXEC = %.200q", got)
		}
	})
}

// TestScripts_Multi: redis-py's lock released inside MULTI, its token
// stored compressed before.
func TestScripts_Multi(t *testing.T) {
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	token := compressible(300, 4)
	p.do("SET", "mlock:a", token, "NX", "PX", "10000")
	if !storedFramed(t, direct, "mlock:a") {
		t.Fatal("the token was not stored compressed")
	}
	p.send([]string{"MULTI"}, []string{"EVAL", lockReleaseScript, "1", "mlock:a", token}, []string{"EXISTS", "mlock:a"}, []string{"EXEC"})
	for i, w := range []string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "*2\r\n:1\r\n:0\r\n"} {
		if got := p.read(); got != w {
			t.Fatalf("reply %d = %q, want %q", i, got, w)
		}
	}
}

// TestScripts_Pipeline: SET, the release script and EXISTS written at once:
// the replies are in order, and the script saw the token.
func TestScripts_Pipeline(t *testing.T) {
	e := startEnv(t)
	p := dialRaw(t, e.addr)
	token := compressible(300, 5)
	p.send([]string{"SET", "plock:a", token, "NX", "PX", "10000"}, []string{"EVAL", lockReleaseScript, "1", "plock:a", token}, []string{"EXISTS", "plock:a"},
		[]string{"SET", "plock:a", token, "NX", "PX", "10000"}, []string{"GET", "plock:a"})
	for i, w := range []string{"+OK\r\n", ":1\r\n", ":0\r\n", "+OK\r\n", bulk(token)} {
		if got := p.read(); got != w {
			t.Fatalf("reply %d = %.100q, want %.100q", i, got, w)
		}
	}
}

// TestScripts_SHAs: SCRIPT LOAD answers the SHA-1 of the script as sent;
// EVALSHA and SCRIPT EXISTS take it; EVAL's script can be run by SHA-1
// after; a script loaded directly on Redis does not run by its own SHA-1
// (NOSCRIPT, until the client sends the body); an unknown one gets
// NOSCRIPT; errors name the client's SHA-1.
func TestScripts_SHAs(t *testing.T) {
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	const s1, s2, s3 = "return 'one'", "return 'two'", "return 'three'"
	sha1, sha2, sha3 := scriptSHA(s1), scriptSHA(s2), scriptSHA(s3)
	steps := []struct {
		cmd  []string
		conn *rawConn
		want string
	}{
		{[]string{"SCRIPT", "EXISTS", sha1, sha2}, p, "*2\r\n:0\r\n:0\r\n"},
		{[]string{"EVALSHA", sha1, "0"}, p, "-NOSCRIPT"},
		{[]string{"SCRIPT", "LOAD", s1}, p, bulk(sha1)},
		{[]string{"SCRIPT", "EXISTS", sha1, sha2}, p, "*2\r\n:1\r\n:0\r\n"},
		{[]string{"EVALSHA", sha1, "0"}, p, bulk("one")},
		{[]string{"EVALSHA_RO", strings.ToUpper(sha1), "0"}, p, bulk("one")},
		{[]string{"EVAL", s2, "0"}, p, bulk("two")},
		{[]string{"EVALSHA", sha2, "0"}, p, bulk("two")},
		// Loaded directly on Redis, unguarded: through the proxy it does
		// not exist (issue 32), and the client sends the body.
		{[]string{"SCRIPT", "LOAD", s3}, direct, bulk(sha3)},
		{[]string{"EVALSHA", sha3, "0"}, p, "-NOSCRIPT squeeze: no script with SHA-1 " + sha3},
		{[]string{"SCRIPT", "EXISTS", sha3}, p, "*1\r\n:0\r\n"},
		{[]string{"EVAL", s3, "0"}, p, bulk("three")},
		{[]string{"EVALSHA", sha3, "0"}, p, bulk("three")},
	}
	for i, st := range steps {
		if got := st.conn.do(st.cmd...); !strings.HasPrefix(got, st.want) {
			t.Fatalf("step %d %v = %q, want %q", i, st.cmd, got, st.want)
		}
	}
	got := p.do("EVAL", "error('boom')", "0")
	if !strings.Contains(got, "boom") || strings.Contains(got, scriptSHA(string(luaguard.Wrap([]byte("error('boom')"), luaguard.EvalPrologue)))) {
		t.Fatalf("error = %q: want Redis's, without the wrapped script's SHA-1", got)
	}
}

// TestScripts_Shebang: a script that starts with #!lua keeps its flags
// (no-writes: a write inside fails as on Redis) and its line numbers.
func TestScripts_Shebang(t *testing.T) {
	e := startEnv(t)
	p := dialRaw(t, e.addr)
	v := compressible(300, 6)
	p.do("SET", "doc:a", v)
	if got := p.do("EVAL", "#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1])", "1", "doc:a"); got != bulk(v) {
		t.Fatalf("EVAL with a shebang = %.100q", got)
	}
	if got := p.do("EVAL", "#!lua flags=no-writes\nreturn redis.call('SET', KEYS[1], 'x')", "1", "doc:a"); !strings.Contains(got, "Write commands are not allowed") {
		t.Fatalf("a write under no-writes = %q", got)
	}
	if got := p.do("EVAL", "local a = 1\nlocal b = nil + 1", "0"); !strings.Contains(got, ":2:") {
		t.Fatalf("error = %q: want the script's own line 2", got)
	}
}

// TestScripts_Function: FUNCTION LOAD and FCALL: the declared key's frame
// is decoded first; an undeclared one gets the error.
func TestScripts_Function(t *testing.T) {
	e := startEnv(t)
	p := dialRaw(t, e.addr)
	lib := "#!lua name=sqlocks\n" +
		"redis.register_function('release', function(keys, args) if redis.call('GET', keys[1]) == args[1] then return redis.call('DEL', keys[1]) end return 0 end)\n" +
		"redis.register_function{function_name='peek', callback=function(keys, args) return redis.call('GET', args[1]) end, flags={'no-writes'}}"
	if got := p.do("FUNCTION", "LOAD", lib); got != bulk("sqlocks") {
		t.Fatalf("FUNCTION LOAD = %q", got)
	}
	token := compressible(300, 7)
	p.do("SET", "flock:a", token)
	p.do("SET", "fdoc:a", token)
	if got := p.do("FCALL", "release", "1", "flock:a", token); got != ":1\r\n" {
		t.Fatalf("FCALL release = %q", got)
	}
	if got := p.do("FCALL_RO", "peek", "0", "fdoc:a"); !strings.HasPrefix(got, "-ERR squeeze: script read a compressed value at fdoc:a, which it does not declare") {
		t.Fatalf("FCALL_RO peek = %q", got)
	}
}

// TestScripts_PrefixesKeptAcrossRestart: a new proxy in front of the same
// Redis reads the prefixes scripts used and stores their keys plain.
func TestScripts_PrefixesKeptAcrossRestart(t *testing.T) {
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	v := compressible(300, 8)
	p.do("EVAL", "return redis.call('SET', KEYS[1], ARGV[1])", "1", "rate:user1", v)
	waitMember(t, direct, ScriptPrefixesKey, "rate:")
	e2 := startProxy(t, e.redis.URL(), e.redis)
	for deadline := time.Now().Add(5 * time.Second); !contains(e2.srv.ScriptPrefixes(), "rate:"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the new proxy did not load the prefixes in 5 s")
		}
	}
	p2 := dialRaw(t, e2.addr)
	p2.do("SET", "rate:user2", v)
	p2.do("SET", "other:user2", v)
	if storedFramed(t, direct, "rate:user2") || !storedFramed(t, direct, "other:user2") {
		t.Fatal("want rate:user2 plain, other:user2 compressed")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestWrapScript: where the prologue goes.
func TestWrapScript(t *testing.T) {
	tests := []struct{ in, want string }{
		{"return 1", "P;return 1"},
		{"#!lua flags=no-writes\nreturn 1", "#!lua flags=no-writes\nP;return 1"},
		{"#!lua", "#!lua"},
		{"", "P;"},
	}
	for _, tc := range tests {
		if got := string(luaguard.Wrap([]byte(tc.in), "P;")); got != tc.want {
			t.Errorf("wrapScript(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	_ = resp.AppendBulk
}

// TestScripts_FrameFromAnotherWriter: a key the proxy made plain, then
// compressed again by another writer (here: the frame written directly):
// the script sent on the fast path gets the prologue's error, never the
// frame, and the next one runs on the value.
func TestScripts_FrameFromAnotherWriter(t *testing.T) {
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	v := compressible(300, 9)
	const get = "return redis.call('GET', KEYS[1])"
	p.do("SET", "shared:a", v)
	if got := p.do("EVAL", get, "1", "shared:a"); got != bulk(v) {
		t.Fatalf("first EVAL = %.60q", got)
	}
	// Another writer stores a frame: take one the proxy makes elsewhere.
	p.do("SET", "elsewhere:a", v)
	frame := direct.do("GET", "elsewhere:a")
	fv, _, err := resp.ReadValue([]byte(frame))
	if err != nil || !strings.HasPrefix(string(fv.Str), string(magic)) {
		t.Fatalf("no frame to copy: %.40q", frame)
	}
	direct.do("SET", "shared:a", string(fv.Str))
	got := p.do("EVAL", get, "1", "shared:a")
	if !strings.HasPrefix(got, "-ERR squeeze: script read a compressed value at declared key shared:a before writing") {
		t.Fatalf("EVAL on the new frame = %.120q, want the prologue's error", got)
	}
	if got := p.do("EVAL", get, "1", "shared:a"); got != bulk(v) {
		t.Fatalf("EVAL after = %.60q, want the value", got)
	}
}
