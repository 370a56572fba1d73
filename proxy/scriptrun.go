package proxy

import (
	"bytes"
	"context"
	"slices"
	"strconv"

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

// makePlain turns the frames at keys into plain values, for the client's
// script command cmd, with rt as the round trip (the client's connection
// outside MULTI, a shared one inside). It returns nil, or cmd's reply, an
// error (or none and the connection's end, see scriptCall).
func (c *client) makePlain(cmd string, keys [][]byte, rt func([]byte) *call) *call {
	byName := true
	var cands []plainCand
	for round := 0; round < maxPlainRounds; round++ {
		req := func(byName bool) []byte {
			n := 3 + len(keys) + 3 + 5*len(cands)
			dst := resp.AppendArray(nil, n)
			dst = appendScript(dst, plainScript, plainSHA, byName)
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
			return resp.AppendBulkString(dst, strconv.Itoa(maxPlainBatch))
		}
		r, ok := c.scriptCall(cmd, rt, &byName, req)
		if !ok {
			return r
		}
		v, _, err := resp.ReadValue(r.reply)
		if err != nil || v.Type != resp.Array {
			done := string(r.reply) == "+OK\r\n" || string(r.reply) == "$2\r\nOK\r\n"
			reply := bytes.Clone(r.reply)
			r.release()
			if done {
				return nil
			}
			if refusedForKeys(reply) {
				// Redis refused the keys before anything ran (the script
				// they are declared to would be refused alike): its own
				// error, a redirection the writer names the proxy in.
				return c.localCall(cmd, reply)
			}
			return c.localCall(cmd, resp.AppendError(nil, "ERR squeeze: decoding the script's keys: "+string(bytes.TrimSpace(reply))))
		}
		cands = cands[:0]
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
				r.release()
				return c.localCall(cmd, resp.AppendError(nil, "ERR "+(&DecodeError{Cmd: "EVAL", Key: bytes.Clone(k.Str), Err: derr}).Error()))
			}
			if bytes.HasPrefix(d, magic) {
				// Stored plain it would read as a frame: it keeps its
				// frame, and a script reading it gets the prologue's error.
				continue
			}
			cands = append(cands, plainCand{key: bytes.Clone(k.Str), kind: bytes.Clone(kind.Str), at: bytes.Clone(at.Str), frame: bytes.Clone(f.Str), dec: d})
		}
		r.release()
		if len(cands) == 0 {
			return nil // only frames that must stay
		}
	}
	return c.localCall(cmd, resp.AppendError(nil, "ERR squeeze: the script's keys kept changing under concurrent writes; try again"))
}

// prepareScript learns the prefixes of the keys a script declares and makes
// the keys not known clean plain. It returns nil, or the reply of the
// client's script command cmd (see makePlain).
func (c *client) prepareScript(cmd string, keys [][]byte, rt func([]byte) *call) *call {
	if len(keys) == 0 {
		return nil
	}
	c.s.learnScriptKeys(keys)
	dirty := c.s.scriptKeys.dirty(keys)
	if len(dirty) == 0 {
		return nil
	}
	if f := c.makePlain(cmd, dirty, rt); f != nil {
		return f
	}
	c.s.scriptKeys.setClean(dirty, true)
	return nil
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
		out[last] = luaguard.Wrap(args[last], luaguard.FunctionPrologue)
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
// client's connection: the declared keys made plain, then the script; if
// the prologue reports a frame at a declared key before the script wrote
// anything (another writer compressed it since), once more after making
// the keys plain again.
func (c *client) runScript(info *cmdInfo, args [][]byte) *call {
	keys, ok := scriptKeysOf(args)
	if ok && info.flags&rediscmd.Script != 0 {
		if f := c.prepareScript(info.name, keys, c.roundtripScript); f != nil {
			return f
		}
	}
	sent, origSHA := c.s.scriptArgs(info, args)
	req := resp.AppendCommand(nil, sent...)
	var pinSeq uint64
	for attempt := 0; ; attempt++ {
		r := c.roundtripScript(req)
		pinSeq = max(pinSeq, r.pinSeq)
		if r.err != nil {
			err, lost := r.err, r.connLost
			r.release()
			if lost {
				return c.lostCall(info.name)
			}
			return c.localCall(info.name, resp.AppendError(nil, "ERR squeeze: upstream: "+err.Error()))
		}
		if ok && attempt < maxInspectRetries && bytes.HasPrefix(r.reply, []byte(luaguard.FrameErr)) && bytes.Contains(r.reply, []byte(luaguard.Retryable)) {
			c.s.scriptKeys.setClean(keys, false)
			if f := c.prepareScript(info.name, keys, c.roundtripScript); f != nil {
				r.release()
				return f
			}
			r.release()
			continue
		}
		switch {
		case origSHA != "" && len(r.reply) > 0 && r.reply[0] == '$':
			r.reply = resp.AppendBulkString(r.reply[:0], origSHA)
		case len(r.reply) > 0 && r.reply[0] == '-':
			r.reply = c.s.scriptSHAs.toClient(r.reply)
			if is(args[0], "FUNCTION") && luaguard.IsLoadError(r.reply) {
				// A callback that is not a function: the server's own
				// text (luaguard.FunctionPrologue), which names its API.
				q := c.roundtripScript(resp.AppendCommand(nil, []byte("FUNCTION"), []byte("LOAD"), []byte(luaguard.APIProbe)))
				api := "redis"
				if q.err == nil {
					api = luaguard.ProbeAPI(q.reply)
				}
				pinSeq = max(pinSeq, q.pinSeq)
				q.release()
				r.reply = luaguard.LoadError(r.reply, api)
			}
		case isFunctionListCode(args):
			// The code as the client loaded it, which loads back as it.
			r.reply = luaguard.UnwrapReply(r.reply)
		}
		r.pinSeq = max(r.pinSeq, pinSeq)
		r.cmd, r.local = info.name, true
		r.notify = c.q.ready
		r.finish()
		return r
	}
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
	if f := c.prepareScript(info.name, keys, func(req []byte) *call { return roundtripOn(up, req) }); f != nil {
		f.release()
	}
}

// scriptFast reports whether a script command needs no round trip first:
// EVAL, EVALSHA or FCALL whose declared keys are all known clean (none, or
// made plain before, under prefixes kept plain). It then goes upstream with
// the others, in the pipeline; if the prologue still finds a frame at a
// declared key (a writer that compresses them, such as another proxy that
// has not read the prefixes yet), the client gets its error, and the keys
// are made plain before the next script that declares them (noteFastScript).
func (s *Server) scriptFast(info *cmdInfo, args [][]byte) bool {
	if info.flags&rediscmd.Script == 0 {
		return false
	}
	keys, ok := scriptKeysOf(args)
	if !ok {
		return false
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
