package proxy

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/squeeze-kv/squeeze/internal/luaguard"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/resp"
)

// plainScript is luaguard.PlainScript, run by the proxy.
const plainScript = luaguard.PlainScript

var plainSHA = scriptSHA(plainScript)

// maxPlainBatch bounds the frames one plainScript reply carries; a list
// or hash with more is made plain in several rounds.
const maxPlainBatch = 256

// maxPlainRounds bounds the rounds of makePlain (a list of
// maxPlainRounds*maxPlainBatch compressed elements, or other clients
// rewriting the keys all the time).
const maxPlainRounds = 4096

// plainCand is one frame plainScript found and its decoded value.
type plainCand struct{ key, kind, at, frame, dec []byte }

// scriptKeysOf returns the keys an EVAL, EVALSHA, FCALL (or _RO) declares,
// and false when numkeys is not a count that fits (Redis's error follows).
func scriptKeysOf(args [][]byte) ([][]byte, bool) {
	if len(args) < 3 {
		return nil, false
	}
	n, ok := resp.ParseInt(args[2])
	if !ok || n < 0 || n > int64(len(args)-3) {
		return nil, false
	}
	return args[3 : 3+n], true
}

// plainRequest returns the request that runs plainScript on keys: with
// cands ('S') or without ('P', only looking), EVALSHA (byName) or EVAL, or
// their _RO forms (ro: a look that must not count as a write, for a
// read-only script or a read-only replica), asking for at most max frames.
func plainRequest(keys [][]byte, cands []plainCand, byName, ro bool, max int) []byte {
	n := 3 + len(keys) + 3 + 5*len(cands)
	dst := resp.AppendArray(nil, n)
	switch {
	case ro && byName:
		dst = resp.AppendBulkString(dst, "EVALSHA_RO")
		dst = resp.AppendBulkString(dst, plainSHA)
	case ro:
		dst = resp.AppendBulkString(dst, "EVAL_RO")
		dst = resp.AppendBulkString(dst, plainScript)
	default:
		dst = appendScript(dst, plainScript, plainSHA, byName)
	}
	dst = resp.AppendBulkString(dst, strconv.Itoa(len(keys)))
	for _, k := range keys {
		dst = resp.AppendBulk(dst, k)
	}
	if len(cands) == 0 {
		dst = resp.AppendBulkString(dst, "P")
	} else {
		dst = resp.AppendBulkString(dst, "S")
	}
	dst = resp.AppendBulkString(dst, strconv.Itoa(len(cands)))
	for _, p := range cands {
		dst = resp.AppendBulk(dst, p.key)
		dst = resp.AppendBulk(dst, p.kind)
		dst = resp.AppendBulk(dst, p.at)
		dst = resp.AppendBulk(dst, p.frame)
		dst = resp.AppendBulk(dst, p.dec)
	}
	return resp.AppendBulkString(dst, strconv.Itoa(max))
}

// errReadOnly is what plainFrames returns for a reply that says the
// server takes no writes (a read-only replica): the script's keys are
// then decoded for it instead (decodeFor).
var errReadOnly = &call{}

// plainFrames reads a reply of plainScript into the frames it lists,
// decoded (those whose decoded value begins with the magic, which stay
// framed, only with keep), and releases r. done: the keys hold no frame
// (+OK). Otherwise it returns the client's reply to cmd: Redis's own
// error where Redis refused the keys before anything ran (the script
// they are declared to would be refused alike: a redirection the writer
// names the proxy in), errReadOnly for a read-only replica, else an error
// naming the decoding step.
func (c *client) plainFrames(cmd string, r *call, keep bool) (cands []plainCand, done bool, fail *call) {
	defer r.release()
	v, _, err := resp.ReadValue(r.reply)
	if err != nil || v.Type != resp.Array {
		if string(r.reply) == "+OK\r\n" || string(r.reply) == "$2\r\nOK\r\n" {
			return nil, true, nil
		}
		reply := bytes.Clone(r.reply)
		if refusedForKeys(reply) {
			return nil, false, c.localCall(cmd, reply)
		}
		if bytes.HasPrefix(reply, []byte("-READONLY")) || bytes.Contains(reply, []byte("READONLY You can't write against a read only replica")) {
			return nil, false, errReadOnly
		}
		return nil, false, c.localCall(cmd, resp.AppendError(nil, "ERR squeeze: decoding the script's keys: "+string(bytes.TrimSpace(reply))))
	}
	it := v.Elements()
	it.Next() // the magic
	for {
		k, ok := it.Next()
		if !ok {
			break
		}
		kind, _ := it.Next()
		at, _ := it.Next()
		f, _ := it.Next()
		d, derr := c.s.decodeFrame(f.Str)
		if derr != nil {
			return nil, false, c.localCall(cmd, resp.AppendError(nil, "ERR "+(&DecodeError{Cmd: "EVAL", Key: bytes.Clone(k.Str), Err: derr}).Error()))
		}
		if bytes.HasPrefix(d, magic) && !keep {
			// Stored plain it would read as a frame: it keeps its
			// frame, and a script reading it gets the prologue's error.
			continue
		}
		cands = append(cands, plainCand{key: bytes.Clone(k.Str), kind: bytes.Clone(kind.Str), at: bytes.Clone(at.Str), frame: bytes.Clone(f.Str), dec: d})
	}
	return cands, false, nil
}

// makePlain turns the frames at keys into plain values, for the client's
// script command cmd, with rt as the round trip (decodeRT outside MULTI, a
// shared connection inside). It returns the frames that must stay framed
// (their decoded value begins with the magic: stored plain it would read
// as a frame), which the script is handed decoded (luaguard.AppendDecoded),
// and nil, or cmd's reply, an error (or none and the connection's end,
// see scriptCall), or errReadOnly.
func (c *client) makePlain(cmd string, keys [][]byte, rt func([]byte) *call) ([]plainCand, *call) {
	byName := true
	var cands []plainCand
	for round := 0; round < maxPlainRounds; round++ {
		req := func(byName bool) []byte { return plainRequest(keys, cands, byName, false, maxPlainBatch) }
		r, ok := c.scriptCall(cmd, rt, &byName, req)
		if !ok {
			return nil, r
		}
		found, done, fail := c.plainFrames(cmd, r, true)
		if done {
			return nil, nil
		}
		if fail != nil {
			return nil, fail
		}
		var stay []plainCand
		cands = cands[:0]
		for _, p := range found {
			if bytes.HasPrefix(p.dec, magic) {
				stay = append(stay, p)
			} else {
				cands = append(cands, p)
			}
		}
		if len(cands) == 0 {
			return stay, nil // only frames that must stay
		}
	}
	return nil, c.localCall(cmd, resp.AppendError(nil, "ERR squeeze: the script's keys kept changing under concurrent writes; try again"))
}

// maxDecodedFrames bounds the frames decodeFor hands one script.
const maxDecodedFrames = maxPlainBatch * 64

// decodeFor finds the frames at keys and decodes them for a script for
// which the proxy writes nothing (see runScript): with plainScript's look
// alone, sent read-only, so that nothing is written, a CLIENT PAUSE WRITE
// does not hold it and a replica runs it. The script gets the decoded values with its arguments
// (luaguard.AppendDecoded). It returns the pairs, or cmd's reply (see
// makePlain).
func (c *client) decodeFor(cmd string, keys [][]byte, rt func([]byte) *call) ([][2][]byte, *call) {
	byName := true
	req := func(byName bool) []byte { return plainRequest(keys, nil, byName, true, maxDecodedFrames) }
	r, ok := c.scriptCall(cmd, rt, &byName, req)
	if !ok {
		return nil, r
	}
	found, _, fail := c.plainFrames(cmd, r, true)
	if fail == errReadOnly {
		fail = c.localCall(cmd, resp.AppendError(nil, "ERR squeeze: decoding the script's keys: the server takes no writes, not even read-only scripts"))
	}
	if fail != nil {
		return nil, fail
	}
	pairs := make([][2][]byte, len(found))
	for i, p := range found {
		pairs[i] = [2][]byte{p.frame, p.dec}
	}
	return pairs, nil
}

// decodeRT returns the round trip the steps that decode a script's keys
// take: a shared connection of the client's database, the proxy's own,
// not the client's private one, which may carry the client's ACL user
// (without the rights those steps need) or CLIENT TRACKING (which would
// start tracking the keys they read, and send invalidations for their
// writes the script never made). A script after ASKING, and a client on
// the shared connections, use the client's round trip as it is. The
// client's earlier commands may still be in flight on its private
// connection: a frame one of them writes is then found by the prologue,
// before the script writes, and the keys are decoded again (runScript).
func (c *client) decodeRT() func([]byte) *call {
	if c.pinned.conn == nil || c.in.asking {
		return c.roundtripScript
	}
	return c.sharedRT(c.sess.db)
}

// sharedRT returns a round trip on a shared connection of database db,
// for the proxy's own steps before a client's command (or the
// client's round trip, if none can be had). If the client's command raised
// an order barrier, it goes ahead of what the barrier holds, in the
// client's place (roundtripShared); the barrier stays up for the command
// itself.
func (c *client) sharedRT(db int) func([]byte) *call {
	up, err := c.s.pool.getDB(context.Background(), db, int(c.id))
	if err != nil {
		return c.roundtripScript
	}
	return func(req []byte) *call { return c.roundtripShared(up, req) }
}

// prepareScript makes the keys a script declares that are not known
// clean plain (their prefixes noted by scriptBegin). It returns the frames
// that must stay, as pairs for luaguard.AppendDecoded (see makePlain), and
// nil, or the reply of the client's script command cmd, or errReadOnly.
func (c *client) prepareScript(cmd string, keys [][]byte, m *scriptMark, rt func([]byte) *call) ([][2][]byte, *call) {
	if len(keys) == 0 {
		return nil, nil
	}
	dirty := c.s.scriptKeys.dirty(keys)
	if len(dirty) == 0 {
		return nil, nil
	}
	stay, f := c.makePlain(cmd, dirty, rt)
	if f != nil {
		return nil, f
	}
	clean := dirty
	var pairs [][2][]byte
	if len(stay) > 0 {
		// A key that keeps a frame is not clean: a script that declares
		// it goes this way again, and is handed the value.
		clean = nil
		for _, k := range dirty {
			if !slices.ContainsFunc(stay, func(p plainCand) bool { return bytes.Equal(p.key, k) }) {
				clean = append(clean, k)
			}
		}
		for _, p := range stay {
			pairs = append(pairs, [2][]byte{p.frame, p.dec})
		}
	}
	c.s.scriptKeys.setClean(clean, true)
	m.noteClean(clean)
	return pairs, nil
}

// scriptArgs returns the arguments a script command goes to Redis with:
// an EVAL's or SCRIPT LOAD's body and a FUNCTION LOAD's library wrapped
// (see scripts.go), an EVALSHA's and SCRIPT EXISTS's SHA-1s translated.
// origSHA is the client's SHA-1 of a SCRIPT LOAD body, for its reply.
func (s *Server) scriptArgs(info *cmdInfo, args [][]byte) (out [][]byte, origSHA string) {
	switch {
	case info.flags&rediscmd.Script != 0 && len(args) >= 2:
		out = append([][]byte(nil), args...)
		switch info.name {
		case "EVAL", "EVAL_RO":
			out[1], _, _ = s.scriptSHAs.wrap(args[1])
		case "EVALSHA", "EVALSHA_RO":
			out[1] = s.scriptSHAs.toRedis(args[1])
		}
		return out, ""
	case len(args) >= 3 && is(args[0], "SCRIPT") && is(args[1], "LOAD"):
		out = append([][]byte(nil), args...)
		out[2], origSHA, _ = s.scriptSHAs.wrap(args[2])
		return out, origSHA
	case len(args) >= 3 && is(args[0], "SCRIPT") && is(args[1], "EXISTS"):
		out = append([][]byte(nil), args...)
		for i := 2; i < len(out); i++ {
			out[i] = s.scriptSHAs.toRedis(args[i])
		}
		return out, ""
	case len(args) >= 3 && is(args[0], "FUNCTION") && is(args[1], "LOAD"):
		out = append([][]byte(nil), args...)
		last := len(out) - 1 // FUNCTION LOAD [REPLACE] code
		_, function := s.scriptSHAs.prologues()
		out[last] = luaguard.Wrap(args[last], function)
		return out, ""
	}
	return args, ""
}

// isScriptAdmin reports whether args is SCRIPT LOAD or EXISTS, FUNCTION
// LOAD: commands whose arguments scriptArgs changes; or FUNCTION LIST
// WITHCODE, whose reply runScript changes.
func isScriptAdmin(args [][]byte) bool {
	return len(args) >= 3 && ((is(args[0], "SCRIPT") && (is(args[1], "LOAD") || is(args[1], "EXISTS"))) || (is(args[0], "FUNCTION") && is(args[1], "LOAD")) || isFunctionListCode(args))
}

// isFunctionListCode reports whether args is FUNCTION LIST with WITHCODE:
// its reply holds the libraries' code, which the proxy wrapped.
func isFunctionListCode(args [][]byte) bool {
	if len(args) < 3 || !is(args[0], "FUNCTION") || !is(args[1], "LIST") {
		return false
	}
	for _, a := range args[2:] {
		if is(a, "WITHCODE") {
			return true
		}
	}
	return false
}

// runScript runs a script command outside MULTI, synchronously on the
// client's connection: the declared keys made plain (or decoded and handed
// to the script, decodeFor, where nothing may be written: an _RO command,
// a script or function flagged no-writes, a read-only replica, a client
// with a private connection), then the script; if the prologue reports a frame at a
// declared key before the script wrote anything (another writer compressed
// it since), once more after decoding the keys again.
func (c *client) runScript(info *cmdInfo, args [][]byte) *call {
	c.detectScriptAPI()
	fn, refused := c.scriptRefusal(info, args)
	if refused != nil {
		return refused
	}
	keys, ok := scriptKeysOf(args)
	ok = ok && info.flags&rediscmd.Script != 0
	ro := ok && (strings.HasSuffix(info.name, "_RO") || c.s.scriptSHAs.readOnly(info.name, args[1]) ||
		info.name == "FCALL" && fn.noWrites)
	// A client with a private connection may have CLIENT TRACKING on, and
	// have read the keys before: making them plain, a write, would send it
	// invalidations Redis does not. Its scripts are handed decoded values
	// too, and only learn the prefixes.
	private := c.pinned.conn != nil
	// The keys' prefixes, learned once it ran (scriptkeys.go): not by a
	// read-only script, for which saving them would be a write that a
	// pause holds and a replica refuses.
	var mark *scriptMark
	defer func() { c.s.scriptEnd(mark, nil) }()
	if ok && !ro {
		mark = c.s.scriptBegin(info.name, c.sess.db, keys)
	}
	var pairs [][2][]byte
	prepare := func() *call {
		if !ro && !private {
			var f *call
			pairs, f = c.prepareScript(info.name, keys, mark, c.decodeRT())
			if f != errReadOnly {
				return f
			}
			ro = true // a read-only replica: decode for the script instead
		}
		if len(keys) == 0 {
			return nil
		}
		if len(c.s.scriptKeys.dirty(keys)) == 0 {
			return nil
		}
		// A read-only script learns no prefix: saving it is a write, which
		// a pause would hold and a replica refuse.
		var f *call
		pairs, f = c.decodeFor(info.name, keys, c.decodeRT())
		if f == nil && len(pairs) == 0 {
			c.s.scriptKeys.setClean(keys, true) // under known prefixes only
			mark.noteClean(keys)
		}
		return f
	}
	if ok {
		if f := prepare(); f != nil {
			return f
		}
		c.s.scriptHeld(mark)
	}
	sent, origSHA := c.s.scriptArgs(info, args)
	var pinSeq uint64
	for attempt := 0; ; attempt++ {
		if len(pairs) > 0 && isFCall(info) && !fn.current {
			pairs = nil // a library an earlier proxy loaded: it would pass them on
		}
		req := resp.AppendCommand(nil, sent...)
		if len(pairs) > 0 {
			req = resp.AppendCommand(nil, luaguard.AppendDecoded(sent, pairs)...)
		}
		r := c.roundtripScript(req)
		pinSeq = max(pinSeq, r.pinSeq)
		if r.err != nil {
			return c.upstreamFailed(info.name, r)
		}
		if ok && attempt < maxInspectRetries && bytes.HasPrefix(r.reply, []byte(luaguard.FrameErr)) && bytes.Contains(r.reply, []byte(luaguard.Retryable)) {
			c.s.scriptKeys.setClean(keys, false)
			if f := prepare(); f != nil {
				r.release()
				return f
			}
			r.release()
			continue
		}
		if changesFunctions(args) {
			c.s.scriptSHAs.forgetFunctions() // a library loaded: its functions' prologue
		}
		pinSeq = max(pinSeq, c.scriptReply(r, args, sent, origSHA))
		c.s.scriptEnd(mark, r.reply)
		mark = nil
		r.pinSeq = max(r.pinSeq, pinSeq)
		r.cmd, r.local = info.name, true
		r.notify = c.q.ready
		r.finish()
		return r
	}
}

// scriptRefusal answers a script command the proxy does not send: an
// FCALL of a function whose library was loaded directly on Redis, which
// has no prologue (checkFunction), or an EVALSHA of a SHA-1 this proxy
// has not seen (another proxy's, or NOSCRIPT: findScriptSHA). Else it
// returns the function's facts for an FCALL, and nil.
func (c *client) scriptRefusal(info *cmdInfo, args [][]byte) (funcInfo, *call) {
	if isFCall(info) {
		fn, refusal, lost := c.checkFunction(args)
		switch {
		case lost:
			return fn, c.lostCall(info.name)
		case refusal != nil:
			return fn, c.localCall(info.name, refusal)
		}
		return fn, nil
	}
	if (info.name == "EVALSHA" || info.name == "EVALSHA_RO") && len(args) >= 2 {
		return funcInfo{}, c.findScriptSHA(info.name, args[1])
	}
	return funcInfo{}, nil
}

// upstreamFailed releases r, a round trip that failed, and returns the
// client's answer: its connection ends if Redis would have ended it,
// else an upstream error.
func (c *client) upstreamFailed(name string, r *call) *call {
	err, lost := r.err, r.connLost
	r.release()
	if lost {
		return c.lostCall(name)
	}
	return c.localCall(name, resp.AppendError(nil, "ERR squeeze: upstream: "+err.Error()))
}

// scriptReply turns the reply r of a script command into the client's: a
// SCRIPT LOAD's SHA-1 the client's (and saved for other proxies), an
// error naming the client's SHA-1 and, for a library refused for a
// callback that is not a function, the server's own text; FUNCTION LIST
// WITHCODE's code as loaded. It returns the pinSeq of a round trip it
// made, if any.
func (c *client) scriptReply(r *call, args, sent [][]byte, origSHA string) (pinSeq uint64) {
	switch {
	case origSHA != "" && len(r.reply) > 0 && r.reply[0] == '$':
		// Other proxies find the wrapped form of what the client may now
		// send by its SHA-1 alone.
		c.s.saveScriptSHA(origSHA, scriptSHA(string(sent[2])))
		r.reply = resp.AppendBulkString(r.reply[:0], origSHA)
	case len(r.reply) > 0 && r.reply[0] == '-':
		r.reply = c.s.scriptSHAs.toClient(r.reply)
		if is(args[0], "FUNCTION") && luaguard.IsLoadError(r.reply) {
			// A callback that is not a function: the server's own text
			// (luaguard.FunctionPrologue), which names its API.
			q := c.roundtripScript(resp.AppendCommand(nil, []byte("FUNCTION"), []byte("LOAD"), []byte(luaguard.APIProbe)))
			api := "redis"
			if q.err == nil {
				api = luaguard.ProbeAPI(q.reply)
			}
			pinSeq = q.pinSeq
			q.release()
			r.reply = luaguard.LoadError(r.reply, api)
		}
	case isFunctionListCode(args):
		// The code as the client loaded it, which loads back as it.
		r.reply = luaguard.UnwrapReply(r.reply)
	}
	return pinSeq
}

// queueScriptPrep, for a script queued in MULTI, makes its declared keys
// plain now, on a shared connection (the client's own is queueing). A
// failure leaves the frames, which the script's prologue then reports at
// EXEC: the command is queued all the same.
func (c *client) queueScriptPrep(info *cmdInfo, args [][]byte) {
	keys, ok := scriptKeysOf(args)
	if !ok || info.flags&rediscmd.Script == 0 {
		return
	}
	up, err := c.s.pool.getDB(context.Background(), c.sess.db, int(c.id))
	if err != nil {
		return
	}
	// Inside MULTI the prefixes are learned when the script is queued.
	// Frames that must stay are the prologue's error at EXEC: a queued
	// command's arguments are already sent.
	mark := c.s.scriptBegin(info.name, c.sess.db, keys)
	if _, f := c.prepareScript(info.name, keys, mark, func(req []byte) *call { return c.roundtripShared(up, req) }); f != nil && f != errReadOnly {
		f.release()
		c.s.scriptEnd(mark, nil)
		return
	}
	c.s.scriptHeld(mark)
	c.s.scriptEnd(mark, []byte("+QUEUED\r\n"))
}

// scriptFast reports whether a script command needs no round trip first:
// EVAL, EVALSHA or FCALL whose declared keys are all known clean (none, or
// made plain before, under prefixes kept plain), and for FCALL whose
// function it knows in a library with a prologue. It then goes upstream with
// the others, in the pipeline; if the prologue still finds a frame at a
// declared key (a writer that compresses them, such as another proxy that
// has not read the prefixes yet), the client gets its error, and the keys
// are made plain before the next script that declares them (noteFastScript).
func (s *Server) scriptFast(info *cmdInfo, args [][]byte) bool {
	if info.flags&rediscmd.Script == 0 || s.scriptSHAs.api.Load() == apiUnknown {
		return false // the first script finds out what to shadow (detectScriptAPI)
	}
	keys, ok := scriptKeysOf(args)
	if !ok {
		return false
	}
	if (info.name == "EVALSHA" || info.name == "EVALSHA_RO") && len(args) >= 2 {
		if _, known := s.scriptSHAs.lookup(args[1]); !known {
			return false // looked up first (findScriptSHA)
		}
	}
	if isFCall(info) && len(args) >= 2 && !s.scriptSHAs.knownGuarded(args[1]) {
		return false // its library checked first (checkFunction)
	}
	return len(keys) == 0 || len(s.scriptKeys.dirty(keys)) == 0
}

// noteFastScript makes the keys of a script sent on the fast path count as
// not clean again when its reply is the prologue's error about one of them,
// and names the client's SHA-1 in an error reply (scriptSHAs.toClient).
func (s *Server) noteFastScript(cl *call, keys [][]byte) {
	keys = slices.Clone(keys)
	for i := range keys {
		keys[i] = bytes.Clone(keys[i])
	}
	prev := cl.onFinish
	cl.onFinish = func() {
		if scriptRan(cl.reply) {
			s.scriptKeys.touchKeys(keys, time.Now().UnixMilli())
		}
		if len(cl.reply) > 0 && cl.reply[0] == '-' {
			if bytes.HasPrefix(cl.reply, []byte(luaguard.FrameErr)) {
				s.scriptKeys.setClean(keys, false)
			}
			cl.reply = s.scriptSHAs.toClient(cl.reply)
		}
		if prev != nil {
			prev()
		}
	}
}
