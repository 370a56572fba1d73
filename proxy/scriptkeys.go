package proxy

import (
	"bytes"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/squeeze-kv/squeeze/internal/luaguard"
)

// ScriptPrefixesKey is the Redis set in which the proxy keeps the key
// prefixes scripts use: values under them are stored uncompressed, so that
// scripts read them as the application wrote them. It is also the channel
// on which a proxy announces a prefix it learned, so that every proxy in
// front of the same Redis (or the same cluster) keeps it plain at once
// (scriptshare.go). `squeeze advise` reports it and `squeeze compact` skips
// its prefixes.
const ScriptPrefixesKey = "squeeze:script-prefixes"

// ScriptPrefixesUsedKey is the Redis hash of when a script last used each
// prefix of ScriptPrefixesKey (Unix milliseconds): a prefix no script used
// for Server.ScriptPrefixTTL is forgotten and compressed again, by every
// proxy alike.
const ScriptPrefixesUsedKey = "squeeze:script-prefixes:used"

// DefaultScriptPrefixTTL is how long a prefix no script uses stays plain
// when Server.ScriptPrefixTTL is zero.
const DefaultScriptPrefixTTL = 7 * 24 * time.Hour

// maxScriptPrefixes bounds the prefixes learned: past it, keys of new
// prefixes are still decoded before each script that declares them
// (scriptrun.go), only no longer kept plain on write.
const maxScriptPrefixes = 4096

// maxCleanKeys bounds the keys known to hold no frame (emptied when full).
const maxCleanKeys = 1 << 16

// scriptPrefixRefresh is how often, at most, the proxy reads
// ScriptPrefixesKey again, saves the uses of its prefixes, saves again the
// prefixes the set lost (FLUSHALL) and forgets those unused for the TTL.
const scriptPrefixRefresh = 10 * time.Second

// ScriptPrefix returns the prefix a key used by a script stands for (see
// luaguard.Prefix: up to its last ':' or to a segment that is an id).
func ScriptPrefix(key []byte) []byte { return luaguard.Prefix(key) }

// prefixEntry is one prefix the proxy keeps plain.
type prefixEntry struct {
	// known: a script ran with a key of it that held a value (or another
	// proxy, or the set in Redis, says so). Until then the entry is
	// tentative: pending scripts declared a key of it and have not ended,
	// and writes under it stay plain meanwhile.
	known   bool
	pending int
	used    atomic.Int64 // Unix ms of the last use by a script known here
	saved   int64        // used as last written to ScriptPrefixesUsedKey
	inSet   bool         // seen in ScriptPrefixesKey by the last read
}

// scriptKeys is what the proxy knows about the keys scripts use.
type scriptKeys struct {
	any      atomic.Bool // some prefix is kept plain: writes must look
	mu       sync.RWMutex
	prefixes map[string]*prefixEntry
	// clean: keys under a prefix kept plain that the proxy found without a
	// frame (or made so). Nothing the proxy writes there is compressed, so
	// a script that declares only clean keys needs no decoding first.
	clean map[string]struct{}
}

// uses reports whether key falls under a prefix kept plain.
func (k *scriptKeys) uses(key []byte) bool {
	if !k.any.Load() {
		return false
	}
	k.mu.RLock()
	_, ok := k.prefixes[string(ScriptPrefix(key))]
	k.mu.RUnlock()
	return ok
}

// scriptMark is what scriptBegin noted for one script, for scriptEnd.
type scriptMark struct {
	cmd       string
	db        int // the client's database, where the script runs
	keys      [][]byte
	prefixes  []string // distinct, of keys
	tentative []string // those not known when the script began
	held      []string // tentative ones of which a key held a value before
	// clean are the keys the script's preparation found or made plain
	// (prepareScript): noted clean once their prefix is known (scriptEnd).
	clean [][]byte
}

// noteClean notes keys m's preparation found or made plain; m may be nil.
func (m *scriptMark) noteClean(keys [][]byte) {
	if m != nil {
		m.clean = append(m.clean, keys...)
	}
}

// begin notes the prefixes of a script's keys before it runs: a prefix
// not known yet becomes tentative, so that writes under it stay plain
// while the script runs.
func (k *scriptKeys) begin(m *scriptMark) {
	for _, key := range m.keys {
		if p := string(ScriptPrefix(key)); !slices.Contains(m.prefixes, p) {
			m.prefixes = append(m.prefixes, p)
		}
	}
	k.mu.RLock()
	all := true
	for _, p := range m.prefixes {
		if e, ok := k.prefixes[p]; !ok || !e.known {
			all = false
			break
		}
	}
	k.mu.RUnlock()
	if all {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.prefixes == nil {
		k.prefixes = map[string]*prefixEntry{}
	}
	for _, p := range m.prefixes {
		e, ok := k.prefixes[p]
		if !ok {
			if len(k.prefixes) >= maxScriptPrefixes {
				continue
			}
			e = &prefixEntry{}
			k.prefixes[p] = e
		}
		if !e.known {
			e.pending++
			m.tentative = append(m.tentative, p)
		}
	}
	if len(k.prefixes) > 0 {
		k.any.Store(true)
	}
}

// touch notes a use of prefixes at now.
func (k *scriptKeys) touch(prefixes []string, now int64) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, p := range prefixes {
		if e, ok := k.prefixes[p]; ok && e.used.Load() < now {
			e.used.Store(now)
		}
	}
}

// touchKeys notes a use of the prefixes of keys at now.
func (k *scriptKeys) touchKeys(keys [][]byte, now int64) {
	if !k.any.Load() {
		return
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, key := range keys {
		if e, ok := k.prefixes[string(ScriptPrefix(key))]; ok && e.used.Load() < now {
			e.used.Store(now)
		}
	}
}

// settle ends the tentative prefixes of a script: those in learn become
// known (the new ones are returned), the others are dropped when no other
// script holds them (no key is noted clean under a tentative prefix).
func (k *scriptKeys) settle(m *scriptMark, learn []string, now int64) (added []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	dropped := false
	for _, p := range m.tentative {
		e, ok := k.prefixes[p]
		if !ok {
			continue
		}
		e.pending--
		switch {
		case e.known:
		case slices.Contains(learn, p):
			e.known = true
			e.used.Store(now)
			added = append(added, p)
		case e.pending <= 0:
			delete(k.prefixes, p)
			dropped = true
		}
	}
	if dropped {
		k.any.Store(len(k.prefixes) > 0)
	}
	return added
}

// add notes prefixes as known (read from Redis or announced by another
// proxy), within the bound, and returns those that are new. used is the
// time of their last use, 0 for now.
func (k *scriptKeys) add(prefixes []string, used map[string]int64, now int64) (added []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.prefixes == nil {
		k.prefixes = map[string]*prefixEntry{}
	}
	for _, p := range prefixes {
		e, ok := k.prefixes[p]
		if !ok {
			if len(k.prefixes) >= maxScriptPrefixes {
				continue
			}
			e = &prefixEntry{}
			k.prefixes[p] = e
		}
		u := used[p]
		if u == 0 && !e.known {
			u = now
		}
		if e.used.Load() < u {
			e.used.Store(u)
		}
		if u > e.saved && used[p] == u {
			e.saved = u // as the hash has it
		}
		if !e.known {
			e.known = true
			added = append(added, p)
		}
	}
	if len(k.prefixes) > 0 {
		k.any.Store(true)
	}
	return added
}

// dirty returns the keys not known clean.
func (k *scriptKeys) dirty(keys [][]byte) (out [][]byte) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, key := range keys {
		if _, ok := k.clean[string(key)]; !ok {
			out = append(out, key)
		}
	}
	return out
}

// setClean notes keys as holding no frame, those under a known prefix
// only (a key outside them may be compressed by the next write; a
// tentative prefix may be dropped, and its keys are noted once it is
// known: scriptEnd).
func (k *scriptKeys) setClean(keys [][]byte, clean bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.clean == nil || len(k.clean)+len(keys) > maxCleanKeys {
		k.clean = map[string]struct{}{}
	}
	for _, key := range keys {
		if !clean {
			delete(k.clean, string(key))
		} else if e, ok := k.prefixes[string(ScriptPrefix(key))]; ok && e.known {
			k.clean[string(key)] = struct{}{}
		}
	}
}

// ScriptPrefixUse is one prefix kept uncompressed because scripts use it.
type ScriptPrefixUse struct {
	Prefix   string
	LastUsed time.Time // by a script, as far as this proxy knows
}

// list returns the known prefixes, sorted.
func (k *scriptKeys) list() []ScriptPrefixUse {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make([]ScriptPrefixUse, 0, len(k.prefixes))
	for p, e := range k.prefixes {
		if e.known {
			out = append(out, ScriptPrefixUse{Prefix: p, LastUsed: time.UnixMilli(e.used.Load())})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Prefix < out[j].Prefix })
	return out
}

// ScriptPrefixes returns the key prefixes the proxy keeps uncompressed
// because scripts use them, sorted.
func (s *Server) ScriptPrefixes() []string {
	var out []string
	for _, u := range s.scriptKeys.list() {
		out = append(out, u.Prefix)
	}
	return out
}

// ScriptPrefixUses returns the key prefixes the proxy keeps uncompressed
// because scripts use them, with their last use, sorted.
func (s *Server) ScriptPrefixUses() []ScriptPrefixUse { return s.scriptKeys.list() }

// scriptPrefixTTL is how long a prefix no script uses stays plain; 0:
// for ever.
func (s *Server) scriptPrefixTTL() time.Duration {
	switch {
	case s.ScriptPrefixTTL < 0:
		return 0
	case s.ScriptPrefixTTL == 0:
		return DefaultScriptPrefixTTL
	}
	return s.ScriptPrefixTTL
}

// scriptPrefixTTLText says the TTL in logs.
func (s *Server) scriptPrefixTTLText() string {
	if ttl := s.scriptPrefixTTL(); ttl > 0 {
		return ttl.String()
	}
	return "never"
}

// scriptBegin notes the keys a script command declares before it runs
// (see scriptKeys.begin); scriptEnd must follow, with its reply.
func (s *Server) scriptBegin(cmd string, db int, keys [][]byte) *scriptMark {
	if len(keys) == 0 {
		return nil
	}
	m := &scriptMark{cmd: cmd, db: db, keys: keys}
	s.scriptKeys.begin(m)
	return m
}

// heldPrefixes returns those of m's tentative prefixes (or in m.held) of
// which a declared key holds a value now, as EXISTS on the proxy's own
// connection tells (not the client's: the check must not act as the
// client's ACL user, nor show in its tracking), in the client's database;
// a prefix it cannot tell of is learned.
func (s *Server) heldPrefixes(m *scriptMark) (held []string) {
	for _, p := range m.tentative {
		if slices.Contains(m.held, p) {
			held = append(held, p)
			continue
		}
		var keys [][]byte
		for _, k := range m.keys {
			if string(ScriptPrefix(k)) == p {
				keys = append(keys, k)
			}
		}
		if n, err := s.existsIn(m.db, keys); err != nil || n > 0 {
			held = append(held, p)
		}
	}
	return held
}

// scriptHeld notes, before a script runs (after its keys were made plain,
// so the client's commands before it have run), which of its tentative
// prefixes have a declared key that holds a value.
func (s *Server) scriptHeld(m *scriptMark) {
	if m != nil && len(m.tentative) > 0 {
		m.held = s.heldPrefixes(m)
	}
}

// scriptEnd ends what scriptBegin noted, with the script's reply (nil: it
// failed before reaching Redis, or was not sent). A script Redis did not run (a
// redirection, NOSCRIPT, a refusal; see scriptRan) learns nothing. One that
// ran touches its prefixes; a tentative prefix becomes known when a key of
// it held a value before the script or holds one after it (a script that
// only read missing keys learns nothing), and is then announced to the
// other proxies and saved in Redis before the client gets the reply, so
// that they agree at once.
func (s *Server) scriptEnd(m *scriptMark, reply []byte) {
	if m == nil {
		return
	}
	ran := scriptRan(reply)
	now := time.Now().UnixMilli()
	if ran {
		s.scriptKeys.touch(m.prefixes, now)
	}
	if len(m.tentative) == 0 {
		return
	}
	var learn []string
	if ran {
		learn = s.heldPrefixes(m)
	}
	added := s.scriptKeys.settle(m, learn, now)
	if len(added) == 0 {
		return
	}
	var clean [][]byte
	for _, key := range m.clean {
		if slices.Contains(added, string(ScriptPrefix(key))) {
			clean = append(clean, key)
		}
	}
	s.scriptKeys.setClean(clean, true)
	for _, p := range added {
		key := m.keys[slices.IndexFunc(m.keys, func(k []byte) bool { return string(ScriptPrefix(k)) == p })]
		s.logger().Info("script key prefix: values stored uncompressed from now on, so that scripts read them as written",
			"prefix", p, "key", string(key), "cmd", m.cmd, "source", "script", "ttl", s.scriptPrefixTTLText())
		s.metrics.scriptPrefixLearned(p, now)
	}
	s.shareLearned(added, now)
}

// notRun are the error replies (after the '-') with which Redis, or the
// proxy, refuses a script command before the script runs.
var notRun = [][]byte{
	[]byte("MOVED "), []byte("ASK "), []byte("TRYAGAIN"), []byte("CLUSTERDOWN"), []byte("CROSSSLOT"),
	[]byte("NOSCRIPT"), []byte("NOPERM"), []byte("NOAUTH"), []byte("WRONGPASS"), []byte("LOADING"),
	[]byte("BUSY"), []byte("MASTERDOWN"), []byte("OOM"), []byte("READONLY"), []byte("NOREPLICAS"),
	[]byte("ERR squeeze: "), []byte("ERR Function not found"), []byte("ERR Number of keys"),
	[]byte("ERR wrong number of arguments"), []byte("ERR unknown command"), []byte("ERR syntax error"),
	[]byte("ERR value is not an integer"), []byte("ERR Error compiling script"),
}

// scriptRan reports whether a script command's reply says the script ran
// (a result, or an error raised while it ran: then it may have read
// values). The prologue's error about a frame comes from a script that ran.
func scriptRan(reply []byte) bool {
	if len(reply) == 0 {
		return false
	}
	if reply[0] != '-' {
		return true
	}
	if bytes.HasPrefix(reply, []byte(luaguard.FrameErr)) {
		return true
	}
	for _, p := range notRun {
		if bytes.HasPrefix(reply[1:], p) {
			return false
		}
	}
	return true
}
