package proxy

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/squeeze-kv/squeeze/internal/luaguard"
	"github.com/squeeze-kv/squeeze/resp"
)

// Lua scripts and compressed values (issue 22).
//
// A script reads stored bytes: on a compressed value it would compare,
// return or copy a frame. The proxy makes that impossible in three ways
// (see docs/design/scripts.md):
//
//   - Every script it forwards (EVAL, EVAL_RO, SCRIPT LOAD, FUNCTION LOAD)
//     gets a prologue (luaguard.EvalPrologue) that shadows redis with a local table
//     whose call and pcall check what the real ones return: a string that
//     begins with the frame magic, alone or inside an array, raises a
//     script error naming the key instead of reaching the script.
//   - Before a script runs outside MULTI, the frames at its declared keys
//     are turned back into plain values with a compare-and-set script
//     (scriptrun.go); inside MULTI before the script is queued. Where the
//     proxy may write nothing (a read-only script, a replica, a client
//     with a private connection, which may track keys), they are decoded
//     and handed to the script with its arguments, which the prologue
//     takes off (luaguard.AppendDecoded).
//   - The key prefixes scripts use are learned, kept in Redis
//     (scriptPrefixesKey) and stay uncompressed from then on
//     (scriptkeys.go).
//
// The prologue's redis is as read-only as Redis's own, FUNCTION LOAD
// accepts and refuses what Redis does, FUNCTION LIST WITHCODE shows the
// code as loaded, and EVALSHA of a script no proxy loaded (so unguarded)
// answers NOSCRIPT (issue 32).
//
// The prologue is one line, put in front of the script's first line (after
// the #! line, which must stay first), so that line numbers in Redis's
// error messages stay those of the script as the client wrote it.

// maxScriptSHAs bounds the map from the SHA-1 a client knows to the one
// Redis knows: past it, it is emptied (a client's EVALSHA then gets Redis's
// NOSCRIPT, and its library loads the script again, which refills it).
const maxScriptSHAs = 4096

// scriptSHAs maps the SHA-1 of scripts as clients wrote them to the SHA-1
// of their wrapped form, and back.
type scriptSHAs struct {
	mu       sync.RWMutex
	wrapped  map[string]string   // client's SHA-1 -> wrapped form's
	orig     map[string]string   // wrapped form's -> client's
	noWrites map[string]struct{} // client's SHA-1s of scripts flagged no-writes
	// learned: client's SHA-1s whose pair came from ScriptSHAsKey, where
	// another proxy (perhaps of another version, with another prologue)
	// put it: wrap computes the wrapped form's SHA-1 of such a body.
	learned map[string]struct{}
	// funcs is what the proxy knows of the functions Redis has (function);
	// nil until an FCALL needs it, and after a FUNCTION LOAD.
	funcs map[string]funcInfo
	// api says whether the server's scripts reach redis as server too
	// (Valkey), which the prologue must then shadow as well: apiUnknown
	// until a script finds out (detectScriptAPI).
	api atomic.Int32
}

// What scripts reach redis as (scriptSHAs.api).
const (
	apiUnknown = iota
	apiRedis   // redis only
	apiServer  // redis and server (Valkey)
)

// prologues returns the EVAL and FUNCTION LOAD prologues for the server.
func (m *scriptSHAs) prologues() (eval, function string) {
	if m.api.Load() == apiServer {
		return luaguard.ServerEvalPrologue, luaguard.ServerFunctionPrologue
	}
	return luaguard.EvalPrologue, luaguard.FunctionPrologue
}

// apiRequest asks whether scripts have the global server, read-only (a
// pause does not hold it, a replica runs it).
var apiRequest = resp.AppendCommand(nil, []byte("EVAL_RO"), []byte("return type(rawget(_G, 'server'))"), []byte("0"))

// detectScriptAPI finds out, once, whether the server's scripts reach
// redis as server too (Valkey), so that the prologue shadows it: else a
// script's server.call would read frames unguarded. An error (a server
// without EVAL_RO) means redis only; an upstream failure leaves it
// unknown, for the next script.
func (c *client) detectScriptAPI() {
	m := &c.s.scriptSHAs
	if m.api.Load() != apiUnknown {
		return
	}
	r := c.sharedRT(c.sess.db)(apiRequest)
	defer r.release()
	if r.err != nil {
		return
	}
	api := int32(apiRedis)
	if string(r.reply) == "$5\r\ntable\r\n" {
		api = apiServer
	}
	if m.api.CompareAndSwap(apiUnknown, api) && api == apiServer {
		// Scripts wrapped before (inside MULTI, which does not wait for
		// this) had the other prologue: forget their SHA-1s.
		m.mu.Lock()
		m.wrapped, m.orig, m.noWrites, m.learned = nil, nil, nil, nil
		m.mu.Unlock()
	}
}

// noWrites reports whether a script body begins with a #! line whose
// flags hold no-writes: Redis runs it as read-only (not held by CLIENT
// PAUSE WRITE, run by a replica), so the proxy writes nothing for it
// either (runScript).
func noWrites(body []byte) bool {
	if !bytes.HasPrefix(body, []byte("#!")) {
		return false
	}
	line, _, _ := bytes.Cut(body, []byte("\n"))
	for _, f := range bytes.Fields(line) {
		if flags, ok := bytes.CutPrefix(f, []byte("flags=")); ok {
			for _, fl := range bytes.Split(flags, []byte(",")) {
				if string(fl) == "no-writes" {
					return true
				}
			}
		}
	}
	return false
}

// readOnly reports whether the script an EVAL or EVALSHA (or _RO) names
// is flagged no-writes, as far as the proxy knows.
func (m *scriptSHAs) readOnly(name string, script []byte) bool {
	switch name {
	case "EVAL", "EVAL_RO":
		return noWrites(script)
	case "EVALSHA", "EVALSHA_RO":
		m.mu.RLock()
		_, ok := m.noWrites[strings.ToLower(string(script))]
		m.mu.RUnlock()
		return ok
	}
	return false
}

// wrap returns the wrapped form of an EVAL script or SCRIPT LOAD body, and
// notes both SHA-1s.
func (m *scriptSHAs) wrap(body []byte) (wrapped []byte, origSHA, wrappedSHA string) {
	eval, _ := m.prologues()
	wrapped = luaguard.Wrap(body, eval)
	origSHA = scriptSHA(string(body))
	m.mu.RLock()
	wrappedSHA, known := m.wrapped[origSHA]
	if _, l := m.learned[origSHA]; l {
		known = false
	}
	m.mu.RUnlock()
	if !known {
		// The prologue is the same for every body: a body's wrapped form's
		// SHA-1 is computed once, not at every EVAL.
		wrappedSHA = scriptSHA(string(wrapped))
		m.mu.Lock()
		if m.wrapped == nil || len(m.wrapped) >= maxScriptSHAs {
			m.wrapped, m.orig, m.noWrites, m.learned = map[string]string{}, map[string]string{}, map[string]struct{}{}, map[string]struct{}{}
		}
		m.wrapped[origSHA], m.orig[wrappedSHA] = wrappedSHA, origSHA
		delete(m.learned, origSHA)
		if noWrites(body) {
			m.noWrites[origSHA] = struct{}{}
		}
		m.mu.Unlock()
	}
	return wrapped, origSHA, wrappedSHA
}

// ScriptSHAsKey is the hash, in the upstream URL's database, from the
// SHA-1 of a script as a client wrote it to the SHA-1 of its wrapped form,
// for the scripts loaded with SCRIPT LOAD through a proxy: a proxy meeting
// an EVALSHA of a SHA-1 it has not seen looks it up there, so that several
// proxies, and a restarted one, agree. Its fields name the prologue too
// (shaField): a proxy of another version, whose prologue differs (or the
// go-redis hook, which keeps plain SHA-1 fields in the same hash), does not
// run a script wrapped with another prologue than its own.
const ScriptSHAsKey = "squeeze:script-shas"

// unknownSHA stands, in what goes to Redis, for a SHA-1 the proxy does not
// know a wrapped form of: no script has it (it is not hex), so Redis
// answers EVALSHA with NOSCRIPT and SCRIPT EXISTS with 0, and a script
// loaded some other way never runs unguarded through the proxy.
var unknownSHA = []byte("squeeze-script-not-loaded-through-squeeze")

// noScriptReply is the reply to an EVALSHA of a script the proxy cannot
// find a wrapped form of: Redis's NOSCRIPT, which client libraries answer
// by sending the body, with the reason.
func noScriptReply(sha []byte) []byte {
	return resp.AppendError(nil, "NOSCRIPT squeeze: no script with SHA-1 "+string(sha)+" was loaded through squeeze, so what it reads could not be checked for compressed values; load it again (SCRIPT LOAD) or send it with EVAL")
}

// toRedis returns the SHA-1 Redis knows for the one a client sent: the
// wrapped form's when the proxy saw the script, else unknownSHA.
func (m *scriptSHAs) toRedis(sha []byte) []byte {
	if w, ok := m.lookup(sha); ok {
		return []byte(w)
	}
	return unknownSHA
}

// lookup returns the wrapped form's SHA-1 of a client's SHA-1, if the
// proxy knows it.
func (m *scriptSHAs) lookup(sha []byte) (string, bool) {
	m.mu.RLock()
	w, ok := m.wrapped[strings.ToLower(string(sha))]
	m.mu.RUnlock()
	return w, ok
}

// Short SHA-1s of the EVAL prologues, in ScriptSHAsKey's fields.
var (
	evalPrologueTag   = scriptSHA(luaguard.EvalPrologue)[:8]
	serverPrologueTag = scriptSHA(luaguard.ServerEvalPrologue)[:8]
)

// shaField is the field of ScriptSHAsKey for a client's SHA-1: it and the
// prologue the proxy wraps scripts with.
func (m *scriptSHAs) shaField(origSHA string) string {
	if m.api.Load() == apiServer {
		return origSHA + ":" + serverPrologueTag
	}
	return origSHA + ":" + evalPrologueTag
}

// note records a pair found in ScriptSHAsKey.
func (m *scriptSHAs) note(origSHA, wrappedSHA string) {
	m.mu.Lock()
	if m.wrapped == nil || len(m.wrapped) >= maxScriptSHAs {
		m.wrapped, m.orig, m.noWrites, m.learned = map[string]string{}, map[string]string{}, map[string]struct{}{}, map[string]struct{}{}
	}
	m.wrapped[origSHA], m.orig[wrappedSHA] = wrappedSHA, origSHA
	m.learned[origSHA] = struct{}{}
	m.mu.Unlock()
}

// saveScriptSHA stores a pair in ScriptSHAsKey, in the background, on a
// connection of its own (a CLIENT PAUSE WRITE holds the write there, not
// on a shared connection other clients' commands take).
func (s *Server) saveScriptSHA(origSHA, wrappedSHA string) {
	field := s.scriptSHAs.shaField(origSHA)
	go func() {
		up, err := s.pool.takeStream()
		if err != nil {
			s.logger().Warn("script SHA-1 not saved in Redis", "key", ScriptSHAsKey, "err", err)
			return
		}
		r := roundtripOn(up, resp.AppendCommand(nil, []byte("HSET"), []byte(ScriptSHAsKey), []byte(field), []byte(wrappedSHA)))
		if r.err != nil || (len(r.reply) > 0 && r.reply[0] == '-') {
			s.logger().Warn("script SHA-1 not saved in Redis", "key", ScriptSHAsKey, "err", r.err, "reply", string(bytes.TrimSpace(r.reply)))
		}
		r.release()
		s.pool.putStream(up)
	}()
}

// findScriptSHA looks a client's SHA-1 the proxy has not seen up in
// ScriptSHAsKey, for the client's EVALSHA cmd. It returns nil when found
// (the pair is noted), else cmd's reply: NOSCRIPT, or an upstream error.
func (c *client) findScriptSHA(cmd string, sha []byte) *call {
	if _, ok := c.s.scriptSHAs.lookup(sha); ok {
		return nil
	}
	orig := strings.ToLower(string(sha))
	r := c.sharedRT(c.s.up.DB)(resp.AppendCommand(nil, []byte("HGET"), []byte(ScriptSHAsKey), []byte(c.s.scriptSHAs.shaField(orig))))
	defer r.release()
	if r.err != nil {
		if r.connLost {
			return c.lostCall(cmd)
		}
		return c.localCall(cmd, resp.AppendError(nil, "ERR squeeze: upstream: "+r.err.Error()))
	}
	if v, _, err := resp.ReadValue(r.reply); err == nil && v.Type == resp.BulkString && len(v.Str) == 40 {
		c.s.scriptSHAs.note(orig, string(v.Str))
		return nil
	}
	return c.localCall(cmd, noScriptReply(sha))
}

// toClient replaces, in a reply, the wrapped forms' SHA-1s Redis names (in
// error messages: "script: <sha>", which may follow another "script: ",
// as in Valkey's "ACL failure in script: ...") with the client's.
func (m *scriptSHAs) toClient(reply []byte) []byte {
	for from := 0; ; {
		i := bytes.Index(reply[from:], []byte("script: "))
		if i < 0 {
			return reply
		}
		i += from
		from = i + 8
		if len(reply) < i+8+40 {
			return reply
		}
		sha := string(reply[i+8 : i+48])
		m.mu.RLock()
		o, ok := m.orig[sha]
		m.mu.RUnlock()
		if ok {
			copy(reply[i+8:], o)
		}
	}
}

// funcInfo is what the proxy knows of a function Redis has (from FUNCTION
// LIST WITHCODE): whether its library holds a prologue of this version,
// and whether it is flagged no-writes.
type funcInfo struct{ current, noWrites bool }

// maxFuncs bounds the functions remembered (names FCALL asked for that
// Redis does not have included).
const maxFuncs = 4096

// function returns what the proxy knows of the function an FCALL names.
// A library loaded through an earlier proxy (issue 22's prologue) would
// hand decoded values to the function as arguments of its own: its calls
// get none (a frame read is then the prologue's error, as before), until
// the library is loaded again. A function flagged no-writes runs as a
// read-only script (runScript): Redis runs it during CLIENT PAUSE WRITE
// and on a replica. It reads FUNCTION LIST WITHCODE when it meets a name it
// does not know, and remembers a name Redis does not have, too.
func (c *client) function(name []byte) funcInfo {
	m := &c.s.scriptSHAs
	lower := strings.ToLower(string(name)) // FCALL finds a function whatever its case
	m.mu.RLock()
	fi, ok := m.funcs[lower]
	m.mu.RUnlock()
	if ok {
		return fi
	}
	r := c.sharedRT(c.sess.db)(resp.AppendCommand(nil, []byte("FUNCTION"), []byte("LIST"), []byte("WITHCODE")))
	defer r.release()
	if r.err != nil {
		return funcInfo{}
	}
	funcs := functionsOf(r.reply)
	if _, ok := funcs[lower]; !ok && len(funcs) < maxFuncs {
		funcs[lower] = funcInfo{} // not in Redis: not asked again until a load
	}
	m.mu.Lock()
	m.funcs = funcs
	m.mu.Unlock()
	return funcs[lower]
}

// forgetFunctions drops what function learned (a library was loaded).
func (m *scriptSHAs) forgetFunctions() {
	m.mu.Lock()
	m.funcs = nil
	m.mu.Unlock()
}

// functionsOf reads a FUNCTION LIST WITHCODE reply (RESP2 or RESP3) into
// a map from each function's name, in lower case, to what it says of it:
// whether its library's code holds, after the #! line, a prologue of this
// version, and whether the function is flagged no-writes.
func functionsOf(reply []byte) map[string]funcInfo {
	out := map[string]funcInfo{}
	v, _, err := resp.ReadValue(reply)
	if err != nil {
		return out
	}
	libs := v.Elements()
	for lib, ok := libs.Next(); ok; lib, ok = libs.Next() {
		type fn struct {
			name     string
			noWrites bool
		}
		var fns []fn
		current := false
		fields := lib.Elements()
		for k, ok := fields.Next(); ok; k, ok = fields.Next() {
			val, _ := fields.Next()
			switch string(k.Str) {
			case "library_code":
				code := val.Str
				current = bytes.Contains(code, []byte("\n"+luaguard.FunctionPrologue)) || bytes.Contains(code, []byte("\n"+luaguard.ServerFunctionPrologue))
			case "functions":
				fs := val.Elements()
				for f, ok := fs.Next(); ok; f, ok = fs.Next() {
					var one fn
					attrs := f.Elements()
					for a, ok := attrs.Next(); ok; a, ok = attrs.Next() {
						av, _ := attrs.Next()
						switch string(a.Str) {
						case "name":
							one.name = strings.ToLower(string(av.Str))
						case "flags":
							fl := av.Elements()
							for x, ok := fl.Next(); ok; x, ok = fl.Next() {
								if string(x.Str) == "no-writes" {
									one.noWrites = true
								}
							}
						}
					}
					fns = append(fns, one)
				}
			}
		}
		for _, f := range fns {
			out[f.name] = funcInfo{current: current, noWrites: f.noWrites}
		}
	}
	return out
}
