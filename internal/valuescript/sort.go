package valuescript

import (
	"bytes"
	"strconv"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
)

// SortCheck runs SORT or SORT_RO only where no element that matters is a
// frame: with ALPHA, the elements (or with a BY pattern the values it
// fetches) are compared; with BY and GET patterns, elements name keys.
// Otherwise it replies with an error that says why, and sorts (and
// stores) nothing. KEYS[1] is the key sorted; ARGV: "1" for ALPHA, the BY
// pattern ("" without one), "1" where BY or GET patterns name keys, then
// the command, name first (SortCheckWords). It needs no answer from the
// caller, so it travels like any command, pipelined and in MULTI, by its
// text.
const SortCheck = `local key, alpha, by, patterns = KEYS[1], ARGV[1] == '1', ARGV[2], ARGV[3] == '1'
local function framed(v) return type(v) == 'string' and string.sub(v, 1, 3) == '` + luaMagic + `' end
local function refuse(why)
  return redis.error_reply('ERR squeeze: ' .. string.upper(ARGV[4]) .. ' ' .. why .. ' (key ' .. key .. '); sort in the client, or store those values uncompressed')
end
local t = redis.pcall('TYPE', key)
local elems = {}
if type(t) == 'table' and t.ok == 'list' then elems = redis.call('LRANGE', key, 0, -1)
elseif type(t) == 'table' and t.ok == 'set' then elems = redis.call('SMEMBERS', key)
elseif type(t) == 'table' and t.ok == 'zset' then elems = redis.call('ZRANGE', key, 0, -1) end
local star = by ~= '' and string.find(by, '*', 1, true)
for _, e in ipairs(elems) do
  if framed(e) then
    if patterns then return refuse('BY and GET patterns would name keys after compressed bytes, not the values') end
    if alpha and not star then return refuse('ALPHA would order compressed bytes, not the values') end
  end
  if alpha and star then
    local suffix, field = string.sub(by, star + 1), nil
    local arrow = string.find(suffix, '->', 1, true)
    if arrow and arrow + 2 <= #suffix then suffix, field = string.sub(suffix, 1, arrow - 1), string.sub(suffix, arrow + 2) end
    local name, v = string.sub(by, 1, star - 1) .. e .. suffix, nil
    if field then v = redis.pcall('HGET', name, field) else v = redis.pcall('GET', name) end
    if framed(v) then return refuse('ALPHA would order compressed bytes, not the values') end
  end
end
return redis.pcall(unpack(ARGV, 4))`

// SortNeedsCheck reports whether a SORT or SORT_RO call must go through
// SortCheck: it compares strings (ALPHA), or has a BY or GET pattern with
// * (which names keys after elements). It returns the BY pattern (nil
// without one, or with BY nosort: a pattern without * sorts nothing) and
// whether there are such patterns. A numeric SORT without patterns needs
// no check: numbers are always stored raw (codec.Numeric).
func SortNeedsCheck(args [][]byte) (by []byte, alpha, patterns, ok bool) {
	if len(args) < 2 {
		return nil, false, false, false
	}
	sort := rediscmd.Is(args[0], "SORT")
	if !sort && !rediscmd.Is(args[0], "SORT_RO") {
		return nil, false, false, false
	}
	star := []byte("*")
	for i := 2; i < len(args); i++ {
		switch {
		case rediscmd.Is(args[i], "ASC"), rediscmd.Is(args[i], "DESC"):
		case rediscmd.Is(args[i], "ALPHA"):
			alpha = true
		case rediscmd.Is(args[i], "BY") && i+1 < len(args):
			i++
			by = args[i]
		case rediscmd.Is(args[i], "GET") && i+1 < len(args):
			i++
			patterns = patterns || bytes.Contains(args[i], star)
		case rediscmd.Is(args[i], "STORE") && i+1 < len(args) && sort:
			i++
		case rediscmd.Is(args[i], "LIMIT") && i+2 < len(args) && isInt(args[i+1]) && isInt(args[i+2]):
			i += 2
		default:
			// Redis refuses the call with its own error before sorting.
			return nil, false, false, false
		}
	}
	if by != nil && !bytes.Contains(by, star) {
		by = nil // BY nosort: no order, no lookups
	}
	patterns = patterns || by != nil
	return by, alpha, patterns, alpha || patterns
}

// isInt reports whether b is a decimal integer Redis reads as a long.
func isInt(b []byte) bool {
	_, err := strconv.ParseInt(string(b), 10, 64)
	return err == nil
}

// SortCheckWords appends to dst the words of EVAL SortCheck running the
// SORT in args, with SortNeedsCheck's results.
func SortCheckWords(dst [][]byte, by []byte, alpha, patterns bool, args [][]byte) [][]byte {
	if by == nil {
		by = []byte{}
	}
	dst = Words(dst, SortCheck, "", false)
	dst = append(dst, []byte("1"), args[1], flag(alpha), by, flag(patterns))
	return append(dst, args...)
}
