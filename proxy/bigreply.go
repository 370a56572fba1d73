package proxy

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/bufpool"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/resp"
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
	switch {
	case cl.kind == shapeNone:
		return true
	case verbatimShape(cl.kind):
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

// verbatimShape reports whether a reply of shape kind that is one bulk
// string, not a frame, goes to the client byte for byte.
func verbatimShape(kind shape) bool {
	switch kind {
	case shapeNone, shapeValue, shapeAny, shapeSniff:
		return true
	}
	return false
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
// takes 16 KiB or more of room dst has not, the bytes move to a reused
// buffer and dst's goes back to the pool.
func appendBig(dst, src []byte) []byte {
	if need := len(dst) + len(src); need > cap(dst) && need >= bufpool.MinSize {
		nb := append(bufpool.Get(need), dst...)
		bufpool.Put(dst)
		dst = nb
	}
	return append(dst, src...)
}

// A GET (any reply of one value that stays in Redis: GETEX, SET ... GET)
// of a zstd frame that decodes to streamDecodeMin or more is decoded
// as it is written (codec.ValueReader): the writer decodes a piece, writes
// it, decodes the next, so the proxy holds two pieces of the value, not the
// whole of it: a 13 kB frame that decodes to 400 MiB (a decompression bomb
// within --max-value) costs 2 MiB, and the allocation of the whole value,
// with the collections it set off, is gone. The length and checksum are
// known only at the end, so the last piece is written only once they are
// met; if they are not, the client's connection ends there, its reply cut
// short: a client library sees a broken connection, never a wrong value.
// (Before anything is written, a frame that fails gets the usual error
// reply.) Other codecs decode whole: s2, lz4 and MinLZ blocks cannot be
// read in pieces, and their ratio is bounded.

// streamDecodeMin is the decoded size from which a value is decoded as it
// is written.
const streamDecodeMin = 8 << 20

// decodePiece is the size of the pieces.
const decodePiece = 1 << 20

// decodedAsWritten returns the frame of cl's reply if the reply is one bulk
// string holding a zstd frame of streamDecodeMin or more, for a command
// that reads without taking the value out of Redis (quarantine.go).
func decodedAsWritten(cl *call) (frame []byte, ok bool) {
	r := cl.reply
	if cl.err != nil || cl.local || cl.kind != shapeValue || len(r) < 8 || r[0] != '$' || cl.takes&rediscmd.Destructive != 0 {
		return nil, false
	}
	i := bytes.IndexByte(r[:min(len(r), 24)], '\n')
	if i < 2 || !codec.IsFramed(r[i+1:]) { // most replies stop here
		return nil, false
	}
	n, ok := resp.ParseInt(r[1 : i-1])
	if !ok || n < 0 || int64(len(r)) != int64(i+1)+n+2 {
		return nil, false
	}
	frame = r[i+1 : len(r)-2]
	h, err := codec.ParseHeader(frame)
	if err != nil || !codec.Streams(h) || h.OriginalLen < streamDecodeMin {
		return nil, false
	}
	return frame, true
}

// While a value is decoded as it is written, Go code gets one more thread
// than --procs gives it (up to the machine's CPUs): with the default of
// half the CPUs, one on a two-CPU machine, a writer decoding hundreds of
// MiB held the only thread the event loop and the upstream readers need,
// and another client's PING waited 0.1-1.5 s (p99 of the abuse suite's
// bomb case); with the extra thread, 13-21 ms. Small values keep the
// default, which serves
// them faster (redis-benchmark -c 50 through the proxy: about 80,000 SETs
// a second with one thread, 40,000 with two, on this machine).
var (
	extraMu    sync.Mutex
	extraUsers int
	extraBase  int
	// extraGrants counts the calls of takeExtraProc that ran with the
	// extra thread (the machine had a CPU for it), for tests: sampling
	// GOMAXPROCS from another goroutine misses a decode that ends
	// between two samples.
	extraGrants atomic.Int64
)

// takeExtraProc raises GOMAXPROCS by one for a large decode, or for the
// compression of a value an encoder splits across cores (policy.encode),
// if the machine has a CPU for it; the returned function gives it back.
func takeExtraProc() (release func()) {
	extraMu.Lock()
	defer extraMu.Unlock()
	if extraUsers == 0 {
		extraBase = runtime.GOMAXPROCS(0)
		if extraBase >= runtime.NumCPU() {
			return func() {}
		}
		runtime.GOMAXPROCS(extraBase + 1)
	}
	extraUsers++
	extraGrants.Add(1)
	return func() {
		extraMu.Lock()
		defer extraMu.Unlock()
		if extraUsers--; extraUsers == 0 {
			runtime.GOMAXPROCS(extraBase)
		}
	}
}

// writeDecoded writes cl's reply, a frame (decodedAsWritten), decoded as
// it is written, after the output before it (writeOut). It returns false,
// having written nothing, when the frame fails before its first piece:
// emit then gives the usual error reply. Writer goroutine, owning the
// output.
func (c *client) writeDecoded(cl *call, frame []byte) bool {
	vr, err := c.s.decoder().NewValueReader(frame)
	if err != nil {
		return false
	}
	defer vr.Close()
	defer takeExtraProc()()
	h := vr.Header()
	buf := bufpool.Get(2 * decodePiece)[:2*decodePiece]
	defer bufpool.Put(buf)
	cur, next := buf[:decodePiece], buf[decodePiece:]
	k, err := io.ReadFull(vr, cur)
	if err != nil {
		return false // shorter than streamDecodeMin, or it fails at once
	}
	c.out.buf = resp.AppendHeader(c.out.buf, resp.BulkString, int(h.OriginalLen))
	c.writeOut()
	for {
		m, err := io.ReadFull(vr, next)
		end := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !end {
			// The value is not the one written: the piece before the
			// failure stays unwritten and the connection ends.
			c.s.metrics.decodeError()
			c.s.logger().Warn("a stored value failed to decode while it was written; the client's connection is closed",
				"err", (&DecodeError{Cmd: cl.cmd, Key: keyOf(cl, 0), Err: err}).Error())
			c.out.broken = true
			c.abort()
			return true
		}
		if _, werr := c.nc.Write(cur[:k]); werr != nil {
			c.out.broken = true
			c.abort()
			return true
		}
		if end {
			c.out.buf = append(append(c.out.buf, next[:m]...), '\r', '\n')
			c.s.metrics.decoded(h.ID, len(frame), int(h.OriginalLen))
			return true
		}
		cur, next, k = next, cur, m
	}
}
