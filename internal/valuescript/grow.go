package valuescript

import (
	"bytes"
	"strconv"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
)

// Grow runs APPEND and SETRANGE so that their result is stored under the
// caller's write policy (compressed), in two rounds. KEYS[1] is the key;
// ARGV (GrowCall):
//
//	1  the mode: GrowProbe, or GrowStore
//	2  the policy's minimum size
//	3  the kind (GrowArgs; lower case where the result may begin with the
//	   frame magic, MayStartFramed)
//	4  x: the appended length, or the end of SETRANGE's range
//	5  GrowStore: the SHA-1 of the bytes read ("" for a missing key)
//	6  GrowStore: the new stored bytes
//	7  GrowStore: the new length, the command's reply
//	8  the command, name first
//
// A probe runs Redis's own command where the policy has nothing to decide
// (a raw value that stays under the minimum size or was already at or over
// it, a key of another type), and that is the reply. Otherwise (a frame,
// or a missing, empty or short value the command takes to the minimum
// size) it changes nothing and replies Marker followed by the stored
// bytes, or Marker alone for a missing key. The caller decodes them,
// applies the command (Grown), encodes the result and sends GrowStore: the
// script stores the new bytes (SET KEEPTTL) only if the key still holds
// what was read, and replies with the new length; else it probes again.
const Grow = `local k, min, kind, x = KEYS[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
if ARGV[1] == 'S' then
  local cur = redis.pcall('GETEX', k)
  if type(cur) ~= 'string' then cur = nil end
  if (ARGV[5] == '' and cur == nil) or (cur ~= nil and ARGV[5] ~= '' and redis.sha1hex(cur) == ARGV[5]) then
    redis.call('SET', k, ARGV[6], 'KEEPTTL')
    return tonumber(ARGV[7])
  end
end
local n = redis.pcall('SETRANGE', k, 0, '')
if type(n) ~= 'number' then return redis.pcall(unpack(ARGV, 8)) end
local framed = false
if n >= 3 then
  local r = redis.pcall('BITFIELD', k, 'GET', 'u24', 0)
  framed = type(r) == 'table' and r[1] == 12669777
end
if not framed then
  if kind == 'E' then return redis.pcall(unpack(ARGV, 8)) end
  local grown = n + x
  if kind == 'R' or kind == 'r' then grown = math.max(n, x) end
  -- a or r: the result may begin with the frame magic, which only the
  -- proxy can store (in a none frame), unless the value's first bytes stay
  local risk = (kind == 'a' and n < 3) or kind == 'r'
  if not risk and (grown < min or (n > 0 and n >= min)) then return redis.pcall(unpack(ARGV, 8)) end
end
local cur = redis.pcall('GETEX', k)
if type(cur) ~= 'string' then return {'` + luaMagic + `'} end
return {'` + luaMagic + `', cur}`

// GrowSHA names Grow for EVALSHA.
var GrowSHA = SHA(Grow)

// Grow modes, ARGV[1].
const (
	GrowProbe = "P"
	GrowStore = "S"
)

// GrowArgs returns how APPEND or SETRANGE args change their string: for
// APPEND kind 'A' and x the appended length; for SETRANGE kind 'R' and x
// the end of the written range, or kind 'E' for an empty value (Redis
// replies with the length and changes nothing). ok is false for any other
// command, or arguments Grow leaves to Inspect (Redis's own errors).
func GrowArgs(args [][]byte) (kind byte, off, x int64, ok bool) {
	switch {
	case len(args) == 3 && rediscmd.Is(args[0], "APPEND"):
		return 'A', 0, int64(len(args[2])), true
	case len(args) == 4 && rediscmd.Is(args[0], "SETRANGE"):
		off, ok := PlainOffset(args[2])
		if !ok {
			return 0, 0, 0, false
		}
		if len(args[3]) == 0 {
			return 'E', off, off, true
		}
		return 'R', off, off + int64(len(args[3])), true
	}
	return 0, 0, 0, false
}

// PlainOffset parses a non-negative decimal integer without sign, spaces
// or leading zeros, of at most 15 digits: anything else (Redis's own
// errors, offsets past any bulk limit) is left to Redis.
func PlainOffset(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 || (len(b) > 1 && b[0] == '0') {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// Grown returns old after APPEND (kind 'A') or SETRANGE (kind 'R', x the
// end of the written range) of args, in a new array: old is left as it is.
func Grown(kind byte, old []byte, off, x int64, args [][]byte) []byte {
	if kind == 'A' {
		return append(old[:len(old):len(old)], args[2]...)
	}
	val := make([]byte, max(int64(len(old)), x))
	copy(val, old)
	copy(val[off:], args[3])
	return val
}

// MayStartFramed reports whether APPEND or SETRANGE (kind 'A' or 'R', see
// GrowArgs) can leave a value whose first bytes are the frame magic: the
// bytes it writes at offsets 0-2 are the magic's there. For APPEND that
// depends on the stored length, which the script knows; it is checked
// there too (an APPEND to 3 bytes or more keeps the first three).
func MayStartFramed(kind byte, off int64, args [][]byte) bool {
	var data []byte
	switch kind {
	case 'A':
		data = args[2]
		for n := 0; n < len(codec.Magic); n++ { // n stored bytes before the data
			m := codec.Magic[n:]
			if len(data) > 0 && bytes.HasPrefix(data, []byte(m[:min(len(m), len(data))])) {
				return true
			}
		}
		return false
	case 'R':
		data = args[3]
	default:
		return false
	}
	if off >= int64(len(codec.Magic)) || len(data) == 0 {
		return false
	}
	for i := off; i < int64(len(codec.Magic)) && i-off < int64(len(data)); i++ {
		if data[i-off] != codec.Magic[i] {
			return false
		}
	}
	return true
}

// ScriptKind returns the kind Grow gets for kind: in lower case where the
// result may begin with the frame magic (MayStartFramed), which Grow then
// hands to the caller to store in a none frame.
func ScriptKind(kind byte, off int64, args [][]byte) byte {
	if MayStartFramed(kind, off, args) {
		return kind | 0x20
	}
	return kind
}

// GrowCall is one call of Grow.
type GrowCall struct {
	Key     []byte
	Mode    string // GrowProbe or GrowStore
	MinSize int    // the write policy's minimum size
	Kind    byte   // ScriptKind
	X       int64  // GrowArgs's x
	// GrowStore: the SHA-1 (hex) of the bytes read, "" for a missing key;
	// the new stored bytes; the new length.
	Want   string
	Enc    []byte
	NewLen int
	// Command is APPEND's or SETRANGE's words, name first.
	Command [][]byte
}

// Words appends the call's words to dst (see Words).
func (g *GrowCall) Words(dst [][]byte, byName bool) [][]byte {
	dst = Words(dst, Grow, GrowSHA, byName)
	newLen := ""
	if g.Mode == GrowStore {
		newLen = strconv.Itoa(g.NewLen)
	}
	enc := g.Enc
	if enc == nil {
		enc = []byte{}
	}
	dst = append(dst, []byte("1"), g.Key, []byte(g.Mode), []byte(strconv.Itoa(g.MinSize)),
		[]byte{g.Kind}, []byte(strconv.FormatInt(g.X, 10)), []byte(g.Want), enc, []byte(newLen))
	return append(dst, g.Command...)
}
