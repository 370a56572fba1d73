package proxy

import (
	"bytes"
	"context"
	"slices"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/luaguard"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/internal/valuescript"
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
const inspectScript = valuescript.Inspect

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
	return valuescript.InspectKeys(info.keys, len(args))
}

// writtenKey returns the string key a write command stores into, or nil.
func writtenKey(info *cmdInfo, args [][]byte) []byte {
	return valuescript.WrittenKey(info.readOnly, info.compare, info.keys, args)
}

// candidate is a frame and its decoded bytes, for key.
type candidate struct{ key, frame, dec []byte }

// inspectSHA names inspectScript for EVALSHA (see listSearchSHA).
var inspectSHA = valuescript.InspectSHA

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
func scriptSHA(script string) string { return valuescript.SHA(script) }

// appendWords appends words as one command, an array of bulk strings.
func appendWords(dst []byte, words [][]byte) []byte {
	dst = resp.AppendArray(dst, len(words))
	for _, w := range words {
		dst = resp.AppendBulk(dst, w)
	}
	return dst
}

// appendInspect appends EVAL inspectScript for the command, or EVALSHA
// with byName. With withCmd false the script only probes: it reports
// frames and changes nothing. recompressMin >= 0 asks a write command on
// compressed values to hand back a result of at least that many bytes
// (see recompress); -1 where the reply cannot wait for that (MULTI).
func appendInspect(dst []byte, info *cmdInfo, args [][]byte, cands []candidate, withCmd, head, byName bool, recompressMin int) []byte {
	first, end := inspectKeyArgs(info, args)
	call := valuescript.InspectCall{
		Mode:          valuescript.InspectMode(info.readOnly, info.compare, info.exact),
		Keys:          args[first:end],
		Written:       writtenKey(info, args),
		Head:          head,
		RecompressMin: recompressMin,
	}
	if info.keys == rediscmd.KeyHash && len(args) > 2 {
		call.Field = args[2]
	}
	for _, c := range cands {
		call.Candidates = append(call.Candidates, valuescript.Candidate{Key: c.key, Frame: c.frame, Dec: c.dec})
	}
	if withCmd {
		call.Command = args
	}
	return appendWords(dst, call.Words(nil, byName))
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
