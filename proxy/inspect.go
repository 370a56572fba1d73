package proxy

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strconv"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/luaguard"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/resp"
)

// Commands that look inside stored bytes (STRLEN, GETRANGE, APPEND, SETBIT,
// INCRBYFLOAT, LCS, HSTRLEN ...) run inside one small Lua script, which makes
// them atomic with respect to other clients:
//
// The script gets the keys the command reads and, for compressed values, a
// list of candidates: a frame and its decoded bytes. For every key that
// holds a frame it needs a candidate with exactly that frame; if one is
// missing it changes nothing and returns a marker with the frames it found
// (only their first 64 bytes for a head-only probe). Otherwise it stores the
// decoded bytes, runs the command, and then puts the frames back for
// read-only commands and for a command that failed (an error reply: Redis
// changed nothing, so its destination still holds its own bytes, which
// must not be wrapped). A command that compares the value with an argument
// and then may replace or delete it (SET ... IFEQ and its kin, DELEX with a
// condition, DELIFEQ) leaves what it wrote, a frame the proxy compressed,
// and the frame is put back where the key still holds the decoded bytes.
// Other write commands that succeed (APPEND, SETRANGE,
// SETBIT, BITFIELD, BITOP, INCRBYFLOAT, HINCRBYFLOAT) leave the value
// uncompressed, wrapped in a none frame only if it begins with the magic;
// the next SET compresses it. Strings are put back with SET KEEPTTL; a hash
// field with HSET, which would clear the field's own expiry (Redis 7.4's
// HEXPIRE, Redis 8's HSETEX), so the script reads HPEXPIRETIME first and
// sets it again (servers without field expiry refuse the read, and nothing
// more is done).
//
// Redis's client-side caching tracks, for the client that runs a script,
// every key a read-only command inside the script reads. A write command
// (APPEND, SETBIT, SET ... IFEQ ...) must not start tracking its key where
// Redis would not, so for those the script reads with commands Redis counts
// as writes: BITFIELD GET u24 0 for the magic (12669777 is 0xC15351) and
// GETEX without options for the value; read-only commands read with
// GETRANGE and GET, as Redis tracks their keys.
//
// A none frame without checksum or dictionary id, the form wrap writes, the
// script reads itself (plain): its bytes follow the header. So a command
// queued in MULTI after one that re-wrapped a value that begins with the
// magic still finds it, although the proxy could not know those bytes when
// it queued the command.
//
// Outside MULTI the proxy first sends the script without candidates: with
// plain values, the common case, that is one round trip. On a marker it
// decodes the frames and sends them as candidates (STRLEN and HSTRLEN answer
// by decoding the value alone), retrying if another client changed a key
// in between. Inside MULTI the proxy finds the candidates before queueing:
// the frames the keys hold now (read on a shared connection, which writes
// nothing and so does not disturb WATCH), the values written earlier in the
// same transaction (SET, MSET, HSET ...), and those of the source of a COPY
// or RENAME queued earlier. Only if yet another value appears by EXEC does
// that one reply become an error.
const inspectScript = `local restore, compare, field, written, head, m = ARGV[1] == '1' or ARGV[1] == '5', ARGV[1] == '2', ARGV[2], ARGV[3], ARGV[4] == '1', tonumber(ARGV[5])
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

// magic is codec.Magic, the frame magic, as bytes.
var magic = []byte(codec.Magic)

// luaMagic is the frame magic, codec.Magic (the bytes 0xC1 'S' 'Q'), as
// the proxy's Lua scripts write it inside a quoted Lua string: 0xC1 in
// Lua's decimal escape, since the scripts are Go raw strings (no escapes)
// and Go source cannot hold that byte (it is not UTF-8). Every script
// spells the magic, and the markers that begin with it ("\xC1SQB",
// "\xC1SQW"), with it by string concatenation; TestLuaMagic checks it
// against codec.Magic as Redis's Lua reads it.
const luaMagic = luaguard.Magic

// isMarker reports whether v is the script's marker array.
func isMarker(v resp.Value) bool {
	if v.Type != resp.Array || v.N < 2 {
		return false
	}
	it := v.Elements()
	e, _ := it.Next()
	return e.Type == resp.BulkString && bytes.Equal(e.Str, magic)
}

// inspectKeyArgs returns the indexes of the keys an inspect command reads.
func inspectKeyArgs(info *cmdInfo, args [][]byte) (first, end int) {
	switch info.keys {
	case rediscmd.KeysTwo:
		return 1, min(3, len(args))
	case rediscmd.KeysFrom3:
		return min(3, len(args)), len(args)
	default:
		return 1, min(2, len(args))
	}
}

// writtenKey returns the string key a write command stores into, or nil.
func writtenKey(info *cmdInfo, args [][]byte) []byte {
	if info.readOnly || info.compare || info.keys == rediscmd.KeyHash {
		return nil
	}
	if info.keys == rediscmd.KeysFrom3 {
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

// candidate is a frame and its decoded bytes, for key.
type candidate struct{ key, frame, dec []byte }

// inspectSHA names inspectScript for EVALSHA (see listSearchSHA).
var inspectSHA = scriptSHA(inspectScript)

// appendScript appends the first two arguments of a script call: EVALSHA
// and the SHA-1 with byName, else EVAL and the script's text.
func appendScript(dst []byte, script, sha string, byName bool) []byte {
	if byName {
		dst = resp.AppendBulkString(dst, "EVALSHA")
		return resp.AppendBulkString(dst, sha)
	}
	dst = resp.AppendBulkString(dst, "EVAL")
	return resp.AppendBulkString(dst, script)
}

// scriptSHA returns the SHA-1 of a script, in hex, as EVALSHA takes it.
func scriptSHA(script string) string {
	sum := sha1.Sum([]byte(script))
	return hex.EncodeToString(sum[:])
}

// appendInspect appends EVAL inspectScript for the command, or EVALSHA
// with byName. With withCmd false the script only probes: it reports
// frames and changes nothing. recompressMin >= 0 asks a write command on
// compressed values to hand back a result of at least that many bytes
// (see recompress); -1 where the reply cannot wait for that (MULTI).
func appendInspect(dst []byte, info *cmdInfo, args [][]byte, cands []candidate, withCmd, head, byName bool, recompressMin int) []byte {
	first, end := inspectKeyArgs(info, args)
	nkeys := end - first
	n := 3 + nkeys + 6 + 3*len(cands)
	if withCmd {
		n += len(args)
	}
	dst = resp.AppendArray(dst, n)
	dst = appendScript(dst, inspectScript, inspectSHA, byName)
	dst = resp.AppendBulkString(dst, strconv.Itoa(nkeys))
	for _, k := range args[first:end] {
		dst = resp.AppendBulk(dst, k)
	}
	switch { // the script's mode
	case info.compare:
		dst = resp.AppendBulkString(dst, "2")
	case info.exact && info.readOnly:
		dst = resp.AppendBulkString(dst, "5")
	case info.exact:
		dst = resp.AppendBulkString(dst, "4")
	default:
		dst = appendFlag(dst, info.readOnly)
	}
	if info.keys == rediscmd.KeyHash && len(args) > 2 {
		dst = resp.AppendBulk(dst, args[2])
	} else {
		dst = resp.AppendBulkString(dst, "")
	}
	dst = resp.AppendBulk(dst, writtenKey(info, args))
	dst = appendFlag(dst, head)
	dst = resp.AppendBulkString(dst, strconv.Itoa(len(cands)))
	dst = resp.AppendBulkString(dst, strconv.Itoa(recompressMin))
	for _, c := range cands {
		dst = resp.AppendBulk(dst, c.key)
		dst = resp.AppendBulk(dst, c.frame)
		dst = resp.AppendBulk(dst, c.dec)
	}
	if withCmd {
		for _, a := range args {
			dst = resp.AppendBulk(dst, a)
		}
	}
	return dst
}

func appendFlag(dst []byte, on bool) []byte {
	if on {
		return resp.AppendBulkString(dst, "1")
	}
	return resp.AppendBulkString(dst, "0")
}

// maxInspectRetries bounds the retries when other clients keep changing
// the keys between two round trips.
const maxInspectRetries = 16

// markerFrames returns the key, frame pairs of a marker.
func markerFrames(v resp.Value) (keys, frames [][]byte) {
	it := v.Elements()
	it.Next()
	for {
		k, ok := it.Next()
		if !ok {
			return keys, frames
		}
		f, _ := it.Next()
		keys = append(keys, k.Str)
		frames = append(frames, f.Str)
	}
}

// decodeCandidates decodes frames into candidates; a failure is returned as
// a DecodeError naming the key.
func (c *client) decodeCandidates(dst []candidate, keys, frames [][]byte) ([]candidate, error) {
	for i, f := range frames {
		d, err := c.s.decodeFrame(f)
		if err != nil {
			return dst, &DecodeError{Key: keys[i], Err: err}
		}
		dst = append(dst, candidate{key: append([]byte(nil), keys[i]...), frame: append([]byte(nil), f...), dec: d})
	}
	return dst, nil
}

// decodeFrame decodes a stored frame a script returned, resolving the
// dictionary it names; a failure is counted.
func (s *Server) decodeFrame(f []byte) ([]byte, error) {
	var d []byte
	var err error
	if h, herr := codec.ParseHeader(f); herr == nil && h.HasDict {
		d, err = s.decodeValue(nil, f, &h)
	} else {
		d, err = s.decoder().AppendDecode(nil, f)
	}
	if err != nil {
		s.metrics.decodeError()
	}
	return d, err
}

// inspect runs a command that looks inside stored bytes, synchronously on
// the client's connection, and returns a finished call with its reply.
func (c *client) inspect(info *cmdInfo, args [][]byte) (out *call) {
	if c.s.RequireAuth {
		first, end := inspectKeyArgs(info, args)
		sha := inspectSHA
		if info == appendCmd || info == setrangeCmd {
			sha = growSHA
		}
		switch plan, up := c.scriptRoute(args, sha, args[first:end]); plan {
		case aclDirect:
			return c.sendAsSent(info.name, args)
		case aclShared:
			c.in.scriptUp = up
			defer func() { c.in.scriptUp = nil }()
		}
	}
	if info == appendCmd || info == setrangeCmd {
		if g := c.grow(info, args); g != nil {
			return g
		}
	}
	if ex, sargs, ok := exactBitfield(info, args); ok {
		info, args = ex, sargs
	}
	errCall := func(msg string) *call {
		return c.localCall(info.name, resp.AppendError(nil, "ERR squeeze: "+info.name+": "+msg))
	}
	var cands []candidate
	byName := true
	args = c.storedArgs(info, args)
	rmin := -1
	if wk := writtenKey(info, args); wk != nil && !info.compare {
		if pol := c.s.policyFor(wk); pol.enc != nil && pol.enc.Algorithm().ID != codec.IDNone {
			rmin = pol.enc.MinSize()
		}
	}
	// Pushes that came while a script ran go after the reply (see
	// roundtripScript): every reply made here notes the last script's
	// place among the private connection's replies.
	var pinSeq uint64
	defer func() { out.pinSeq = max(out.pinSeq, pinSeq) }()
	var keyLock keyLockHold
	defer keyLock.release()
	for attempt := 0; attempt < maxInspectRetries; attempt++ {
		if attempt > 0 {
			// Another writer changed a key: from now on this proxy's
			// writers of it wait for each other (keylock.go).
			keyLock.take(&c.s.keyLocks, writtenKey(info, args))
		}
		r, ok := c.scriptCall(info.name, c.roundtripScript, &byName, func(byName bool) []byte {
			return appendInspect(nil, info, args, cands, true, false, byName, rmin)
		})
		pinSeq = max(pinSeq, r.pinSeq)
		if !ok {
			return r
		}
		v, _, err := resp.ReadValue(r.reply)
		if err == nil && isRecompress(v) {
			r.reply = c.recompress(info.name, writtenKey(info, args), v, r.reply[:0:0])
			v, _, err = resp.ReadValue(r.reply)
		}
		if err != nil || !isMarker(v) {
			if info.exact {
				r.reply = exactBitfieldReply(r.reply, c.sess.proto)
			}
			r.reply = fixResp3(r.reply, c.sess.proto)
			r.cmd, r.local = info.name, true
			r.notify = c.q.ready
			r.finish()
			return r
		}
		keys, frames := markerFrames(v)
		if info.headOnly {
			// STRLEN and HSTRLEN: the length of the value, which GET would
			// return. The header names it, but only decoding (with its
			// checksum) shows that the frame holds it: a corrupt frame must
			// be an error here as it is for GET, not its claimed length.
			key := bytes.Clone(keys[0])
			d, err := c.s.decodeFrame(frames[0])
			r.release()
			if err != nil {
				return c.localCall(info.name, resp.AppendError(nil, "ERR "+(&DecodeError{Cmd: info.name, Key: key, Err: err}).Error()))
			}
			return c.localCall(info.name, resp.AppendInt(nil, int64(len(d))))
		}
		cands, err = c.decodeCandidates(cands[:0], keys, frames)
		r.release()
		if err != nil {
			de := err.(*DecodeError)
			de.Cmd = info.name
			return c.localCall(info.name, resp.AppendError(nil, "ERR "+de.Error()))
		}
	}
	return errCall("the keys kept changing under concurrent writes; try again")
}

// appendQueuedInspect appends the script that runs an inspect command queued
// in MULTI, with candidates for the frames its keys may hold at EXEC.
func (c *client) appendQueuedInspect(dst []byte, info *cmdInfo, args [][]byte) []byte {
	if ex, sargs, ok := exactBitfield(info, args); ok {
		info, args = ex, sargs
	}
	first, end := inspectKeyArgs(info, args)
	var cands []candidate
	// Values SET earlier in this transaction, under the key or under a key
	// a queued COPY or RENAME brings to it.
	for _, k := range args[first:end] {
		for _, src := range c.txSources(k) {
			// A candidate applies only where the key holds its very frame,
			// so a hash field's value noted under the hash's key cannot
			// stand for another field or for a string.
			for _, w := range c.sess.txSets {
				if bytes.Equal(w.key, src) {
					cands = append(cands, candidate{key: k, frame: w.frame, dec: w.dec})
				}
			}
			if !bytes.Equal(src, k) {
				cands = c.probeFrame(cands, info, args, k, src)
			}
		}
	}
	// Frames the keys hold now, read on a shared connection.
	if up, err := c.s.pool.getDB(context.Background(), c.sess.db, int(c.id)); err == nil {
		r := c.roundtripShared(up, appendInspect(nil, info, args, nil, false, false, false, -1))
		if r.err == nil {
			if v, _, err := resp.ReadValue(r.reply); err == nil && isMarker(v) {
				keys, frames := markerFrames(v)
				cands, _ = c.decodeCandidates(cands, keys, frames)
			}
		}
		r.release()
	}
	// By its text: a NOSCRIPT error at EXEC could not be retried.
	return appendInspect(dst, info, c.storedArgs(info, args), cands, true, false, false, -1)
}

// storedArgs returns args with the values the command writes (SET ...
// IFEQ's) replaced by what the write policy of the key stores, or args
// itself when it writes none: the script runs the command as it gets it.
func (c *client) storedArgs(info *cmdInfo, args [][]byte) [][]byte {
	if info.vals == rediscmd.ValuesNone || len(args) < 2 {
		return args
	}
	first, step, end := valueArgs(info.vals, args)
	if step == 0 || first >= end {
		return args
	}
	out := slices.Clone(args)
	pol := c.s.policyFor(args[1])
	for i := first; i < end; i += step {
		if enc, o := pol.encode(c.s.metrics, nil, args[i]); o != codec.StoredRaw {
			out[i] = enc
		}
	}
	return out
}

// txSources returns key and the keys whose values COPY or RENAME commands
// queued in the open transaction may bring to it (transitively, at most
// 16).
func (c *client) txSources(key []byte) [][]byte {
	out := [][]byte{key}
	for i := 0; i < len(out) && len(out) < 16; i++ {
		for _, cp := range c.sess.txCopies {
			if bytes.Equal(cp[0], out[i]) && !slices.ContainsFunc(out, func(k []byte) bool { return bytes.Equal(k, cp[1]) }) {
				out = append(out, cp[1])
			}
		}
	}
	return out
}

// probeFrame adds to cands, as candidates for key, the frame src holds now
// (the string, or for a hash command the field), read on a shared
// connection: a COPY or RENAME queued earlier will have put it under key
// by the time the command runs.
func (c *client) probeFrame(cands []candidate, info *cmdInfo, args [][]byte, key, src []byte) []candidate {
	probe, pargs := commandTable["strlen"], [][]byte{[]byte("STRLEN"), src}
	if info.keys == rediscmd.KeyHash {
		if len(args) < 3 {
			return cands
		}
		probe, pargs = commandTable["hstrlen"], [][]byte{[]byte("HSTRLEN"), src, args[2]}
	}
	up, err := c.s.pool.getDB(context.Background(), c.sess.db, int(c.id))
	if err != nil {
		return cands
	}
	r := c.roundtripShared(up, appendInspect(nil, probe, pargs, nil, false, false, false, -1))
	defer r.release()
	if r.err != nil {
		return cands
	}
	v, _, err := resp.ReadValue(r.reply)
	if err != nil || !isMarker(v) {
		return cands
	}
	_, frames := markerFrames(v)
	for _, f := range frames {
		if d, err := c.s.decodeFrame(f); err == nil {
			cands = append(cands, candidate{key: bytes.Clone(key), frame: bytes.Clone(f), dec: d})
		}
	}
	return cands
}

// noteTxSet records a value a queued command will store under key (a
// string's, or a hash field's under its hash's key), so that a later
// inspect command in the same transaction can see through it.
func (c *client) noteTxSet(key, value []byte) {
	frame := c.s.policyFor(key).enc.AppendEncode(nil, value)
	if !codec.IsFramed(frame) {
		return
	}
	c.sess.txSets = append(c.sess.txSets, candidate{key: append([]byte(nil), key...), frame: frame, dec: append([]byte(nil), value...)})
}

// roundtripShared is roundtripOn for the client's reader, on the shared
// connection up: ahead of the order barrier the client holds for the
// command it handles (order.go), which would otherwise hold the request
// until that very command is sent.
func (c *client) roundtripShared(up *upConn, req []byte) *call {
	h := c.pinned.held
	if h == nil {
		return roundtripOn(up, req)
	}
	if !h.awaited {
		c.s.pool.awaitOrder(h)
	}
	cl := newCall()
	up.sendAhead(req, []*call{cl})
	<-cl.done
	return cl
}

// roundtripOn sends one request on up and waits for its reply.
func roundtripOn(up *upConn, req []byte) *call {
	cl := newCall()
	up.send(req, []*call{cl})
	<-cl.done
	return cl
}

// fixResp3 restores the RESP3 type of a reply that went through a Lua
// script, which speaks RESP2: LCS ... IDX replies with a map in RESP3.
func fixResp3(reply []byte, proto int) []byte {
	const lcsIdx = "*4\r\n$7\r\nmatches\r\n"
	if proto != 3 || !bytes.HasPrefix(reply, []byte(lcsIdx)) {
		return reply
	}
	copy(reply, "%2\r\n")
	return reply
}
