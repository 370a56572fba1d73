package proxy

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// The step that decodes a script's declared keys acts as the proxy, not as
// the user, and a script that must not write writes nothing (issue 32,
// section 2).

// TestScripts_ReadOnlyDuringPause: during CLIENT PAUSE ... WRITE, EVAL_RO,
// EVALSHA_RO, FCALL_RO, EVAL of a script flagged no-writes and FCALL of a
// function flagged no-writes on compressed keys (a string, a hash) run at once, as on Redis, see the values as written, and leave them stored
// compressed.
func TestScripts_ReadOnlyDuringPause(t *testing.T) {
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	v := compressible(300, 11)
	p.do("SET", "rodoc", v)
	p.do("HSET", "rohash", "f", v)
	if !storedFramed(t, direct, "rodoc") {
		t.Fatal("the value is not stored compressed")
	}
	lib := "#!lua name=rolib\nredis.register_function{function_name='ro_get', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}\n" +
		"redis.register_function{function_name='ro_args', callback=function(keys, args) return {#args, args[1]} end, flags={'no-writes'}}"
	if got := p.do("FUNCTION", "LOAD", lib); got != bulk("rolib") {
		t.Fatalf("FUNCTION LOAD = %q", got)
	}
	const get = "return redis.call('get', KEYS[1])"
	if got := p.do("SCRIPT", "LOAD", get); got != bulk(scriptSHA(get)) {
		t.Fatalf("SCRIPT LOAD = %q", got)
	}
	// SCRIPT LOAD saved the SHA-1s in the background: done before the pause.
	for deadline := time.Now().Add(5 * time.Second); direct.do("HEXISTS", ScriptSHAsKey, e.srv.scriptSHAs.shaField(scriptSHA(get))) != ":1\r\n"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("SCRIPT LOAD did not save the SHA-1s")
		}
	}
	if got := direct.do("CLIENT", "PAUSE", "5000", "WRITE"); got != "+OK\r\n" {
		t.Fatalf("CLIENT PAUSE = %q", got)
	}
	defer direct.do("CLIENT", "UNPAUSE")
	other := dialRaw(t, e.addr)
	for _, st := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"EVAL_RO", get, "1", "rodoc"}, bulk(v)},
		{[]string{"EVALSHA_RO", scriptSHA(get), "1", "rodoc"}, bulk(v)},
		{[]string{"FCALL_RO", "ro_get", "1", "rodoc"}, bulk(v)},
		{[]string{"FCALL", "ro_get", "1", "rodoc"}, bulk(v)},
		{[]string{"EVAL_RO", "return redis.call('hgetall', KEYS[1])", "1", "rohash"}, "*2\r\n" + bulk("f") + bulk(v)},
		{[]string{"EVAL_RO", "return {ARGV[1], #ARGV, #_G.ARGV, redis.call('get', KEYS[1]) == ARGV[2]}", "1", "rodoc", "a", v}, "*4\r\n" + bulk("a") + ":2\r\n:2\r\n:1\r\n"},
		{[]string{"FCALL_RO", "ro_args", "1", "rodoc", "a"}, "*2\r\n:1\r\n" + bulk("a")},
		{[]string{"EVAL", "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", "1", "rodoc"}, bulk(v)},
	} {
		start := time.Now()
		got := p.do(st.cmd...)
		if got != st.want {
			t.Errorf("%.60q = %.80q, want %.80q", st.cmd, got, st.want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%.60q took %v: it waited for the pause", st.cmd, d)
		}
		start = time.Now()
		if got := other.do("PING"); got != "+PONG\r\n" || time.Since(start) > 2*time.Second {
			t.Errorf("PING from another client = %q after %v", got, time.Since(start))
		}
	}
	if !storedFramed(t, direct, "rodoc") {
		t.Error("a read-only script rewrote the value")
	}
}

// TestScripts_ReadReplica: behind a proxy in front of a read-only
// replica, EVAL, EVAL_RO, FCALL and FCALL_RO that read a compressed key
// see the value, as they do on the replica directly for a plain one.
func TestScripts_ReadReplica(t *testing.T) {
	e := startEnv(t)
	host, port, _ := net.SplitHostPort(e.redis.Addr)
	dialRaw(t, e.redis.Addr).do("CONFIG", "SET", "repl-diskless-sync-delay", "0")
	replica := testutil.StartRedis(t, "--replicaof", host, port)
	rd := dialRaw(t, replica.Addr)
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(rd.do("INFO", "replication"), "master_link_status:up"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the replica did not sync")
		}
	}
	v := compressible(300, 12)
	dialRaw(t, e.addr).do("SET", "repdoc", v)
	lib := "#!lua name=replib\nredis.register_function('rep_get', function(keys) return redis.call('GET', keys[1]) end)\n" +
		"redis.register_function{function_name='rep_get_ro', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}"
	if got := dialRaw(t, e.addr).do("FUNCTION", "LOAD", lib); got != bulk("replib") {
		t.Fatalf("FUNCTION LOAD = %q", got)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(rd.do("FUNCTION", "LIST"), "replib"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the library did not reach the replica")
		}
	}
	for deadline := time.Now().Add(30 * time.Second); rd.do("EXISTS", "repdoc") != ":1\r\n"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the value did not reach the replica")
		}
	}
	r := startProxy(t, replica.URL(), replica)
	p := dialRaw(t, r.addr)
	for _, cmd := range []string{"EVAL", "EVAL_RO"} {
		if got := p.do(cmd, "return redis.call('get', KEYS[1])", "1", "repdoc"); got != bulk(v) {
			t.Errorf("%s on the replica = %.100q, want the value", cmd, got)
		}
	}
	for _, c := range [][]string{{"FCALL", "rep_get_ro", "1", "repdoc"}, {"FCALL_RO", "rep_get_ro", "1", "repdoc"}} {
		if got := p.do(c...); got != bulk(v) {
			t.Errorf("%s on the replica = %.100q, want the value", c[0], got)
		}
	}
	// A function that may write: Redis refuses it on a replica, before it
	// runs, and so does the proxy.
	want := rd.do("FCALL", "rep_get", "1", "repdoc")
	if got := p.do("FCALL", "rep_get", "1", "repdoc"); got != want {
		t.Errorf("FCALL of a function that may write on the replica = %.100q, Redis = %.100q", got, want)
	}
	if got := p.do("EVAL", "return redis.call('set', KEYS[1], 'x')", "1", "repdoc"); !strings.HasPrefix(got, "-READONLY") {
		t.Errorf("EVAL that writes on the replica = %.100q, want Redis's READONLY", got)
	}
}

// TestScripts_ACLUser: a user without the rights the decoding step uses
// (TYPE, GET ...) runs scripts as on Redis: what Redis allows succeeds,
// what it refuses fails with Redis's error.
func TestScripts_ACLUser(t *testing.T) {
	e := startEnv(t)
	ref := testutil.StartRedis(t)
	for _, addr := range []string{e.redis.Addr, ref.Addr} {
		if got := dialRaw(t, addr).do("ACL", "SETUSER", "bob", "on", ">123", "+@scripting", "+set", "~x*"); got != "+OK\r\n" {
			t.Fatalf("ACL SETUSER = %q", got)
		}
	}
	big := compressible(300, 13)
	direct, via := dialRaw(t, ref.Addr), dialRaw(t, e.addr)
	for _, c := range [][]string{
		{"AUTH", "bob", "123"},
		{"EVAL", "return redis.acl_check_cmd('set','xx',1)", "1", "xx"},
		{"SET", "xx", big},
		{"EVAL", "return redis.acl_check_cmd('set','xx',1)", "1", "xx"},
		{"EVAL", "return redis.call('set', KEYS[1], ARGV[1])", "1", "xx", "small"},
		{"SET", "xy", big},
		{"EVAL", "return redis.call('get', KEYS[1])", "1", "xy"},
		{"EVAL", "return redis.call('set', KEYS[1], 'v')", "1", "yy"},
		{"EVAL_RO", "return redis.acl_check_cmd('get','xy')", "1", "xy"},
		// The decoded value the proxy hands a read-only script is not
		// within reach of a user who may not GET it.
		{"EVAL_RO", "return {#ARGV, #_G.ARGV, ARGV[1]}", "1", "xy", "a"},
		{"EVAL_RO", "return redis.call('get', KEYS[1])", "1", "xy"},
	} {
		want, got := direct.do(c...), via.do(c...)
		if got != want {
			t.Errorf("%.60q through the proxy = %.120q, Redis = %.120q", c, got, want)
		}
	}
}

// TestScripts_TrackingNoPushes: with CLIENT TRACKING on, a script that
// reads nothing but declares compressed keys gets no invalidation when
// they change afterwards, as on Redis: the proxy's decoding step does not
// read them on the client's connection; and a script that declares a key
// the client cached gets none at all: for a client with a private
// connection the decoding step writes nothing.
func TestScripts_TrackingNoPushes(t *testing.T) {
	e := startEnv(t)
	ref := testutil.StartRedis(t)
	big := compressible(300, 14)
	run := func(addr string) []string {
		w, c := dialRaw(t, addr), dialRaw(t, addr)
		w.do("SET", "tk1", big)
		w.do("SET", "tk2", big)
		w.do("SET", "tk3", big)
		c.do("HELLO", "3")
		out := []string{c.do("CLIENT", "TRACKING", "ON"), c.do("EVAL", "return 1", "2", "tk1", "tk2")}
		w.do("SET", "tk1", "new")
		w.do("SET", "tk2", "new")
		out = append(out, c.do("PING"), c.do("PING"))
		// A key the client reads, then declares to a script that writes
		// nothing: no invalidation either.
		out = append(out, c.do("GET", "tk3"), c.do("EVAL", "return redis.call('strlen', KEYS[1])", "1", "tk3"), c.do("PING"))
		return append(out, c.do("EVAL", "return redis.call('get', KEYS[1])", "1", "tk3"), c.do("PING"))
	}
	want, got := run(ref.Addr), run(e.addr)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d through the proxy = %q, Redis = %q", i, got[i], want[i])
		}
	}
}

// TestScripts_StreamEntryError: a script that reads a compressed stream
// entry gets an error that says running it again cannot help and what to
// do instead, and the proxy does not run it again.
func TestScripts_StreamEntryError(t *testing.T) {
	e := startEnv(t)
	p := dialRaw(t, e.addr)
	p.do("XADD", "sev", "1-1", "f", compressible(300, 15))
	got := p.do("EVAL", "return redis.call('xrange', KEYS[1], '-', '+')", "1", "sev")
	if !strings.HasPrefix(got, "-ERR squeeze: script read a compressed value at sev in a stream entry") ||
		strings.Contains(got, "run it again") || !strings.Contains(got, "XRANGE") {
		t.Fatalf("EVAL reading a compressed stream entry = %q", got)
	}
	if got := p.do("XRANGE", "sev", "-", "+"); !strings.Contains(got, compressible(300, 15)) {
		t.Fatalf("XRANGE = %.100q", got)
	}
}

// TestScripts_CachedElsewhere: a script loaded directly on Redis never runs
// unguarded through the proxy's EVALSHA (it read a frame before); one
// loaded through another proxy in front of the same Redis runs at once.
func TestScripts_CachedElsewhere(t *testing.T) {
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	const script = "local v=redis.call('get',ARGV[1]) return {string.len(v),v}"
	sha := scriptSHA(script)
	if got := direct.do("SCRIPT", "LOAD", script); got != bulk(sha) {
		t.Fatalf("SCRIPT LOAD directly = %q", got)
	}
	v := compressible(300, 16)
	p.do("SET", "cached:doc", v)
	if got := p.do("EVALSHA", sha, "0", "cached:doc"); !strings.HasPrefix(got, "-NOSCRIPT ") {
		t.Fatalf("EVALSHA of a script loaded directly = %.120q, want NOSCRIPT", got)
	}
	if got := p.do("EVALSHA_RO", sha, "0", "cached:doc"); !strings.HasPrefix(got, "-NOSCRIPT ") {
		t.Fatalf("EVALSHA_RO of a script loaded directly = %.120q, want NOSCRIPT", got)
	}
	// A pair saved by a proxy with another prologue (here: pointing at the
	// unguarded script) is not this proxy's: NOSCRIPT still.
	direct.do("HSET", ScriptSHAsKey, sha, sha)
	if got := p.do("EVALSHA", sha, "0", "cached:doc"); !strings.HasPrefix(got, "-NOSCRIPT ") {
		t.Fatalf("EVALSHA of a script another proxy version saved = %.120q, want NOSCRIPT", got)
	}
	// Sent with its body, it is guarded: the undeclared key's frame is an
	// error, never read.
	if got := p.do("EVAL", script, "0", "cached:doc"); !strings.HasPrefix(got, "-ERR squeeze: script read a compressed value at cached:doc") {
		t.Fatalf("EVAL = %.120q", got)
	}
	// Loaded through proxy A, run by its SHA-1 through proxy B.
	const get = "return redis.call('get', KEYS[1])"
	if got := p.do("SCRIPT", "LOAD", get); got != bulk(scriptSHA(get)) {
		t.Fatalf("SCRIPT LOAD = %q", got)
	}
	b := dialRaw(t, startProxy(t, e.redis.URL(), e.redis).addr)
	var got string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got = b.do("EVALSHA", scriptSHA(get), "1", "cached:doc"); got == bulk(v) || time.Now().After(deadline) {
			break
		}
	}
	if got != bulk(v) {
		t.Fatalf("EVALSHA through another proxy = %.120q, want the value", got)
	}
}

// TestScripts_ReadOnlyLooksInside: a read-only script, whose keys stay
// compressed, gets STRLEN, HSTRLEN, GETRANGE and SUBSTR of the values as
// written, as Redis gives them for the values stored plain; the bit
// commands, LCS and LPOS on a compressed value are refused with an error
// rather than answered from the frame.
func TestScripts_ReadOnlyLooksInside(t *testing.T) {
	e := startEnv(t)
	ref := testutil.StartRedis(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, ref.Addr)
	v := compressible(300, 17)
	for _, c := range []*rawConn{p, direct} {
		c.do("SET", "in:s", v)
		c.do("HSET", "in:h", "f", v)
		c.do("SET", "in:plain", "short")
	}
	ro := func(body string, args ...string) []string {
		return append([]string{"EVAL_RO", body, "3", "in:s", "in:h", "in:plain"}, args...)
	}
	for _, c := range [][]string{
		ro("return redis.call('strlen', KEYS[1])"),
		ro("return redis.call('hstrlen', KEYS[2], 'f')"),
		ro("return redis.call('strlen', KEYS[3])"),
		ro("return redis.call('getrange', KEYS[1], ARGV[1], ARGV[2])", "0", "-1"),
		ro("return redis.call('getrange', KEYS[1], ARGV[1], ARGV[2])", "5", "10"),
		ro("return redis.call('getrange', KEYS[1], ARGV[1], ARGV[2])", "-5", "-1"),
		ro("return redis.call('getrange', KEYS[1], ARGV[1], ARGV[2])", "-1", "-5"),
		ro("return redis.call('getrange', KEYS[1], ARGV[1], ARGV[2])", "290", "1000"),
		ro("return redis.call('getrange', KEYS[1], ARGV[1], ARGV[2])", "400", "500"),
		ro("return redis.call('substr', KEYS[1], ARGV[1], ARGV[2])", "-1000", "3"),
		ro("return redis.pcall('getrange', KEYS[1], 'x', 3)"),
		ro("return redis.pcall('strlen', KEYS[2])"),
	} {
		if got, want := p.do(c...), direct.do(c...); got != want {
			t.Errorf("%.80q through the proxy = %.100q, Redis = %.100q", c, got, want)
		}
	}
	for _, body := range []string{
		"return redis.call('bitcount', KEYS[1])",
		"return redis.call('lcs', KEYS[1], KEYS[3])",
	} {
		if got := p.do(ro(body)...); !strings.HasPrefix(got, "-ERR squeeze: ") || !strings.Contains(got, "inside a read-only script looks inside the compressed value at in:s") {
			t.Errorf("%q through the proxy = %.160q, want the refusal", body, got)
		}
	}
}

// TestScripts_MagicValue: a value that itself begins with the frame magic
// stays framed (stored plain it would read as a frame); a script that
// declares its key gets the value, every time, as on Redis, where it used
// to get an error telling it to run again, which could never succeed.
func TestScripts_MagicValue(t *testing.T) {
	e := startEnv(t)
	ref := testutil.StartRedis(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, ref.Addr)
	v := string(magic) + compressible(300, 18)
	for _, c := range []*rawConn{p, direct} {
		c.do("SET", "mg:k", v)
		c.do("HSET", "mg:h", "f", v)
	}
	for _, c := range [][]string{
		{"EVAL", "return redis.call('get', KEYS[1])", "1", "mg:k"},
		{"EVAL", "return redis.call('get', KEYS[1])", "1", "mg:k"},
		{"EVAL", "return {redis.call('hget', KEYS[2], 'f'), redis.call('get', KEYS[1])}", "2", "mg:k", "mg:h"},
		{"EVAL_RO", "return string.len(redis.call('get', KEYS[1]))", "1", "mg:k"},
	} {
		if got, want := p.do(c...), direct.do(c...); got != want {
			t.Errorf("%.60q through the proxy = %.100q, Redis = %.100q", c, got, want)
		}
	}
}
