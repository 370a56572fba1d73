package valuescript

import (
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"strconv"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
)

// ListSearch runs LREM, LPOS or LINSERT so that they find the list
// elements that hold the searched value in any stored form (raw, or a
// frame of another codec, level or dictionary), atomically. KEYS[1] is the
// list; ARGV (ListSearchCall):
//
//	1   the mode: SearchProbe, SearchRestore or SearchKeep (SearchMode)
//	2   e0: the searched value as the command below sends it
//	3   the value itself
//	4   the Lua pattern of a frame header of its length (HeaderPattern)
//	5   the length of that varint
//	6   its CRC-32C, little endian
//	7-9 the search scope: direction, matches needed, elements looked at
//	    (SearchScope)
//	10  n, then n SHA-1s of frames that hold the value
//	..  n, then n SHA-1s of frames that do not
//	..  the command, name first, with e0 in the searched value's place
//
// It scans the scope, rewrites the elements holding the value in another
// form to e0 (LSET), runs the command and, for SearchRestore, puts the
// elements back. A frame it cannot rule out from its header or compare
// itself (a none frame) and that neither list names makes it change
// nothing and reply Marker followed by those frames: the caller decodes
// them, notes each in Forms, and calls again.
const ListSearch = `local mode, e0, raw, pat, hlen, crc = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6]
local want = #raw
local dir, need, maxlen = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local same, differ, ns = {}, {}, tonumber(ARGV[10])
for i = 11, 10 + ns do same[ARGV[i]] = true end
local p = 11 + ns
local nd = tonumber(ARGV[p])
for i = p + 1, p + nd do differ[ARGV[i]] = true end
local cmd, key = p + nd + 1, KEYS[1]
local function uvarint(v, i)
  local n, scale = 0, 1
  for _ = 1, 10 do
    local b = string.byte(v, i)
    if b == nil then return nil, i end
    n, i = n + (b % 128) * scale, i + 1
    if b < 128 then return n, i end
    scale = scale * 128
  end
  return nil, i
end
local fix, marker, asked, found = {}, nil, {}, 0
local n = redis.pcall('LLEN', key)
if type(n) == 'number' then
  if maxlen > 0 and maxlen < n then n = maxlen end
  local pos = 0
  while pos < n and (need == 0 or found < need) do
    local last = math.min(pos + 511, n - 1)
    local chunk
    if dir == 1 then chunk = redis.call('LRANGE', key, pos, last) else chunk = redis.call('LRANGE', key, -last - 1, -pos - 1) end
    local cnt = #chunk
    for j = 1, cnt do
      local v, idx
      if dir == 1 then v, idx = chunk[j], pos + j - 1 else v, idx = chunk[cnt - j + 1], -pos - j end
      local match = false
      if v == e0 then
        found = found + 1
      elseif string.find(v, pat) then
        local flags, at = string.byte(v, 6), 7 + hlen
        local len = want
        if flags >= 2 then
          local d
          d, at = uvarint(v, at)
          if d == nil then len = nil end
        end
        if len == want and flags % 2 == 1 then
          if string.sub(v, at, at + 3) ~= crc then len = nil end
          at = at + 4
        end
        if len == want then
          if string.byte(v, 5) == 0 then
            match = #v - at + 1 == want and string.sub(v, at) == raw
          else
            local h = redis.sha1hex(v)
            if same[h] then
              match = true
            elseif not differ[h] and not asked[h] then
              asked[h] = true
              marker = marker or {'` + luaMagic + `'}
              marker[#marker + 1] = v
            end
          end
        end
      elseif v == raw then
        match = true
      end
      if match then
        fix[#fix + 1] = {idx, v}
        found = found + 1
      end
      if need > 0 and found >= need then break end
    end
    pos = pos + 512
  end
end
if marker then return marker end
if mode == '0' then return 'OK' end
for _, f in ipairs(fix) do redis.call('LSET', key, f[1], e0) end
local r = redis.pcall(unpack(ARGV, cmd))
if mode == '1' then
  for _, f in ipairs(fix) do redis.call('LSET', key, f[1], f[2]) end
end
return r`

// ListSearchSHA names ListSearch for EVALSHA.
var ListSearchSHA = SHA(ListSearch)

// List search modes, ARGV[1] of ListSearch.
const (
	SearchProbe   = "0" // report frames to decode, run nothing
	SearchRestore = "1" // run, then put rewritten elements back (LPOS)
	SearchKeep    = "2" // run, leave rewritten elements in the sent form
)

// SearchMode returns how ListSearch runs the command name: LPOS, which
// must not write, restores.
func SearchMode(name []byte) string {
	if rediscmd.Is(name, "LPOS") {
		return SearchRestore
	}
	return SearchKeep
}

// SearchArg returns the index of the argument that the command args
// compares list elements with, or 0 if args cannot be a valid call (Redis
// then gives its own error).
func SearchArg(args [][]byte) int {
	if len(args) == 0 {
		return 0
	}
	switch {
	case rediscmd.Is(args[0], "LREM"):
		if len(args) == 4 {
			return 3
		}
	case rediscmd.Is(args[0], "LPOS"):
		if len(args) >= 3 {
			return 2
		}
	case rediscmd.Is(args[0], "LINSERT"):
		if len(args) == 5 {
			return 3
		}
	}
	return 0
}

// SearchScope returns how far ListSearch must look for the command's
// matches: from the head (dir 1) or the tail (-1), until need matches of
// any form (0: all) among the first maxlen elements (0: all). The matches
// past those cannot change the reply. Arguments Redis will refuse give the
// widest scope, harmlessly.
func SearchScope(args [][]byte) (dir int, need, maxlen int64) {
	switch {
	case rediscmd.Is(args[0], "LINSERT"):
		return 1, 1, 0
	case rediscmd.Is(args[0], "LREM"):
		n, err := strconv.ParseInt(string(args[2]), 10, 64)
		if err != nil {
			return 1, 0, 0
		}
		if n < 0 {
			return -1, -n, 0
		}
		return 1, n, 0
	case rediscmd.Is(args[0], "LPOS"):
		rank, count, hasCount := int64(1), int64(0), false
		for i := 3; i < len(args); i += 2 {
			if i+1 >= len(args) {
				return 1, 0, 0
			}
			v, err := strconv.ParseInt(string(args[i+1]), 10, 64)
			switch {
			case err != nil:
				return 1, 0, 0
			case rediscmd.Is(args[i], "RANK"):
				rank = v
			case rediscmd.Is(args[i], "COUNT"):
				count, hasCount = v, true
			case rediscmd.Is(args[i], "MAXLEN"):
				maxlen = v
			default:
				return 1, 0, 0
			}
		}
		if rank == 0 || rank < -(1<<62) || count < 0 || maxlen < 0 {
			return 1, 0, 0 // Redis refuses these
		}
		dir = 1
		if rank < 0 {
			dir, rank = -1, -rank
		}
		switch {
		case !hasCount:
			need = rank
		case count == 0:
			need = 0
		default:
			need = rank + count - 1
		}
		return dir, need, maxlen
	}
	return 1, 0, 0
}

// HeaderPattern returns the Lua pattern that matches the start of a
// version 1 frame whose original length is encoded as lenv: the magic, the
// version, any codec, flags 0-3, then lenv. One string.find per element
// rules out most of a list.
func HeaderPattern(lenv []byte) []byte {
	p := []byte("^\xC1SQ\x01.[%z\x01-\x03]")
	for _, b := range lenv {
		switch {
		case b == 0:
			p = append(p, "%z"...)
		case b >= '0' && b <= '9', b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z':
			p = append(p, b)
		default:
			p = append(p, '%', b) // any other character, escaped
		}
	}
	return p
}

// Forms are the SHA-1s (hex, as redis.sha1hex writes them) of frames the
// caller decoded: those that hold the searched value and those that do
// not.
type Forms struct{ Same, Differ []string }

// Note records whether frame holds the searched value.
func (f *Forms) Note(frame []byte, same bool) {
	sum := sha1.Sum(frame)
	h := hex.EncodeToString(sum[:])
	if same {
		f.Same = append(f.Same, h)
	} else {
		f.Differ = append(f.Differ, h)
	}
}

// ListSearchCall is one call of ListSearch.
type ListSearchCall struct {
	Key  []byte
	Mode string // SearchMode, or SearchProbe
	// E0 is the searched value as Command carries it (its stored form
	// under the caller's write policy); Raw the value itself.
	E0, Raw []byte
	Forms   *Forms // nil: none yet
	// Command is the command's words, name first, E0 in the searched
	// value's place (SearchArg) and any other value in its stored form.
	Command [][]byte
}

// Words appends the call's words to dst (see Words).
func (l *ListSearchCall) Words(dst [][]byte, byName bool) [][]byte {
	dst = Words(dst, ListSearch, ListSearchSHA, byName)
	dst = append(dst, []byte("1"), l.Key, []byte(l.Mode), l.E0)
	dst = l.Params(dst)
	return append(dst, l.Command...)
}

// Params appends ARGV 3 to the forms: the value, its header pattern, the
// scope of Command (SearchScope) and the forms, without the command.
func (l *ListSearchCall) Params(dst [][]byte) [][]byte {
	dir, need, maxlen := SearchScope(l.Command)
	if need < 0 { // overflowed (LREM of -2^63, LPOS RANK + COUNT): all
		need = 0
	}
	var lenv [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(lenv[:], uint64(len(l.Raw)))
	sum := binary.LittleEndian.AppendUint32(nil, codec.Checksum(l.Raw))
	raw := l.Raw
	if raw == nil {
		raw = []byte{}
	}
	dst = append(dst, raw, HeaderPattern(lenv[:k]), []byte(strconv.Itoa(k)), sum,
		[]byte(strconv.Itoa(dir)), []byte(strconv.FormatInt(need, 10)), []byte(strconv.FormatInt(maxlen, 10)))
	var f Forms
	if l.Forms != nil {
		f = *l.Forms
	}
	dst = append(dst, []byte(strconv.Itoa(len(f.Same))))
	for _, h := range f.Same {
		dst = append(dst, []byte(h))
	}
	dst = append(dst, []byte(strconv.Itoa(len(f.Differ))))
	for _, h := range f.Differ {
		dst = append(dst, []byte(h))
	}
	return dst
}
