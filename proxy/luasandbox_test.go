package proxy

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/internal/luaguard"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// The Lua sandbox through the proxy is Redis's (issue 32, section 3): the
// prologue's redis is as read-only as Redis's own, and FUNCTION LOAD
// accepts, refuses and lists libraries as Redis does. Each case runs the
// same commands directly on Redis and through the proxy and wants the same
// replies.

// TestScripts_RedisReadOnly: assigning to redis (or one of its fields, or
// with rawset, or its metatable) in EVAL fails with Redis's error, and
// the script does not go on.
func TestScripts_RedisReadOnly(t *testing.T) {
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	for _, script := range []string{
		"redis.call = function() return 1 end return 'x'",
		"redis.pcall = redis.call return 'x'",
		"local a = 1\nredis.foo = 1 return 'x'",
		"rawset(redis, 'call', function() return 1 end) return 'x'",
		"setmetatable(redis, nil) return 'x'",
		"return {type(getmetatable(redis)), type(rawget(redis, 'call')), type(redis.call), type(redis.sha1hex)}",
		"local ok, err = pcall(function() redis.call = 1 end) return {tostring(ok), err, redis.call('PING')}",
		"local t = {} rawset(t, 'a', 1) setmetatable(t, {__index = function() return 2 end}) return {rawget(t, 'a'), t.b, type(getmetatable(t))}",
		"x = 1 return 'x'",
	} {
		want := direct.do("EVAL", script, "0")
		if got := p.do("EVAL", script, "0"); got != want {
			t.Errorf("EVAL %q through the proxy = %q, Redis = %q", script, got, want)
		}
	}
}

// TestScripts_FunctionReadOnly: a library's callback that assigns to
// redis fails as on Redis, and no later call of the library sees the
// change (it persisted in the library's state before).
func TestScripts_FunctionReadOnly(t *testing.T) {
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	const lib = "#!lua name=hj\n" +
		"redis.register_function('f_get', function(keys) return redis.call('GET', keys[1]) end)\n" +
		"redis.register_function('f_hijack', function(keys) redis.call = function() return 'hijacked' end return 'x' end)\n" +
		"redis.register_function('f_raw', function(keys) rawset(redis, 'call', function() return 'hijacked' end) return 'x' end)\n" +
		"redis.register_function('f_meta', function(keys) return {type(getmetatable(redis)), type(rawget(redis, 'call')), type(redis.log)} end)"
	direct.do("SET", "hk", "v")
	run := func(c *rawConn) []string {
		if got := c.do("FUNCTION", "LOAD", lib); got != bulk("hj") {
			t.Fatalf("FUNCTION LOAD = %q", got)
		}
		var out []string
		for _, cmd := range [][]string{
			{"FCALL", "f_get", "1", "hk"},
			{"FCALL", "f_hijack", "1", "hk"},
			{"FCALL", "f_get", "1", "hk"},
			{"FCALL", "f_raw", "1", "hk"},
			{"FCALL", "f_get", "1", "hk"},
			{"FCALL", "f_meta", "0"},
		} {
			out = append(out, c.do(cmd...))
		}
		c.do("FUNCTION", "DELETE", "hj")
		return out
	}
	want, got := run(direct), run(p)
	for i := range want {
		w, g := want[i], got[i]
		if i == 3 {
			// rawset's error names the line it was called from as the
			// prologue's (a documented difference): compare the rest.
			// (Redis writes ", on @user_function:N", Valkey 9 "script: on
			// @user_function:N".)
			w, g = strings.Split(w, "on @user_function")[0], strings.Split(g, "on @user_function")[0]
		}
		if g != w {
			t.Errorf("call %d through the proxy = %q, Redis = %q", i, got[i], want[i])
		}
	}
	if !strings.Contains(got[1], "Attempt to modify a readonly table") || got[2] != bulk("v") {
		t.Errorf("hijack = %q, then f_get = %q", got[1], got[2])
	}
}

// TestScripts_FunctionLoadAsRedis: FUNCTION LOAD accepts and refuses the
// libraries Redis does, with Redis's errors.
func TestScripts_FunctionLoadAsRedis(t *testing.T) {
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	for _, body := range []string{
		"redis.register_function('f', function() return 1 end)",
		"redis.register_function('f', 'bad')",
		"redis.register_function('f', nil)",
		"redis.register_function{function_name='f', callback='bad'}",
		"redis.register_function{function_name='f', callback=function() return 1 end, flags={'no-writes'}}",
		"redis.register_function('f', function() end, 1, 2)",
		"redis.register_function('f', function() end, nil)",
		"redis.register_function('f')",
		"redis.register_function()",
		"redis.register_function{function_name='f'}",
		"redis.register_function{callback=function() end}",
		"redis.register_function{function_name='f', callback=function() end, bogus=1}",
		"redis.register_function{function_name='f', callback=function() end, flags={'bad'}}",
		"redis.register_function('f', function() end) redis.register_function('f', function() end)",
		"redis.call = 1\nredis.register_function('f', function() end)",
		"local x = redis.REDIS_VERSION",
		"local t = type(1)\nredis.register_function('f', function() end)",
		"redis.register_function('f', function() end",
	} {
		lib := "#!lua name=lt\n" + body
		want := direct.do("FUNCTION", "LOAD", lib)
		direct.do("FUNCTION", "FLUSH")
		got := p.do("FUNCTION", "LOAD", lib)
		direct.do("FUNCTION", "FLUSH")
		if got != want {
			t.Errorf("FUNCTION LOAD %q through the proxy = %q, Redis = %q", body, got, want)
		}
	}
	// A library that changes redis after its last register_function: the
	// prologue cannot see it while the library loads (Redis refuses the
	// load), so every call fails with Redis's error instead (a documented
	// difference).
	lib := "#!lua name=lt\nredis.register_function('f', function() return 1 end)\nredis.call = function() return 'hijacked' end"
	if got := direct.do("FUNCTION", "LOAD", lib); !strings.Contains(got, "Attempt to modify a readonly table") {
		t.Fatalf("FUNCTION LOAD directly = %q", got)
	}
	p.do("FUNCTION", "LOAD", lib)
	for range 2 {
		if got := p.do("FCALL", "f", "0"); !strings.Contains(got, "Attempt to modify a readonly table") {
			t.Fatalf("FCALL of a library that changed redis while it loaded = %q", got)
		}
	}
}

// TestScripts_FunctionListWithCode: FUNCTION LIST WITHCODE shows the code
// as loaded (RESP2 and RESP3), which loads back as it; FUNCTION DUMP and
// RESTORE through the proxy keep the library guarded.
func TestScripts_FunctionListWithCode(t *testing.T) {
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	const lib = "#!lua name=lc\n" +
		"redis.register_function('lc_get', function(keys, args) return redis.call('GET', args[1]) end)"
	if got := p.do("FUNCTION", "LOAD", lib); got != bulk("lc") {
		t.Fatalf("FUNCTION LOAD = %q", got)
	}
	// The prologue for the server: Valkey's shadows server too.
	wraps := func(raw string) int {
		return strings.Count(raw, luaguard.FunctionPrologue) + strings.Count(raw, luaguard.ServerFunctionPrologue)
	}
	if raw := direct.do("FUNCTION", "LIST", "WITHCODE"); wraps(raw) != 1 {
		t.Fatalf("Redis holds %q: want the wrapped library", raw)
	}
	list := p.do("FUNCTION", "LIST", "WITHCODE")
	if !strings.Contains(list, bulk(lib)) || strings.Contains(list, "squeeze") {
		t.Fatalf("FUNCTION LIST WITHCODE = %q: want the code as loaded", list)
	}
	if got := p.do("FUNCTION", "LIST", "LIBRARYNAME", "lc", "WITHCODE"); got != list {
		t.Fatalf("FUNCTION LIST LIBRARYNAME lc WITHCODE = %q, want %q", got, list)
	}
	// Loaded back from that reply, it is wrapped once.
	if got := p.do("FUNCTION", "LOAD", "REPLACE", lib); got != bulk("lc") {
		t.Fatalf("FUNCTION LOAD REPLACE = %q", got)
	}
	if raw := direct.do("FUNCTION", "LIST", "WITHCODE"); wraps(raw) != 1 {
		t.Fatalf("Redis holds %q: want the library wrapped once", raw)
	}
	p3 := dialRaw(t, e.addr)
	p3.do("HELLO", "3")
	if got := p3.do("FUNCTION", "LIST", "WITHCODE"); !strings.Contains(got, bulk(lib)) || strings.Contains(got, "squeeze") {
		t.Fatalf("FUNCTION LIST WITHCODE in RESP3 = %q: want the code as loaded", got)
	}
	// DUMP and RESTORE through the proxy: the library stays guarded and
	// lists as loaded.
	dump := p.do("FUNCTION", "DUMP")
	payload := strings.SplitN(dump, "\r\n", 2)[1]
	payload = payload[:len(payload)-2]
	p.do("FUNCTION", "FLUSH")
	if got := p.do("FUNCTION", "RESTORE", payload); got != "+OK\r\n" {
		t.Fatalf("FUNCTION RESTORE = %q", got)
	}
	if got := p.do("FUNCTION", "LIST", "WITHCODE"); got != list {
		t.Fatalf("FUNCTION LIST WITHCODE after RESTORE = %q, want %q", got, list)
	}
	p.do("SET", "lcdoc", compressible(300, 3))
	if got := p.do("FCALL", "lc_get", "0", "lcdoc"); !strings.HasPrefix(got, "-ERR squeeze: script read a compressed value at lcdoc") {
		t.Fatalf("FCALL after RESTORE = %q: want the prologue's error", got)
	}
}

// TestScripts_ValkeyServerAlias: Valkey's scripts reach redis as server
// too; the prologue shadows it as well, so server.call is guarded and
// server.register_function wraps its callback, and server is as read-only
// as there.
func TestScripts_ValkeyServerAlias(t *testing.T) {
	if _, err := exec.LookPath("valkey-server"); err != nil {
		t.Skip("valkey-server not installed")
	}
	t.Setenv(testutil.ServerEnv, "valkey-server")
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	v := compressible(300, 19)
	p.do("SET", "sv:doc", v)
	if got := p.do("EVAL", "return string.len(server.call('get', ARGV[1]))", "0", "sv:doc"); !strings.HasPrefix(got, "-ERR squeeze: script read a compressed value at sv:doc, which it does not declare") {
		t.Errorf("server.call on an undeclared compressed key = %.120q, want the prologue's error", got)
	}
	if got := p.do("EVAL", "return string.len(server.call('get', KEYS[1]))", "1", "sv:doc"); got != ":300\r\n" {
		t.Errorf("server.call on a declared key = %.120q, want :300", got)
	}
	lib := "#!lua name=svlib\nserver.register_function('sv_len', function(keys) return string.len(server.call('get', keys[1])) end)"
	if got := p.do("FUNCTION", "LOAD", lib); got != bulk("svlib") {
		t.Fatalf("FUNCTION LOAD = %q", got)
	}
	p.do("SET", "sv:doc2", v)
	if got := p.do("FCALL", "sv_len", "1", "sv:doc2"); got != ":300\r\n" {
		t.Errorf("FCALL of a function registered with server.register_function = %.120q, want :300", got)
	}
	if got := p.do("FUNCTION", "LIST", "WITHCODE"); !strings.Contains(got, bulk(lib)) {
		t.Errorf("FUNCTION LIST WITHCODE = %.200q: want the code as loaded", got)
	}
	for _, script := range []string{"server.call = function() return 1 end return 'x'", "return {type(getmetatable(server)), type(server.call)}"} {
		if got, want := p.do("EVAL", script, "0"), direct.do("EVAL", script, "0"); got != want {
			t.Errorf("EVAL %q through the proxy = %q, Valkey = %q", script, got, want)
		}
	}
}

// TestScripts_EarlierLibrary: a library an earlier proxy loaded (issue
// 22's prologue, which does not take decoded values off a call's
// arguments) gets none: its functions see their own arguments, and one
// that reads a compressed value gets that prologue's error, as before.
// FUNCTION LIST WITHCODE shows its code as loaded, and loaded again through
// the proxy it gets this prologue, and the values.
func TestScripts_EarlierLibrary(t *testing.T) {
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	code := "#!lua name=oldlib\nredis.register_function{function_name='old_args', callback=function(keys, args) return #args end, flags={'no-writes'}}\n" +
		"redis.register_function{function_name='old_get', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes'}}"
	if got := direct.do("FUNCTION", "LOAD", string(luaguard.Wrap([]byte(code), luaguard.FunctionPrologue22))); got != bulk("oldlib") {
		t.Fatalf("FUNCTION LOAD directly = %q", got)
	}
	v := compressible(300, 20)
	p.do("SET", "old:doc", v)
	if got := p.do("FCALL_RO", "old_args", "1", "old:doc", "a"); got != ":1\r\n" {
		t.Fatalf("FCALL_RO old_args of an earlier library = %.120q, want its one argument", got)
	}
	if got := p.do("FCALL_RO", "old_get", "1", "old:doc"); !strings.HasPrefix(got, "-ERR squeeze: script read a compressed value at declared key old:doc") {
		t.Fatalf("FCALL_RO old_get of an earlier library = %.120q, want its prologue's error", got)
	}
	if list := p.do("FUNCTION", "LIST", "WITHCODE"); !strings.Contains(list, bulk(code)) {
		t.Fatalf("FUNCTION LIST WITHCODE = %.200q: want the code as loaded", list)
	}
	if got := p.do("FUNCTION", "LOAD", "REPLACE", code); got != bulk("oldlib") {
		t.Fatalf("FUNCTION LOAD REPLACE = %q", got)
	}
	if got := p.do("FCALL_RO", "old_args", "1", "old:doc", "a"); got != ":1\r\n" {
		t.Fatalf("FCALL_RO old_args after loading it again = %.120q", got)
	}
	if got := p.do("FCALL_RO", "old_get", "1", "old:doc"); got != bulk(v) {
		t.Fatalf("FCALL_RO old_get after loading it again = %.120q, want the value", got)
	}
	// Function names are found whatever their case.
	if got := p.do("FCALL_RO", "OLD_GET", "1", "old:doc"); got != bulk(v) {
		t.Fatalf("FCALL_RO OLD_GET = %.120q, want the value", got)
	}
}
