// Package luaguard holds the Lua that keeps scripts from reading
// compressed values (issue 22), shared by the proxy and the go-redis hook:
// the prologue put in front of every script, and the compare-and-set
// script that turns the frames at a script's declared keys back into plain
// values before it runs. See docs/design/scripts.md.
package luaguard

import "bytes"

// Magic is the frame magic (codec.Magic: 0xC1 'S' 'Q') as Lua source
// writes it inside a quoted string: 0xC1 in Lua's decimal escape, since the
// scripts are Go raw strings and Go source cannot hold that byte. Every
// script of the proxy and the hook spells the magic with it.
const Magic = `\193SQ`

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
	`local function check(v, key, depth, w) if type(v) == 'string' then if string.sub(v, 1, 3) == '` + Magic + `' then fail(key, w) end elseif type(v) == 'table' and depth < 4 and v.err == nil then for _, e in pairs(v) do check(e, key, depth + 1, w) end end end; ` +
	`local function guard(f) return function(...) local name = string.lower(tostring((...))); local w = wrote or not string.find(ro, ' ' .. name .. ' ', 1, true); if w then wrote = true end; local r = f(...); ` +
	`if name == 'mget' and type(r) == 'table' then for i, e in ipairs(r) do check(e, select(i + 1, ...), 3, w) end else check(r, select(2, ...), 0, w) end; return r end end; `

// EvalPrologue is the prologue of an EVAL script: its keys are KEYS.
const EvalPrologue = `local redis = (function(real, keys) ` + guardBody +
	`return setmetatable({call = guard(real.call), pcall = guard(real.pcall)}, {__index = real}) end)(redis, function() return KEYS end); `

// FunctionPrologue is the prologue of a FUNCTION LOAD library: each
// registered function's keys are those FCALL passed it, so register_function
// wraps the callback to note them (and to start each call with no write).
// While the library loads, Redis lets it reach no global but redis (not
// even type or setmetatable), so what needs them runs in the callbacks;
// the fields a library may use while it loads are copied, and the redis
// of the calls is the global one at the first call (the one the library
// loaded with has no call).
const FunctionPrologue = `local redis = (function(real) local current, shadow, ready = {}, {}, false; local function keys() return current end; ` + guardBody +
	`local gcall, gpcall; local function wrap(fn) return function(k, a) if not ready then real = redis; gcall, gpcall = guard(real.call), guard(real.pcall); setmetatable(shadow, {__index = real}); ready = true end; current, wrote = k, false; return fn(k, a) end end; ` +
	`shadow.call = function(...) return gcall(...) end; shadow.pcall = function(...) return gpcall(...) end; ` +
	`shadow.log, shadow.LOG_DEBUG, shadow.LOG_VERBOSE, shadow.LOG_NOTICE, shadow.LOG_WARNING = real.log, real.LOG_DEBUG, real.LOG_VERBOSE, real.LOG_NOTICE, real.LOG_WARNING; ` +
	`shadow.REDIS_VERSION, shadow.REDIS_VERSION_NUM = real.REDIS_VERSION, real.REDIS_VERSION_NUM; ` +
	`shadow.register_function = function(a, b) if b == nil and a ~= nil and a.callback ~= nil then a.callback = wrap(a.callback); return real.register_function(a) end; ` +
	`if b ~= nil then b = wrap(b) end; return real.register_function(a, b) end; ` +
	`return shadow end)(redis); `

// Error texts of the prologue the proxy reads (see runScript).
const (
	FrameErr  = "-ERR squeeze: script read a compressed value at "
	Retryable = " before writing: "
)

// Wrap returns body with prologue inserted after its #! line, if it
// has one, else in front of its first line.
func Wrap(body []byte, prologue string) []byte {
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

// PlainScript turns the frames at its keys back into the plain values they
// encode, with compare-and-set: ARGV[1] 'S' carries ARGV[2] candidates of
// five arguments (key, kind, field or index, frame, decoded value), each
// written only where the key still holds that very frame (a string with SET
// KEEPTTL; a hash field with HSET, its own expiry kept; a list element with
// LSET). Then, and for 'P' at once, it looks at every key and returns the
// frames left, as {magic, key, kind, where, frame, ...}, at most
// as many as its last argument allows, or 'OK' when there are none. Streams, sets and
// sorted sets are left as they are: their entries or members cannot be
// replaced in place (the proxy does not compress set members).
const PlainScript = `local function framed(v) return type(v) == 'string' and string.sub(v, 1, 3) == '` + Magic + `' end
if ARGV[1] == 'S' then
  for i = 0, tonumber(ARGV[2]) - 1 do
    local k, kind, at, f, d = ARGV[3+5*i], ARGV[4+5*i], ARGV[5+5*i], ARGV[6+5*i], ARGV[7+5*i]
    if kind == 's' then
      if redis.pcall('GET', k) == f then redis.call('SET', k, d, 'KEEPTTL') end
    elseif kind == 'h' then
      if redis.pcall('HGET', k, at) == f then
        local t = redis.pcall('HPEXPIRETIME', k, 'FIELDS', 1, at)
        redis.call('HSET', k, at, d)
        if type(t) == 'table' and type(t[1]) == 'number' and t[1] > 0 then redis.call('HPEXPIREAT', k, t[1], 'FIELDS', 1, at) end
      end
    elseif kind == 'l' then
      if redis.pcall('LINDEX', k, at) == f then redis.call('LSET', k, at, d) end
    end
  end
end
local out, max = {'` + Magic + `'}, tonumber(ARGV[#ARGV])
local function add(k, kind, at, v) if #out < 1 + 4*max then out[#out+1] = k; out[#out+1] = kind; out[#out+1] = at; out[#out+1] = v end end
for _, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k).ok
  if t == 'string' then
    local v = redis.call('GET', k)
    if framed(v) then add(k, 's', '', v) end
  elseif t == 'hash' then
    local all = redis.call('HGETALL', k)
    for i = 1, #all, 2 do if framed(all[i+1]) then add(k, 'h', all[i], all[i+1]) end end
  elseif t == 'list' then
    local all = redis.call('LRANGE', k, 0, -1)
    for i, v in ipairs(all) do if framed(v) then add(k, 'l', tostring(i-1), v) end end
  end
end
if #out == 1 then return 'OK' end
return out`

// Prefix returns the prefix a key used by a script stands for: the key up
// to and including its last ':', or the whole key without one; but if a
// segment before that, not the first, is an id (all digits, or 8 or more hex digits and
// dashes with a digit among them: a UUID, a hash), the key up to that
// segment. So one prefix stands for a framework's per-item keys
// (bull:q:17:logs and bull:q:18:logs are both bull:q:), rather than one
// per item filling the bounded set of prefixes.
func Prefix(key []byte) []byte {
	last := bytes.LastIndexByte(key, ':')
	if last < 0 {
		return key
	}
	start := 0
	for start < last {
		end := start + bytes.IndexByte(key[start:], ':')
		if start > 0 && isID(key[start:end]) {
			return key[:start]
		}
		start = end + 1
	}
	return key[:last+1]
}

// isID reports whether a key segment looks like an item's id.
func isID(seg []byte) bool {
	if len(seg) == 0 {
		return false
	}
	digits, hex := 0, true
	for _, c := range seg {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c >= 'a' && c <= 'f', c >= 'A' && c <= 'F', c == '-':
		default:
			hex = false
		}
	}
	return digits == len(seg) || (hex && digits > 0 && len(seg) >= 8)
}
