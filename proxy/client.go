package proxy

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/squeeze-kv/squeeze/internal/bufpool"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/resp"
)

func (s *Server) newClient(nc net.Conn, pollers []*poller) *client {
	if tcp, ok := nc.(*net.TCPConn); ok {
		tcp.SetNoDelay(true)
	}
	c := &client{
		s:    s,
		nc:   nc,
		id:   s.nextID.Add(1),
		q:    replyQueue{ready: make(chan struct{}, 1), space: make(chan struct{}, 1)},
		in:   reader{args: make([][]byte, 0, 16), handback: make(chan readEnd, 1)},
		sess: session{proto: 2, db: s.up.DB},
		life: lifecycle{draining: make(chan struct{}), writerDone: make(chan struct{})},
	}
	c.in.rw.s, c.out.rw.s = s, s
	c.out.writtenC = sync.NewCond(&c.out.writtenMu)
	if sc, ok := nc.(syscall.Conn); ok {
		c.raw, _ = sc.SyscallConn()
	}
	c.out.wr.write = func(fd uintptr) bool {
		c.out.wr.n, c.out.wr.errno = rawWrite(fd, c.out.wr.buf)
		return true // never wait: the writer goroutine finishes a full socket
	}
	c.nc = newRawSock(nc)
	if c.raw == nil || !directWrites || s.RequireAuth { // RequireAuth: pinned from the start
		c.out.noDirect.Store(true)
		c.in.noLoop = true
	}
	if len(pollers) > 0 {
		c.in.poller = pollers[c.id%uint64(len(pollers))]
	}
	return c
}

// drain makes the reader stop after the commands it has already read; the
// writer then writes their replies and the connection closes.
func (c *client) drain() {
	c.life.drainOnce.Do(func() {
		close(c.life.draining)
		c.nc.SetReadDeadline(time.Now())
		c.shutdownSocket(shutRead) // the poller sees it
	})
}

// hasRoom reports whether the reply queue may take one more call: fewer
// than MaxInFlight calls, and no more than MaxReplyBytes of replies held
// (an empty queue always has room).
//
// The count needs qmu, but the writer only ever shortens the queue: a
// count taken under it says how many more calls fit (roomCredit), and the
// commands after it in the same read use that instead of the lock.
func (c *client) hasRoom() bool {
	if c.in.roomCredit > 0 && c.bytesRoom() {
		return true
	}
	c.q.mu.Lock()
	ok := c.roomLocked()
	c.q.mu.Unlock()
	return ok
}

// roomLocked is hasRoom for the command reader holding qmu. It sets
// roomCredit to the calls that may be queued before the count must be
// taken again.
func (c *client) roomLocked() bool {
	n := len(c.q.calls) - c.q.head
	w := c.replyWindow()
	c.in.roomCredit = 0
	if n < w && c.bytesRoom() {
		c.in.roomCredit = w - n
		return true
	}
	return n == 0
}

// bytesRoom reports whether the client holds and expects no more than
// MaxReplyBytes, and the process is not under pressure. Command reader
// only (it counts batchExpected).
func (c *client) bytesRoom() bool {
	return c.mem.held.Load()+c.mem.expected.Load()+c.in.batchExpected <= c.s.maxReplyBytes() && !c.s.pressure()
}

// closePinned closes the private upstream connection, failing its calls.
func (c *client) closePinned() {
	c.pinned.mu.Lock()
	p := c.pinned.conn
	c.pinned.mu.Unlock()
	if p != nil {
		p.close()
	}
}

// forceClose ends the connection now, for Shutdown past its deadline.
func (c *client) forceClose() {
	c.abort()
	c.closePinned()
}

// abort ends the connection in both directions: reads see the end of input
// and writes fail, wherever they are waiting. The descriptor stays open
// until serve closes it, so the poller never loses track of it.
func (c *client) abort() {
	c.life.aborted.Store(true)
	if !c.shutdownSocket(shutBoth) {
		c.nc.Close()
	}
}

// idleKeep is the capacity from which a client's working buffer (its
// batch of requests, its output, a rewriter's scratch) goes back to the
// free lists of buffers once the client has nothing pending, rather
// than stay with a client that may wait for hours: a proxy whose 300
// clients had each stored and read a 500 kB document held 1.2 MB per idle
// client (scripts/idle-memory.sh with VALUE=500000).
const idleKeep = bufpool.MinSize

// giveBackIdle puts *b, if it is empty and of idleKeep or more, back in
// the free lists of large buffers.
func giveBackIdle(b *[]byte) {
	if len(*b) == 0 && cap(*b) >= idleKeep {
		bufpool.Put(*b)
		*b = nil
	}
}

// forwardAsIsMin is the command size from which a command that goes to
// Redis as it came is sent from the read buffer instead of a copy
// (forwardsAsIs): below it, one batch for many commands costs less.
const forwardAsIsMin = 32 << 10

// lostCall ends the client's connection without a reply: its private
// upstream connection ended, as Redis ends a client's connection.
func (c *client) lostCall(cmd string) *call {
	cl := c.localCall(cmd, nil)
	cl.close = true
	return cl
}

// localCall returns a finished call whose reply the proxy made.
func (c *client) localCall(cmd string, reply []byte) *call {
	cl := newCall()
	cl.cmd = cmd
	cl.local = true
	cl.reply = append(cl.reply[:0], reply...)
	if c.s.metrics != nil {
		cl.start = time.Now()
	}
	cl.notify = c.q.ready
	cl.finish()
	return cl
}

// wake nudges the writer.
func (c *client) wake() {
	select {
	case c.q.ready <- struct{}{}:
	default:
	}
}

// enqueue hands a call to the writer in order. If MaxInFlight calls, or
// MaxReplyBytes of replies, are waiting, the batch goes upstream first so
// that the calls the writer waits for can end, and the reader waits for
// room: a slow client stops being read instead of making the proxy buffer
// its replies.
//
// An event loop never waits here: it checked for room before it took the
// command (loopSafe), and room taken since by other clients' replies
// (MaxMemory) must not stop the loop.
func (c *client) enqueue(cl *call) {
	if c.in.roomCredit > 0 {
		c.in.roomCredit-- // one call fewer fits now
	}
	for {
		if c.in.looping {
			c.q.mu.Lock()
			c.q.calls = append(c.q.calls, cl)
			c.q.mu.Unlock()
			break
		}
		c.q.mu.Lock()
		if c.roomLocked() {
			c.q.calls = append(c.q.calls, cl)
			c.in.roomCredit = max(c.in.roomCredit-1, 0)
			c.q.mu.Unlock()
			break
		}
		c.q.mu.Unlock()
		c.flush()
		stop := func() {}
		if c.pinned.conn != nil {
			// A reply that never comes (a command blocked for good, a
			// subscriber's) must not keep a client that left waiting here,
			// where it reads nothing and so never sees the end.
			stop = c.watchPeer()
		}
		<-c.q.space
		stop()
	}
	if cl.ready.Load() {
		c.wake()
	}
}

// next returns the call at the head of the queue, or nil, and whether the
// reader is done.
func (c *client) next() (*call, bool) {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	if c.q.head < len(c.q.calls) {
		return c.q.calls[c.q.head], c.q.closed
	}
	return nil, c.q.closed
}

// pop removes the head of the queue.
func (c *client) pop() {
	c.q.mu.Lock()
	c.q.calls[c.q.head] = nil
	c.q.head++
	if c.q.head == len(c.q.calls) {
		c.q.calls, c.q.head = c.q.calls[:0], 0
	}
	c.q.mu.Unlock()
	select {
	case c.q.space <- struct{}{}:
	default:
	}
}

// conn returns the upstream connection for this client's next commands.
func (c *client) conn() (*upConn, error) {
	if c.pinned.conn != nil {
		return c.pinned.conn, nil
	}
	return c.sharedConn()
}

// sendOn sends requests on up in the order they came among all clients'
// (proxy/order.go): on the client's private connection behind the
// barriers raised before and under one of their own (sendPrivate); on a
// shared one ahead of the barrier the client raised for a command that had
// to wait, or as they come. tail says how Redis will show it took the
// last of them; nil: the reply of the last call.
func (c *client) sendOn(up *upConn, req []byte, calls []*call, tail *batchTail) {
	switch {
	case up.onPush != nil:
		c.sendPrivate(up, req, calls, tail)
	case c.pinned.held != nil:
		if !c.pinned.held.awaited {
			c.s.pool.awaitOrder(c.pinned.held)
		}
		up.sendAhead(req, calls)
	case c.in.looping && len(req) >= forwardAsIsMin:
		c.in.scope.heldBack = &c.pinned.heldBack
		up.sendHeld(c.in.poller, req, calls, &c.in.scope)
	default:
		c.in.scope.heldBack = &c.pinned.heldBack
		up.sendScoped(req, calls, &c.in.scope)
	}
}

// sendPrivate sends requests on the client's private connection in their
// place among all clients' commands: once every barrier raised before
// them has ended, and under a barrier of their own (the one raised when
// they were read, if one was) that lasts until Redis has taken the last
// of them (endWhenTaken). Written is not enough: Redis reads its sockets
// in an order of its own, so another client's command sent on another
// socket right after could run first.
func (c *client) sendPrivate(up *upConn, req []byte, calls []*call, tail *batchTail) {
	h := c.pinned.held
	c.pinned.held = nil
	if h == nil {
		h = c.s.pool.raiseOrder()
	}
	c.s.pool.awaitOrderTaken(h)
	// More commands read with these follow (a SELECT whose reply the
	// reader waits for, then the SET sent with it): they came before what
	// other clients sent since, so the barrier carries on to them, and
	// ends once Redis has taken the last batch (parts). Ended already
	// (behind a blocked command, or by the sweeper), it carries nothing.
	carry := !c.in.lastFlush && !h.ended.Load()
	if carry && !c.pinned.heldPart {
		h.parts.Add(1) // the goroutine's, until the last batch (endPinOrder)
		c.pinned.heldPart = true
	}
	h.parts.Add(1) // this batch's
	atWrite := c.endWhenTaken(h, calls, tail)
	up.send(req, calls)
	if atWrite {
		h.endPart()
	}
	switch {
	case carry:
		c.pinned.held = h
	case c.pinned.heldPart:
		// The goroutine's: this is the last batch. (Told from the count
		// of parts, it was missed when the batch's reply came before
		// the count was read, and the barrier held the others until the
		// sweeper ended it: 250 ms.)
		c.pinned.heldPart = false
		h.endPart()
	}
}

// endWhenTaken arranges for barrier h to end once Redis has taken the
// requests sent under it: at the reply to the last of them; for a batch
// with a blocking command, once Redis holds the client blocked
// (endWhenBlocked) or the reply comes; for subscription commands that get
// no reply, at the first confirmation of the last one (confirmations).
// It reports whether h must end once they are written instead: behind a
// blocked command of the client's (Redis runs them only after it returns,
// and the others must not wait that long), or after a command that gets
// no reply at all (CLIENT REPLY OFF, a command in the RESP2 relay other
// than a subscription). Runs before the send: a reply may come at once.
func (c *client) endWhenTaken(h *orderHold, calls []*call, t *batchTail) (atWrite bool) {
	var one batchTail
	if t == nil {
		t = &one
		if len(calls) > 0 {
			one.last = calls[len(calls)-1]
		}
	}
	switch {
	case c.pinned.blockers.Load() > int32(t.blocks):
		return true
	case t.blocks > 0:
		if t.last != nil {
			t.last.endsOrder = h
		}
		if c.pinned.id == 0 {
			return true
		}
		go c.s.endWhenBlocked(h, c.pinned.id)
	case t.confirms:
		c.pinned.confirms.arm(h)
	case t.silent || t.last == nil:
		return true
	default:
		t.last.endsOrder = h
	}
	return false
}

// clientIDRequest asks a new private connection for its id.
var clientIDRequest = resp.AppendCommand(nil, []byte("CLIENT"), []byte("ID"))

// pingRequest is the PING that makes sure a client's earlier commands ran.
var pingRequest = resp.AppendCommand(nil, []byte("PING"))

// endPinOrder lowers the order barrier raised for a command that had to
// wait (see pin and process), if no send on the private connection took
// it over (sendPrivate): once the command is written.
func (c *client) endPinOrder() {
	c.in.coversRest = false
	if c.pinned.held != nil {
		c.pinned.held.endPart() // the goroutine's part, if it had one
		c.pinned.held = nil
	}
	c.pinned.heldPart = false
}

// flush sends the batch of rewritten requests upstream.
func (c *client) flush() {
	if c.in.batchExpected != 0 {
		// Before the batch goes: its replies give the reservations back.
		c.expect(c.in.batchExpected)
		c.in.batchExpected = 0
	}
	if len(c.in.req) == 0 {
		return
	}
	up, err := c.conn()
	if err != nil {
		for _, cl := range c.in.batch {
			cl.err, cl.connLost = err, c.s.lossEndsClients()
			cl.finish()
		}
	} else {
		c.sendOn(up, c.in.req, c.in.batch, &c.in.tail)
	}
	c.in.tail = batchTail{}
	c.in.scope.reset()
	for i := range c.in.batch {
		c.in.batch[i] = nil
	}
	c.in.batch = c.in.batch[:0]
	if c.in.reqRaw { // req was the client's read buffer: back to its own
		c.in.req, c.in.reqOwn, c.in.reqRaw = c.in.reqOwn[:0], nil, false
		return
	}
	c.in.req = c.in.req[:0]
	if cap(c.in.req) > 1<<20 {
		bufpool.Put(c.in.req) // sent: the connection wrote it or copied it
		c.in.req = nil
	}
}

// noteStep makes the scope of a round trip of the command being handled
// (stepInfo) that command's keys. Unnoted, the scope passed every barrier
// (orderscope.go): an APPEND's probe on a shared connection ran before
// another client's SET of the key, sent on a private connection before
// it (order scenes, seed 105). After flush, which empties the scope.
func (c *client) noteStep() {
	if c.in.stepInfo == nil {
		return
	}
	if o := &c.s.pool.order; o.up.Load() > 0 {
		c.in.scope.note(c.in.stepInfo, c.in.stepArgs, true, o.mayWake())
	} else {
		c.in.scope.any = true // as note with no barrier up
	}
}

// roundtrip sends one request on the client's connection after everything
// sent before, and waits for the reply. The caller releases the call.
func (c *client) roundtrip(req []byte) *call {
	c.flush()
	c.noteStep()
	cl := newCall()
	up, err := c.conn()
	if err != nil {
		cl.err, cl.connLost = err, c.s.lossEndsClients()
		return cl
	}
	req, ask := c.askingFirst(req)
	calls := c.in.one[:]
	c.in.one[0] = cl
	if ask != nil {
		calls = []*call{ask, cl}
	}
	c.sendOn(up, req, calls, nil)
	if up.onPush == nil {
		c.endPinOrder() // if a command waited, it is written now
	} // (on a private connection sendPrivate ended it, or carries it on)
	c.in.one[0] = nil
	stop := c.watchGone()
	awaitAsking(ask)
	<-cl.done
	stop()
	c.noteRoundtripPin(cl.pinSeq)
	return cl
}

// askingRequest is the ASKING that the proxy's round trips for a command
// the client sent after its own ASKING carry (reader.asking).
var askingRequest = resp.AppendCommand(nil, []byte("ASKING"))

// askingFirst returns req preceded by ASKING, and the call for ASKING's
// reply, when the command being handled came after the client's ASKING
// (reader.asking); else req and nil. Redis Cluster lets ASKING through
// to one command only, and each of the proxy's round trips for the
// client's command is a command of its own, so each carries its own.
func (c *client) askingFirst(req []byte) ([]byte, *call) {
	if !c.in.asking {
		return req, nil
	}
	return append(append(make([]byte, 0, len(askingRequest)+len(req)), askingRequest...), req...), newCall()
}

// awaitAsking waits for the reply to the ASKING askingFirst put before a
// request, if it did, and lets its call go.
func awaitAsking(ask *call) {
	if ask != nil {
		<-ask.done
		ask.release()
	}
}

// watchGone watches, while the client's reader waits on its private
// connection behind commands that have not run (a blocked BLPOP, then a
// HELLO or a STRLEN), whether the client leaves: Redis frees a blocked
// client whose socket ends, so the proxy then closes the private
// connection, which fails what it owes and ends the wait. It returns the
// function that stops watching; without a private connection that owes
// earlier replies it watches nothing.
func (c *client) watchGone() (stop func()) {
	if c.pinned.conn == nil || c.pinned.conn.awaiting.Load() <= 1 {
		return func() {}
	}
	return c.watchPeer()
}

// watchPeer polls the client's socket for its end until stop, and closes
// the private connection when the client has left, failing what waits on
// it: for a reader waiting on its private connection's replies.
func (c *client) watchPeer() (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if c.peerGone() {
					c.closePinned()
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// roundtripScript is roundtrip for the script that runs the client's
// command in its place (inspect): Redis sends the invalidation pushes the
// script's writes cause before the script's reply, where it would send
// them after the command's own reply, so pushes that arrive while the
// script is in flight are written after the reply the proxy makes of it.
// Its pinSeq is left for that reply's call to note (see emit).
func (c *client) roundtripScript(req []byte) *call {
	c.flush()
	c.noteStep()
	req, ask := c.askingFirst(req)
	cl := newCall()
	if c.in.scriptUp != nil {
		c.in.scriptUp.send(req, askingCalls(ask, cl))
		awaitAsking(ask)
		<-cl.done
		return cl
	}
	up, err := c.conn()
	if err != nil {
		if ask != nil {
			ask.release()
		}
		cl.err, cl.connLost = err, c.s.lossEndsClients()
		return cl
	}
	if up.onPush == nil {
		calls := c.in.one[:]
		c.in.one[0] = cl
		if ask != nil {
			calls = []*call{ask, cl}
		}
		c.sendOn(up, req, calls, nil)
		// A barrier that holds only the command's keys lasts until the
		// command is done (process ends it): past a NOSCRIPT, after which
		// the script goes again by its text, and between the round trips
		// of a command that makes several (APPEND probes, then writes),
		// requests on those keys must not run (orderscope.go). So does
		// any barrier of such a command (steps: one that holds everything
		// because the command came with a SELECT, say). Another one, a
		// script's that holds everything, ends now that it is written.
		if !c.pinned.held.keyed() && !c.in.steps {
			c.endPinOrder() // if a command waited, it is written now
		}
		c.in.one[0] = nil
		awaitAsking(ask)
		<-cl.done
		return cl
	}
	// A connection that receives pushes: a PING goes first, in the same
	// write, so pushes Redis sent before the script (another client's
	// write invalidating a key this client caches) arrive before its reply
	// and keep their place; only those between the two replies are the
	// script's own. (ASKING, if the script carries it, goes between: it
	// must come right before the script.)
	cl.deferPushes = true
	ping := newCall()
	calls := append([]*call{ping}, askingCalls(ask, cl)...)
	c.sendOn(up, append(append(make([]byte, 0, len(pingRequest)+len(req)), pingRequest...), req...), calls, nil)
	if !c.pinned.held.keyed() && !c.in.steps {
		// As above: a barrier of a command of several steps lasts until
		// it is done (it ended here, between APPEND's probe and its
		// write, and another client's SET of the key ran in between).
		c.endPinOrder()
	}
	stop := c.watchGone()
	<-ping.done
	ping.release()
	awaitAsking(ask)
	<-cl.done
	stop()
	return cl
}

// askingCalls returns the calls for a request askingFirst made: ask's,
// if not nil, then cl's.
func askingCalls(ask, cl *call) []*call {
	if ask == nil {
		return []*call{cl}
	}
	return []*call{ask, cl}
}

// pin moves the client to a private upstream connection. Commands sent on
// the shared connection complete first, so order is kept.
func (c *client) pin() error {
	if c.pinned.conn != nil {
		return nil
	}
	c.out.noDirect.Store(true)
	if c.pinned.push.Load() == nil {
		ch := make(chan pushMsg, 128)
		c.pinned.push.Store(&ch)
		c.wake() // a writer asleep on no channel waits on this one
	}
	// Other clients' requests from now on reach Redis after the command
	// that made this client pin, however long the dial takes: an order
	// barrier (raised already if an event loop handed the client over)
	// holds them until that command is written (proxy/order.go).
	if c.pinned.held == nil {
		c.flush() // this client's earlier commands go before the barrier
		c.pinned.held = c.s.pool.raiseOrder()
	}
	if !c.pinned.held.awaited {
		c.s.pool.awaitOrder(c.pinned.held)
	}
	if !c.s.RequireAuth { // else the client pins before its first command
		// This client's own commands sent before must have run, not only
		// been written: PING on its shared connection, ahead of the
		// barrier, and wait for the reply.
		if shared, err := c.conn(); err == nil {
			ping := newCall()
			c.in.one[0] = ping
			shared.sendAhead(pingRequest, c.in.one[:])
			c.in.one[0] = nil
			<-ping.done
			ping.release()
		}
	}
	up, err := c.s.dialUpAs(context.Background(), c.onPush, !c.s.RequireAuth, c.s.up.DB)
	if err != nil {
		c.endPinOrder()
		return err
	}
	if !c.s.RequireAuth {
		// Its id, to see when a blocking command waits (endWhenBlocked).
		idc := newCall()
		up.send(clientIDRequest, []*call{idc})
		<-idc.done
		if idc.err == nil && len(idc.reply) > 3 && idc.reply[0] == ':' {
			c.pinned.id, _ = strconv.ParseInt(string(bytes.TrimSpace(idc.reply[1:])), 10, 64)
		}
		c.notePin(idc.pinSeq)
		idc.release()
	}
	c.sess.authed = up.authed
	c.pinned.mu.Lock()
	c.pinned.conn = up
	c.pinned.mu.Unlock()
	c.in.pass.setPrivate()
	return nil
}

// pushes returns the channel of push messages, nil (which never
// delivers) before the client pins.
func (c *client) pushes() chan pushMsg {
	if p := c.pinned.push.Load(); p != nil {
		return *p
	}
	return nil
}

// onPush runs on the pinned connection's reader for push messages and
// relayed replies.
func (c *client) onPush(msg []byte, seq uint64) {
	if cf := confirmationOf(msg); cf.kind != confirmNone {
		c.pinned.confirms.confirmed(cf)
	}
	select {
	case *c.pinned.push.Load() <- pushMsg{append([]byte(nil), msg...), seq}: // made by pin, which dialed
	case <-c.life.writerDone: // nobody will write it
	}
}

// noteTxWrites notes what a command queued in a transaction writes, for
// the inspect commands queued after it: the values it sets (their keys,
// and for hashes the hash's key), and the keys it copies or moves.
func (c *client) noteTxWrites(info *cmdInfo, args [][]byte) {
	if info.flags&rediscmd.SetsValue != 0 {
		first, step, end := valueArgs(info.vals, args)
		for i := first; step > 0 && i < end; i += step {
			c.noteTxSet(info.vals.KeyOf(args, i), args[i])
		}
	}
	if info.flags&rediscmd.Copies != 0 && len(args) >= 3 {
		c.sess.txCopies = append(c.sess.txCopies, [2][]byte{bytes.Clone(args[2]), bytes.Clone(args[1])})
	}
}

// clientInfoDB returns the db field of a CLIENT INFO reply.
func clientInfoDB(reply []byte) (int, bool) {
	i := bytes.Index(reply, []byte(" db="))
	if i < 0 {
		return 0, false
	}
	rest := reply[i+4:]
	end := bytes.IndexAny(rest, " \r\n")
	if end < 0 {
		end = len(rest)
	}
	n, ok := resp.ParseInt(rest[:end])
	return int(n), ok && n >= 0
}

// restoreSetup runs the connection setup commands on the client's private
// connection, without showing their replies, and notes whether the client
// is authenticated now: true unless Redis answered -NOAUTH.
func (c *client) restoreSetup(cmds [][]byte) {
	c.sess.authed = true
	for _, cmd := range cmds {
		r := c.roundtrip(cmd)
		if r.err != nil || bytes.HasPrefix(r.reply, []byte("-NOAUTH")) {
			c.sess.authed = false
		}
		r.release()
	}
}

// pushMsg is a push message (or relayed reply) and the number of calls its
// connection had completed before it.
type pushMsg struct {
	msg []byte
	seq uint64
}

// noteRoundtripPin notes seq, the place of a reply a round trip of the
// reader consumed (no reply of it is written): the push messages that came
// after it may be written once every reply before it is. With replies of
// the client still queued, the writer notes it when it has written them
// (writer.idle), unless a later reply it writes does first: noted at once,
// a RESP3 client's subscription confirmation went out before the replies
// of the commands it had sent before it, whenever a SELECT (a round trip)
// came after them in the same pipeline.
func (c *client) noteRoundtripPin(seq uint64) {
	if c.queued() == 0 {
		c.notePin(seq)
		return
	}
	for {
		cur := c.pinned.rtDone.Load()
		if seq <= cur || c.pinned.rtDone.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// notePin records that the reply of the pinned call with sequence seq has
// been consumed, so pushes that came after it may be written.
func (c *client) notePin(seq uint64) {
	for {
		cur := c.pinned.done.Load()
		if seq <= cur || c.pinned.done.CompareAndSwap(cur, seq) {
			return
		}
	}
}
