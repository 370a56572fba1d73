package proxy

import (
	"strings"
	"testing"
)

// plainLib is a function library as a program loads it directly on Redis:
// without the proxy's prologue.
const plainLib = "#!lua name=plainlib\n" +
	"redis.register_function('pl_arg', function(keys, args) return redis.call('GET', args[1]) end)\n" +
	"redis.register_function{function_name='pl_get', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}\n" +
	"redis.register_function('pl_set', function(keys, args) return redis.call('SET', keys[1], args[1]) end)\n"

// wantUnguarded fails unless reply is the proxy's refusal of a function
// whose library was not loaded through squeeze, which never holds a frame.
func wantUnguarded(t *testing.T, what, reply string) {
	t.Helper()
	if !strings.HasPrefix(reply, "-ERR squeeze: function ") || !strings.Contains(reply, "was not loaded through squeeze") ||
		!strings.Contains(reply, "FUNCTION LOAD REPLACE") || strings.Contains(reply, string(magic)) {
		t.Fatalf("%s = %.120q: want the error that says to load the library again through squeeze", what, reply)
	}
}

// dumpPayload returns the payload of a FUNCTION DUMP reply.
func dumpPayload(t *testing.T, dump string) string {
	t.Helper()
	if !strings.HasPrefix(dump, "$") {
		t.Fatalf("FUNCTION DUMP = %q", dump)
	}
	payload := strings.SplitN(dump, "\r\n", 2)[1]
	return payload[:len(payload)-2]
}

// TestScripts_FunctionUnguarded: FCALL and FCALL_RO through the proxy of a
// function whose library was loaded directly on Redis (no prologue) are
// not sent: the client gets an error that says to load the library again
// through squeeze, never the frame, and nothing changes, in a pipeline, in
// MULTI (EXEC fails) and with replies off too. A function Redis does not
// have gets Redis's own error; the library loaded again through the proxy
// runs guarded.
func TestScripts_FunctionUnguarded(t *testing.T) {
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	v := compressible(300, 11)
	p.do("SET", "fn:doc", v)
	if !storedFramed(t, direct, "fn:doc") {
		t.Fatal("fn:doc is not stored compressed")
	}
	stored := direct.do("GET", "fn:doc")
	if got := direct.do("FUNCTION", "LOAD", plainLib); got != bulk("plainlib") {
		t.Fatalf("FUNCTION LOAD directly = %q", got)
	}
	wantUnguarded(t, "FCALL reading an undeclared key", p.do("FCALL", "pl_arg", "0", "fn:doc"))
	wantUnguarded(t, "FCALL", p.do("FCALL", "PL_GET", "1", "fn:doc"))
	wantUnguarded(t, "FCALL_RO", p.do("FCALL_RO", "pl_get", "1", "fn:doc"))
	wantUnguarded(t, "FCALL that writes", p.do("FCALL", "pl_set", "1", "fn:doc", "x"))
	p.send([]string{"FCALL", "pl_get", "1", "fn:doc"}, []string{"GET", "fn:doc"})
	wantUnguarded(t, "FCALL in a pipeline", p.read())
	if got := p.read(); got != bulk(v) {
		t.Fatalf("GET after it in the pipeline = %.40q", got)
	}

	// In MULTI: refused when queued, and EXEC fails, as after any
	// command Redis refuses when queued.
	if got := p.do("MULTI"); got != "+OK\r\n" {
		t.Fatalf("MULTI = %q", got)
	}
	if got := p.do("SET", "fn:other", "1"); got != "+QUEUED\r\n" {
		t.Fatalf("SET in MULTI = %q", got)
	}
	wantUnguarded(t, "FCALL in MULTI", p.do("FCALL", "pl_set", "1", "fn:doc", "x"))
	if got := p.do("EXEC"); !strings.HasPrefix(got, "-EXECABORT") {
		t.Fatalf("EXEC = %q, want EXECABORT", got)
	}
	if got := direct.do("EXISTS", "fn:other"); got != ":0\r\n" {
		t.Fatalf("the transaction ran: EXISTS fn:other = %q", got)
	}

	// Replies off: not sent either.
	p.send([]string{"CLIENT", "REPLY", "OFF"}, []string{"FCALL", "pl_set", "1", "fn:doc", "x"}, []string{"CLIENT", "REPLY", "ON"})
	if got := p.read(); got != "+OK\r\n" {
		t.Fatalf("CLIENT REPLY ON = %q", got)
	}

	if got := direct.do("GET", "fn:doc"); got != stored {
		t.Fatal("the key of a function that was not run was changed")
	}
	if got := direct.do("SISMEMBER", ScriptPrefixesKey, "fn:"); got != ":0\r\n" {
		t.Fatal("a function that was not run taught its prefix")
	}

	// A function Redis does not have: Redis's own error.
	if got := p.do("FCALL", "no_such_function", "0"); !strings.HasPrefix(got, "-") || strings.Contains(got, "squeeze") {
		t.Fatalf("FCALL of a function Redis does not have = %q, want Redis's error", got)
	}

	// Loaded again through the proxy: guarded, as any library it loads.
	if got := p.do("FUNCTION", "LOAD", "REPLACE", plainLib); got != bulk("plainlib") {
		t.Fatalf("FUNCTION LOAD REPLACE = %q", got)
	}
	if got := p.do("FCALL", "pl_arg", "0", "fn:doc"); !strings.Contains(got, "which it does not declare in KEYS") {
		t.Fatalf("FCALL reading an undeclared key, guarded = %.120q", got)
	}
	if got := p.do("FCALL_RO", "pl_get", "1", "fn:doc"); got != bulk(v) {
		t.Fatalf("FCALL_RO, guarded = %.40q", got)
	}
	p.do("MULTI")
	p.do("FCALL", "pl_get", "1", "fn:doc")
	if got := p.do("EXEC"); got != "*1\r\n"+bulk(v) {
		t.Fatalf("EXEC of an FCALL, guarded = %.40q", got)
	}
}

// TestScripts_FunctionLibrariesChecked: what a proxy knows of the
// libraries is read again for a function it does not know guarded (a
// library loaded again through another proxy runs at once), and dropped
// after FUNCTION LOAD, DELETE, FLUSH and RESTORE through it (in MULTI
// too), so that a library that lost its prologue since is refused.
func TestScripts_FunctionLibrariesChecked(t *testing.T) {
	e := startEnv(t)
	e2 := startProxy(t, e.redis.URL(), e.redis)
	p1, p2, direct := dialRaw(t, e.addr), dialRaw(t, e2.addr), dialRaw(t, e.redis.Addr)
	v := compressible(300, 12)
	p1.do("SET", "fl:doc", v)
	if !storedFramed(t, direct, "fl:doc") {
		t.Fatal("fl:doc is not stored compressed")
	}
	direct.do("FUNCTION", "LOAD", plainLib)
	unguarded := dumpPayload(t, direct.do("FUNCTION", "DUMP"))
	call := func() string { return p2.do("FCALL_RO", "pl_get", "1", "fl:doc") }
	wantUnguarded(t, "FCALL_RO through the second proxy", call())

	// Loaded again through the first proxy: the second runs it at once.
	if got := p1.do("FUNCTION", "LOAD", "REPLACE", plainLib); got != bulk("plainlib") {
		t.Fatalf("FUNCTION LOAD REPLACE = %q", got)
	}
	guarded := func(when string) {
		t.Helper()
		if got := call(); got != bulk(v) {
			t.Fatalf("FCALL_RO %s = %.80q", when, got)
		}
	}
	guarded("after the library was loaded through another proxy")

	steps := []struct {
		name string
		run  func()
	}{
		{"DELETE", func() {
			p2.do("FUNCTION", "DELETE", "plainlib")
			direct.do("FUNCTION", "LOAD", plainLib)
		}},
		{"FLUSH", func() {
			p2.do("FUNCTION", "FLUSH")
			direct.do("FUNCTION", "LOAD", plainLib)
		}},
		{"RESTORE", func() {
			if got := p2.do("FUNCTION", "RESTORE", unguarded, "REPLACE"); got != "+OK\r\n" {
				t.Fatalf("FUNCTION RESTORE = %q", got)
			}
		}},
		{"LOAD", func() {
			// Replaced by a plain client: seen at the next FUNCTION LOAD
			// through the proxy.
			direct.do("FUNCTION", "LOAD", "REPLACE", plainLib)
			if got := p2.do("FUNCTION", "LOAD", "#!lua name=otherlib\nredis.register_function('ol_one', function() return 1 end)"); got != bulk("otherlib") {
				t.Fatalf("FUNCTION LOAD = %q", got)
			}
		}},
		{"RESTORE in MULTI", func() {
			p2.do("MULTI")
			p2.do("FUNCTION", "RESTORE", unguarded, "REPLACE")
			if got := p2.do("EXEC"); got != "*1\r\n+OK\r\n" {
				t.Fatalf("EXEC = %q", got)
			}
		}},
	}
	for _, st := range steps {
		if got := p2.do("FUNCTION", "LOAD", "REPLACE", plainLib); got != bulk("plainlib") {
			t.Fatalf("FUNCTION LOAD REPLACE = %q", got)
		}
		guarded("before FUNCTION " + st.name)
		st.run()
		wantUnguarded(t, "FCALL_RO after FUNCTION "+st.name, call())
	}
	if !storedFramed(t, direct, "fl:doc") {
		t.Fatal("fl:doc was rewritten")
	}
}
