package proxy

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"strconv"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/valuescript"
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
const growScript = valuescript.Grow

var growSHA = valuescript.GrowSHA

// growArgs returns how a command of the grow path changes its string
// (valuescript.GrowArgs); ok is false where the command goes to the
// inspect script instead.
func growArgs(info *cmdInfo, args [][]byte) (kind byte, off, x int64, ok bool) {
	if info != appendCmd && info != setrangeCmd {
		return 0, 0, 0, false
	}
	return valuescript.GrowArgs(args)
}

// plainOffset is valuescript.PlainOffset.
func plainOffset(b []byte) (int64, bool) { return valuescript.PlainOffset(b) }

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
	// frame magic, see mayStartFramed).
	minSize    int
	scriptKind byte
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
	g.minSize = pol.enc.MinSize()
	// A result that may begin with the frame magic must not be left to
	// Redis's own command, which would store it raw: a reader would take
	// it for a frame. The script then hands it to the proxy (kind in
	// lower case), which wraps it.
	g.scriptKind = kind
	if mayStartFramed(kind, off, args) {
		g.scriptKind = kind | 0x20
	}
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
	call := valuescript.GrowCall{Key: g.key, Mode: mode, MinSize: g.minSize, Kind: g.scriptKind, X: g.x, Want: want, Enc: enc, Command: g.args}
	call.NewLen, _ = strconv.Atoi(newLen)
	return appendWords(nil, call.Words(nil, byName))
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

// grown is valuescript.Grown.
func grown(kind byte, old []byte, off, x int64, args [][]byte) []byte {
	return valuescript.Grown(kind, old, off, x, args)
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

// mayStartFramed is valuescript.MayStartFramed.
func mayStartFramed(kind byte, off int64, args [][]byte) bool {
	return valuescript.MayStartFramed(kind, off, args)
}
