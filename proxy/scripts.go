package proxy

import (
	"bytes"
	"strings"
	"sync"

	"github.com/squeeze-kv/squeeze/internal/luaguard"
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
//     (scriptrun.go); inside MULTI before the script is queued.
//   - The key prefixes scripts use are learned, kept in Redis
//     (scriptPrefixesKey) and stay uncompressed from then on
//     (scriptkeys.go).
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
	mu      sync.RWMutex
	wrapped map[string]string // client's SHA-1 -> wrapped form's
	orig    map[string]string // wrapped form's -> client's
}

// wrap returns the wrapped form of an EVAL script or SCRIPT LOAD body, and
// notes both SHA-1s.
func (m *scriptSHAs) wrap(body []byte) (wrapped []byte, origSHA, wrappedSHA string) {
	wrapped = luaguard.Wrap(body, luaguard.EvalPrologue)
	origSHA, wrappedSHA = scriptSHA(string(body)), scriptSHA(string(wrapped))
	m.mu.RLock()
	known := m.wrapped[origSHA] == wrappedSHA
	m.mu.RUnlock()
	if !known {
		m.mu.Lock()
		if m.wrapped == nil || len(m.wrapped) >= maxScriptSHAs {
			m.wrapped, m.orig = map[string]string{}, map[string]string{}
		}
		m.wrapped[origSHA], m.orig[wrappedSHA] = wrappedSHA, origSHA
		m.mu.Unlock()
	}
	return wrapped, origSHA, wrappedSHA
}

// toRedis returns the SHA-1 Redis knows for the one a client sent: the
// wrapped form's when the proxy saw the script, else sha unchanged (a
// script loaded directly on Redis).
func (m *scriptSHAs) toRedis(sha []byte) []byte {
	m.mu.RLock()
	w, ok := m.wrapped[strings.ToLower(string(sha))]
	m.mu.RUnlock()
	if ok {
		return []byte(w)
	}
	return sha
}

// toClient replaces, in a reply, the wrapped forms' SHA-1s Redis names (in
// error messages: "script: <sha>") with the client's.
func (m *scriptSHAs) toClient(reply []byte) []byte {
	i := bytes.Index(reply, []byte("script: "))
	if i < 0 || len(reply) < i+8+40 {
		return reply
	}
	sha := string(reply[i+8 : i+48])
	m.mu.RLock()
	o, ok := m.orig[sha]
	m.mu.RUnlock()
	if ok {
		copy(reply[i+8:], o)
	}
	return reply
}
