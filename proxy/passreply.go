package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/bufpool"
	"github.com/squeeze-kv/squeeze/resp"
)

// A large raw value that Redis sends on a shared connection goes on to its
// client as it arrives, as a plain hop would pass it, instead of being
// read whole first (passReply): the client gets its first bytes while
// Redis still sends the last, and the proxy holds one passBuf of the value
// at a time instead of all of it.
//
// The shared connection's reader does it, as it does for small replies
// (writeDirect): only for the reply of a GET-like call (a value passed
// byte for byte: verbatimReply's shapes) of at least passMinReply bytes
// that is not a frame, when the reply is the next one its client is owed
// and nothing of the client's is being written. Since the replies of other
// clients on the connection come after this one, the reader must not wait
// on a client that reads slowly: each write to the client may take
// passStall; one that takes longer ends the pass, the reader reads the
// rest of the value into memory (the stored way, bounded as before,
// memory.go) and the client's writer writes it from there. That client's
// large replies then go the stored way for passPause.

// passMinReply is the smallest value passed through as it arrives: from
// there a whole 100 kB GET through the proxy is about a tenth faster
// (scripts/bench-large.sh).
const passMinReply = 64 << 10

// passChunk is what the reader reads from Redis, and writes to the client,
// at a time.
const passChunk = 512 << 10

// passSpliceMin is the smallest value whose bytes move from Redis's socket
// to the client's with splice(2) (passsplice_linux.go). A smaller one is
// read into the reader's passBuf until it holds passChunk bytes or the
// whole reply, and written from there: a reply of up to passChunk goes out
// with one write, as a proxy that reads replies whole writes it. Below
// this size a splice cost more CPU than the two copies, in the proxy (each
// splice into the client's socket) and in Redis, whose socket could not
// reuse its pages while the client's socket held them (figures:
// docs/design/large-values.md).
const passSpliceMin = 2 << 20

// passStall bounds one write of a passed reply to its client.
const passStall = 20 * time.Millisecond

// passPause is how long a client that read a passed reply too slowly gets
// its large replies the stored way.
const passPause = 5 * time.Second

// passReply passes the reply that begins b, the incomplete rest of the
// reader's buffer, to its client if it is a large raw value (see above).
// It reports whether it did: then b and the rest of the reply are
// consumed. A non-nil error is the connection's failure: the reply's
// client, which has part of a reply, is disconnected.
func (c *upConn) passReply(b []byte) (bool, error) {
	if len(b) < 16 || b[0] != '$' {
		return false, nil
	}
	nl := bytes.IndexByte(b[:min(len(b), 24)], '\n')
	if nl < 2 || b[nl-1] != '\r' {
		return false, nil
	}
	size, ok := resp.ParseInt(b[1 : nl-1])
	if !ok || size < passMinReply || size > 1<<40 {
		return false, nil
	}
	if data := b[nl+1:]; len(data) < len(codec.Magic) || bytes.HasPrefix(data, magic) {
		return false, nil // not known yet, or a frame
	}
	cl := c.taken
	if cl == nil {
		if cl = c.takeCall(); cl == nil {
			return false, nil
		}
		c.taken = cl
	}
	o := cl.owner
	if o == nil || c.srv.Cluster != nil || !passable(cl) || !plainSocket(o.nc) || time.Now().UnixNano() < o.out.passOff.Load() {
		return false, nil
	}
	if !o.acquire() {
		return false, nil
	}
	if head, _ := o.next(); head != cl || len(o.out.buf) > 0 || o.out.broken {
		o.release(true)
		return false, nil
	}
	c.taken = nil
	c.awaiting.Add(-1)
	if c.onPush == nil {
		// Answered, for awaitTaken: uncounted, a private command behind
		// it waited for good.
		c.noteDelivered(1)
	}
	o.expect(-cl.reserved)
	cl.reserved = 0
	total := int64(nl+1) + size + 2
	o.noteReply(total)
	stored, err := c.passTo(o, cl, b, total-int64(len(b)), total >= passSpliceMin)
	if err != nil {
		// Part of the reply is written: the client's connection ends, as
		// it would if Redis went away in the middle of a reply.
		o.out.broken = true
		o.abort()
	}
	if stored && err == nil { // the rest is in cl.reply: the writer writes it
		cl.ready.Store(true)
		o.release(true)
		return true, nil
	}
	cl.local, cl.reply = true, cl.reply[:0] // written (or dropped): bookkeeping only
	o.pop()
	var now time.Time
	o.emit(&c.rw, cl, &now)
	o.release(true)
	return true, err
}

// passable reports whether cl's reply, a bulk string that is not a frame,
// goes to the client byte for byte (verbatimReply).
func passable(cl *call) bool {
	return cl.err == nil && !cl.local && !cl.close && cl.onFinish == nil && cl.cmd != "HELLO" && verbatimShape(cl.kind)
}

// plainSocket reports whether nc is a TCP or Unix socket: a TLS
// connection whose write timed out cannot be written again.
func plainSocket(nc net.Conn) bool {
	switch baseConn(nc).(type) {
	case *net.TCPConn, *net.UnixConn:
		return true
	}
	return false
}

// passTo writes b, then the rest bytes that follow it on the connection, to
// the client o, whose output the caller owns: spliced when splice is set,
// else through passBuf in writes as large as it holds (passSpliceMin).
// When o reads too slowly it reads the rest into cl.reply, counted against
// o, for its writer, and reports stored. When o is gone it reads the rest
// and drops it. A non-nil error is the upstream connection's.
func (c *upConn) passTo(o *client, cl *call, b []byte, rest int64, splice bool) (stored bool, err error) {
	if c.passBuf == nil {
		c.passBuf = make([]byte, passChunk)
	}
	defer o.nc.SetWriteDeadline(time.Time{})
	pend := b
	if !splice && len(b) < len(c.passBuf) {
		// b and what follows it, up to a full passBuf, go in one write.
		if pend, rest, err = c.passFill(copy(c.passBuf, b), rest); err != nil {
			return false, err
		}
	}
	for {
		if len(pend) > 0 {
			o.nc.SetWriteDeadline(time.Now().Add(passStall))
			n, err := o.nc.Write(pend)
			pend = pend[n:]
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					return true, c.passStore(o, cl, pend, rest)
				}
				o.out.broken = true
				o.abort()
				return false, c.passDrop(rest)
			}
		}
		if rest > 0 && len(pend) == 0 && splice {
			// The rest socket to socket, where the kernel allows.
			if back, left, cerr, uerr, ok := c.splicePass(o, rest); ok {
				switch {
				case uerr != nil:
					return false, uerr
				case errors.Is(cerr, os.ErrDeadlineExceeded):
					return true, c.passStore(o, cl, back, left)
				case cerr != nil:
					o.out.broken = true
					o.abort()
					return false, c.passDrop(left)
				}
				rest = 0
			}
		}
		if rest == 0 {
			c.srv.metrics.passedReply("whole")
			return false, nil
		}
		if pend, rest, err = c.passFill(0, rest); err != nil {
			return false, err
		}
	}
}

// passFill reads the rest of a passed reply into passBuf after its first n
// bytes until passBuf is full or the reply whole, and returns what passBuf
// holds and what is left to read. A non-nil error is the upstream
// connection's (the client, which has part of a reply, is disconnected).
func (c *upConn) passFill(n int, rest int64) ([]byte, int64, error) {
	end := n + int(min(int64(len(c.passBuf)-n), rest))
	for n < end {
		// Requests that waited for replies go out meanwhile, as they do
		// between the reads of a reply read whole.
		c.flushQueued()
		m, err := c.nc.Read(c.passBuf[n:min(end, n+upReadMax)])
		n += m
		rest -= int64(m)
		if err != nil && m == 0 {
			return nil, rest, upstreamReadErr(err)
		}
	}
	return c.passBuf[:n], rest, nil
}

// passStore reads the rest of a passed reply into cl.reply, after pend,
// for o's writer.
func (c *upConn) passStore(o *client, cl *call, pend []byte, rest int64) error {
	c.srv.metrics.passedReply("stored")
	o.out.passOff.Store(time.Now().Add(passPause).UnixNano())
	n := len(pend) + int(rest)
	r := append(bufpool.Get(n), pend...)[:n]
	if _, err := io.ReadFull(c.nc, r[len(pend):]); err != nil {
		bufpool.Put(r)
		return upstreamReadErr(err)
	}
	// The rest goes to the client as it is (local), and counts against
	// the client until written (memory.go).
	cl.reply, cl.local = r, true
	o.hold(int64(n))
	cl.held = int64(n)
	o.s.checkLimits(o, int64(n))
	return nil
}

// passDrop reads and drops the rest of a reply whose client is gone.
func (c *upConn) passDrop(rest int64) error {
	if _, err := io.CopyN(io.Discard, c.nc, rest); err != nil {
		return upstreamReadErr(err)
	}
	return nil
}

func upstreamReadErr(err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("upstream closed the connection")
	}
	return fmt.Errorf("read from upstream: %w", err)
}

// failTaken fails the calls the reader took whose replies never came (the
// one whose reply was partly read first); the connection has failed. On a
// private connection it then tells the client's writer, which may be idle
// (a subscriber): its connection ends as Redis would end it.
func (c *upConn) failTaken() {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err == nil {
		err = errUpstreamClosed
	}
	private := c.onPush != nil
	for {
		cl := c.nextCall()
		if cl == nil {
			break
		}
		cl.err, cl.connLost = err, private || c.srv.lossEndsClients()
		cl.finish()
	}
	if private {
		c.onPush(nil, 0)
	}
}
