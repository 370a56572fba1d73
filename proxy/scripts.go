package proxy

import (
	"bytes"
	"strings"
	"sync"
)

// Lua scripts and compressed values (issue 22).
//
// A script reads stored bytes: on a compressed value it would compare,
// return or copy a frame. The proxy makes that impossible in three ways
// (see docs/ARCHITECTURE.md, "Scripts"):
//
//   - Every script it forwards (EVAL, EVAL_RO, SCRIPT LOAD, FUNCTION LOAD)
//     gets a prologue (guardPrologue) that shadows redis with a local table
//     whose call and pcall check what the real ones return: a string that
//     begins with the frame magic, alone or inside an array, raises a
//     script error naming the key instead of reaching the script.
//   - Before a script runs outside MULTI, the frames at its declared keys
//     are turned back into plain values with a compare-and-set script
//     (scriptrun.go); inside MULTI before the script is queued.
//   - The key prefixes scripts use are learned, kept in Redis
//     (scriptPrefixesKey) and stay uncompressed from then on
//     (scriptkeys.go).
//
// The prologue is one line, put in front of the script's first line (after
// the #! line, which must stay first), so that line numbers in Redis's
// error messages stay those of the script as the client wrote it.

// guardBody is the prologue's shared part. It is a function of the real
// redis table, the keys the script declares (a function returning them),
// and returns the shadow. A command outside readOnlyCommands counts as a
// write: after one, a frame read at a declared key cannot be undone by
// decoding and running the script again, and the error says so.
const guardBody = `local wrote, ro = false, ' get mget strlen getrange substr exists type ttl pttl expiretime pexpiretime hget hmget hgetall hvals hkeys hexists hlen hstrlen hrandfield hscan lrange lindex llen lpos smembers sismember smismember scard srandmember sscan zscore zmscore zrange zrangebyscore zrangebylex zrevrange zrevrangebyscore zrevrangebylex zrank zrevrank zcard zcount zlexcount zscan zrandmember xrange xrevrange xlen xread xinfo xpending object scan keys dbsize time echo ping getbit bitcount bitpos bitfield_ro lcs dump randomkey sunion sinter sintercard sdiff zunion zinter zdiff zintercard hpexpiretime httl hpttl hexpiretime touch memory '; ` +
	`local function declared(k) for _, d in ipairs(keys()) do if d == k then return true end end return false end; ` +
	`local function fail(k, w) k = tostring(k); ` +
	`if not declared(k) then error({err = 'ERR squeeze: script read a compressed value at ' .. k .. ', which it does not declare in KEYS: declare every key a script reads, so that the proxy decodes it before the script runs'}) end; ` +
	`if w then error({err = 'ERR squeeze: script read a compressed value at declared key ' .. k .. ' after writing: the proxy decodes declared keys before a script runs; run it again through the proxy outside MULTI'}) end; ` +
	`error({err = 'ERR squeeze: script read a compressed value at declared key ' .. k .. ' before writing: the proxy decodes declared keys before a script runs; run it again through the proxy outside MULTI'}) end; ` +
	`local function check(v, key, depth, w) if type(v) == 'string' then if string.sub(v, 1, 3) == '\193SQ' then fail(key, w) end elseif type(v) == 'table' and depth < 4 and v.err == nil then for _, e in pairs(v) do check(e, key, depth + 1, w) end end end; ` +
	`local function guard(f) return function(...) local name = string.lower(tostring((...))); local w = wrote or not string.find(ro, ' ' .. name .. ' ', 1, true); if w then wrote = true end; local r = f(...); ` +
	`if name == 'mget' and type(r) == 'table' then for i, e in ipairs(r) do check(e, select(i + 1, ...), 3, w) end else check(r, select(2, ...), 0, w) end; return r end end; `

// evalPrologue is the prologue of an EVAL script: its keys are KEYS.
const evalPrologue = `local redis = (function(real, keys) ` + guardBody +
	`return setmetatable({call = guard(real.call), pcall = guard(real.pcall)}, {__index = real}) end)(redis, function() return KEYS end); `

// functionPrologue is the prologue of a FUNCTION LOAD library: each
// registered function's keys are those FCALL passed it, so register_function
// wraps the callback to note them (and to start each call with no write).
// While the library loads, Redis lets it reach no global but redis (not
// even type or setmetatable), so what needs them runs in the callbacks;
// the fields a library may use while it loads are copied, and the redis
// of the calls is the global one at the first call (the one the library
// loaded with has no call).
const functionPrologue = `local redis = (function(real) local current, shadow, ready = {}, {}, false; local function keys() return current end; ` + guardBody +
	`local gcall, gpcall; local function wrap(fn) return function(k, a) if not ready then real = redis; gcall, gpcall = guard(real.call), guard(real.pcall); setmetatable(shadow, {__index = real}); ready = true end; current, wrote = k, false; return fn(k, a) end end; ` +
	`shadow.call = function(...) return gcall(...) end; shadow.pcall = function(...) return gpcall(...) end; ` +
	`shadow.log, shadow.LOG_DEBUG, shadow.LOG_VERBOSE, shadow.LOG_NOTICE, shadow.LOG_WARNING = real.log, real.LOG_DEBUG, real.LOG_VERBOSE, real.LOG_NOTICE, real.LOG_WARNING; ` +
	`shadow.REDIS_VERSION, shadow.REDIS_VERSION_NUM = real.REDIS_VERSION, real.REDIS_VERSION_NUM; ` +
	`shadow.register_function = function(a, b) if b == nil and a ~= nil and a.callback ~= nil then a.callback = wrap(a.callback); return real.register_function(a) end; ` +
	`if b ~= nil then b = wrap(b) end; return real.register_function(a, b) end; ` +
	`return shadow end)(redis); `

// Error texts of the prologue the proxy reads (see runScript).
const (
	scriptFrameErr  = "-ERR squeeze: script read a compressed value at "
	scriptRetryable = " before writing: "
)

// wrapScript returns body with prologue inserted after its #! line, if it
// has one, else in front of its first line.
func wrapScript(body []byte, prologue string) []byte {
	out := make([]byte, 0, len(body)+len(prologue))
	if bytes.HasPrefix(body, []byte("#!")) {
		nl := bytes.IndexByte(body, '\n')
		if nl < 0 {
			// A shebang line alone: Redis's own error (or an empty script)
			// is the reply; nothing to guard.
			return append(out, body...)
		}
		out = append(out, body[:nl+1]...)
		body = body[nl+1:]
	}
	out = append(out, prologue...)
	return append(out, body...)
}

// maxScriptSHAs bounds the map from the SHA-1 a client knows to the one
// Redis knows: past it, it is emptied (a client's EVALSHA then gets Redis's
// NOSCRIPT, and its library loads the script again, which refills it).
const maxScriptSHAs = 4096

// scriptSHAs maps the SHA-1 of scripts as clients wrote them to the SHA-1
// of their wrapped form, and back.
type scriptSHAs struct {
	mu      sync.RWMutex
	wrapped map[string]string // client's SHA-1 -> wrapped form's
	orig    map[string]string // wrapped form's -> client's
}

// wrap returns the wrapped form of an EVAL script or SCRIPT LOAD body, and
// notes both SHA-1s.
func (m *scriptSHAs) wrap(body []byte) (wrapped []byte, origSHA, wrappedSHA string) {
	wrapped = wrapScript(body, evalPrologue)
	origSHA, wrappedSHA = scriptSHA(string(body)), scriptSHA(string(wrapped))
	m.mu.RLock()
	known := m.wrapped[origSHA] == wrappedSHA
	m.mu.RUnlock()
	if !known {
		m.mu.Lock()
		if m.wrapped == nil || len(m.wrapped) >= maxScriptSHAs {
			m.wrapped, m.orig = map[string]string{}, map[string]string{}
		}
		m.wrapped[origSHA], m.orig[wrappedSHA] = wrappedSHA, origSHA
		m.mu.Unlock()
	}
	return wrapped, origSHA, wrappedSHA
}

// toRedis returns the SHA-1 Redis knows for the one a client sent: the
// wrapped form's when the proxy saw the script, else sha unchanged (a
// script loaded directly on Redis).
func (m *scriptSHAs) toRedis(sha []byte) []byte {
	m.mu.RLock()
	w, ok := m.wrapped[strings.ToLower(string(sha))]
	m.mu.RUnlock()
	if ok {
		return []byte(w)
	}
	return sha
}

// toClient replaces, in a reply, the wrapped forms' SHA-1s Redis names (in
// error messages: "script: <sha>") with the client's.
func (m *scriptSHAs) toClient(reply []byte) []byte {
	i := bytes.Index(reply, []byte("script: "))
	if i < 0 || len(reply) < i+8+40 {
		return reply
	}
	sha := string(reply[i+8 : i+48])
	m.mu.RLock()
	o, ok := m.orig[sha]
	m.mu.RUnlock()
	if ok {
		copy(reply[i+8:], o)
	}
	return reply
}
