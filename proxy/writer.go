package proxy

import (
	"syscall"
	"time"

	"github.com/squeeze-kv/squeeze/internal/bufpool"
	"github.com/squeeze-kv/squeeze/resp"
)

// trimWriter gives back the output owner's large working buffers once
// everything is written.
func (c *client) trimWriter() {
	giveBackIdle(&c.out.buf)
	c.out.rw.scratch = c.out.rw.scratch[:0]
	giveBackIdle(&c.out.rw.scratch)
}

// helloReplyProto returns the "proto" field of a successful HELLO reply, or 0.
func helloReplyProto(reply []byte) int64 {
	v, _, err := resp.ReadValue(reply)
	if err != nil || (v.Type != resp.Map && v.Type != resp.Array) {
		return 0
	}
	it := v.Elements()
	for {
		k, ok := it.Next()
		if !ok {
			return 0
		}
		val, _ := it.Next()
		if string(k.Str) == "proto" && val.Type == resp.Integer {
			n, _ := resp.ParseInt(val.Str)
			return n
		}
	}
}

// acquire makes the caller the output owner if nobody is.
func (c *client) acquire() bool {
	c.q.mu.Lock()
	ok := !c.q.owned
	c.q.owned = true
	c.q.mu.Unlock()
	return ok
}

// release gives up output ownership. The writer goroutine calls it with
// direct false before it sleeps: every event since left a nudge. The
// shared connection's reader calls it with direct true: if work arrived
// that the writer goroutine skipped while the reader owned the output (a
// ready head call, the end of input, unwritten output, a pinned client's
// pushes), it nudges the writer.
func (c *client) release(direct bool) {
	c.settleHeld()
	c.q.mu.Lock()
	c.q.owned = false
	more := direct && (c.q.closed || len(c.out.buf) > 0 || c.out.noDirect.Load() ||
		(c.q.head < len(c.q.calls) && c.q.calls[c.q.head].ready.Load()))
	c.q.mu.Unlock()
	if more {
		c.wake()
	}
}

// settleHeld takes what the replies written since the last call gave back
// off the process's total: once per batch of replies, not once per reply,
// as the total is shared by every goroutine. Output owner only.
func (c *client) settleHeld() {
	c.out.obs.flush() // the commands counted, as the totals, before the write
	if c.out.unheld != 0 {
		c.s.heldTotal.Add(-c.out.unheld)
		c.out.unheld = 0
	}
}

// emit appends the reply of cl, which the owner has popped, to out and
// does the bookkeeping of a written reply. It returns whether the
// connection must close after it. now is the clock reading of the batch of
// replies being written, taken at the first reply that needs it (one
// reading for the batch, as for the commands read).
func (c *client) emit(rw *rewriter, cl *call, now *time.Time) bool {
	if cl.err != nil && cl.connLost {
		// The client's private connection ended: no reply, the
		// connection closes (see call.connLost).
		c.s.metrics.upstreamError("reply")
		cl.close = true
	} else if cl.err != nil {
		c.s.metrics.upstreamError("reply")
		c.out.buf = resp.AppendError(c.out.buf, "ERR squeeze: upstream: "+cl.err.Error())
	} else if c.out.broken && !destructive(cl.cmd) && cl.kind != shapeExec {
		// The client is gone: nothing to write, and no value to decode
		// (a destructive read is still decoded: see quarantine.go).
	} else {
		c.out.buf = rw.appendReply(c.out.buf, cl)
	}
	if cl.cmd != "" && c.s.metrics != nil {
		if now.Before(cl.start) { // also the zero time: not read yet
			*now = time.Now()
		}
		// Replies written together mostly share their command and
		// their batch's clock readings: counted in one go (pendingObs).
		c.out.obs.note(c.s.metrics.statsOf(cl.cmdID, cl.cmd), now.Sub(cl.start))
	}
	if cl.cmd == "HELLO" && cl.err == nil {
		c.sess.helloProto.Store(helloReplyProto(cl.reply))
	}
	if cl.authUser != nil && cl.err == nil && len(cl.reply) > 0 && cl.reply[0] != '-' {
		u := cl.authUser
		c.sess.user.Store(&u) // the login succeeded: the client is this user now
	}
	c.notePin(cl.pinSeq)
	if cl.owner != nil {
		c.mem.held.Add(-cl.held)
		c.out.unheld += cl.held // the process's total: in settleHeld
		if cl.reserved != 0 {   // no reply came (a failure, a local reply)
			c.expect(-cl.reserved)
		}
	}
	closeAfter := cl.close
	if cl.seq != 0 {
		c.out.writtenSeq.Store(cl.seq)
		if c.out.writtenWaiters.Load() > 0 {
			c.out.writtenMu.Lock()
			c.out.writtenC.Broadcast()
			c.out.writtenMu.Unlock()
		}
	}
	cl.release()
	return closeAfter
}

// sockIO is one side's non-blocking socket call: its buffer, its results,
// and the functions that run it, made once.
type sockIO struct {
	buf   []byte
	n     int
	errno syscall.Errno
	read  func(fd uintptr)
	write func(fd uintptr) bool
}

// writeDirect runs on the reader of the shared connection that completed
// calls of this client: if the writer goroutine is idle, it writes the
// ready replies at the head of the queue itself with one non-blocking
// system call, saving the writer's wake-up. Whatever it cannot finish (a
// full socket, a call that closes the connection, pushes) it leaves to
// the writer goroutine. It returns false if it did nothing; the caller
// then wakes the writer.
func (c *client) writeDirect(rw *rewriter) bool {
	if c.out.noDirect.Load() {
		return false
	}
	// Become the output owner (as acquire does) and take the run of ready
	// replies at the head of the queue, up to 64 KiB, with one lock; write
	// them with one system call.
	c.q.mu.Lock()
	if c.q.owned {
		c.q.mu.Unlock()
		return false
	}
	c.q.owned = true
	if len(c.out.buf) > 0 || c.out.broken {
		c.q.mu.Unlock()
		c.release(true)
		return false
	}
	run, size := c.out.direct[:0], 0
	for c.q.head < len(c.q.calls) && size < 64<<10 {
		cl := c.q.calls[c.q.head]
		if !cl.ready.Load() || cl.close || cl.cmd == "HELLO" || len(cl.reply) >= handOverReply || bigDecode(cl) {
			// Large replies: the writer goroutine writes them from their
			// buffer, or decodes them, while this reader goes on.
			break
		}
		c.q.calls[c.q.head] = nil
		c.q.head++
		run = append(run, cl)
		size += len(cl.reply)
	}
	if c.q.head == len(c.q.calls) {
		c.q.calls, c.q.head = c.q.calls[:0], 0
	}
	c.q.mu.Unlock()
	if len(run) > 0 {
		select { // as pop does
		case c.q.space <- struct{}{}:
		default:
		}
	}
	var now time.Time
	for i, cl := range run {
		c.emit(rw, cl, &now)
		run[i] = nil
	}
	c.out.direct = run[:0]
	c.out.obs.flush() // counted before the client can see the replies
	if len(c.out.buf) > 0 {
		c.out.wr.buf = c.out.buf
		rerr := c.raw.Write(c.out.wr.write)
		n := c.out.wr.n
		var err error
		switch {
		case rerr != nil:
			err = rerr
		case c.out.wr.errno != 0:
			err = c.out.wr.errno
		}
		c.out.wr.buf = nil
		switch {
		case err == syscall.EAGAIN || err == syscall.EINTR:
			n = 0
		case err != nil:
			c.out.broken = true
			c.abort() // ends the reader
			n = len(c.out.buf)
		}
		if n < 0 {
			n = 0
		}
		rest := copy(c.out.buf, c.out.buf[n:])
		c.out.buf = c.out.buf[:rest]
		if rest == 0 {
			c.trimWriter()
		}
	}
	c.release(true)
	return true
}

// writeLoop writes replies in order and flushes when nothing more is ready.
func (c *client) writeLoop() {
	write := func() {
		c.settleHeld()
		if len(c.out.buf) > 0 && !c.out.broken {
			// The output counts against the client's bounds while the
			// socket takes it (memory.go).
			// Large output counts against the client's bounds while
			// the socket takes it (memory.go); small output is not
			// worth the bookkeeping.
			n := int64(len(c.out.buf))
			if n < minOtherHeld {
				n = 0
			}
			if n > 0 {
				c.hold(n)
				c.mem.writing.Store(n)
			}
			if _, err := c.nc.Write(c.out.buf); err != nil {
				c.out.broken = true
				c.abort() // ends the reader
			}
			if n > 0 {
				c.mem.writing.Store(0)
				c.hold(-n)
			}
		}
		c.out.buf = c.out.buf[:0]
		if cap(c.out.buf) > 1<<20 {
			bufpool.Put(c.out.buf) // only the writer held it
			c.out.buf = nil
		}
	}
	var held []pushMsg // pushes that came after replies not written yet
	writePushesUpTo := func(done uint64) {
		for len(held) > 0 && held[0].seq <= done {
			m := held[0].msg
			held = held[1:]
			v, _, err := resp.ReadValue(m)
			mark := len(c.out.buf)
			if err == nil {
				c.out.buf, err = c.out.rw.walk(c.out.buf, v, shapeAny, nil, nil)
			}
			if err != nil {
				c.out.buf = append(c.out.buf[:mark], m...)
			}
		}
	}
	writePushes := func() { writePushesUpTo(c.pinned.done.Load()) }
	// sleep waits for a nudge or a push; pushes are only held here, and
	// written once the writer owns the output.
	// lost: the private upstream connection ended (a push without a
	// message): once the replies that came before are written, the
	// connection ends, as Redis would end it.
	lost := false
	take := func(m pushMsg) {
		if m.msg == nil {
			lost = true
			return
		}
		held = append(held, m)
	}
	var now time.Time // of the replies written since the last sleep
	sleep := func() {
		now = time.Time{}
		select {
		case <-c.q.ready:
		case m := <-c.pushes():
			take(m)
		}
	}
	own := false
	for {
		if !own {
			if own = c.acquire(); !own {
				sleep()
				continue
			}
		}
		writePushes()
		cl, closed := c.next()
		if cl == nil && closed {
			write()
			return
		}
		if cl == nil || !cl.ready.Load() {
			// Nothing more is ready: write what we have, then sleep
			// until a call completes or a push arrives.
			write()
			c.trimWriter()
			if lost && !c.out.broken {
				c.abort()
				c.out.broken = true
			}
			c.release(false)
			own = false
			sleep()
			continue
		}
		c.pop()
		// Pushes delivered before this call finished came first on the
		// wire: take them in now so they are written in their place.
	drainPush:
		for {
			select {
			case m := <-c.pushes():
				take(m)
			default:
				break drainPush
			}
		}
		if cl.pinSeq > 0 {
			// Those that came before this reply on the wire (a push
			// numbered k came after k calls completed) go before it.
			writePushesUpTo(cl.pinSeq - 1)
		}
		if verbatimReply(cl) && !c.out.broken {
			// Written from the reply's own buffer, after what is before it.
			// (No second copy: the reply counts as held until emit.)
			write()
			if _, err := c.nc.Write(cl.reply); err != nil {
				c.out.broken = true
				c.abort()
			}
			bufpool.Put(cl.reply)
			cl.local = true // the reply is written: emit only does the bookkeeping
			cl.reply = nil
		} else if frame, ok := decodedAsWritten(cl); ok && !c.out.broken && c.writeDecoded(cl, frame, write) {
			cl.local = true // written: emit only does the bookkeeping
			cl.reply = cl.reply[:0]
		}
		var closeAfter bool
		if !cl.local && bigDecode(cl) {
			// A frame of 256 KiB or more decoded whole: a thread more
			// meanwhile, as for the streamed decode, so that the writers
			// of several clients decoding at once, and the event loop,
			// are not left to take turns on --procs threads.
			release := takeExtraProc()
			closeAfter = c.emit(&c.out.rw, cl, &now)
			release()
		} else {
			closeAfter = c.emit(&c.out.rw, cl, &now)
		}
		writePushes()
		if closeAfter {
			write()
			c.abort()
			c.out.broken = true
		}
		if len(c.out.buf) >= 64<<10 {
			write()
		}
	}
}

// waitWritten waits until the writer has written the reply of call seq.
// The caller must have flushed: the call must be on its way.
func (c *client) waitWritten(seq uint64) {
	defer c.watchGone()()
	c.out.writtenMu.Lock()
	c.out.writtenWaiters.Add(1) // before the test: emit then sees it, or we see its seq
	for c.out.writtenSeq.Load() < seq {
		c.out.writtenC.Wait()
	}
	c.out.writtenWaiters.Add(-1)
	c.out.writtenMu.Unlock()
}
