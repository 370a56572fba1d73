package proxy

import (
	"bytes"
	"strconv"

	"github.com/squeeze-kv/squeeze/resp"
)

// SORT and SORT_RO look at stored bytes in two ways. ALPHA compares them
// (the elements, or with BY pattern the values the pattern fetches), and
// BY and GET patterns put an element's bytes into key names (weight_*,
// data_*->field). Where those bytes are frames, Redis would order
// compressed bytes or look up keys named after them, and the proxy would
// hand back a wrong order or missing values as if they were right.
//
// The proxy sends such a SORT inside a small script instead. The script
// looks at every element (and, with ALPHA and BY, every fetched value) and
// runs Redis's SORT only if none that matters is a frame; otherwise it
// replies with an error that says why, and sorts nothing (with STORE, it
// stores nothing). A numeric SORT without patterns needs no check: the
// write policy stores numbers raw (codec.Numeric), so a frame never holds
// one, and Redis's "can't be converted into double" is the reply Redis
// gives on the values. Lists written raw, and sets and sorted
// sets, whose members the proxy never compresses, sort as before.
//
// The script needs no answer from the proxy, so it travels like any
// command, pipelined and in MULTI. It goes by its text (about 1.5 KB): a
// NOSCRIPT error could not be retried without waiting for it.
const sortCheckScript = `local key, alpha, by, patterns = KEYS[1], ARGV[1] == '1', ARGV[2], ARGV[3] == '1'
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

// sortNeedsCheck reports whether a SORT or SORT_RO call must go through
// sortCheckScript: it compares strings (ALPHA), or has a BY or GET
// pattern with * (which names keys after elements). It returns the BY
// pattern ("" without one, or with BY nosort: a pattern without * sorts
// nothing) and whether there are such patterns.
func sortNeedsCheck(info *cmdInfo, args [][]byte) (by []byte, alpha, patterns, ok bool) {
	if (info.name != "SORT" && info.name != "SORT_RO") || len(args) < 2 {
		return nil, false, false, false
	}
	star := []byte("*")
	for i := 2; i < len(args); i++ {
		switch {
		case is(args[i], "ASC"), is(args[i], "DESC"):
		case is(args[i], "ALPHA"):
			alpha = true
		case is(args[i], "BY") && i+1 < len(args):
			i++
			by = args[i]
		case is(args[i], "GET") && i+1 < len(args):
			i++
			patterns = patterns || bytes.Contains(args[i], star)
		case is(args[i], "STORE") && i+1 < len(args) && info.name == "SORT":
			i++
		case is(args[i], "LIMIT") && i+2 < len(args) && isInt(args[i+1]) && isInt(args[i+2]):
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

// appendSortCheck appends EVAL sortCheckScript running the SORT in args.
func appendSortCheck(dst []byte, by []byte, alpha, patterns bool, args [][]byte) []byte {
	dst = resp.AppendArray(dst, 7+len(args))
	dst = appendScript(dst, sortCheckScript, "", false)
	dst = resp.AppendBulkString(dst, "1")
	dst = resp.AppendBulk(dst, args[1])
	dst = appendFlag(dst, alpha)
	dst = resp.AppendBulk(dst, by)
	dst = appendFlag(dst, patterns)
	for _, a := range args {
		dst = resp.AppendBulk(dst, a)
	}
	return dst
}
