package proxy

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"strconv"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/resp"
)

// LREM, LPOS and LINSERT find list elements equal to an argument (LINSERT's
// pivot). Redis compares stored bytes, and the proxy sends the argument
// encoded with its current settings, so an element stored with other
// settings (another codec or level, --min-size, --min-gain, a dictionary,
// or stored raw before the proxy was put in front of Redis) holds the same
// value in different bytes, and Redis's own search misses it.
//
// The exact search runs Redis's command inside one Lua script, atomically:
// the script first scans the list and finds the elements that hold the
// searched value in another form, rewrites them to the form the proxy sent
// (LSET, the same value), runs the command, and for LPOS, which must not
// write, puts the original bytes back. Lua cannot decompress, so the script
// decides what it can from the frame header: an element whose original
// length or CRC-32C differs cannot be equal; a none frame it compares
// itself. Any other frame it cannot rule out it returns in a marker,
// without changing anything; the proxy decodes those frames, tells the
// script by their SHA-1 which ones are equal and which are not, and sends
// the script again. With checksums on (the default), only true matches are
// ever returned, so the second round trip happens only when the list holds
// the value in another form.
//
// Server.StoredListSearch turns this off: the proxy then sends the
// commands as they are, which is faster but misses values stored in
// another form.
const listSearchScript = `local mode, e0, raw, pat, hlen, crc = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6]
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

// listSearchSHA names the script for EVALSHA: Redis keeps every script EVAL
// ran, so after the first call the proxy sends 40 bytes instead of the
// script's text, and Redis need not hash it again.
var listSearchSHA = scriptSHA(listSearchScript)

// List search modes, ARGV[1] of the script.
const (
	searchProbe   = "0" // report frames to decode, run nothing
	searchRestore = "1" // run, then put rewritten elements back (LPOS)
	searchKeep    = "2" // run, leave rewritten elements in the sent form
)

// listSearchArg returns the index of the argument that info's command
// compares list elements with, or 0 if args cannot be a valid call (Redis
// then gives its own error).
func listSearchArg(info *cmdInfo, args [][]byte) int {
	switch info.name {
	case "LREM":
		if len(args) == 4 {
			return 3
		}
	case "LPOS":
		if len(args) >= 3 {
			return 2
		}
	case "LINSERT":
		if len(args) == 5 {
			return 3
		}
	}
	return 0
}

// searchScope returns how far the script must look for the command's
// matches: from the head (dir 1) or the tail (-1), until need matches of
// any form (0: all) among the first maxlen elements (0: all). The matches
// past those cannot change the reply. Arguments Redis will refuse give the
// widest scope, harmlessly.
func searchScope(info *cmdInfo, args [][]byte) (dir int, need, maxlen int64) {
	switch info.name {
	case "LINSERT":
		return 1, 1, 0
	case "LREM":
		n, err := strconv.ParseInt(string(args[2]), 10, 64)
		if err != nil {
			return 1, 0, 0
		}
		if n < 0 {
			return -1, -n, 0
		}
		return 1, n, 0
	case "LPOS":
		rank, count, hasCount := int64(1), int64(0), false
		for i := 3; i < len(args); i += 2 {
			if i+1 >= len(args) {
				return 1, 0, 0
			}
			v, err := strconv.ParseInt(string(args[i+1]), 10, 64)
			switch {
			case err != nil:
				return 1, 0, 0
			case is(args[i], "RANK"):
				rank = v
			case is(args[i], "COUNT"):
				count, hasCount = v, true
			case is(args[i], "MAXLEN"):
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

// exactListSearch reports whether the command must go through the list
// search script.
func (c *client) exactListSearch(info *cmdInfo, args [][]byte) bool {
	return info.flags&rediscmd.ListSearch != 0 && !c.s.StoredListSearch && listSearchArg(info, args) > 0
}

// listForms are the SHA-1s (hex, as redis.sha1hex writes them) of frames
// the proxy decoded: those that hold the searched value and those that do
// not.
type listForms struct{ same, differ []string }

// appendListSearch appends EVAL listSearchScript running info's command,
// or EVALSHA with byName.
func (c *client) appendListSearch(dst []byte, info *cmdInfo, args [][]byte, mode string, forms *listForms, byName bool) []byte {
	ai := listSearchArg(info, args)
	raw := args[ai]
	pol := c.s.policyFor(args[1])
	first, step, end := valueArgs(info.vals, args)
	encoded := func(i int) bool { return step != 0 && i >= first && i < end && (i-first)%step == 0 }
	dir, need, maxlen := searchScope(info, args)
	if need < 0 { // overflowed (LREM of -2^63, LPOS RANK + COUNT): all
		need = 0
	}
	n := 3 + 1 + 11 + len(forms.same) + len(forms.differ) + len(args) // EVAL script 1 key, mode e0 raw pattern hlen crc dir need maxlen ns nd
	dst = resp.AppendArray(dst, n)
	dst = appendScript(dst, listSearchScript, listSearchSHA, byName)
	dst = resp.AppendBulkString(dst, "1")
	dst = resp.AppendBulk(dst, args[1])
	dst = resp.AppendBulkString(dst, mode)
	mark := len(dst)
	// e0: the searched value as the command below sends it.
	if encoded(ai) {
		dst = c.in.rw.appendStored(dst, c.s.metrics, pol, raw)
	} else {
		dst = resp.AppendBulk(dst, raw)
	}
	e0 := dst[mark:]
	dst = resp.AppendBulk(dst, raw)
	var lenv [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(lenv[:], uint64(len(raw)))
	dst = resp.AppendBulk(dst, headerPattern(lenv[:k]))
	dst = resp.AppendBulkString(dst, strconv.Itoa(k))
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], codec.Checksum(raw))
	dst = resp.AppendBulk(dst, sum[:])
	dst = resp.AppendBulkString(dst, strconv.Itoa(dir))
	dst = resp.AppendBulkString(dst, strconv.FormatInt(need, 10))
	dst = resp.AppendBulkString(dst, strconv.FormatInt(maxlen, 10))
	dst = resp.AppendBulkString(dst, strconv.Itoa(len(forms.same)))
	for _, h := range forms.same {
		dst = resp.AppendBulkString(dst, h)
	}
	dst = resp.AppendBulkString(dst, strconv.Itoa(len(forms.differ)))
	for _, h := range forms.differ {
		dst = resp.AppendBulkString(dst, h)
	}
	for i, a := range args {
		switch {
		case i == ai:
			dst = append(dst, e0...) // the same bytes the script compares
		case encoded(i):
			dst = c.in.rw.appendStored(dst, c.s.metrics, pol, a)
		default:
			dst = resp.AppendBulk(dst, a)
		}
	}
	if cap(c.in.rw.scratch) > maxPooledReply {
		c.in.rw.scratch = nil
	}
	return dst
}

// headerPattern returns the Lua pattern that matches the start of a
// version 1 frame whose original length is encoded as lenv: the magic, the
// version, any codec, flags 0-3, then lenv. One string.find per element
// rules out most of a list.
func headerPattern(lenv []byte) []byte {
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

// classify decodes the frames of a marker and records in forms whether
// each holds value. A frame that cannot be decoded is an error naming key.
func (c *client) classify(forms *listForms, key, value []byte, v resp.Value) error {
	it := v.Elements()
	it.Next() // the magic
	for {
		f, ok := it.Next()
		if !ok {
			return nil
		}
		d, err := c.s.decodeFrame(f.Str)
		if err != nil {
			return &DecodeError{Key: key, Err: err}
		}
		sum := sha1.Sum(f.Str)
		h := hex.EncodeToString(sum[:])
		if bytes.Equal(d, value) {
			forms.same = append(forms.same, h)
		} else {
			forms.differ = append(forms.differ, h)
		}
	}
}

// searchMode is how the script runs info's command.
func searchMode(info *cmdInfo) string {
	if info.name == "LPOS" {
		return searchRestore
	}
	return searchKeep
}

// listSearch runs LREM, LPOS or LINSERT through the list search script,
// synchronously on the client's connection, and returns a finished call
// with Redis's reply.
func (c *client) listSearch(info *cmdInfo, args [][]byte) (out *call) {
	if c.s.RequireAuth && len(args) > 1 {
		switch plan, up := c.scriptRoute(args, listSearchSHA, args[1:2]); plan {
		case aclDirect:
			return c.sendAsSent(info.name, args)
		case aclShared:
			c.in.scriptUp = up
			defer func() { c.in.scriptUp = nil }()
		}
	}
	var forms listForms
	value := args[listSearchArg(info, args)]
	byName := true
	// Pushes that came while a script ran go after the reply (see
	// roundtripScript).
	var pinSeq uint64
	defer func() { out.pinSeq = max(out.pinSeq, pinSeq) }()
	for attempt := 0; attempt < maxInspectRetries; attempt++ {
		r, ok := c.scriptCall(info.name, c.roundtripScript, &byName, func(byName bool) []byte {
			return c.appendListSearch(nil, info, args, searchMode(info), &forms, byName)
		})
		pinSeq = max(pinSeq, r.pinSeq)
		if !ok {
			return r
		}
		v, _, err := resp.ReadValue(r.reply)
		if err != nil || !isMarker(v) {
			r.cmd, r.local = info.name, true
			r.notify = c.q.ready
			r.finish()
			return r
		}
		err = c.classify(&forms, args[1], value, v)
		r.release()
		if err != nil {
			de := err.(*DecodeError)
			de.Cmd = info.name
			return c.localCall(info.name, resp.AppendError(nil, "ERR "+de.Error()))
		}
	}
	return c.localCall(info.name, resp.AppendError(nil, "ERR squeeze: "+info.name+": the list kept changing under concurrent writes; try again"))
}

// appendQueuedListSearch appends the script for a command queued in MULTI
// (or sent with replies off): the frames the list holds now are decoded
// first, on a shared connection, which writes nothing and so does not
// disturb WATCH. A frame that appears by EXEC and must be decoded turns
// the command's reply into an error (shapeInspect).
func (c *client) appendQueuedListSearch(dst []byte, info *cmdInfo, args [][]byte) []byte {
	var forms listForms
	value := args[listSearchArg(info, args)]
	if up, err := c.s.pool.getDB(context.Background(), c.sess.db, int(c.id)); err == nil {
		for attempt := 0; attempt < maxInspectRetries; attempt++ {
			r := c.roundtripShared(up, c.appendListSearch(nil, info, args, searchProbe, &forms, false))
			v, _, err := resp.ReadValue(r.reply)
			if r.err != nil || err != nil || !isMarker(v) {
				r.release()
				break
			}
			err = c.classify(&forms, args[1], value, v)
			r.release()
			if err != nil {
				break // EXEC will report it
			}
		}
	}
	// By its text: a NOSCRIPT error at EXEC could not be retried.
	return c.appendListSearch(dst, info, args, searchMode(info), &forms, false)
}
