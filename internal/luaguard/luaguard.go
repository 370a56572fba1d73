// Package luaguard holds the Lua that keeps scripts from reading
// compressed values (issue 22), shared by the proxy and the go-redis hook:
// the prologue put in front of every script, and the compare-and-set
// script that turns the frames at a script's declared keys back into plain
// values before it runs. See docs/design/scripts.md.
package luaguard

import (
	"bytes"
	"fmt"
	"strconv"
)

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
const guardBody = `local wrote, subst, ro = false, nil, ' get mget strlen getrange substr exists type ttl pttl expiretime pexpiretime hget hmget hgetall hvals hkeys hexists hlen hstrlen hrandfield hscan lrange lindex llen lpos smembers sismember smismember scard srandmember sscan zscore zmscore zrange zrangebyscore zrangebylex zrevrange zrevrangebyscore zrevrangebylex zrank zrevrank zcard zcount zlexcount zscan zrandmember xrange xrevrange xlen xread xinfo xpending object scan keys dbsize time echo ping getbit bitcount bitpos bitfield_ro lcs dump randomkey sunion sinter sintercard sdiff zunion zinter zdiff zintercard hpexpiretime httl hpttl hexpiretime touch memory '; ` +
	`local function declared(k) for _, d in ipairs(keys()) do if d == k then return true end end return false end; ` +
	`local function fail(k, w, name) k = tostring(k); ` +
	`if string.sub(name, 1, 1) == 'x' then error({err = 'ERR squeeze: script read a compressed value at ' .. k .. ' in a stream entry: the proxy cannot decode stream entries for a script, so running it again fails alike; read the stream with XRANGE or XREAD through the proxy, outside the script, or store the stream uncompressed (a rule with the none algorithm for its prefix)'}) end; ` +
	`if not declared(k) then error({err = 'ERR squeeze: script read a compressed value at ' .. k .. ', which it does not declare in KEYS: declare every key a script reads, so that the proxy decodes it before the script runs'}) end; ` +
	`if w then error({err = 'ERR squeeze: script read a compressed value at declared key ' .. k .. ' after writing: the proxy decodes declared keys before a script runs; run it again through the proxy outside MULTI'}) end; ` +
	`error({err = 'ERR squeeze: script read a compressed value at declared key ' .. k .. ' before writing: the proxy decodes declared keys before a script runs; run it again through the proxy outside MULTI'}) end; ` +
	`local function check(v, key, depth, w, name) if type(v) == 'string' then if string.sub(v, 1, 3) == '` + Magic + `' then local d = subst and subst[v]; if d then return d end; fail(key, w, name) end ` +
	`elseif type(v) == 'table' and depth < 4 and v.err == nil then for i, e in pairs(v) do local d = check(e, key, depth + 1, w, name); if d ~= e then v[i] = d end end end; return v end; ` +
	inside +
	`local function guard(f) return function(...) local name = string.lower(tostring((...))); if subst and string.find(looks, ' ' .. name .. ' ', 1, true) then local ok, r = inside(name, ...); if ok then return r end end; local w = wrote or not string.find(ro, ' ' .. name .. ' ', 1, true); if w then wrote = true end; local r = f(...); ` +
	`if name == 'mget' and type(r) == 'table' then for i, e in ipairs(r) do r[i] = check(e, select(i + 1, ...), 3, w, name) end else r = check(r, select(2, ...), 0, w, name) end; return r end end; ` +
	`local function substitutes(argv) subst = nil; local n = #argv; if n == 0 or string.byte(argv[n], 1) ~= 193 or string.sub(argv[n], 1, ` + decodedMarkLen + `) ~= '` + Magic + `decoded:' then return argv end; ` +
	`local c = tonumber(string.sub(argv[n], ` + decodedMarkLen + ` + 1)); if not c or n < 2 * c + 1 then return argv end; local base = n - 1 - 2 * c; subst = {}; ` +
	`for i = 1, c do subst[argv[base + 2 * i - 1]] = argv[base + 2 * i] end; for i = n, base + 1, -1 do argv[i] = nil end; return argv end; `

// inside is the part of the prologue that answers, in a script given
// decoded values (DecodedMark: a read-only script, whose keys stay
// compressed), the commands that look inside a value (STRLEN, HSTRLEN,
// GETRANGE, SUBSTR) from the decoded value, as Redis would from the value
// stored plain; and refuses with an error the others (the bit commands,
// LCS, LPOS) where they would look inside a compressed value, rather than
// answer from the frame's bytes. A value without a frame, a key of
// another type, an argument Redis refuses: the command runs as it is.
const inside = `local looks = ' strlen hstrlen getrange substr getbit bitcount bitpos bitfield_ro lcs lpos '; ` +
	`local function inside(name, _, k, a, b) local function refuse(name, k) error({err = 'ERR squeeze: ' .. string.upper(name) .. ' inside a read-only script looks inside the compressed value at ' .. tostring(k) .. ', which the proxy decodes for such a script only where it reads the value whole (GET, HGET, LRANGE ...): run the command outside the script, or the script with EVAL or FCALL'}) end; ` +
	`local function framed(v) return type(v) == 'string' and subst[v] ~= nil end; ` +
	`if name == 'lpos' then local all = real.pcall('lrange', k, 0, -1); if type(all) == 'table' and all.err == nil then for _, e in ipairs(all) do if framed(e) then refuse(name, k) end end end; return false end; ` +
	`if name == 'lcs' then if framed(real.pcall('get', k)) then refuse(name, k) end; if framed(real.pcall('get', a)) then refuse(name, a) end; return false end; ` +
	`local d; if name == 'hstrlen' then d = real.pcall('hget', k, a) else d = real.pcall('get', k) end; if not framed(d) then return false end; d = subst[d]; ` +
	`if name == 'strlen' or name == 'hstrlen' then return true, #d end; ` +
	`if name == 'getrange' or name == 'substr' then local s, e, n = tonumber(a), tonumber(b), #d; if not s or not e or s ~= math.floor(s) or e ~= math.floor(e) then return false end; ` +
	`if s < 0 and e < 0 and s > e then return true, '' end; if s < 0 then s = n + s end; if e < 0 then e = n + e end; if s < 0 then s = 0 end; if e < 0 then e = 0 end; if e >= n then e = n - 1 end; ` +
	`if s > e or n == 0 then return true, '' end; return true, string.sub(d, s + 1, e + 1) end; refuse(name, k) end; `

// DecodedMark begins the argument the proxy appends to a script's
// arguments after pairs of frames and their decoded values, followed by
// the count of pairs: the prologue takes them off ARGV (or a function's
// args), in place, before the script runs, and gives a script that reads
// one of those frames (with a command its user may run, which Redis
// checks) its decoded value instead (see AppendDecoded). The script
// cannot reach the pairs any other way. A script run read-only (EVAL_RO,
// FCALL_RO, or on a read-only replica) gets its declared keys' values
// this way, since the proxy may not write them plain.
const DecodedMark = "\xC1SQdecoded:"

// decodedMarkLen is len(DecodedMark), as Lua source.
const decodedMarkLen = "11"

// readOnly makes the shadow as read-only as Redis's own redis table (issue
// 32): shadow is an empty table whose metatable reaches fields (call and
// pcall guarded, the rest of real through it) and sends every assignment to
// real, which Redis protects, so that Redis itself raises its "Attempt to
// modify a readonly table" at the script's own line. __metatable hides the
// metatable from setmetatable; the locals the prologue returns besides the
// shadow stand for rawset, rawget, setmetatable and getmetatable, which go
// to real instead of the shadow (rawget returns the shadow's field). They
// look their globals up when called, as a function library has none of
// them while it loads.
const readOnly = `local function protect(t) setmetatable(t, {__index = setmetatable({call = guard(real.call), pcall = guard(real.pcall)}, {__index = real}), __newindex = real, __metatable = false}) end; ` +
	`local function others() return function(t, ...) if t == shadow then t = real end return rawset(t, ...) end, ` +
	`function(t, ...) if t == shadow then return shadow[(...)] end return rawget(t, ...) end, ` +
	`function(t, ...) if t == shadow then t = real end return setmetatable(t, ...) end, ` +
	`function(t, ...) if t == shadow then t = real end return getmetatable(t, ...) end end; `

// EvalPrologue is the prologue of an EVAL script: its keys are KEYS.
const EvalPrologue = `local redis, rawset, rawget, setmetatable, getmetatable = (function(real, keys, argv) local shadow = {}; ` + evalBody +
	`return shadow, others() end)(redis, function() return KEYS end, ARGV); `

// ServerEvalPrologue is EvalPrologue for a server whose scripts also reach
// redis as server (Valkey): the global server is shadowed as redis is, so
// that server.call is guarded too.
const ServerEvalPrologue = `local redis, server, rawset, rawget, setmetatable, getmetatable = (function(real, keys, argv) local shadow = {}; ` + evalBody +
	`return shadow, shadow, others() end)(redis, function() return KEYS end, ARGV); `

// evalBody is the part both EVAL prologues share.
const evalBody = guardBody + readOnly + `substitutes(argv); protect(shadow); `

// FunctionPrologue is the prologue of a FUNCTION LOAD library: each
// registered function's keys are those FCALL passed it, so register_function
// wraps the callback to note them (and to start each call with no write).
// While the library loads, Redis lets it reach no global but redis (not
// even type, next or setmetatable), so the shadow is then a plain table of
// the fields a library may use while it loads, checked unchanged at each
// register_function (a change raises Redis's own error, by writing to the
// protected load-time redis); at the first call, with the globals there,
// it is emptied and made read-only as EVAL's (readOnly), over the redis of
// the calls, and emptied again at each call should a library have set a
// field with the global rawset.
//
// register_function passes on exactly the arguments it got (arg.n: the
// count, nils included), so that Redis's own checks answer; a callback is
// wrapped only after string.dump took it, which it does for a Lua function
// only: the error that stops a load with another value names the local it
// was called through, which LoadError turns into Redis's own text.
const FunctionPrologue = `local redis, rawset, rawget, setmetatable, getmetatable = (function(real) ` + functionBody + `return shadow, others() end)(redis); `

// ServerFunctionPrologue is FunctionPrologue for a server whose libraries
// also reach redis as server (Valkey, see ServerEvalPrologue): a library's
// server.register_function wraps its callback too.
const ServerFunctionPrologue = `local redis, server, rawset, rawget, setmetatable, getmetatable = (function(real) ` + functionBody + `return shadow, shadow, others() end)(redis); `

// functionBody is the part both FUNCTION LOAD prologues share.
const functionBody = `local current, shadow, ready = {}, {}, false; local function keys() return current end; ` + guardBody + readOnly +
	`local squeeze_positional_callback, squeeze_named_callback = ('').dump, ('').dump; local gcall, gpcall; ` +
	`local loaded = {}; local function wrap(fn) return function(k, a) if not ready then local rt, changed = redis, false; for f, v in next, loaded do changed = changed or shadow[f] ~= v end; for f, v in next, shadow do changed = changed or loaded[f] ~= v; shadow[f] = nil end; if changed then rt.register_function = nil end; real = rt; gcall, gpcall = guard(rt.call), guard(rt.pcall); protect(shadow); ready = true elseif next(shadow) ~= nil then for f in next, shadow do shadow[f] = nil end end; current, wrote = k, false; return fn(k, substitutes(a)) end end; ` +
	`local lcall, lpcall, lrf = function(...) return gcall(...) end, function(...) return gpcall(...) end; ` +
	`lrf = function(...) if shadow.call ~= lcall or shadow.pcall ~= lpcall or shadow.register_function ~= lrf or shadow.log ~= real.log then real.register_function = real.register_function end; local n, a, b = arg.n, arg[1], arg[2]; ` +
	`if n == 2 then if b ~= nil then squeeze_positional_callback(b); b = wrap(b) end; return real.register_function(a, b) end; ` +
	`if n == 1 then if a ~= nil and a ~= true and a ~= false then local cb = a.callback; if cb ~= nil then squeeze_named_callback(cb); a.callback = wrap(cb) end end; return real.register_function(a) end; ` +
	`if n == 0 then return real.register_function() end; return real.register_function(a, b, arg[3]) end; ` +
	`local function fill(t) t.call, t.pcall, t.register_function = lcall, lpcall, lrf; ` +
	`t.log, t.LOG_DEBUG, t.LOG_VERBOSE, t.LOG_NOTICE, t.LOG_WARNING = real.log, real.LOG_DEBUG, real.LOG_VERBOSE, real.LOG_NOTICE, real.LOG_WARNING; ` +
	`t.REDIS_VERSION, t.REDIS_VERSION_NUM = real.REDIS_VERSION, real.REDIS_VERSION_NUM end; ` +
	`fill(shadow); fill(loaded); `

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

// Unwrap returns a library's code as it was loaded: without the prologue
// Wrap put after its #! line. Code loaded some other way is returned as it
// is.
func Unwrap(code []byte) []byte {
	nl := bytes.IndexByte(code, '\n')
	if nl < 0 || !bytes.HasPrefix(code, []byte("#!")) {
		return code
	}
	for _, pro := range functionPrologues {
		if bytes.HasPrefix(code[nl+1:], []byte(pro)) {
			out := make([]byte, 0, len(code)-len(pro))
			out = append(out, code[:nl+1]...)
			return append(out, code[nl+1+len(pro):]...)
		}
	}
	return code
}

// functionPrologues are the prologues FUNCTION LOAD may have put in a
// library: this version's, and issue 22's (legacy.go).
var functionPrologues = []string{FunctionPrologue, ServerFunctionPrologue, FunctionPrologue22}

// UnwrapReply returns a reply of FUNCTION LIST WITHCODE (RESP2 or RESP3,
// as Redis sent it) with the code of every library the prologue wraps as
// it was loaded (Unwrap): each such bulk string is rewritten, its length
// with it. reply is returned itself when it holds none.
func UnwrapReply(reply []byte) []byte {
	for _, pro := range functionPrologues {
		reply = unwrapReply(reply, pro)
	}
	return reply
}

// unwrapReply is UnwrapReply for one prologue.
func unwrapReply(reply []byte, prologue string) []byte {
	pro := []byte("\n" + prologue)
	var out []byte
	done := 0 // reply[:done] is in out
	for from := 0; ; {
		i := bytes.Index(reply[from:], pro)
		if i < 0 {
			break
		}
		i += from + 1 // the prologue's first byte
		from = i
		// The bulk string's header ends just before the #! line.
		h := bytes.LastIndex(reply[done:i], []byte("\r\n"))
		if h < 0 {
			continue
		}
		h += done
		start := bytes.LastIndexByte(reply[:h], '\n') + 1
		if start < done || reply[start] != '$' || !bytes.HasPrefix(reply[h+2:], []byte("#!")) || bytes.IndexByte(reply[h+2:i-1], '\n') >= 0 {
			continue
		}
		n, err := strconv.Atoi(string(reply[start+1 : h]))
		if err != nil || h+2+n > len(reply) || i+len(prologue) > h+2+n {
			continue
		}
		out = append(out, reply[done:start]...)
		out = append(out, '$')
		out = strconv.AppendInt(out, int64(n-len(prologue)), 10)
		out = append(out, reply[h:i]...)
		done = i + len(prologue)
		from = done
	}
	if out == nil {
		return reply
	}
	return append(out, reply[done:]...)
}

// loadErrs are the errors a FUNCTION LOAD of a library with the prologue
// raises where Redis refuses a callback that is not a function (see
// FunctionPrologue), and Redis's own texts for them (%s: the API's name).
var loadErrs = []struct {
	local, redis string
}{
	{"'squeeze_positional_callback' (function expected", "second argument to %s.register_function must be a function"},
	{"'squeeze_named_callback' (function expected", "callback argument given to %s.register_function must be a function"},
}

// APIProbe is a library every server refuses, with an error that names
// its API as Redis's errors do ("wrong number of arguments to
// redis.register_function"; Valkey's say server.register_function): a
// FUNCTION LOAD of it changes nothing, and its error tells LoadError the
// name.
const APIProbe = "#!lua name=squeeze_api_probe\nredis.register_function()"

// ProbeAPI returns the API name in the reply to APIProbe, "redis" if it
// names none.
func ProbeAPI(reply []byte) string {
	const mark = "wrong number of arguments to "
	i := bytes.Index(reply, []byte(mark))
	if i < 0 {
		return "redis"
	}
	rest := reply[i+len(mark):]
	if j := bytes.Index(rest, []byte(".register_function")); j > 0 && j < 32 {
		return string(rest[:j])
	}
	return "redis"
}

// IsLoadError reports whether a FUNCTION LOAD error is the prologue's
// refusal of a callback that is not a function (LoadError).
func IsLoadError(reply []byte) bool {
	for _, e := range loadErrs {
		if bytes.Contains(reply, []byte(e.local)) {
			return true
		}
	}
	return false
}

// LoadError returns a FUNCTION LOAD error reply (or message) with the
// prologue's refusal of a callback that is not a function replaced by the
// text the server gives without the prologue (api: the name its errors
// give its API, see ProbeAPI); any other reply as it is.
func LoadError(reply []byte, api string) []byte {
	for _, e := range loadErrs {
		i := bytes.Index(reply, []byte(e.local))
		if i < 0 {
			continue
		}
		// "...: ERR user_function:N: bad argument #1 to '<local>' (function
		// expected, got T)" becomes "...: ERR <Redis's text>".
		s := bytes.LastIndex(reply[:i], []byte("user_function:"))
		end := bytes.IndexByte(reply[i:], ')')
		if s < 0 || end < 0 {
			return reply
		}
		out := append([]byte(nil), reply[:s]...)
		out = fmt.Appendf(out, e.redis, api)
		return append(out, reply[i+end+1:]...)
	}
	return reply
}

// AppendDecoded returns a script command's arguments (EVAL, EVALSHA,
// FCALL or their _RO forms, ending with the script's own arguments) with
// pairs of a frame and its decoded value appended, then DecodedMark and
// their count: the prologue hands the script its own arguments, and the
// decoded value wherever it reads one of the frames. pairs with the same
// frame are sent once.
func AppendDecoded(args [][]byte, pairs [][2][]byte) [][]byte {
	out := append(make([][]byte, 0, len(args)+2*len(pairs)+1), args...)
	seen := make(map[string]bool, len(pairs))
	n := 0
	for _, p := range pairs {
		if seen[string(p[0])] {
			continue
		}
		seen[string(p[0])] = true
		out = append(out, p[0], p[1])
		n++
	}
	return append(out, strconv.AppendInt([]byte(DecodedMark), int64(n), 10))
}
