// Package bufpool keeps large byte buffers for reuse across the process,
// by size class, rather than have each large value allocated and zeroed
// anew. There are four classes to each power of two, 2^k, 1.25 x 2^k,
// 1.5 x 2^k and 1.75 x 2^k, so that a buffer is at most a quarter larger
// than asked for: with powers of two, a SET of a 1 MiB value took a read
// buffer and a batch of 2 MiB each, and 200 clients that pipelined such
// SETs had the proxy hold 800 MB for 200 MB of commands.
//
// Get returns an empty buffer with room for n bytes; Put gives one back
// once nothing else points into it. Buffers of less than MinSize are
// neither kept nor pooled: Get allocates them and Put drops them.
//
// Up to 64 MiB of classes up to 16 MiB stay in free lists that the garbage
// collector does not empty (a sync.Pool is emptied by every other
// collection, and with values of megabytes collections come every request
// or two); beyond that a sync.Pool. Larger buffers (huge: over 16 MiB, up
// to 1 GiB) are kept, up to 256 MiB, only while they are in use. Buffers
// of more than 1 GiB are allocated and never kept.
//
// A burst gives its memory back: a second after the last Get of a
// buffer of 1 MiB or more (bigIdle), the free lists of those classes and
// the huge buffers are let go and, if the burst allocated 64 MiB or more
// of large buffers (or huge ones were kept), two collections empty the
// sync.Pools and the process's free memory goes back to the system
// (debug.FreeOSMemory). Before, a process stayed as large as its largest
// burst for minutes while idle: the free lists never let go, an idle
// process collects every two minutes, a sync.Pool needs two collections
// to let go, and after a burst the collector's goal is twice the heap the
// burst left live.
//
// SetChecks(true) makes Put panic when a buffer is put back while the free
// lists hold it already, which catches two owners of one buffer.
package bufpool

import (
	"fmt"
	"math/bits"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// MinSize is the least capacity the pool keeps: Get of fewer bytes
// allocates, and Put of a smaller buffer drops it.
const MinSize = 16 << 10 // classSize(minClass)

// Size classes: class c holds buffers of classSize(c) bytes, steps
// classes to each power of two (class steps*k is 2^k bytes).
const (
	steps         = 4
	minClass      = 14 * steps // 16 KiB
	maxClass      = 30 * steps // 1 GiB
	maxKeptClass  = 24 * steps // 16 MiB
	keepBytes     = 64 << 20
	hugeKeepBytes = 256 << 20
	bigClass      = 20 * steps // 1 MiB: the classes a burst's end lets go
	bigIdle       = time.Second
	freeAfter     = 64 << 20 // allocated in a burst: worth a FreeOSMemory at its end
)

// classSize is the capacity of the buffers of class c: (steps + c%steps)
// / steps x 2^(c/steps).
func classSize(c int) int { return (steps + c%steps) << (c/steps - 2) }

// classUp returns the least class whose buffers hold n bytes (n of
// MinSize or more).
func classUp(n int) int {
	k := bits.Len(uint(n-1)) - 1 // 2^k < n <= 2^(k+1)
	return k*steps + (n-1<<k+1<<(k-2)-1)>>(k-2)
}

// classDown returns the greatest class whose buffers a capacity of n
// bytes holds (n of MinSize or more).
func classDown(n int) int {
	k := bits.Len(uint(n)) - 1 // 2^k <= n
	return k*steps + (n-1<<k)>>(k-2)
}

var (
	pools  [maxKeptClass + 1]sync.Pool // of *[]byte
	kept   [maxKeptClass + 1]chan []byte
	keptN  atomic.Int64 // bytes in the free lists
	keptMk sync.Once
)

func keptList(k int) chan []byte {
	keptMk.Do(func() {
		for i := minClass; i <= maxKeptClass; i++ {
			kept[i] = make(chan []byte, keepBytes/classSize(i))
		}
	})
	return kept[k]
}

// Get returns an empty buffer with room for n bytes.
func Get(n int) []byte {
	if n < MinSize || n > 1<<30 {
		return make([]byte, 0, n)
	}
	k := classUp(n)
	if k >= bigClass {
		useBig(k)
	}
	if k > maxKeptClass {
		return getHuge(k)
	}
	select {
	case b := <-keptList(k):
		keptN.Add(-int64(cap(b)))
		unlisted(b)
		return b
	default:
	}
	if p, _ := pools[k].Get().(*[]byte); p != nil {
		return (*p)[:0]
	}
	if k >= bigClass {
		bigAllocated.Add(int64(classSize(k)))
	}
	return make([]byte, 0, classSize(k))
}

// Put keeps b for reuse; the caller must hold no other reference to it.
// It keeps b in the greatest class that cap(b) holds.
func Put(b []byte) {
	if cap(b) < MinSize || cap(b) > 1<<30 {
		return
	}
	k := classDown(cap(b))
	b = b[:0]
	listed(b)
	if k > maxKeptClass {
		putHuge(k, b)
		return
	}
	if keptN.Load()+int64(cap(b)) > keepBytes {
		evictKept(k) // the sizes in use now win over those of before
	}
	if keptN.Load()+int64(cap(b)) <= keepBytes {
		select {
		case keptList(k) <- b:
			keptN.Add(int64(cap(b)))
			return
		default:
		}
	}
	pool(k, b)
}

// KeptBytes returns the bytes of the buffers in the free lists of the
// classes up to 16 MiB: memory the process holds for reuse, which no user
// of a buffer does.
func KeptBytes() int64 { return keptN.Load() }

// pool puts b in class k's sync.Pool. Apart from Put, so that only this
// path moves a slice header to the heap (the pool keeps a pointer): Put is
// called on every event loop step of the proxy, mostly with nothing to
// keep.
//
//go:noinline
func pool(k int, b []byte) {
	if checks.Load() {
		unlisted(b) // dropped: see SetChecks
		return
	}
	pools[k].Put(&b)
}

// The double-put check (SetChecks): whether it is on, and the first bytes
// of the buffers in the free lists.
var (
	checks  atomic.Bool
	checkMu sync.Mutex
	listd   map[*byte]bool
)

// SetChecks switches on (or off) the check that makes Put panic when a
// buffer is put back while the free lists hold it already: two owners of
// one buffer, the way one client's value is overwritten by another's
// bytes. It costs a map operation per buffer, and meanwhile buffers stay
// out of the sync.Pools, which drop them unseen (their addresses then come
// back with new buffers). Call it before the pool is used: the buffers
// already in the free lists are not known to the check.
func SetChecks(on bool) {
	checkMu.Lock()
	defer checkMu.Unlock()
	checks.Store(on)
	if !on {
		listd = nil
	}
}

// listed notes that b goes into a free list (SetChecks).
func listed(b []byte) {
	if !checks.Load() {
		return
	}
	p := &b[:1][0]
	checkMu.Lock()
	defer checkMu.Unlock()
	if listd == nil {
		listd = map[*byte]bool{}
	}
	if listd[p] {
		panic(fmt.Sprintf("bufpool: a buffer of %d bytes was put back while the free lists held it", cap(b)))
	}
	listd[p] = true
}

// unlisted notes that b left the free lists (SetChecks).
func unlisted(b []byte) {
	if !checks.Load() {
		return
	}
	checkMu.Lock()
	delete(listd, &b[:1][0])
	checkMu.Unlock()
}

// The huge buffers kept (see the package doc), guarded by hugeMu: by
// class, and their bytes.
var (
	hugeMu    sync.Mutex
	hugeKept  [maxClass + 1][][]byte
	hugeKeptN int64
)

// getHuge returns an empty buffer of class k (above maxKeptClass).
func getHuge(k int) []byte {
	hugeMu.Lock()
	if l := hugeKept[k]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		hugeKept[k] = l[:len(l)-1]
		hugeKeptN -= int64(cap(b))
		hugeMu.Unlock()
		unlisted(b)
		return b
	}
	hugeMu.Unlock()
	bigAllocated.Add(int64(classSize(k)))
	return make([]byte, 0, classSize(k))
}

// putHuge keeps b, of class k, for reuse while huge buffers are in use
// (until the trim after the last use of a big buffer: trimBig).
func putHuge(k int, b []byte) {
	hugeMu.Lock()
	defer hugeMu.Unlock()
	if hugeKeptN+int64(cap(b)) <= hugeKeepBytes {
		hugeKept[k] = append(hugeKept[k], b)
		hugeKeptN += int64(cap(b))
	} else {
		unlisted(b) // let go
	}
}

// The end of a burst (see the package doc): Gets of big classes since
// the trim last looked, bytes of big buffers allocated since the last
// FreeOSMemory, whether a trim is due, and how many trims have let
// buffers go.
var (
	bigGets      atomic.Int64
	bigAllocated atomic.Int64
	bigArmed     atomic.Bool
	bigTrims     atomic.Int64
)

// useBig notes a Get of class k (bigClass or more) and arms the trim that
// runs bigIdle after the last one.
func useBig(k int) {
	bigGets.Add(1)
	if !bigArmed.Load() && bigArmed.CompareAndSwap(false, true) {
		time.AfterFunc(bigIdle, trimBig(bigGets.Load()))
	}
}

// trimBig returns the trim that runs bigIdle after a Get of a big class,
// when gets was the count of those: if another came since, it waits
// again; otherwise it lets go the free lists of the big classes and the
// huge buffers and, after a burst that allocated freeAfter or more of big
// buffers, returns the process's free memory to the system.
func trimBig(gets int64) func() {
	return func() {
		if now := bigGets.Load(); now != gets {
			time.AfterFunc(bigIdle, trimBig(now))
			return
		}
		bigArmed.Store(false)
		if bigGets.Load() != gets && bigArmed.CompareAndSwap(false, true) {
			// A Get came meanwhile, and did not arm a trim of its own.
			time.AfterFunc(bigIdle, trimBig(bigGets.Load()))
			return
		}
		for k := bigClass; k <= maxKeptClass; k++ {
			dropKept(k)
		}
		hugeMu.Lock()
		huge := hugeKeptN
		for k := range hugeKept {
			for _, b := range hugeKept[k] {
				unlisted(b)
			}
			clear(hugeKept[k])
			hugeKept[k] = hugeKept[k][:0]
		}
		hugeKeptN = 0
		hugeMu.Unlock()
		bigTrims.Add(1)
		if bigAllocated.Swap(0) >= freeAfter || huge > 0 {
			// The sync.Pools let go of what they hold in two
			// collections: this one, and FreeOSMemory's.
			runtime.GC()
			debug.FreeOSMemory()
		}
	}
}

// dropKept lets go the buffers in class k's free list.
func dropKept(k int) {
	for {
		select {
		case b := <-keptList(k):
			keptN.Add(-int64(cap(b)))
			unlisted(b)
		default:
			return
		}
	}
}

// evictKept moves one buffer from the free list that holds the most bytes,
// other than class k's, to its sync.Pool.
func evictKept(k int) {
	most, from := 0, -1
	for i := minClass; i <= maxKeptClass; i++ {
		if n := len(keptList(i)) * classSize(i); i != k && n > most {
			most, from = n, i
		}
	}
	if from < 0 {
		return
	}
	select {
	case b := <-keptList(from):
		keptN.Add(-int64(cap(b)))
		pool(from, b)
	default:
	}
}
