package proxy

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"strconv"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/resp"
)

// APPEND and SETRANGE grow strings. Redis runs them on stored bytes, so on
// a compressed value they would append to the frame; the inspect script
// makes them exact but leaves the result raw, and an append-heavy key (a
// log, a growing document) would lose its savings on its first APPEND.
// So outside MULTI the proxy computes their result itself and stores it
// under the write policy, in two round trips:
//
//  1. growScript probes the key without making Redis track it (it reads
//     with commands Redis counts as writes, see inspectScript). Where the
//     policy has nothing to decide, it runs Redis's own command and that is
//     the reply: a raw value that stays under the policy's minimum size, a
//     raw value at or over it (the policy left it raw: it did not compress,
//     or was stored before squeeze), a key of another type (Redis's
//     WRONGTYPE). Otherwise, for a frame, or for a missing, empty or short
//     value that the command takes to the minimum size or past it, it
//     returns the stored bytes.
//  2. The proxy decodes them, applies the command, encodes the result with
//     the key's policy, and sends growScript the new stored bytes with the
//     SHA-1 of those it read: the script stores them (SET KEEPTTL) only if
//     the key still holds what the proxy read, and replies with the new
//     length, the command's own reply. If another client changed the key
//     in between, the proxy starts again (at most maxInspectRetries times).
//
// Whatever is unusual (a SETRANGE with an empty value or an offset that is
// not a plain integer, a result over the bulk length limit) goes to the
// inspect script, which runs Redis's own command and gives its own reply or
// error.
const growScript = `local k, min, kind, x = KEYS[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
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

var growSHA = scriptSHA(growScript)

// growArgs returns how a command of the grow path changes its string: for
// APPEND kind 'A' and x the appended length; for SETRANGE kind 'R' and x
// the end of the written range, or kind 'E' for an empty value (Redis
// replies with the length and changes nothing). ok is false where the
// command goes to the inspect script instead.
func growArgs(info *cmdInfo, args [][]byte) (kind byte, off, x int64, ok bool) {
	switch {
	case info == appendCmd && len(args) == 3:
		return 'A', 0, int64(len(args[2])), true
	case info == setrangeCmd && len(args) == 4:
		off, ok := plainOffset(args[2])
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

// plainOffset parses a non-negative decimal integer without sign, spaces
// or leading zeros, of at most 15 digits: anything else (Redis's own errors,
// offsets past any bulk limit) is left to Redis.
func plainOffset(b []byte) (int64, bool) {
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

// maxGrowRetries bounds the compare-and-set rounds of one APPEND or
// SETRANGE while other clients keep changing its key; past it the command
// runs in the inspect script, which is atomic but leaves the result raw.
const maxGrowRetries = 64

// grow runs APPEND or SETRANGE on the grow path (see growScript), or returns
// nil for the inspect script to run it. Command reader only.
func (c *client) grow(info *cmdInfo, args [][]byte) *call {
	g := c.newGrowOp(info, args)
	if g == nil {
		return nil
	}
	out := g.run()
	if out != nil {
		out.pinSeq = max(out.pinSeq, g.pinSeq)
	}
	return out
}

// growOp is one APPEND or SETRANGE on the grow path: what its rounds with
// growScript share. The command reader's, for the command it handles.
type growOp struct {
	c    *client
	info *cmdInfo
	args [][]byte
	key  []byte
	pol  *policy
	// kind, off and x: how the command changes its string (growArgs).
	kind   byte
	off, x int64
	// What every request carries: the policy's minimum size, the kind as
	// the script sees it (lower case for a result that may begin with the
	// frame magic, see mayStartFramed), and x.
	minSize    string
	scriptKind byte
	xs         string
	byName     bool   // the script goes by its SHA-1 (scriptCall)
	pinSeq     uint64 // the latest of the round trips' places (roundtripScript)
}

// newGrowOp returns the grow path's operation for the command, or nil
// where the command goes to the inspect script: not one the grow path
// takes (growArgs), a key whose values are not compressed, or a result
// over the bulk length limit.
func (c *client) newGrowOp(info *cmdInfo, args [][]byte) *growOp {
	kind, off, x, ok := growArgs(info, args)
	if !ok {
		return nil
	}
	key := args[1]
	pol := c.s.policyFor(key)
	if pol.enc == nil || pol.enc.Algorithm().ID == codec.IDNone {
		return nil // nothing is compressed: Redis's command as it is
	}
	if x > c.s.maxBulk() {
		return nil
	}
	g := &growOp{c: c, info: info, args: args, key: key, pol: pol, kind: kind, off: off, x: x, byName: true}
	g.minSize = strconv.Itoa(pol.enc.MinSize())
	// A result that may begin with the frame magic must not be left to
	// Redis's own command, which would store it raw: a reader would take
	// it for a frame. The script then hands it to the proxy (kind in
	// lower case), which wraps it.
	g.scriptKind = kind
	if mayStartFramed(kind, off, args) {
		g.scriptKind = kind | 0x20
	}
	g.xs = strconv.FormatInt(x, 10)
	return g
}

// run probes the key, then computes and stores the result until the
// compare-and-set holds (see growScript). It returns the command's reply,
// or nil for the inspect script to run it.
func (g *growOp) run() *call {
	var keyLock keyLockHold
	defer keyLock.release()
	r, ok := g.send("P", "", nil, "")
	for attempt := 0; ; attempt++ {
		if !ok {
			return r
		}
		v, _, err := resp.ReadValue(r.reply)
		if err != nil || v.Type != resp.Array || v.N < 1 || v.N > 2 || !isMarkerHead(v) {
			// Redis's own reply: the command ran as it is, or the new
			// value was stored.
			return g.asReply(r)
		}
		stored, missing := markedValue(v)
		r.release()
		if attempt >= maxGrowRetries {
			return nil
		}
		if attempt > 0 {
			// The compare-and-set failed: another writer changed the key.
			// From now on this proxy's writers of it wait for each other
			// (keylock.go), so the next round or the one after stores.
			keyLock.take(&g.c.s.keyLocks, g.key)
		}
		if g.kind == 'E' {
			return g.frameLen(stored)
		}
		val, fail := g.result(stored)
		if fail != nil {
			return fail
		}
		if int64(len(val)) > g.c.s.maxBulk() {
			return nil // Redis's own error, from the inspect script
		}
		// Stored if the key still holds what was read; else the script
		// probes again and its reply is handled as the first one.
		r, ok = g.store(stored, missing, val)
	}
}

// send runs growScript once: mode "P" probes, "S" stores enc if the key
// holds the bytes whose SHA-1 is want ("" for a missing key), newLen being
// the reply.
func (g *growOp) send(mode, want string, enc []byte, newLen string) (*call, bool) {
	r, ok := g.c.scriptCall(g.info.name, g.c.roundtripScript, &g.byName, func(byName bool) []byte {
		return g.request(byName, mode, want, enc, newLen)
	})
	g.pinSeq = max(g.pinSeq, r.pinSeq)
	return r, ok
}

// request returns growScript's call, by name or with its body: the key,
// mode, the policy's minimum size, the script's kind, x, want, enc, newLen,
// then the command itself.
func (g *growOp) request(byName bool, mode, want string, enc []byte, newLen string) []byte {
	dst := resp.AppendArray(nil, 3+1+7+len(g.args))
	dst = appendScript(dst, growScript, growSHA, byName)
	dst = resp.AppendBulkString(dst, "1")
	dst = resp.AppendBulk(dst, g.key)
	dst = resp.AppendBulkString(dst, mode)
	dst = resp.AppendBulkString(dst, g.minSize)
	dst = resp.AppendBulk(dst, []byte{g.scriptKind})
	dst = resp.AppendBulkString(dst, g.xs)
	dst = resp.AppendBulkString(dst, want)
	dst = resp.AppendBulk(dst, enc)
	dst = resp.AppendBulkString(dst, newLen)
	for _, a := range g.args {
		dst = resp.AppendBulk(dst, a)
	}
	return dst
}

// asReply makes r, Redis's own reply to growScript, the command's reply.
func (g *growOp) asReply(r *call) *call {
	r.cmd, r.local = g.info.name, true
	r.notify = g.c.q.ready
	r.finish()
	return r
}

// markedValue returns the stored bytes of growScript's marked reply v (a
// copy, as v is the reply's), or missing when it holds none: the key is
// missing.
func markedValue(v resp.Value) (stored []byte, missing bool) {
	if v.N == 1 {
		return nil, true
	}
	it := v.Elements()
	it.Next()
	e, _ := it.Next()
	return bytes.Clone(e.Str), false
}

// frameLen replies to a SETRANGE with an empty value of a key that holds
// a frame: the length of its value, nothing changes.
func (g *growOp) frameLen(stored []byte) *call {
	h, err := codec.ParseHeader(stored)
	if err != nil {
		g.c.s.metrics.decodeError()
		return g.c.localCall(g.info.name, resp.AppendError(nil, "ERR "+(&DecodeError{Cmd: g.info.name, Key: g.key, Err: err}).Error()))
	}
	return g.c.localCall(g.info.name, resp.AppendInt(nil, int64(h.OriginalLen)))
}

// result returns the value the command leaves, from the stored bytes
// (decoded if a frame), or fail, the reply to a frame that does not decode.
func (g *growOp) result(stored []byte) (val []byte, fail *call) {
	old := stored
	if codec.IsFramed(stored) {
		d, err := g.c.s.decodeFrame(stored)
		if err != nil {
			return nil, g.c.localCall(g.info.name, resp.AppendError(nil, "ERR "+(&DecodeError{Cmd: g.info.name, Key: g.key, Err: err}).Error()))
		}
		old = d
	}
	return grown(g.kind, old, g.off, g.x, g.args), nil
}

// grown returns old after APPEND (kind 'A') or SETRANGE (kind 'R', x the
// end of the written range) of args, in a new array: old is left as it is.
func grown(kind byte, old []byte, off, x int64, args [][]byte) []byte {
	if kind == 'A' {
		return append(old[:len(old):len(old)], args[2]...)
	}
	val := make([]byte, max(int64(len(old)), x))
	copy(val, old)
	copy(val[off:], args[3])
	return val
}

// store encodes val with the key's policy and sends it, to be stored if
// the key still holds stored (or is still missing).
func (g *growOp) store(stored []byte, missing bool, val []byte) (*call, bool) {
	enc, o := g.pol.encode(g.c.s.metrics, nil, val)
	if o == codec.StoredRaw {
		enc = val
	}
	want := ""
	if !missing {
		sum := sha1.Sum(stored)
		want = hex.EncodeToString(sum[:])
	}
	return g.send("S", want, enc, strconv.Itoa(len(val)))
}

// isMarkerHead reports whether v's first element is the magic (a marker
// with no frames: growScript's "the key is missing").
func isMarkerHead(v resp.Value) bool {
	it := v.Elements()
	e, ok := it.Next()
	return ok && e.Type == resp.BulkString && bytes.Equal(e.Str, magic)
}

// mayStartFramed reports whether APPEND or SETRANGE (kind 'A' or 'R', see
// growArgs) can leave a value whose first bytes are the frame magic: the
// bytes it writes at offsets 0-2 are the magic's there. For APPEND that
// depends on the stored length, which the script knows; it is checked
// there too (an APPEND to 3 bytes or more keeps the first three).
func mayStartFramed(kind byte, off int64, args [][]byte) bool {
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
