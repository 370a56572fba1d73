package proxy

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
)

// Order barriers hold only what their command could change or see.
//
// Two commands that touch no key in common give the same replies and leave
// the same data whichever runs first, so a barrier raised for a command
// whose keys are known (a large SET being compressed off the event loop, a
// STRLEN that waits for a script) holds only the requests that touch one
// of its keys; a request whose keys are known and free of every barrier's
// and every held request's keys is written at once, ahead of them (it
// passes). A command whose keys are not at fixed places (a script, KEYS,
// PUBLISH, SUBSCRIBE, anything the table does not place:
// rediscmd.TouchesAny) raises a barrier that holds everything, and such
// a request waits behind every barrier, as before. A client's own
// requests never pass each other: a batch of a client that has requests
// held waits too. So one client flooding the proxy with large values holds
// back the commands on its own keys, not another client's PING or GET.

// Two commands that only read a key (rediscmd.Spec.ReadsOnly: GET,
// STRLEN, LRANGE ...) give the same replies in either order too: a
// barrier raised for one holds only the requests that write one of its
// keys, and one raised for a write holds those that read or write them.
// So 50 clients that pipeline STRLEN of one compressed value, each
// command under a barrier of its own that lasts its round trips, do not
// take turns.

// keySeed hashes keys for the sets below; a collision only holds a
// request that could have passed.
var keySeed = maphash.MakeSeed()

// hashKey is a key's hash with its low bit clear; the sets below note a
// key a command writes with the bit set (keyWrite), one it only reads
// without.
func hashKey(k []byte) uint64 { return maphash.Bytes(keySeed, k) &^ keyWrite }

const keyWrite = 1

// reqScope is what a batch of requests touches: the hashes of its keys,
// or any. Keys are noted only while a barrier is up; a batch begun without
// one counts as any, which only matters if one is raised before it is
// sent. The command reader's, in the batch (reader.scope).
type reqScope struct {
	keys []uint64
	any  bool
	// noted: a command was noted (note); a scope with none, of requests
	// the proxy wrote for a command it did not note, touches anything.
	noted bool
	// writing: the command being noted writes its keys (note).
	writing bool
	// heldBack counts the client's requests held behind barriers on the
	// shared connections (pinning.heldBack): while some are, its later
	// requests do not pass them.
	heldBack *atomic.Int32
}

// note adds a command's keys, as info's table entry places them, to s.
// up: a barrier is raised now (orderState.up); blocked: a client may be
// blocked in Redis, or on its way to block (orderState.mayWake), whom a
// command that wakes (rediscmd.Spec.Wakes) would serve, touching keys of
// that client's command: then it touches anything.
func (s *reqScope) note(info *cmdInfo, args [][]byte, up, blocked bool) {
	s.noted = true
	if s.any {
		return
	}
	s.writing = !info.reads
	if !up || info.wakes && blocked || !info.touches.EachKey(args, s.addKey) {
		s.any = true
	}
}

func (s *reqScope) addKey(k []byte) {
	h := hashKey(k)
	if s.writing {
		h |= keyWrite
	}
	s.keys = append(s.keys, h)
}

// reset empties s for the next batch, keeping its storage.
func (s *reqScope) reset() {
	s.keys, s.any, s.noted = s.keys[:0], false, false
	if cap(s.keys) > 1024 {
		s.keys = nil
	}
}

// heldKeys are the keys of the raised barriers and of the requests held
// behind them, on every shared connection; any counts those whose keys
// are not known. Taken under upConn.mu and orderState.mu: a leaf lock.
type heldKeys struct {
	mu   sync.Mutex
	any  int
	keys map[uint64]int32
}

// passOrHold reports whether a batch of scope s may pass the barriers:
// its keys are known, none is held or under a barrier, and its client has
// nothing held. If not, its keys join the held ones (the caller holds the
// batch and later calls release with them). s nil: any.
func (h *heldKeys) passOrHold(s *reqScope) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s != nil && s.noted && (s.heldBack == nil || s.heldBack.Load() == 0) && !h.holdsLocked(s) {
		return true
	}
	h.addLocked(s)
	return false
}

// holds reports whether a batch of scope s would be held by the keys
// noted, its client's aside (s nil: any).
func (h *heldKeys) holds(s *reqScope) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.holdsLocked(s)
}

func (h *heldKeys) holdsLocked(s *reqScope) bool {
	if s == nil || s.any || h.any > 0 {
		return true
	}
	for _, k := range s.keys {
		// Held if a barrier or a held request writes the key, or this
		// one writes it and one reads it.
		if h.keys[k|keyWrite] > 0 || k&keyWrite != 0 && h.keys[k&^keyWrite] > 0 {
			return true
		}
	}
	return false
}

// add notes the keys of a barrier or a held batch (s nil: any).
func (h *heldKeys) add(s *reqScope) {
	h.mu.Lock()
	h.addLocked(s)
	h.mu.Unlock()
}

func (h *heldKeys) addLocked(s *reqScope) {
	if s == nil || s.any {
		h.any++
		return
	}
	if h.keys == nil {
		h.keys = map[uint64]int32{}
	}
	for _, k := range s.keys {
		h.keys[k]++
	}
}

// release forgets keys and anyN batches of unknown keys noted by add or
// passOrHold.
func (h *heldKeys) release(keys []uint64, anyN int) {
	if len(keys) == 0 && anyN == 0 {
		return
	}
	h.mu.Lock()
	h.any -= anyN
	for _, k := range keys {
		if n := h.keys[k] - 1; n > 0 {
			h.keys[k] = n
		} else {
			delete(h.keys, k)
		}
	}
	h.mu.Unlock()
}

// releaseScope is release for the scope of a barrier.
func (h *heldKeys) releaseScope(s *reqScope) {
	if s == nil || s.any {
		h.release(nil, 1)
		return
	}
	h.release(s.keys, 0)
}

// touchesOf is the proxy's copy of a command's rediscmd.Touches.
func touchesOf(spec *rediscmd.Spec) rediscmd.Touches {
	if spec == nil {
		return rediscmd.TouchesAny
	}
	return spec.Touches
}

// keyed reports whether h holds only the requests on its command's keys
// (nil: no barrier).
func (h *orderHold) keyed() bool { return h != nil && h.scope != nil && !h.scope.any }

// overlaps reports whether scopes s and t share a key, however they use
// it, or either touches anything.
func (s *reqScope) overlaps(t *reqScope) bool {
	if s == nil || t == nil || s.any || t.any {
		return true
	}
	for _, a := range s.keys {
		for _, b := range t.keys {
			if a^b <= keyWrite {
				return true
			}
		}
	}
	return false
}

// conflicts reports whether commands of scopes s and t may see or change
// what the other does: either touches anything (nil or any), or they
// share a key hash that one of them writes.
func (s *reqScope) conflicts(t *reqScope) bool {
	if s == nil || t == nil || s.any || t.any {
		return true
	}
	for _, a := range s.keys {
		for _, b := range t.keys {
			if a^b <= keyWrite && (a|b)&keyWrite != 0 {
				return true
			}
		}
	}
	return false
}
