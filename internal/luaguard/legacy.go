package luaguard

// legacyGuardBody22 is issue 22's guardBody, part of FunctionPrologue22.
const legacyGuardBody22 = `local wrote, ro = false, ' get mget strlen getrange substr exists type ttl pttl expiretime pexpiretime hget hmget hgetall hvals hkeys hexists hlen hstrlen hrandfield hscan lrange lindex llen lpos smembers sismember smismember scard srandmember sscan zscore zmscore zrange zrangebyscore zrangebylex zrevrange zrevrangebyscore zrevrangebylex zrank zrevrank zcard zcount zlexcount zscan zrandmember xrange xrevrange xlen xread xinfo xpending object scan keys dbsize time echo ping getbit bitcount bitpos bitfield_ro lcs dump randomkey sunion sinter sintercard sdiff zunion zinter zdiff zintercard hpexpiretime httl hpttl hexpiretime touch memory '; ` +
	`local function declared(k) for _, d in ipairs(keys()) do if d == k then return true end end return false end; ` +
	`local function fail(k, w) k = tostring(k); ` +
	`if not declared(k) then error({err = 'ERR squeeze: script read a compressed value at ' .. k .. ', which it does not declare in KEYS: declare every key a script reads, so that the proxy decodes it before the script runs'}) end; ` +
	`if w then error({err = 'ERR squeeze: script read a compressed value at declared key ' .. k .. ' after writing: the proxy decodes declared keys before a script runs; run it again through the proxy outside MULTI'}) end; ` +
	`error({err = 'ERR squeeze: script read a compressed value at declared key ' .. k .. ' before writing: the proxy decodes declared keys before a script runs; run it again through the proxy outside MULTI'}) end; ` +
	`local function check(v, key, depth, w) if type(v) == 'string' then if string.sub(v, 1, 3) == '` + Magic + `' then fail(key, w) end elseif type(v) == 'table' and depth < 4 and v.err == nil then for _, e in pairs(v) do check(e, key, depth + 1, w) end end end; ` +
	`local function guard(f) return function(...) local name = string.lower(tostring((...))); local w = wrote or not string.find(ro, ' ' .. name .. ' ', 1, true); if w then wrote = true end; local r = f(...); ` +
	`if name == 'mget' and type(r) == 'table' then for i, e in ipairs(r) do check(e, select(i + 1, ...), 3, w) end else check(r, select(2, ...), 0, w) end; return r end end; `

// FunctionPrologue22 is the prologue FUNCTION LOAD put in libraries before
// issue 32, kept so that a library loaded through an earlier proxy lists
// (FUNCTION LIST WITHCODE) as it was loaded, and loads back, REPLACE, with
// the prologue of now. It is never put in a library any more.
const FunctionPrologue22 = `local redis = (function(real) local current, shadow, ready = {}, {}, false; local function keys() return current end; ` + legacyGuardBody22 +
	`local gcall, gpcall; local function wrap(fn) return function(k, a) if not ready then real = redis; gcall, gpcall = guard(real.call), guard(real.pcall); setmetatable(shadow, {__index = real}); ready = true end; current, wrote = k, false; return fn(k, a) end end; ` +
	`shadow.call = function(...) return gcall(...) end; shadow.pcall = function(...) return gpcall(...) end; ` +
	`shadow.log, shadow.LOG_DEBUG, shadow.LOG_VERBOSE, shadow.LOG_NOTICE, shadow.LOG_WARNING = real.log, real.LOG_DEBUG, real.LOG_VERBOSE, real.LOG_NOTICE, real.LOG_WARNING; ` +
	`shadow.REDIS_VERSION, shadow.REDIS_VERSION_NUM = real.REDIS_VERSION, real.REDIS_VERSION_NUM; ` +
	`shadow.register_function = function(a, b) if b == nil and a ~= nil and a.callback ~= nil then a.callback = wrap(a.callback); return real.register_function(a) end; ` +
	`if b ~= nil then b = wrap(b) end; return real.register_function(a, b) end; ` +
	`return shadow end)(redis); `
