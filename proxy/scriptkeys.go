package proxy

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/squeeze-kv/squeeze/internal/luaguard"
	"github.com/squeeze-kv/squeeze/resp"
)

// ScriptPrefixesKey is the Redis set in which the proxy keeps the key
// prefixes scripts use: values under them are stored uncompressed, so that
// scripts read them as the application wrote them. The proxy loads it at
// start and every scriptPrefixRefresh, so that several proxies in front of
// one Redis, and a restarted one, agree; `squeeze advise` reports it and
// `squeeze compact` skips its prefixes.
const ScriptPrefixesKey = "squeeze:script-prefixes"

// maxScriptPrefixes bounds the prefixes learned: past it, keys of new
// prefixes are still decoded before each script that declares them
// (scriptrun.go), only no longer kept plain on write.
const maxScriptPrefixes = 4096

// maxCleanKeys bounds the keys known to hold no frame (emptied when full).
const maxCleanKeys = 1 << 16

// scriptPrefixRefresh is how often the proxy reads ScriptPrefixesKey again.
const scriptPrefixRefresh = 10 * time.Second

// ScriptPrefix returns the prefix a key used by a script stands for (see
// luaguard.Prefix: up to its last ':' or to a segment that is an id).
func ScriptPrefix(key []byte) []byte { return luaguard.Prefix(key) }

// scriptKeys is what the proxy knows about the keys scripts use.
type scriptKeys struct {
	any      atomic.Bool // some prefix is known: writes must look
	mu       sync.RWMutex
	prefixes map[string]struct{}
	// clean: keys under a known prefix that the proxy found without a frame
	// (or made so). Nothing the proxy writes there is compressed, so a
	// script that declares only clean keys needs no decoding first.
	clean map[string]struct{}
}

// uses reports whether key falls under a prefix scripts use.
func (k *scriptKeys) uses(key []byte) bool {
	if !k.any.Load() {
		return false
	}
	k.mu.RLock()
	_, ok := k.prefixes[string(ScriptPrefix(key))]
	k.mu.RUnlock()
	return ok
}

// learn notes the prefixes of keys and returns those it did not know.
func (k *scriptKeys) learn(keys [][]byte) (added []string) {
	k.mu.RLock()
	for _, key := range keys {
		if _, ok := k.prefixes[string(ScriptPrefix(key))]; !ok {
			added = append(added, string(ScriptPrefix(key)))
		}
	}
	k.mu.RUnlock()
	if len(added) == 0 {
		return nil
	}
	return k.add(added)
}

// add notes prefixes, within the bound, and returns those that are new.
func (k *scriptKeys) add(prefixes []string) (added []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.prefixes == nil {
		k.prefixes = map[string]struct{}{}
	}
	for _, p := range prefixes {
		if _, ok := k.prefixes[p]; ok || len(k.prefixes) >= maxScriptPrefixes {
			continue
		}
		k.prefixes[p] = struct{}{}
		added = append(added, p)
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

// setClean notes keys as holding no frame, those under a known prefix only
// (a key outside them may be compressed by the next write).
func (k *scriptKeys) setClean(keys [][]byte, clean bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.clean == nil || len(k.clean)+len(keys) > maxCleanKeys {
		k.clean = map[string]struct{}{}
	}
	for _, key := range keys {
		if !clean {
			delete(k.clean, string(key))
		} else if _, ok := k.prefixes[string(ScriptPrefix(key))]; ok {
			k.clean[string(key)] = struct{}{}
		}
	}
}

// list returns the known prefixes.
func (k *scriptKeys) list() []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make([]string, 0, len(k.prefixes))
	for p := range k.prefixes {
		out = append(out, p)
	}
	return out
}

// ScriptPrefixes returns the key prefixes the proxy keeps uncompressed
// because scripts use them.
func (s *Server) ScriptPrefixes() []string { return s.scriptKeys.list() }

// learnScriptKeys notes the prefixes of the keys a script declares and
// stores new ones in ScriptPrefixesKey, in the background.
func (s *Server) learnScriptKeys(keys [][]byte) {
	added := s.scriptKeys.learn(keys)
	if len(added) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.dialTimeout())
		defer cancel()
		up, err := s.pool.getDB(ctx, s.up.DB, 0)
		if err != nil {
			s.logger().Warn("script key prefixes not saved in Redis", "key", ScriptPrefixesKey, "err", err)
			return
		}
		args := [][]byte{[]byte("SADD"), []byte(ScriptPrefixesKey)}
		for _, p := range added {
			args = append(args, []byte(p))
		}
		r := roundtripOn(up, resp.AppendCommand(nil, args...))
		if r.err != nil || (len(r.reply) > 0 && r.reply[0] == '-') {
			s.logger().Warn("script key prefixes not saved in Redis", "key", ScriptPrefixesKey, "err", r.err, "reply", string(bytes.TrimSpace(r.reply)))
		}
		r.release()
	}()
}

// loadScriptPrefixes reads ScriptPrefixesKey now and then every
// scriptPrefixRefresh until the server is done.
func (s *Server) loadScriptPrefixes(ctx context.Context) {
	for {
		s.readScriptPrefixes(ctx)
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-time.After(scriptPrefixRefresh):
		}
	}
}

// readScriptPrefixes reads ScriptPrefixesKey once.
func (s *Server) readScriptPrefixes(ctx context.Context) {
	dctx, cancel := context.WithTimeout(ctx, s.dialTimeout())
	defer cancel()
	up, err := s.pool.getDB(dctx, s.up.DB, 0)
	if err != nil {
		return
	}
	r := roundtripOn(up, resp.AppendCommand(nil, []byte("SMEMBERS"), []byte(ScriptPrefixesKey)))
	defer r.release()
	if r.err != nil {
		return
	}
	v, _, err := resp.ReadValue(r.reply)
	if err != nil || (v.Type != resp.Array && v.Type != resp.Set) {
		return
	}
	var ps []string
	it := v.Elements()
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		if e.Type == resp.BulkString {
			ps = append(ps, string(e.Str))
		}
	}
	s.scriptKeys.add(ps)
}
