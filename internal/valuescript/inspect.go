package valuescript

import (
	"strconv"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
)

// Inspect runs a command that looks inside stored bytes (STRLEN, GETRANGE,
// APPEND, SETRANGE, the bit commands, LCS, HSTRLEN, the compare commands)
// on the decoded values of the keys it reads, atomically. Its KEYS are the
// keys the command reads (InspectKeys); its ARGV:
//
//	1  the mode: InspectRun, InspectRestore, InspectCompare, InspectExact
//	   or InspectExactRestore (InspectMode)
//	2  the hash field for HSTRLEN, else empty
//	3  the key the command writes (WrittenKey), else empty
//	4  "1" for a probe that reports only the first 64 bytes of frames
//	5  the number m of candidates
//	6  the minimum size of a written value to hand back for compression,
//	   or -1 (see RecompressMarker)
//	7  m triples: key, frame, decoded bytes
//	.. the command, name first (none: a probe, which changes nothing)
//
// For every key that holds a frame it needs a candidate with exactly that
// frame (a none frame of the plain form it reads itself); if one is
// missing it changes nothing and returns Marker followed by key, frame
// pairs. Otherwise it stores the decoded bytes, runs the command, and puts
// the frames back for read-only commands and failed ones; a compare
// command leaves what it wrote; other writes leave the result uncompressed
// (wrapped in a none frame where it begins with the magic). A probe
// without a command returns "OK" where nothing needs decoding. The
// command's reply, error included, is the script's. The proxy's narrative
// is in proxy/inspect.go and docs/design/inspect.md.
const Inspect = `local restore, compare, field, written, head, m = ARGV[1] == '1' or ARGV[1] == '5', ARGV[1] == '2', ARGV[2], ARGV[3], ARGV[4] == '1', tonumber(ARGV[5])
local exact = ARGV[1] == '4' or ARGV[1] == '5'
local sget, magic = 'GET', function(k) return redis.pcall('GETRANGE', k, 0, 2) == '` + luaMagic + `' end
if not restore then
  sget = 'GETEX'
  magic = function(k) local r = redis.pcall('BITFIELD', k, 'GET', 'u24', 0) return type(r) == 'table' and r[1] == 12669777 end
end
local function get(k) if field ~= '' then return redis.pcall('HGET', k, field) end return redis.pcall(sget, k) end
local function put(k, v)
  if field == '' then redis.call('SET', k, v, 'KEEPTTL') return end
  local t = redis.pcall('HPEXPIRETIME', k, 'FIELDS', 1, field)
  redis.call('HSET', k, field, v)
  if type(t) == 'table' and type(t[1]) == 'number' and t[1] > 0 then redis.call('HPEXPIREAT', k, t[1], 'FIELDS', 1, field) end
end
local function framed(k)
  if field == '' then
    if not magic(k) then return nil end
    return redis.call(sget, k)
  end
  local v = redis.pcall('HGET', k, field)
  if type(v) == 'string' and string.sub(v, 1, 3) == '` + luaMagic + `' then return v end
  return nil
end
local function plain(v)
  if string.byte(v, 4) ~= 1 or string.byte(v, 5) ~= 0 or string.byte(v, 6) ~= 0 then return nil end
  local n, scale, i = 0, 1, 7
  while true do
    local b = string.byte(v, i)
    if b == nil or i > 16 then return nil end
    n, i = n + (b % 128) * scale, i + 1
    if b < 128 then break end
    scale = scale * 128
  end
  if #v - i + 1 ~= n then return nil end
  return string.sub(v, i)
end
local function wrap(k)
  if k == '' or not magic(k) then return end
  local v = redis.call(sget, k)
  local n, len = #v, ''
  while n >= 128 do len = len .. string.char(n % 128 + 128); n = math.floor(n / 128) end
  redis.call('SET', k, '` + luaMagic + `\1\0\0' .. len .. string.char(n) .. v, 'KEEPTTL')
end
local orig, dec, out = {}, {}, nil
for i, k in ipairs(KEYS) do
  local cur = framed(k)
  if cur and not orig[k] then
    for j = 0, m - 1 do
      if ARGV[7 + 3*j] == k and ARGV[8 + 3*j] == cur then dec[k] = ARGV[9 + 3*j] break end
    end
    if dec[k] == nil then dec[k] = plain(cur) end
    if dec[k] == nil then
      out = out or {'` + luaMagic + `'}
      out[#out+1] = k
      if head then out[#out+1] = string.sub(cur, 1, 64) else out[#out+1] = cur end
    end
    orig[k] = cur
  end
end
if out then return out end
if #ARGV < 7 + 3*m then return 'OK' end
for k, v in pairs(dec) do put(k, v) end
local function bits64(k, at) return redis.pcall('BITFIELD', k, 'GET', 'u32', at, 'GET', 'u32', at + 32) end
local function run(b)
  if not exact then return redis.pcall(unpack(ARGV, b)) end
  local name, k, out = ARGV[b], ARGV[b+1], {'` + luaMagic + `B'}
  for i = b + 2, #ARGV, 6 do
    local op, at = ARGV[i], tonumber(ARGV[i+5])
    local before, r
    if op == 'SET' then before = bits64(k, at) end
    if op == 'GET' then r = redis.pcall(name, k, 'GET', ARGV[i+1], ARGV[i+2])
    else r = redis.pcall(name, k, 'OVERFLOW', ARGV[i+4], op, ARGV[i+1], ARGV[i+2], ARGV[i+3]) end
    if type(r) == 'table' and r.err then return r end
    if r[1] == nil or r[1] == false then out[#out+1] = false
    else
      local v = before or bits64(k, at)
      out[#out+1] = {v[1], v[2], ARGV[i+1]}
    end
  end
  return out
end
local r = run(7 + 3*m)
if restore or (type(r) == 'table' and r.err) then
  for k, v in pairs(orig) do put(k, v) end
elseif compare then
  for k, v in pairs(orig) do if get(k) == dec[k] then put(k, v) end end
elseif field ~= '' then
  for k, v in pairs(orig) do
    local now = get(k)
    if type(now) == 'string' and string.sub(now, 1, 3) == '` + luaMagic + `' then put(k, v) end
  end
else
  -- Keys only read (BITOP's sources) get their frames back; the written
  -- key keeps the result.
  for k, v in pairs(orig) do if k ~= written then put(k, v) else wrap(k) end end
  if orig[written] == nil then wrap(written) end
  -- A write on compressed values (SETBIT, BITFIELD, BITOP): hand the
  -- result to the proxy, which compresses it again (see recompress).
  local min = tonumber(ARGV[6])
  if written ~= '' and min >= 0 and next(orig) ~= nil then
    local v = redis.pcall(sget, written)
    if type(v) == 'string' and #v >= min and string.sub(v, 1, 3) ~= '` + luaMagic + `' then return {'` + luaMagic + `W', r, v} end
  end
end
return r`

// InspectSHA names Inspect for EVALSHA.
var InspectSHA = SHA(Inspect)

// Inspect modes, ARGV[1].
const (
	InspectRun          = "0" // a write: the result stays
	InspectRestore      = "1" // read-only: the frames are put back
	InspectCompare      = "2" // compares, then may write or delete
	InspectExact        = "4" // BITFIELD run subcommand by subcommand (ExactBitfield)
	InspectExactRestore = "5" // BITFIELD_RO, likewise
)

// InspectMode returns the mode of a command: readOnly (it does not write),
// compare (it compares the value with an argument, then may write), exact
// (the exact form of BITFIELD, see ExactBitfield).
func InspectMode(readOnly, compare, exact bool) string {
	switch {
	case compare:
		return InspectCompare
	case exact && readOnly:
		return InspectExactRestore
	case exact:
		return InspectExact
	case readOnly:
		return InspectRestore
	}
	return InspectRun
}

// InspectKeys returns the indexes [first, end) of the keys an inspect
// command of n arguments (name included) reads.
func InspectKeys(keys rediscmd.Keys, n int) (first, end int) {
	switch keys {
	case rediscmd.KeysTwo:
		return 1, min(3, n)
	case rediscmd.KeysFrom3:
		return min(3, n), n
	default:
		return 1, min(2, n)
	}
}

// WrittenKey returns the string key a write command stores into (BITOP's
// destination, or the key), or nil for a read-only or compare command and
// a hash command.
func WrittenKey(readOnly, compare bool, keys rediscmd.Keys, args [][]byte) []byte {
	if readOnly || compare || keys == rediscmd.KeyHash {
		return nil
	}
	if keys == rediscmd.KeysFrom3 {
		if len(args) > 2 {
			return args[2]
		}
		return nil
	}
	if len(args) > 1 {
		return args[1]
	}
	return nil
}

// A Candidate is a frame and its decoded bytes, for Key.
type Candidate struct{ Key, Frame, Dec []byte }

// InspectCall is one call of Inspect.
type InspectCall struct {
	Mode       string   // InspectMode
	Keys       [][]byte // the keys the command reads (InspectKeys)
	Field      []byte   // HSTRLEN's field, else nil
	Written    []byte   // WrittenKey
	Head       bool     // a probe reporting only the frames' first 64 bytes
	Candidates []Candidate
	// RecompressMin >= 0 asks a write on compressed values to hand back a
	// result of at least that many bytes (RecompressMarker); -1 not to.
	RecompressMin int
	// Command is the command to run, name first; nil for a probe.
	Command [][]byte
}

// Words appends the call's words to dst: EVALSHA or EVAL (see Words),
// then its keys and arguments.
func (c *InspectCall) Words(dst [][]byte, byName bool) [][]byte {
	dst = Words(dst, Inspect, InspectSHA, byName)
	dst = append(dst, []byte(strconv.Itoa(len(c.Keys))))
	dst = append(dst, c.Keys...)
	field := c.Field
	if field == nil {
		field = []byte{}
	}
	written := c.Written
	if written == nil {
		written = []byte{}
	}
	dst = append(dst, []byte(c.Mode), field, written, flag(c.Head),
		[]byte(strconv.Itoa(len(c.Candidates))), []byte(strconv.Itoa(c.RecompressMin)))
	for _, cd := range c.Candidates {
		dst = append(dst, cd.Key, cd.Frame, cd.Dec)
	}
	return append(dst, c.Command...)
}
