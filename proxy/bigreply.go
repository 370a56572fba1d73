package proxy

import (
	"bytes"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/squeeze-kv/squeeze/codec"
)

// Large replies that need no rewriting are written from the buffer the
// upstream reader handed the call (handOverReply) instead of being copied
// into the client's output first: for a 4 MB GET of a raw value that is
// one copy of 4 MB less, and no 4 MB output buffer to allocate and zero.

// verbatimReply reports whether the reply of cl is large and goes to the
// client byte for byte as Redis sent it: a bulk string that is not a frame,
// in a reply shape that would copy it unchanged.
func verbatimReply(cl *call) bool {
	r := cl.reply
	if cl.err != nil || cl.local || len(r) < handOverReply || r[0] != '$' {
		return false
	}
	switch cl.kind {
	case shapeNone:
		return true
	case shapeValue, shapeAny, shapeSniff:
		i := bytes.IndexByte(r[:min(len(r), 24)], '\n')
		if i < 0 {
			return false
		}
		// shapeSniff decodes a frame anywhere in the reply; a bulk string
		// that is not a frame is all the reply is.
		return !codec.IsFramed(r[i+1:])
	}
	return false
}

// Buffers of 256 KiB and more, reused by size class (a power of two) rather
// than allocated and zeroed for each large value: the read buffers as they
// grow toward a large command or reply, requests, queued upstream writes,
// replies once written, decoded values. Up to bigKeepBytes of classes up to
// 16 MiB stay in free lists that the garbage collector does not empty (a
// sync.Pool is emptied by every other collection, and with values of
// megabytes collections come every request or two); beyond that, and for
// larger classes, a sync.Pool.
const (
	minBigClass  = 18 // 256 KiB
	maxBigClass  = 30 // 1 GiB
	maxKeptClass = 24 // 16 MiB
	bigKeepBytes = 64 << 20
)

var (
	bigBufs   [maxBigClass + 1]sync.Pool // of *[]byte
	bigKept   [maxKeptClass + 1]chan []byte
	bigKeptN  atomic.Int64 // bytes in the free lists
	bigKeptMk sync.Once
)

func keptList(k int) chan []byte {
	bigKeptMk.Do(func() {
		for i := minBigClass; i <= maxKeptClass; i++ {
			bigKept[i] = make(chan []byte, bigKeepBytes>>i)
		}
	})
	return bigKept[k]
}

// getBig returns an empty buffer with room for n bytes.
func getBig(n int) []byte {
	k := bits.Len(uint(n - 1)) // 2^k >= n
	if n < 1<<minBigClass || k > maxBigClass {
		return make([]byte, 0, n)
	}
	if k <= maxKeptClass {
		select {
		case b := <-keptList(k):
			bigKeptN.Add(-int64(cap(b)))
			return b
		default:
		}
	}
	if p, _ := bigBufs[k].Get().(*[]byte); p != nil {
		return (*p)[:0]
	}
	return make([]byte, 0, 1<<k)
}

// putBig keeps b for reuse; the caller must hold no other reference to it.
func putBig(b []byte) {
	k := bits.Len(uint(cap(b))) - 1 // 2^k <= cap
	if k < minBigClass || k > maxBigClass {
		return
	}
	b = b[:0]
	if k <= maxKeptClass {
		if bigKeptN.Load()+int64(cap(b)) > bigKeepBytes {
			evictKept(k) // the sizes in use now win over those of before
		}
		if bigKeptN.Load()+int64(cap(b)) <= bigKeepBytes {
			select {
			case keptList(k) <- b:
				bigKeptN.Add(int64(cap(b)))
				return
			default:
			}
		}
	}
	bigBufs[k].Put(&b)
}

// evictKept moves one buffer from the free list that holds the most bytes,
// other than class k's, to its sync.Pool.
func evictKept(k int) {
	most, from := 0, -1
	for i := minBigClass; i <= maxKeptClass; i++ {
		if n := len(keptList(i)) << i; i != k && n > most {
			most, from = n, i
		}
	}
	if from < 0 {
		return
	}
	select {
	case b := <-keptList(from):
		bigKeptN.Add(-int64(cap(b)))
		bigBufs[from].Put(&b)
	default:
	}
}

// upstreamGrowth is the capacity the upstream reader's full buffer of n
// bytes grows to when the reply in it ends at need (0: unknown): Redis is
// trusted, so a large reply gets its whole size at once, with room for the
// start of the next.
func upstreamGrowth(n, need int) int {
	if need > 2*n {
		return need + 16<<10
	}
	return max(2*n, 4<<10)
}

// bigDecode reports whether the reply of cl is a frame that decodes to
// 256 KiB or more: the upstream reader leaves it to the client's writer, so
// that other clients' replies are not held up behind the decoding.
func bigDecode(cl *call) bool {
	r := cl.reply
	if len(r) == 0 || r[0] != '$' || cl.kind == shapeNone || cl.local {
		return false
	}
	i := bytes.IndexByte(r[:min(len(r), 24)], '\n')
	if i < 0 || !codec.IsFramed(r[i+1:]) {
		return false
	}
	h, err := codec.ParseHeader(r[i+1:])
	return err == nil && h.OriginalLen >= handOverReply
}

// appendBig appends src to dst, which the caller owns alone: when that
// takes 256 KiB or more of room dst has not, the bytes move to a reused
// buffer and dst's goes back to the pool.
func appendBig(dst, src []byte) []byte {
	if need := len(dst) + len(src); need > cap(dst) && need >= 1<<minBigClass {
		nb := append(getBig(need), dst...)
		putBig(dst)
		dst = nb
	}
	return append(dst, src...)
}
