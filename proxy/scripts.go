package proxy

import (
	"bytes"
	"errors"
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
// answers NOSCRIPT (issue 32); FCALL and FCALL_RO of a function whose
// library holds no prologue (loaded directly on Redis) are not sent, and
// get an error that says to load the library again through squeeze
// (checkFunction).
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
	// nil until an FCALL needs it, and after a FUNCTION command that may
	// change them (forgetFunctions), which also counts funcsGen up.
	funcs    map[string]funcInfo
	funcsGen uint64
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

// funcInfo is what the proxy knows of a function (from FUNCTION LIST
// WITHCODE): whether Redis has it (present), its library, whether that
// library holds a prologue (guarded) and this version's (current), and
// whether the function is flagged no-writes.
type funcInfo struct {
	lib                                 string
	present, guarded, current, noWrites bool
}

// function returns what the proxy knows of the function an FCALL or
// FCALL_RO names. What it knows of a function in a guarded library it
// uses as it is; of any other name (unknown, in a library without a
// prologue, or not in Redis) it reads FUNCTION LIST WITHCODE first, on a
// shared connection (one round trip, read-only: a pause does not hold it,
// a replica answers it), so that a library loaded again through another
// proxy, or a function loaded since, is seen at once. It returns the
// upstream's failure, or its error reply to FUNCTION LIST, as err (lost:
// the connection was lost): the FCALL must not be sent then, since what
// the function reads could not be checked.
//
// A library loaded through an earlier proxy (issue 22's prologue) would
// hand decoded values to the function as arguments of its own: its calls
// get none (a frame read is then the prologue's error, as before), until
// the library is loaded again. A function flagged no-writes runs as a
// read-only script (runScript): Redis runs it during CLIENT PAUSE WRITE
// and on a replica.
func (c *client) function(name []byte) (fi funcInfo, err error, lost bool) {
	m := &c.s.scriptSHAs
	lower := strings.ToLower(string(name)) // FCALL finds a function whatever its case
	m.mu.RLock()
	fi, ok := m.funcs[lower]
	gen := m.funcsGen
	m.mu.RUnlock()
	if ok && fi.guarded {
		return fi, nil, false
	}
	r := c.sharedRT(c.sess.db)(resp.AppendCommand(nil, []byte("FUNCTION"), []byte("LIST"), []byte("WITHCODE")))
	defer r.release()
	if r.err != nil {
		return funcInfo{}, r.err, r.connLost
	}
	if len(r.reply) > 0 && r.reply[0] == '-' {
		return funcInfo{}, errors.New(string(bytes.TrimSpace(r.reply[1:]))), false
	}
	funcs := functionsOf(r.reply)
	m.mu.Lock()
	if m.funcsGen == gen { // no FUNCTION command changed them meanwhile
		m.funcs = funcs
	}
	m.mu.Unlock()
	return funcs[lower], nil, false
}

// knownGuarded reports whether the proxy knows the function an FCALL
// names to be in a library that holds a prologue (scriptFast: it needs no
// look first).
func (m *scriptSHAs) knownGuarded(name []byte) bool {
	m.mu.RLock()
	fi, ok := m.funcs[string(name)] // no copy: the name as most clients write it
	if !ok {
		fi, ok = m.funcs[strings.ToLower(string(name))]
	}
	m.mu.RUnlock()
	return ok && fi.guarded
}

// unguardedFunctionReply is the reply to an FCALL or FCALL_RO of a
// function whose library holds no prologue (loaded directly on Redis, not
// through squeeze): as EVALSHA of a script no proxy loaded, it is not
// sent, since what it reads could not be checked. The words are the
// go-redis hook's.
func unguardedFunctionReply(name []byte, lib string) []byte {
	return resp.AppendError(nil, "ERR squeeze: function "+string(name)+" is in library "+lib+", which was not loaded through squeeze, so what it reads could not be checked for compressed values; load the library again through squeeze (FUNCTION LOAD REPLACE)")
}

// functionCheckReply is the reply to an FCALL or FCALL_RO whose function
// could not be looked up (function's err).
func functionCheckReply(err error) []byte {
	return resp.AppendError(nil, "ERR squeeze: checking that the function's library was loaded through squeeze (FUNCTION LIST): "+err.Error())
}

// checkFunction looks up the function of an FCALL or FCALL_RO (args):
// it returns what the proxy knows of it, and nil, or the reply the
// command gets in its place, not sent: for a library without a prologue,
// or a failed look-up (lost: the upstream connection was lost). A
// function Redis does not have is sent: Redis answers its own error.
func (c *client) checkFunction(args [][]byte) (fi funcInfo, refusal []byte, lost bool) {
	if len(args) < 2 {
		return funcInfo{}, nil, false
	}
	fi, err, lost := c.function(args[1])
	switch {
	case err != nil:
		return fi, functionCheckReply(err), lost
	case fi.present && !fi.guarded:
		return fi, unguardedFunctionReply(args[1], fi.lib), false
	}
	return fi, nil, false
}

// refusedFunctionCmd stands, in what goes to Redis, for an FCALL or
// FCALL_RO the proxy does not send (checkFunction) where it cannot answer
// in its place (inside MULTI, or with replies off): Redis knows no such
// command, so it refuses it when queued, and EXEC then fails with
// EXECABORT, as after any command Redis refuses when queued: the
// transaction changes nothing. The client gets the proxy's reason in
// place of Redis's error (checkQueuedFunction).
var refusedFunctionCmd = []byte("squeeze-function-not-loaded-through-squeeze")

// checkQueuedFunction checks the function of an FCALL or FCALL_RO that
// goes to Redis without runScript (inside MULTI, or with replies off), as
// runScript does (checkFunction). It returns the arguments to send, and
// the reply the client gets in place of Redis's (nil: Redis's own): a
// call the proxy does not send goes as refusedFunctionCmd.
func (c *client) checkQueuedFunction(args [][]byte) ([][]byte, []byte) {
	_, refusal, _ := c.checkFunction(args)
	if refusal == nil {
		return args, nil
	}
	return append([][]byte{refusedFunctionCmd}, args[1:]...), refusal
}

// replyInstead makes the error reply of cl, a command sent as
// refusedFunctionCmd, the proxy's reason.
func replyInstead(cl *call, reply []byte) {
	prev := cl.onFinish
	cl.onFinish = func() {
		if cl.err == nil && len(cl.reply) > 0 && cl.reply[0] == '-' {
			cl.reply = append(cl.reply[:0], reply...)
		}
		if prev != nil {
			prev()
		}
	}
}

// isFCall reports whether the command calls a function.
func isFCall(info *cmdInfo) bool { return info.name == "FCALL" || info.name == "FCALL_RO" }

// changesFunctions reports whether args is a FUNCTION command that may
// change the libraries Redis has: LOAD, DELETE, FLUSH, RESTORE.
func changesFunctions(args [][]byte) bool {
	return len(args) >= 2 && is(args[0], "FUNCTION") &&
		(is(args[1], "LOAD") || is(args[1], "DELETE") || is(args[1], "FLUSH") || is(args[1], "RESTORE"))
}

// forgetFunctions drops what function read (a FUNCTION command that may
// change the libraries went through this proxy), and keeps a look-up
// begun before from storing what it read.
func (m *scriptSHAs) forgetFunctions() {
	m.mu.Lock()
	m.funcs = nil
	m.funcsGen++
	m.mu.Unlock()
}

// forgetFunctionsAfter drops what function read now and again once cl,
// a command that may change the libraries (or the EXEC of a transaction
// holding one), has its reply: a look-up that read them before Redis ran
// it does not keep what it read.
func (s *Server) forgetFunctionsAfter(cl *call) {
	s.scriptSHAs.forgetFunctions()
	if cl == nil {
		return
	}
	prev := cl.onFinish
	cl.onFinish = func() {
		s.scriptSHAs.forgetFunctions()
		if prev != nil {
			prev()
		}
	}
}

// functionsOf reads a FUNCTION LIST WITHCODE reply (RESP2 or RESP3) into
// a map from each function's name, in lower case, to what it says of it:
// its library, whether the library's code holds, after the #! line, a
// prologue (of any version: guarded; of this one: current), and whether
// the function is flagged no-writes.
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
		var name string
		guarded, current := false, false
		fields := lib.Elements()
		for k, ok := fields.Next(); ok; k, ok = fields.Next() {
			val, _ := fields.Next()
			switch string(k.Str) {
			case "library_name":
				name = string(val.Str)
			case "library_code":
				code := val.Str
				guarded = len(luaguard.Unwrap(code)) != len(code)
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
			out[f.name] = funcInfo{lib: name, present: true, guarded: guarded, current: current, noWrites: f.noWrites}
		}
	}
	return out
}
