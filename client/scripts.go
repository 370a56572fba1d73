package client

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/luaguard"
)

// Scripts (EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, FCALL, FCALL_RO, and
// redis.NewScript, which runs EVALSHA then EVAL) work on values as the
// application wrote them, as through the proxy (docs/design/scripts.md):
//
//   - every script body the hook sends (EVAL, SCRIPT LOAD, FUNCTION LOAD)
//     gets the prologue of package luaguard: a compressed value a script
//     reads raises an error naming the key, never reaches the script;
//   - a script sent alone first has the frames at its declared keys made
//     plain, under compare-and-set (luaguard.PlainScript); EVAL_RO and
//     EVALSHA_RO, which must write nothing, are handed them decoded
//     instead (luaguard.AppendDecoded); in a pipeline or transaction
//     neither happens, and a frame there is the prologue's error;
//   - on Valkey, whose scripts reach redis as server too, the prologue
//     shadows server as well (detectAPI);
//   - the prefixes of the keys scripts declare (luaguard.Prefix) are kept
//     in ScriptPrefixesKey and values under them are stored uncompressed
//     from then on, by this hook and by the proxy.
//
// EVALSHA and SCRIPT EXISTS take the SHA-1 of the script as written:
// the hook maps it to its wrapped form's, and SCRIPT LOAD answers it.
// So that a script loaded once runs everywhere by that SHA-1, SCRIPT LOAD
// also loads the script as written (which plain clients' EVALSHA runs, as
// without squeeze) and notes the pair in ScriptSHAsKey, where the hooks of
// other processes look up a SHA-1 they have not seen.
//
// A script whose SHA-1 no hook has noted (loaded before the hook, or by a
// plain client) cannot be guarded: the hook never sees its body. Its
// EVALSHA fails with a NOSCRIPT error, as if Redis did not hold it, and is
// not sent; clients then send the body (redis.NewScript's Run sends EVAL),
// which the hook guards. SCRIPT EXISTS answers 0 for it, for the same
// reason.

// ScriptPrefixesKey is the set of the key prefixes scripts use, shared
// with the proxy (proxy.ScriptPrefixesKey).
const ScriptPrefixesKey = "squeeze:script-prefixes"

// ScriptSHAsKey is the hash from the SHA-1 of each script loaded with
// SCRIPT LOAD through a hook, as written, to the SHA-1 of its guarded
// form, so that every hook can run it by the SHA-1 its loader was given.
const ScriptSHAsKey = "squeeze:script-shas"

// noScriptError is the error of an EVALSHA of a script no hook loaded:
// Redis's NOSCRIPT, so that clients send the script's body, with the
// reason. It wraps ErrUnsupported: the command was not sent.
type noScriptError struct{ sha string }

func (e noScriptError) Error() string {
	return "NOSCRIPT squeeze: no script with SHA-1 " + e.sha + " was loaded through squeeze, so what it reads could not be checked for compressed values; load it again (SCRIPT LOAD) or send it with EVAL"
}

// RedisError marks it as a Redis error for go-redis (redis.HasErrorPrefix,
// and Script.Run's fallback to EVAL).
func (noScriptError) RedisError() {}

func (noScriptError) Unwrap() error { return ErrUnsupported }

// Bounds of what the hook keeps about scripts.
const (
	maxScriptPrefixes = 4096
	maxScriptSHAs     = 4096
	maxCleanKeys      = 1 << 16
	maxPlainRounds    = 4096
	maxPlainBatch     = 256
)

// scriptState is what the hook knows of scripts and of the keys they use.
type scriptState struct {
	loaded   atomic.Bool // ScriptPrefixesKey read once
	any      atomic.Bool
	mu       sync.RWMutex
	prefixes map[string]struct{}
	clean    map[string]struct{}
	wrapped  map[string]string // client's SHA-1 -> wrapped form's
	orig     map[string]string
	// noWrites holds the wrapped forms' SHA-1s of the scripts flagged
	// no-writes (#!lua flags=no-writes) this hook wrapped.
	noWrites map[string]struct{}
	// funcs is what the hook read of the functions Redis has (FUNCTION
	// LIST WITHCODE), by name in lower case: nil until an FCALL needs
	// it, and after a FUNCTION command through the hook.
	funcs map[string]funcInfo
	// api says whether the server's scripts reach redis as server too
	// (Valkey), which the prologue must then shadow as well: apiUnknown
	// until a script sent alone finds out (detectAPI).
	api atomic.Int32
}

// funcInfo is what the hook knows of a function Redis has: its library;
// whether the library holds a prologue (guarded) and this version's
// (current: it takes decoded values with a call's arguments, where issue
// 22's, put by earlier proxies, does not); whether it is flagged
// no-writes.
type funcInfo struct {
	lib                        string
	guarded, current, noWrites bool
}

// What scripts reach redis as (scriptState.api), as the proxy tells.
const (
	apiUnknown = iota
	apiRedis   // redis only
	apiServer  // redis and server (Valkey)
)

// prologues returns the EVAL and FUNCTION LOAD prologues for the server:
// on Valkey they shadow server too, else a script's server.call would read
// frames unguarded.
func (s *scriptState) prologues() (eval, function string) {
	if s.api.Load() == apiServer {
		return luaguard.ServerEvalPrologue, luaguard.ServerFunctionPrologue
	}
	return luaguard.EvalPrologue, luaguard.FunctionPrologue
}

// wrapsBody reports whether the command name (lower case) sends a script
// body the hook wraps: EVAL, EVAL_RO, SCRIPT and FUNCTION (their LOAD).
func wrapsBody(name string) bool {
	switch name {
	case "eval", "eval_ro", "script", "function":
		return true
	}
	return false
}

// detectAPI finds out, once, whether the server's scripts reach redis as
// server too (Valkey), before a script body is wrapped for a command sent
// alone: read-only, so a replica or a pause does not hold it. An error
// reply (a server without EVAL_RO) means redis only; a failed round trip
// leaves it unknown, for the next script. Pipelines do not wait for it:
// until it is known they get the redis prologue.
func (h *Hook) detectAPI(ctx context.Context, next redis.ProcessHook) {
	s := &h.scripts
	if s.api.Load() != apiUnknown {
		return
	}
	c := redis.NewCmd(ctx, "eval_ro", "return type(rawget(_G, 'server'))", 0)
	_ = next(ctx, c)
	api := int32(apiRedis)
	switch v, err := c.Result(); {
	case err == nil && v == "table":
		api = apiServer
	case err != nil && !isRedisError(err):
		return
	}
	if s.api.CompareAndSwap(apiUnknown, api) && api == apiServer {
		// Scripts wrapped before (in pipelines) had the other prologue.
		s.mu.Lock()
		s.wrapped, s.orig = nil, nil
		s.mu.Unlock()
	}
}

// isRedisError reports whether err is an error reply of the server, not a
// failed round trip.
func isRedisError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

func sha1hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// uses reports whether key is under a prefix scripts use.
func (s *scriptState) uses(key string) bool {
	if !s.any.Load() {
		return false
	}
	s.mu.RLock()
	_, ok := s.prefixes[string(luaguard.Prefix([]byte(key)))]
	s.mu.RUnlock()
	return ok
}

// add notes prefixes and returns the new ones.
func (s *scriptState) add(ps []string) (added []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prefixes == nil {
		s.prefixes = map[string]struct{}{}
	}
	for _, p := range ps {
		if _, ok := s.prefixes[p]; !ok && len(s.prefixes) < maxScriptPrefixes {
			s.prefixes[p] = struct{}{}
			added = append(added, p)
		}
	}
	if len(s.prefixes) > 0 {
		s.any.Store(true)
	}
	return added
}

// dirty returns the keys not known to hold no frame.
func (s *scriptState) dirty(keys []string) (out []string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, k := range keys {
		if _, ok := s.clean[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

func (s *scriptState) setClean(keys []string, clean bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clean == nil || len(s.clean)+len(keys) > maxCleanKeys {
		s.clean = map[string]struct{}{}
	}
	for _, k := range keys {
		if !clean {
			delete(s.clean, k)
		} else if _, ok := s.prefixes[string(luaguard.Prefix([]byte(k)))]; ok {
			s.clean[k] = struct{}{}
		}
	}
}

// wrap returns the wrapped form of an EVAL or SCRIPT LOAD body and notes
// the SHA-1s.
func (s *scriptState) wrap(body string) (wrapped, origSHA, wrappedSHA string) {
	eval, _ := s.prologues()
	wrapped = string(luaguard.Wrap([]byte(body), eval))
	origSHA, wrappedSHA = sha1hex(body), sha1hex(wrapped)
	s.note(origSHA, wrappedSHA)
	if noWrites(body) {
		s.mu.Lock()
		if s.noWrites == nil || len(s.noWrites) >= maxScriptSHAs {
			s.noWrites = map[string]struct{}{}
		}
		s.noWrites[wrappedSHA] = struct{}{}
		s.mu.Unlock()
	}
	return wrapped, origSHA, wrappedSHA
}

// note notes that the script of SHA-1 orig runs guarded as wrapped.
func (s *scriptState) note(orig, wrapped string) {
	s.mu.Lock()
	if s.wrapped == nil || len(s.wrapped) >= maxScriptSHAs {
		s.wrapped, s.orig = map[string]string{}, map[string]string{}
	}
	s.wrapped[orig], s.orig[wrapped] = wrapped, orig
	s.mu.Unlock()
}

// noWritesSHA reports whether the script of a wrapped form's SHA-1 is
// flagged no-writes, as far as the hook knows (a script another process
// loaded, found in ScriptSHAsKey, is not known to be).
func (s *scriptState) noWritesSHA(wrapped string) bool {
	s.mu.RLock()
	_, ok := s.noWrites[strings.ToLower(wrapped)]
	s.mu.RUnlock()
	return ok
}

// noWrites reports whether a script body begins with a #! line whose
// flags hold no-writes: Redis runs it as read-only (not held by CLIENT
// PAUSE WRITE, run by a replica), so the hook writes nothing for it
// either, as the proxy (runScript).
func noWrites(body string) bool {
	if !strings.HasPrefix(body, "#!") {
		return false
	}
	line, _, _ := strings.Cut(body, "\n")
	for _, f := range strings.Fields(line) {
		if flags, ok := strings.CutPrefix(f, "flags="); ok {
			if slices.Contains(strings.Split(flags, ","), "no-writes") {
				return true
			}
		}
	}
	return false
}

// toRedis returns the SHA-1 Redis knows for a client's, and whether the
// hook knows it runs guarded (a wrapped form's SHA-1 is its own).
func (s *scriptState) toRedis(sha string) (string, bool) {
	sha = strings.ToLower(sha)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if w, ok := s.wrapped[sha]; ok {
		return w, true
	}
	if _, ok := s.orig[sha]; ok {
		return sha, true
	}
	return sha, false
}

// scriptKeys returns the keys a script command declares (nil, false when
// numkeys does not fit: Redis answers with its error).
func scriptKeys(args []any) ([]string, bool) {
	if len(args) < 3 {
		return nil, false
	}
	n, err := strconv.Atoi(argString(args[2]))
	if err != nil || n < 0 || n > len(args)-3 {
		return nil, false
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = argString(args[3+i])
	}
	return keys, true
}

// swap replaces args[i] by v, saved for undo.
func (p *prepared) swap(args []any, i int, v any) {
	sa := savedArg{i: i, v: args[i]}
	if p.nsaved == 0 {
		p.first = sa
	} else {
		p.more = append(p.more, sa)
	}
	p.nsaved++
	args[i] = v
}

// prepareScript rewrites a script command's arguments (saved in p for
// undo) and notes the keys to make plain first, and the SHA-1s to look up
// in ScriptSHAsKey (p.lookup; resolveScript completes the command once
// they are). It reports whether the command is a script command.
func (h *Hook) prepareScript(ctx context.Context, args []any, p *prepared) bool {
	switch {
	case p.name == "script" && len(args) >= 3 && strings.EqualFold(argString(args[1]), "load"):
		body := argString(args[2])
		w, sha, wsha := h.scripts.wrap(body)
		p.swap(args, 2, w)
		p.scriptSHA = sha
		// The script as written too, and the pair for other hooks.
		p.extra = []redis.Cmder{
			redis.NewStringCmd(ctx, "script", "load", body),
			redis.NewIntCmd(ctx, "hset", ScriptSHAsKey, sha, wsha),
		}
		return true
	case p.name == "script" && len(args) >= 3 && strings.EqualFold(argString(args[1]), "exists"):
		for i := 2; i < len(args); i++ {
			if w, ok := h.scripts.toRedis(argString(args[i])); ok {
				p.swap(args, i, w)
			} else {
				p.lookup = append(p.lookup, w)
			}
		}
		return true
	case p.name == "function" && len(args) >= 3 && strings.EqualFold(argString(args[1]), "load"):
		last := len(args) - 1
		_, function := h.scripts.prologues()
		p.swap(args, last, string(luaguard.Wrap([]byte(argString(args[last])), function)))
		return true
	}
	switch p.name {
	case "eval", "eval_ro":
		w, _, _ := h.scripts.wrap(argString(args[1]))
		p.swap(args, 1, w)
	case "evalsha", "evalsha_ro":
		if w, ok := h.scripts.toRedis(argString(args[1])); ok {
			p.swap(args, 1, w)
		} else {
			p.lookup = append(p.lookup, w)
		}
	case "fcall", "fcall_ro":
		if len(args) >= 2 {
			p.fcall = argString(args[1]) // checked before it is sent (checkFunction)
		}
	default:
		return false
	}
	if keys, ok := scriptKeys(args); ok {
		p.scriptKeys = keys
	}
	p.script = true
	return true
}

// unguardedFunctionError is the error of an FCALL or FCALL_RO of a
// function whose library holds no prologue (loaded before the hook, or by
// a plain client): as EVALSHA of a script no hook loaded, it is not sent,
// since what it reads could not be checked. It wraps ErrUnsupported.
type unguardedFunctionError struct{ name, lib string }

func (e unguardedFunctionError) Error() string {
	return "ERR squeeze: function " + e.name + " is in library " + e.lib + ", which was not loaded through squeeze, so what it reads could not be checked for compressed values; load the library again through squeeze (FUNCTION LOAD REPLACE)"
}

// RedisError marks it as a Redis error for go-redis.
func (unguardedFunctionError) RedisError() {}

func (unguardedFunctionError) Unwrap() error { return ErrUnsupported }

// uncheckedFunctionError is the error of an FCALL or FCALL_RO in a
// transaction of a function the hook has not yet found in a library
// loaded through squeeze: it cannot ask Redis there (FUNCTION LIST would
// be queued), and does not send what it could not check. It wraps
// ErrUnsupported.
type uncheckedFunctionError struct{ name string }

func (e uncheckedFunctionError) Error() string {
	return "ERR squeeze: function " + e.name + " is not yet known to be in a library loaded through squeeze, and the hook cannot check it inside a transaction; call it once outside a transaction first"
}

// RedisError marks it as a Redis error for go-redis.
func (uncheckedFunctionError) RedisError() {}

func (uncheckedFunctionError) Unwrap() error { return ErrUnsupported }

// function returns what the hook read of a function, and whether it read
// that Redis has it.
func (s *scriptState) function(name string) (funcInfo, bool) {
	s.mu.RLock()
	fi, ok := s.funcs[strings.ToLower(name)] // FCALL finds a function whatever its case
	s.mu.RUnlock()
	return fi, ok
}

// forgetFunctions drops what readFunctions read (a FUNCTION command went
// through the hook: a library may have been loaded, deleted or restored).
func (s *scriptState) forgetFunctions() {
	s.mu.Lock()
	s.funcs = nil
	s.mu.Unlock()
}

// readFunctions reads FUNCTION LIST WITHCODE with send (one round trip,
// read-only: a pause does not hold it, a replica answers it) and keeps
// what it says of each function (funcInfo).
func (h *Hook) readFunctions(ctx context.Context, send func(redis.Cmder) error) error {
	c := redis.NewFunctionListCmd(ctx, "function", "list", "withcode")
	if err := send(c); err != nil && c.Err() == nil {
		c.SetErr(err)
	}
	if err := c.Err(); err != nil {
		return fmt.Errorf("client: FCALL: checking that the function's library was loaded through squeeze (FUNCTION LIST): %w", err)
	}
	funcs := map[string]funcInfo{}
	for _, l := range c.Val() {
		code := l.Code
		guarded := len(luaguard.Unwrap([]byte(code))) != len(code)
		current := guarded && (strings.Contains(code, "\n"+luaguard.FunctionPrologue) || strings.Contains(code, "\n"+luaguard.ServerFunctionPrologue))
		for _, f := range l.Functions {
			funcs[strings.ToLower(f.Name)] = funcInfo{lib: l.Name, guarded: guarded, current: current, noWrites: slices.Contains(f.Flags, "no-writes")}
		}
	}
	h.scripts.mu.Lock()
	h.scripts.funcs = funcs
	h.scripts.mu.Unlock()
	return nil
}

// checkFunction returns what the hook knows of the function an FCALL or
// FCALL_RO names, and fails for one whose library holds no prologue
// (unguardedFunctionError), so that it never reads a frame silently. What
// it does not know guarded it reads again with send first; send nil (in a
// transaction) uses what it read before, and fails for a function it
// does not know (uncheckedFunctionError). A function Redis does not have
// is sent: Redis answers its own error.
func (h *Hook) checkFunction(ctx context.Context, send func(redis.Cmder) error, name string) (funcInfo, error) {
	fi, known := h.scripts.function(name)
	if known && fi.guarded {
		return fi, nil
	}
	if send != nil {
		if err := h.readFunctions(ctx, send); err != nil {
			return funcInfo{}, err
		}
		fi, known = h.scripts.function(name)
	}
	switch {
	case known && !fi.guarded:
		return fi, unguardedFunctionError{name: name, lib: fi.lib}
	case !known && send == nil:
		return fi, uncheckedFunctionError{name: name}
	}
	return fi, nil
}

// lookupSHAs looks shas up in ScriptSHAsKey with send (one round trip)
// and notes those found.
func (h *Hook) lookupSHAs(ctx context.Context, send func(redis.Cmder) error, shas []string) error {
	a := make([]any, 0, 2+len(shas))
	a = append(a, "hmget", ScriptSHAsKey)
	for _, s := range shas {
		a = append(a, s)
	}
	c := redis.NewSliceCmd(ctx, a...)
	if err := send(c); err != nil && c.Err() == nil {
		c.SetErr(err)
	}
	if err := c.Err(); err != nil {
		return err
	}
	for i, v := range c.Val() {
		if w, ok := v.(string); ok && i < len(shas) && len(w) == 40 {
			h.scripts.note(shas[i], w)
		}
	}
	return nil
}

// resolveScript completes an EVALSHA or SCRIPT EXISTS whose SHA-1s were
// looked up: each known one is translated; an EVALSHA of an unknown one
// fails with a NOSCRIPT error (see noScriptError), and SCRIPT EXISTS
// answers 0 for it.
func (h *Hook) resolveScript(args []any, p *prepared) error {
	if len(p.lookup) == 0 {
		return nil
	}
	if p.name == "script" {
		for i := 2; i < len(args); i++ {
			sha := strings.ToLower(argString(args[i]))
			if !slices.Contains(p.lookup, sha) {
				continue // translated already
			}
			if w, ok := h.scripts.toRedis(sha); ok {
				p.swap(args, i, w)
			} else {
				p.swap(args, i, "") // no hook loaded it: Redis answers 0
			}
		}
		return nil
	}
	w, ok := h.scripts.toRedis(argString(args[1]))
	if !ok {
		return noScriptError{sha: w}
	}
	p.swap(args, 1, w)
	return nil
}

// learnScriptKeys notes the prefixes of keys, reading ScriptPrefixesKey
// the first time and adding the new ones to it (one round trip each, the
// first time only).
func (h *Hook) learnScriptKeys(ctx context.Context, next redis.ProcessHook, keys []string) {
	if h.scripts.loaded.CompareAndSwap(false, true) {
		c := redis.NewStringSliceCmd(ctx, "smembers", ScriptPrefixesKey)
		if next(ctx, c) == nil {
			h.scripts.add(c.Val())
		}
	}
	if added := h.scripts.add(scriptPrefixes(keys)); len(added) > 0 {
		// As the proxy does (proxy/scriptshare.go): announce them, so
		// that every proxy in front of this Redis keeps them plain at
		// once, then save them with their use. Best effort: the hook
		// keeps them anyway.
		now := strconv.FormatInt(time.Now().UnixMilli(), 10)
		a, u := []any{"sadd", ScriptPrefixesKey}, []any{"hset", ScriptPrefixesKey + ":used"}
		for _, p := range added {
			_ = next(ctx, redis.NewIntCmd(ctx, "publish", ScriptPrefixesKey, p))
			a, u = append(a, p), append(u, p, now)
		}
		_ = next(ctx, redis.NewIntCmd(ctx, a...))
		_ = next(ctx, redis.NewIntCmd(ctx, u...))
	}
}

// makePlain turns the frames at keys into plain values (see
// luaguard.PlainScript).
func (h *Hook) makePlain(ctx context.Context, next redis.ProcessHook, keys []string) error {
	type cand struct{ key, kind, at, frame, dec string }
	var cands []cand
	for range maxPlainRounds {
		a := []any{"eval", luaguard.PlainScript, len(keys)}
		for _, k := range keys {
			a = append(a, k)
		}
		mode := "P"
		if len(cands) > 0 {
			mode = "S"
		}
		a = append(a, mode, len(cands))
		for _, c := range cands {
			a = append(a, c.key, c.kind, c.at, c.frame, c.dec)
		}
		a = append(a, maxPlainBatch)
		cmd := redis.NewCmd(ctx, a...)
		if err := next(ctx, cmd); err != nil && cmd.Err() == nil {
			cmd.SetErr(err)
		}
		if err := cmd.Err(); err != nil {
			return fmt.Errorf("decoding the script's keys: %w", err)
		}
		list, ok := cmd.Val().([]any)
		if !ok {
			return nil // "OK": no frame left
		}
		cands = cands[:0]
		for i := 1; i+3 < len(list); i += 4 {
			k, _ := list[i].(string)
			kind, _ := list[i+1].(string)
			at, _ := list[i+2].(string)
			f, _ := list[i+3].(string)
			d, err := h.decodeString(f)
			if err != nil {
				return &Error{Command: "eval", Key: k, Err: err}
			}
			if strings.HasPrefix(d, codec.Magic) {
				continue // stored plain it would read as a frame: it stays one
			}
			cands = append(cands, cand{k, kind, at, f, d})
		}
		if len(cands) == 0 {
			return nil
		}
	}
	return errors.New("the script's keys kept changing under concurrent writes; try again")
}

// runScript sends a script command alone: declared keys made plain first,
// and once more if the prologue found a frame at one before the script
// wrote anything.
func (h *Hook) runScript(ctx context.Context, next redis.ProcessHook, cmd redis.Cmder, p prepared) error {
	keys := p.scriptKeys
	if c, ok := cmd.(*redis.Cmd); ok && len(keys) > 0 && h.readOnlyScript(cmd, p) {
		// A library of an earlier proxy (issue 22's prologue) would pass
		// decoded values on to its function as arguments: it gets none,
		// and a frame it reads is that prologue's error, as through the
		// proxy.
		return h.runReadOnly(ctx, next, c, keys, p.fcall == "" || p.fn.current)
	}
	if len(keys) > 0 {
		h.learnScriptKeys(ctx, next, keys)
	}
	for attempt := 0; ; attempt++ {
		if dirty := h.scripts.dirty(keys); len(dirty) > 0 {
			if err := h.makePlain(ctx, next, dirty); err != nil {
				return &Error{Command: p.name, Key: dirty[0], Err: err}
			}
			h.scripts.setClean(dirty, true)
		}
		err := next(ctx, cmd)
		if err != nil && cmd.Err() == nil {
			cmd.SetErr(err)
		}
		e := cmd.Err()
		if e == nil || attempt >= maxGuardRetries || len(keys) == 0 ||
			!strings.HasPrefix("-"+e.Error(), luaguard.FrameErr) || !strings.Contains(e.Error(), luaguard.Retryable) {
			return nil
		}
		h.scripts.setClean(keys, false)
		cmd.SetErr(nil)
	}
}

// readOnlyScript reports whether a script command must write nothing:
// EVAL_RO, EVALSHA_RO, FCALL_RO, a script or function flagged no-writes
// (as far as the hook knows), which Redis runs during CLIENT PAUSE WRITE
// and on a replica.
func (h *Hook) readOnlyScript(cmd redis.Cmder, p prepared) bool {
	switch p.name {
	case "eval_ro", "evalsha_ro", "fcall_ro":
		return true
	case "eval":
		return noWrites(argString(cmd.Args()[1])) // wrapped: the #! line stays first
	case "evalsha":
		return h.scripts.noWritesSHA(argString(cmd.Args()[1]))
	case "fcall":
		return p.fn.noWrites
	}
	return false
}

// maxDecodedFrames bounds the frames decodeFor hands one script (the
// proxy's bound).
const maxDecodedFrames = maxPlainBatch * 64

// runReadOnly runs a script command that must write nothing
// (readOnlyScript), sent alone, as the proxy does: a replica runs it, a
// pause does not hold it, and its keys' prefixes are not learned. With
// decode, the frames at the declared keys are found read-only and handed
// to the script decoded, after its arguments (luaguard.AppendDecoded),
// where the prologue reads them in their place; if the prologue finds
// another frame at a declared key (another client wrote it since), it
// decodes again.
func (h *Hook) runReadOnly(ctx context.Context, next redis.ProcessHook, cmd *redis.Cmd, keys []string, decode bool) error {
	for attempt := 0; ; attempt++ {
		var pairs [][2][]byte
		if decode && (attempt > 0 || len(h.scripts.dirty(keys)) > 0) { // else plain under a prefix scripts use
			var err error
			if pairs, err = h.decodeFor(ctx, next, keys); err != nil {
				return err
			}
		}
		send := cmd
		if len(pairs) > 0 {
			args := make([][]byte, len(cmd.Args()))
			for i, a := range cmd.Args() {
				args[i] = []byte(argString(a))
			}
			send = redis.NewCmd(ctx, anyWords(luaguard.AppendDecoded(args, pairs))...)
		}
		if err := next(ctx, send); err != nil && send.Err() == nil {
			send.SetErr(err)
		}
		e := send.Err()
		if e != nil && decode && attempt < maxGuardRetries && strings.HasPrefix("-"+e.Error(), luaguard.FrameErr) && strings.Contains(e.Error(), luaguard.Retryable) {
			continue
		}
		if send != cmd {
			cmd.SetVal(send.Val())
			cmd.SetErr(e)
		}
		return nil
	}
}

// decodeFor returns the frames at keys and their decoded values, found
// with luaguard.PlainScript's look alone, sent read-only (EVAL_RO).
func (h *Hook) decodeFor(ctx context.Context, next redis.ProcessHook, keys []string) ([][2][]byte, error) {
	a := []any{"eval_ro", luaguard.PlainScript, len(keys)}
	for _, k := range keys {
		a = append(a, k)
	}
	c := redis.NewCmd(ctx, append(a, "P", 0, maxDecodedFrames)...)
	if err := next(ctx, c); err != nil && c.Err() == nil {
		c.SetErr(err)
	}
	if err := c.Err(); err != nil {
		return nil, fmt.Errorf("decoding the script's keys: %w", err)
	}
	list, ok := c.Val().([]any)
	if !ok {
		return nil, nil // "OK": no frame
	}
	var pairs [][2][]byte
	for i := 1; i+3 < len(list); i += 4 {
		k, _ := list[i].(string)
		f, _ := list[i+3].(string)
		d, err := h.decodeString(f)
		if err != nil {
			return nil, &Error{Command: "eval_ro", Key: k, Err: err}
		}
		pairs = append(pairs, [2][]byte{[]byte(f), []byte(d)})
	}
	return pairs, nil
}

// scriptPrefixes returns the prefixes of keys (luaguard.Prefix).
func scriptPrefixes(keys []string) []string {
	ps := make([]string, len(keys))
	for i, k := range keys {
		ps[i] = string(luaguard.Prefix([]byte(k)))
	}
	return ps
}

// unwrapLibrary returns a library's code as it was loaded: without the
// prologue FUNCTION LOAD put after its #! line (luaguard.Wrap). Code
// loaded without the hook is returned as it is.
func unwrapLibrary(code string) string {
	return string(luaguard.Unwrap([]byte(code)))
}

// unwrapLibraries unwraps the library_code of each library in the generic
// reply of FUNCTION LIST WITHCODE: an array of libraries, each a flat
// array of name, value pairs (RESP2) or a map (RESP3).
func unwrapLibraries(v any) {
	libs, _ := v.([]any)
	for _, l := range libs {
		switch t := l.(type) {
		case []any:
			for i := 0; i+1 < len(t); i += 2 {
				if k, _ := t[i].(string); k == "library_code" {
					if code, ok := t[i+1].(string); ok {
						t[i+1] = unwrapLibrary(code)
					}
				}
			}
		case map[any]any:
			if code, ok := t["library_code"].(string); ok {
				t["library_code"] = unwrapLibrary(code)
			}
		}
	}
}

// loadError is a FUNCTION LOAD error with the server's own text.
type loadError string

func (e loadError) Error() string { return string(e) }

// RedisError marks it as a Redis error for go-redis.
func (loadError) RedisError() {}

// fixLoadError gives a FUNCTION LOAD refused by the prologue because a
// callback is not a function the error the server gives without it
// (luaguard.LoadError), the API's name asked of the server
// (luaguard.APIProbe, which every server refuses).
func fixLoadError(ctx context.Context, next redis.ProcessHook, cmd redis.Cmder) {
	err := cmd.Err()
	if err == nil || !luaguard.IsLoadError([]byte(err.Error())) {
		return
	}
	api := "redis"
	probe := redis.NewStringCmd(ctx, "function", "load", luaguard.APIProbe)
	if next(ctx, probe) != nil && probe.Err() != nil {
		api = luaguard.ProbeAPI([]byte(probe.Err().Error()))
	}
	// A server whose scripts reach the API as server too (Valkey) names it
	// so in these errors, whatever the probe's error says.
	if api == "redis" {
		alias := redis.NewStringCmd(ctx, "eval_ro", "return type(rawget(_G, 'server'))", 0)
		if next(ctx, alias) == nil && alias.Val() == "table" {
			api = "server"
		}
	}
	cmd.SetErr(loadError(luaguard.LoadError([]byte(err.Error()), api)))
}
