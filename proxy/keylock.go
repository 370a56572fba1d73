package proxy

import (
	"hash/maphash"
	"sync"
	"time"
)

// Read-modify-write commands that the proxy computes itself (APPEND and
// SETRANGE on the grow path, the inspect script's writes) store their
// result with a compare-and-set: if another client changed the key in
// between, the proxy starts again. Clients of one proxy that append to one
// key at once would then mostly retry each other's work, and under load
// one could lose every round (64 of them) and end in an error that Redis
// never gives for APPEND. So the proxy runs such commands on one key one at
// a time: keyLocks is a small array of locks, a key hashed to one of them.
// The compare-and-set stays, for writers behind other proxies or
// programs with the hook.
//
// A command takes the lock only once its first compare-and-set failed, so
// the common case (no other writer) costs nothing, and by then its first
// request is written: the order barrier it may have raised for it
// (order.go) has ended, and no writer that holds the lock can be waiting
// behind it. A lock is held across round trips to Redis, and a client with
// a private connection can wait behind its own earlier command (a blocked
// BLPOP), so nobody waits for a lock longer than keyLockWait: past it the
// command goes on without the lock, as it did before, with its
// compare-and-set.

// keyLockWait bounds the wait for a key's lock.
const keyLockWait = 200 * time.Millisecond

// keyLockCount is the number of locks keys share.
const keyLockCount = 64

type keyLocks struct {
	once sync.Once
	seed maphash.Seed
	sems [keyLockCount]chan struct{}
}

// lock takes key's lock, waiting at most keyLockWait; it returns the
// function that releases it (nil when the wait ran out).
func (k *keyLocks) lock(key []byte) (unlock func()) {
	k.once.Do(func() {
		k.seed = maphash.MakeSeed()
		for i := range k.sems {
			k.sems[i] = make(chan struct{}, 1)
		}
	})
	sem := k.sems[maphash.Bytes(k.seed, key)%keyLockCount]
	select {
	case sem <- struct{}{}:
		return func() { <-sem }
	default:
	}
	t := time.NewTimer(keyLockWait)
	defer t.Stop()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }
	case <-t.C:
		return nil
	}
}

// keyLockHold is the lock one command holds, if any.
type keyLockHold struct{ unlock func() }

// take takes key's lock unless one is held already (or key is nil).
func (h *keyLockHold) take(k *keyLocks, key []byte) {
	if h.unlock == nil && key != nil {
		h.unlock = k.lock(key)
	}
}

// release releases the lock held, if any.
func (h *keyLockHold) release() {
	if h.unlock != nil {
		h.unlock()
		h.unlock = nil
	}
}
