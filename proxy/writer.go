package proxy

import (
	"syscall"
	"time"

	"github.com/squeeze-kv/squeeze/internal/bufpool"
	"github.com/squeeze-kv/squeeze/resp"
)

// The writing side of a client: the writer goroutine (writeLoop) writes
// the replies in order; when it is idle, the reader of a shared
// connection that completed ready replies writes them itself
// (writeDirect). Whoever writes owns the output (acquire, release) and
// does each written reply's bookkeeping (emit).

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
		if !cl.ready.Load() || cl.close || cl.cmd == "HELLO" || len(cl.reply) >= handOverReply || bigDecode(cl) || mayRoundTrip(cl) {
			// Large replies: the writer goroutine writes them from their
			// buffer, or decodes them, while this reader goes on; and
			// replies that may wait for Redis (quarantine.go), which
			// this reader must not.
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

// writeLoop is the writer goroutine: it writes the replies in order, with
// a pinned client's pushes in their place among them, and flushes when
// nothing more is ready. It owns the output while it writes (acquire) and
// gives it up before it sleeps, so that a shared connection's reader may
// write directly meanwhile (writeDirect). It returns once the reader is
// done and every reply is written.
func (c *client) writeLoop() {
	w := writer{c: c}
	for {
		if !w.own {
			if w.own = c.acquire(); !w.own {
				w.sleep()
				continue
			}
		}
		w.writePushes()
		cl, closed := c.next()
		if cl == nil && closed {
			c.writeOut()
			return
		}
		if cl == nil || !cl.ready.Load() {
			w.idle()
			continue
		}
		c.pop()
		w.reply(cl)
	}
}

// writer is the writer goroutine's own state (writeLoop), kept on its
// stack: whether it owns the output now, the pushes it holds, and the
// clock reading of the replies it writes.
type writer struct {
	c   *client
	own bool
	// held is the pushes taken in that came after replies not written
	// yet: each is written once those replies are (pinning.done), by the
	// writer owning the output.
	held []pushMsg
	// lost: the private upstream connection ended (a push without a
	// message): once the replies that came before are written, the
	// connection ends, as Redis would end it.
	lost bool
	now  time.Time // of the replies written since the last sleep
}

// idle is the writer goroutine's turn when nothing more is ready: it
// writes what it has, gives back its large buffers, ends the connection if
// its private upstream connection was lost, gives up the output and sleeps
// until a call completes or a push arrives.
func (w *writer) idle() {
	c := w.c
	if d := c.pinned.rtDone.Load(); d > c.pinned.done.Load() && c.queued() == 0 {
		// Every reply before the reader's round trips is written: the
		// pushes that came after them may go (noteRoundtripPin).
		c.notePin(d)
		w.writePushes()
	}
	c.writeOut()
	c.trimWriter()
	if w.lost && !c.out.broken {
		c.abort()
		c.out.broken = true
	}
	c.release(false)
	w.own = false
	w.sleep()
}

// sleep waits for a nudge or a push, and holds the push. Writer goroutine
// only, owning the output or not.
func (w *writer) sleep() {
	w.now = time.Time{}
	select {
	case <-w.c.q.ready:
	case m := <-w.c.pushes():
		w.take(m)
	}
}

// take holds push message m until the replies before it are written, or
// notes that the private connection was lost (no message). Writer
// goroutine only.
func (w *writer) take(m pushMsg) {
	if m.msg == nil {
		w.lost = true
		return
	}
	w.held = append(w.held, m)
}

// takePushes holds the push messages delivered so far, without waiting.
// Writer goroutine only.
func (w *writer) takePushes() {
	for {
		select {
		case m := <-w.c.pushes():
			w.take(m)
		default:
			return
		}
	}
}

// writePushes appends the held pushes that came after the replies written
// so far (pinning.done) to the output. Writer goroutine, owning the output.
func (w *writer) writePushes() { w.writePushesUpTo(w.c.pinned.done.Load()) }

// writePushesUpTo appends the held pushes that came after no more than
// done calls completed to the output, with their values decoded where
// they hold frames (as they came where they do not parse). Writer
// goroutine, owning the output.
func (w *writer) writePushesUpTo(done uint64) {
	c := w.c
	for len(w.held) > 0 && w.held[0].seq <= done {
		m := w.held[0].msg
		w.held = w.held[1:]
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

// reply writes the reply of cl, just popped off the queue, after the
// pushes that came before it on the wire, and the pushes that it lets
// through after it; it ends the connection after a reply that closes it.
// Writer goroutine, owning the output.
func (w *writer) reply(cl *call) {
	c := w.c
	// Pushes delivered before this call finished came first on the
	// wire: take them in now so they are written in their place.
	w.takePushes()
	if cl.pinSeq > 0 {
		// Those that came before this reply on the wire (a push
		// numbered k came after k calls completed) go before it.
		w.writePushesUpTo(cl.pinSeq - 1)
	}
	c.writeLarge(cl)
	closeAfter := w.emit(cl)
	w.writePushes()
	if closeAfter {
		c.writeOut()
		c.abort()
		c.out.broken = true
	}
	if len(c.out.buf) >= 64<<10 {
		c.writeOut()
	}
}

// emit is client.emit for the writer goroutine: a frame of 256 KiB or
// more decoded whole gets a thread more meanwhile, as the streamed decode
// does, so that the writers of several clients decoding at once, and the
// event loop, are not left to take turns on --procs threads.
func (w *writer) emit(cl *call) bool {
	c := w.c
	if cl.local || !bigDecode(cl) {
		return c.emit(&c.out.rw, cl, &w.now)
	}
	release := takeExtraProc()
	closeAfter := c.emit(&c.out.rw, cl, &w.now)
	release()
	return closeAfter
}

// writeLarge writes a large reply that is not to be copied into the
// output: one that goes byte for byte as Redis sent it, written from its
// own buffer, or a frame decoded as it is written. It marks such a reply
// local, so that emit only does the bookkeeping. Writer goroutine, owning
// the output.
func (c *client) writeLarge(cl *call) {
	if verbatimReply(cl) && !c.out.broken {
		// Written from the reply's own buffer, after what is before it.
		// (No second copy: the reply counts as held until emit.)
		c.writeOut()
		if _, err := c.nc.Write(cl.reply); err != nil {
			c.out.broken = true
			c.abort()
		}
		bufpool.Put(cl.reply)
		cl.local = true // the reply is written: emit only does the bookkeeping
		cl.reply = nil
	} else if frame, ok := decodedAsWritten(cl); ok && !c.out.broken && c.writeDecoded(cl, frame) {
		cl.local = true // written: emit only does the bookkeeping
		cl.reply = cl.reply[:0]
	}
}

// writeOut writes the output gathered so far to the client's socket,
// blocking until the socket takes it, and takes what the replies written
// gave back off the process's total first (settleHeld). A failed write
// marks the output broken and ends the reader. Writer goroutine, owning
// the output.
func (c *client) writeOut() {
	c.settleHeld()
	if len(c.out.buf) > 0 && !c.out.broken {
		// Large output counts against the client's bounds while the
		// socket takes it (memory.go); small output is not worth the
		// bookkeeping.
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
