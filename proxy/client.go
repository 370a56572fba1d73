package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
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

func (c *client) serve() {
	defer c.s.forget(c)
	if tc, ok := c.nc.(*tls.Conn); ok {
		// Complete the handshake first, within a bound, so that a client
		// that never finishes it does not hold a connection for good, and
		// a refused one (no certificate, another CA) is told in the log.
		ctx, cancel := context.WithTimeout(context.Background(), tlsHandshakeTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			c.s.logger().Warn("client TLS handshake failed", "remote", tc.RemoteAddr().String(), "err", err)
			tc.Close()
			return
		}
	}
	go func() { c.writeLoop(); close(c.life.writerDone) }()
	if c.s.RequireAuth {
		// A private connection without credentials before the first
		// command: Redis itself decides what the client may do. On
		// failure, the first command reports it.
		_ = c.pin()
		c.endPinOrder() // no command came with it
	}
	var end readEnd
	for {
		if c.loopable() {
			if end = c.in.poller.run(c); end != endToGoroutine {
				break
			}
		}
		if end = c.readLoop(); end != endToLoop {
			break
		}
	}
	c.endPinOrder()
	switch end {
	case endGone:
		// Nobody will read the replies: fail whatever the pinned
		// connection still owes (a blocked BLPOP) so the writer can end.
		c.closePinned()
	case endStop:
		// Close after the replies; but if the client goes away while a
		// reply is still owed (a subscription's, a blocked command's),
		// nobody will read it: then fail what the pinned connection owes,
		// so the writer ends and nothing stays behind.
		go func() {
			buf := make([]byte, 512)
			for {
				if _, err := c.nc.Read(buf); err != nil {
					select {
					case <-c.life.writerDone:
					default:
						c.closePinned()
					}
					return
				}
			}
		}()
	}
	c.q.mu.Lock()
	c.q.closed = true
	c.q.mu.Unlock()
	c.wake()
	<-c.life.writerDone
	c.closePinned()
	c.nc.Close()
}

// tlsHandshakeTimeout bounds a client's TLS handshake.
const tlsHandshakeTimeout = 10 * time.Second

// readEnd says why a reader (the poller or the client's goroutine) stopped
// reading a client.
type readEnd int

const (
	endStay        readEnd = iota // poller: keep reading this client
	endToGoroutine                // a command must wait: read in the goroutine
	endToLoop                     // the goroutine is done waiting: back to the poller
	endGone                       // the client closed or the socket failed
	endDrained                    // Shutdown: stop after the commands read
	endStop                       // QUIT or malformed input: close after the replies
)

// loopable reports whether the poller may read this client: it has one,
// and the client's state needs no waiting (no private connection, no open
// transaction, no pub/sub, replies on).
func (c *client) loopable() bool {
	return c.in.poller != nil && !c.in.noLoop && c.pinned.conn == nil && c.sess.inPlainFlow()
}

// maxLoopCommand is the largest command an event loop handles itself: a
// larger one (a big value to compress) goes to the client's goroutine, so
// that the loop's other clients do not wait for its compression.
const maxLoopCommand = 256 << 10

// loopSafe reports whether the poller may handle this command: one that
// never waits for Redis or for room in the reply queue.
func (c *client) loopSafe(info *cmdInfo, args [][]byte) bool {
	if c.mustWait(info, args) {
		return false
	}
	return c.hasRoom()
}

// mustWait reports whether a command waits for Redis before, or instead
// of, going upstream with the others: it pins a private connection, or runs
// a script after a round trip.
func (c *client) mustWait(info *cmdInfo, args [][]byte) bool {
	return info.flags&(rediscmd.Inspect|rediscmd.Hello) != 0 || needsPin(info, args) || c.exactListSearch(info, args) ||
		(!c.s.RejectScripts && (info.flags&rediscmd.Script != 0 || isScriptAdmin(args)) && !c.s.scriptFast(info, args))
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

// readLoop reads, parses and forwards commands in the client's goroutine
// until the client leaves, or until the poller can take over again.
func (c *client) readLoop() readEnd {
	var rerr error
	for {
		if !c.process(false) {
			return c.stopped()
		}
		select {
		case <-c.life.draining:
			return endDrained
		default:
		}
		if rerr != nil {
			return endGone
		}
		if c.loopable() {
			if len(c.in.rbuf) == 0 {
				// Idle in the loop until the client sends more: the
				// loop reads it into its own buffer.
				c.dropReadBuf()
				c.trimReader()
			}
			return endToLoop
		}
		if len(c.in.rbuf) == 0 && cap(c.in.rbuf) != readBufSize {
			// The read may wait for hours (a subscriber): with a buffer
			// of the usual size, not one grown for a large command.
			c.dropReadBuf()
			c.in.rbuf = getReadBuf()
		}
		if len(c.in.rbuf) == 0 {
			c.trimReader()
		}
		c.growRead()
		var n int
		n, rerr = c.nc.Read(c.in.rbuf[len(c.in.rbuf):cap(c.in.rbuf)])
		c.in.rbuf = c.in.rbuf[:len(c.in.rbuf)+n]
	}
}

// stopped is why a reader stopped when process returned false: the
// connection was aborted (endGone: nobody reads the replies, so what a
// pinned connection still owes is failed), or QUIT or malformed input
// (endStop: close after the replies).
func (c *client) stopped() readEnd {
	if c.life.aborted.Load() {
		return endGone
	}
	return endStop
}

// loopStep is the poller's turn with a client whose socket is readable:
// read once, handle the complete commands, send them upstream.
func (c *client) loopStep() readEnd {
	select {
	case <-c.life.draining:
		return endDrained
	default:
	}
	// With nothing pending, read into the loop's buffer: an idle client
	// then holds no read buffer (as Redis's clients share one query
	// buffer), and the loop reads every such client into the same memory.
	shared := len(c.in.rbuf) == 0
	if shared {
		putReadBuf(c.in.rbuf)
		c.in.rbuf = c.in.poller.rbuf[:0]
	} else {
		c.growRead()
	}
	room := cap(c.in.rbuf) - len(c.in.rbuf)
	n, err := c.readOnce(c.in.rbuf[len(c.in.rbuf):cap(c.in.rbuf)])
	c.in.rbuf = c.in.rbuf[:len(c.in.rbuf)+n]
	// The socket may hold more, which an edge-triggered poller hears of
	// only if it asks again.
	c.in.readFull = n == room && err == nil
	ok := c.process(true)
	switch {
	case shared && len(c.in.rbuf) > 0:
		// Part of a command, or commands for the client's goroutine:
		// they move to a buffer of the client's own (nothing refers to
		// the loop's buffer once process returns), sized at once for a
		// large argument that is still arriving.
		size := max(readBufSize, readGrowth(len(c.in.rbuf), resp.PendingBulkEnd(c.in.rbuf)))
		c.in.rbuf = append(bufpool.Get(size), c.in.rbuf...)
	case shared:
		c.in.rbuf = nil
		c.trimReader()
	case len(c.in.rbuf) == 0:
		c.dropReadBuf()
		c.trimReader()
	}
	if !ok {
		return c.stopped()
	}
	switch {
	case err != nil:
		return endGone
	case !c.loopable() || c.in.handOff:
		c.in.handOff = false
		return endToGoroutine
	}
	return endStay
}

// readBufSize is the size of a read: of an event loop's buffer, and of a
// client's own when it needs one.
const readBufSize = 16 << 10

// getReadBuf returns an empty read buffer of readBufSize, from the free
// lists of buffers (internal/bufpool).
func getReadBuf() []byte { return bufpool.Get(readBufSize) }

// putReadBuf gives an empty read buffer back to the free lists.
func putReadBuf(b []byte) { bufpool.Put(b) }

// dropReadBuf gives back the client's empty read buffer.
func (c *client) dropReadBuf() {
	putReadBuf(c.in.rbuf)
	c.in.rbuf = nil
	clear(c.in.args[:cap(c.in.args)]) // slices of it: it must not stay reachable
}

// idleKeep is the capacity from which a client's working buffer (its
// batch of requests, its output, a rewriter's scratch) goes back to the
// free lists of buffers once the client has nothing pending, rather
// than stay with a client that may wait for hours: a proxy whose 300
// clients had each stored and read a 500 kB document held 1.2 MB per idle
// client (scripts/idle-memory.sh with VALUE=500000).
const idleKeep = bufpool.MinSize

// trimReader gives back the command reader's large working buffers: the
// batch of requests (sent by now) and the scratch of compression.
func (c *client) trimReader() {
	if !c.in.reqRaw {
		giveBackIdle(&c.in.req)
	}
	c.in.rw.scratch = c.in.rw.scratch[:0]
	giveBackIdle(&c.in.rw.scratch)
}

// trimWriter gives back the output owner's large working buffers once
// everything is written.
func (c *client) trimWriter() {
	giveBackIdle(&c.out.buf)
	c.out.rw.scratch = c.out.rw.scratch[:0]
	giveBackIdle(&c.out.rw.scratch)
}

// giveBackIdle puts *b, if it is empty and of idleKeep or more, back in
// the free lists of large buffers.
func giveBackIdle(b *[]byte) {
	if len(*b) == 0 && cap(*b) >= idleKeep {
		bufpool.Put(*b)
		*b = nil
	}
}

// growRead makes room in rbuf for the next read: see readGrowth.
func (c *client) growRead() {
	if len(c.in.rbuf) < cap(c.in.rbuf) {
		return
	}
	nb := bufpool.Get(readGrowth(len(c.in.rbuf), resp.PendingBulkEnd(c.in.rbuf)))[:len(c.in.rbuf)]
	copy(nb, c.in.rbuf)
	bufpool.Put(c.in.rbuf) // between two runs of process: no argument points into it
	c.in.rbuf = nb
}

// readGrowth returns the capacity a full read buffer of n bytes grows to
// when the command or reply in it ends at need (0: unknown). It doubles, or
// jumps toward a large bulk argument or reply (as redis-server sizes its
// query buffer for big arguments), so that a 10 MB value is copied two or
// three times rather than at each of ten doublings. A jump goes no further
// than 4n + 1 MiB: a client that sends the header of a huge value and
// stalls makes the proxy hold little more than what it sent.
func readGrowth(n, need int) int {
	newCap := max(2*n, 4<<10) // never 0: an empty buffer must still grow
	if need > newCap {
		newCap = min(need, 4*n+1<<20) // more than 2n either way
	}
	return newCap
}

// process handles the complete commands in rbuf and sends them upstream,
// keeping an incomplete tail. In the poller (inLoop), it stops before a
// command that may wait and sets handOff. It returns false when the
// connection must end (QUIT, malformed input).
func (c *client) process(inLoop bool) bool {
	c.in.looping = inLoop
	c.in.roomCredit = 0 // counted afresh for each read (hasRoom)
	defer func() { c.in.looping = false }()
	maxBulk := c.s.maxBulk()
	off := 0
	if !inLoop {
		// A barrier raised for a command this call handled ends with it;
		// one an event loop raised lasts until the goroutine sends it.
		defer c.endPinOrder()
	}
	if c.s.metrics != nil {
		// One clock reading for the whole batch: the commands of one read
		// arrived together, and a reading per command was about 8% of the
		// proxy's CPU at -P 16.
		c.in.readAt = time.Now()
	}
	defer func() {
		// Keep the unparsed tail; shrink a buffer grown by a huge command.
		rest := copy(c.in.rbuf, c.in.rbuf[off:])
		c.in.rbuf = c.in.rbuf[:rest]
		if cap(c.in.rbuf) > 1<<20 && rest < 16<<10 {
			old := c.in.rbuf
			c.in.rbuf = append(getReadBuf(), c.in.rbuf...)
			bufpool.Put(old) // every command in it is handled: its calls hold copies
		}
	}()
	for off < len(c.in.rbuf) {
		if c.life.aborted.Load() {
			// Nobody will read the replies: like Redis, which drops the
			// query buffer of a client it frees, run no more of them (a
			// pipeline of thousands read in one go would keep Redis busy
			// and Close waiting). What was batched still goes upstream,
			// so that the calls queued for the writer end.
			c.flush()
			return false
		}
		limit := maxBulk
		if c.s.RequireAuth && !c.sess.authed {
			limit = unauthMaxBulk
		}
		args, m, perr := resp.ReadCommand(c.in.args, c.in.rbuf[off:], limit)
		c.in.args = args[:0]
		if limit == unauthMaxBulk {
			perr = unauthLimit(c.in.rbuf[off:], perr, maxBulk)
		}
		if errors.Is(perr, resp.ErrIncomplete) {
			// A large value to store as it is passes on as it arrives
			// (stream.go), from the client's goroutine.
			if _, _, _, _, ok := c.streamable(c.in.rbuf[off:]); ok {
				if inLoop {
					c.in.handOff = true
					break
				}
				c.in.rbuf = c.in.rbuf[:copy(c.in.rbuf, c.in.rbuf[off:])]
				off = 0
				key, count, at, size, _ := c.streamable(c.in.rbuf)
				streamed, alive := c.streamSet(key, count, at, size)
				if !alive {
					return false
				}
				if streamed {
					continue
				}
			}
			break
		}
		if perr != nil {
			// Redis answers malformed input with an error and closes.
			cl := c.localCall("", resp.AppendError(nil, "ERR "+perr.Error()))
			cl.close = true
			c.enqueue(cl)
			c.flush()
			return false
		}
		if len(args) == 0 {
			off += m
			continue
		}
		// SET and DELEX that compare the value run as inspect commands.
		info := c.s.served(conditional(c.lookupCommand(args[0]), args))
		if inLoop && (!c.loopable() || m > maxLoopCommand || !c.loopSafe(info, args)) {
			c.in.handOff = true
			if c.pinned.held == nil && c.loopable() && (m > maxLoopCommand || c.mustWait(info, args)) {
				// The command came now: other clients' commands read
				// after it must reach Redis after it, although the client's
				// goroutine sends it later (proxy/order.go). What the
				// client sent before it goes first.
				c.flush()
				c.pinned.held = c.s.pool.raiseOrder()
			}
			break
		}
		off += m
		c.in.rawCmd = c.in.rbuf[off-m : off : off]
		ok := c.handle(info, args)
		c.in.rawCmd = nil
		if !ok {
			c.flush()
			c.endPinOrder()
			return false
		}
		if c.pinned.held != nil {
			c.flush()
			c.endPinOrder()
		}
	}
	c.flush()
	return true
}

// lookupCommand returns the command table's entry for name: the last
// command's again when the name is spelt the same, without hashing it.
func (c *client) lookupCommand(name []byte) *cmdInfo {
	if c.in.lastInfo != nil && bytes.Equal(name, c.in.lastName) {
		return c.in.lastInfo
	}
	info := lookup(name)
	if len(name) <= 24 { // as long as lookup looks up
		c.in.lastName = append(c.in.lastName[:0], name...)
		c.in.lastInfo = info
	}
	return info
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
	return c.s.pool.get(context.Background(), int(c.id))
}

// sendOn sends requests on up in the order they came among all clients'
// (proxy/order.go): ahead of the barrier the client raised for a command
// that had to wait, or, on its private connection, behind a barrier of
// its own so that other clients' later commands follow it.
func (c *client) sendOn(up *upConn, req []byte, calls []*call) {
	switch {
	case c.pinned.held != nil:
		if !c.pinned.held.awaited {
			c.s.pool.awaitOrder(c.pinned.held)
		}
		up.sendAhead(req, calls)
	case up.onPush != nil:
		h := c.s.pool.beginOrder()
		up.send(req, calls)
		c.s.pool.endOrder(h)
	case c.in.looping && len(req) >= forwardAsIsMin:
		up.sendHeld(c.in.poller, req, calls)
	default:
		up.send(req, calls)
	}
}

// clientIDRequest asks a new private connection for its id.
var clientIDRequest = resp.AppendCommand(nil, []byte("CLIENT"), []byte("ID"))

// pingRequest is the PING that makes sure a client's earlier commands ran.
var pingRequest = resp.AppendCommand(nil, []byte("PING"))

// endPinOrder lowers the order barrier raised for a command that had to
// wait (see pin and process), once that command is written.
func (c *client) endPinOrder() {
	if c.pinned.held != nil {
		switch {
		case !c.pinned.byCall:
			c.s.pool.endOrder(c.pinned.held)
		case c.pinned.blocking && c.pinned.id > 0:
			// Written: end the barrier once Redis holds it blocked.
			go c.s.endWhenBlocked(c.pinned.held, c.pinned.id)
		}
		c.pinned.held, c.pinned.byCall, c.pinned.blocking = nil, false, false
	}
}

// holdUntilRun makes the barrier for the command of call cl last until
// Redis has run it: until its reply, or for a blocking command until Redis
// holds the client blocked. The command that opens a private connection,
// blocking commands and subscriptions take this: the first may come after
// a dial, and programs wait on the others (a PUBLISH right after another
// client's SUBSCRIBE reaches it; the first BRPOPLPUSH gets the element).
//
// Redis runs a command only after the client's earlier ones: behind a
// blocked BLPOP, a SUBSCRIBE waits as long as the BLPOP does, and the
// barrier would hold every client's commands meanwhile. So where this
// client's private connection still owes replies, the barrier ends when
// the command is written, as for other commands; and no barrier lasts
// longer than maxBlockedWait in any case.
func (c *client) holdUntilRun(cl *call, blocking bool) {
	if c.pinned.conn != nil && c.pinned.conn.awaiting.Load() > 0 {
		return // behind an earlier command that has not run yet
	}
	if c.pinned.held == nil {
		c.flush() // what the client sent before goes first
		c.pinned.held = c.s.pool.raiseOrder()
	}
	h := c.pinned.held
	c.pinned.byCall, c.pinned.blocking = true, blocking
	cl.onFinish = func() { c.s.pool.endOrder(h) }
	time.AfterFunc(maxBlockedWait, func() { c.s.pool.endOrder(h) })
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
			cl.err = err
			cl.finish()
		}
	} else {
		c.sendOn(up, c.in.req, c.in.batch)
	}
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

// roundtrip sends one request on the client's connection after everything
// sent before, and waits for the reply. The caller releases the call.
func (c *client) roundtrip(req []byte) *call {
	c.flush()
	cl := newCall()
	up, err := c.conn()
	if err != nil {
		cl.err = err
		return cl
	}
	c.in.one[0] = cl
	c.sendOn(up, req, c.in.one[:])
	c.endPinOrder() // if a command waited, it is written now
	c.in.one[0] = nil
	stop := c.watchGone()
	<-cl.done
	stop()
	c.notePin(cl.pinSeq)
	return cl
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
	if c.in.scriptUp != nil {
		return roundtripOn(c.in.scriptUp, req)
	}
	cl := newCall()
	up, err := c.conn()
	if err != nil {
		cl.err = err
		return cl
	}
	if up.onPush == nil {
		c.in.one[0] = cl
		c.sendOn(up, req, c.in.one[:])
		c.endPinOrder() // if a command waited, it is written now
		c.in.one[0] = nil
		<-cl.done
		return cl
	}
	// A connection that receives pushes: a PING goes first, in the same
	// write, so pushes Redis sent before the script (another client's
	// write invalidating a key this client caches) arrive before its reply
	// and keep their place; only those between the two replies are the
	// script's own.
	cl.deferPushes = true
	ping := newCall()
	both := []*call{ping, cl}
	c.sendOn(up, append(append(make([]byte, 0, len(pingRequest)+len(req)), pingRequest...), req...), both)
	c.endPinOrder()
	stop := c.watchGone()
	<-ping.done
	ping.release()
	<-cl.done
	stop()
	return cl
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

// pushMsg is a push message (or relayed reply) and the number of calls its
// connection had completed before it.
type pushMsg struct {
	msg []byte
	seq uint64
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
