package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/squeeze-kv/squeeze/internal/bufpool"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/resp"
)

// The reading side of a client: serve runs the connection; commands are
// read in the client's goroutine (readLoop) or, while they need no
// waiting, by an event loop (loopStep), and both hand what they read to
// process, which parses each command and hands it to handle (handle.go).

// serve is the client's goroutine: it starts the writer goroutine, reads
// the client's commands (through the poller while it may) until the
// client leaves or the connection must end, then waits for the writer to
// write what is owed and closes the connection.
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
		if c.pollable() {
			if end = c.in.poller.run(c, end == endToSet); end != endToGoroutine {
				break
			}
		}
		if end = c.readLoop(); end != endToLoop && end != endToSet {
			break
		}
	}
	c.pinned.confirms.drop()
	if c.in.pass.leave() {
		// Read no more; what is owed may wait behind a barrier the
		// poller raised for input that came (passState).
		c.in.poller.unregisterKept(c, c.in.pass.fd)
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
	endToSet                      // the same, for a client the poller kept in its set (passState)
	endGone                       // the client closed or the socket failed
	endDrained                    // Shutdown: stop after the commands read
	endStop                       // QUIT or malformed input: close after the replies
)

// loopable reports whether the poller may read this client: it has one,
// and the client's state needs no waiting (no private connection, no open
// transaction, no pub/sub, replies on).
func (c *client) loopable() bool {
	return c.pollable() && c.pinned.conn == nil && c.sess.inPlainFlow()
}

// pollable reports whether the poller reads this client's socket: it has
// one. A client that is not loopable it reads only to hand each command
// over to the client's goroutine in its place in the order (passStep).
func (c *client) pollable() bool {
	return c.in.poller != nil && !c.in.noLoop
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

// readLoop reads, parses and forwards commands in the client's goroutine
// until the client leaves, or until the poller can take over again.
func (c *client) readLoop() readEnd {
	var rerr error
	for {
		ok := c.process(false)
		if !ok {
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
		if c.in.drainAgain {
			c.adoptHold(c.in.pass.resume())
			rerr = c.readWaiting()
			continue
		}
		if c.in.pass.kept {
			// Back to the poller, which kept the socket in its set; or,
			// if input came meanwhile, read it here, in the place the
			// poller gave it among the others'.
			if len(c.in.rbuf) == 0 {
				// Idle in the loop until the client sends more (before
				// comeBack: from then on the poller has the reader).
				c.dropReadBuf()
				c.trimReader()
			}
			h, came, rearm := c.in.pass.comeBack()
			if came {
				c.adoptHold(h)
				rerr = c.readWaiting()
				c.keepPlace()
				continue
			}
			if rearm {
				// Input came while this goroutine was busy, and no barrier
				// was raised for it: the poller reads it, in its place
				// among what other clients sent meanwhile (read here, it
				// could overtake a command another client sent before it
				// that the poller had not read yet).
				c.in.poller.rearm(c)
			}
			return endToSet
		}
		if c.pollable() {
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
	if !c.loopable() {
		return c.passStep()
	}
	for reads := 1; ; reads++ {
		end, again := c.loopRead()
		// A command longer than one read (over the loop's 16 KiB) is read
		// on at once, up to maxLoopReads reads: left for the next round,
		// its last bytes came after those of clients read in this one,
		// whose commands then ran first although it came first.
		if !again || reads >= maxLoopReads {
			return end
		}
	}
}

// maxLoopReads bounds the reads of one client in one turn of the loop
// (loopStep): enough for a command as large as the loop handles.
const maxLoopReads = maxLoopCommand/readBufSize + 1

// loopRead is one read and its commands, for loopStep; again: the read
// filled the buffer and left part of a command, which the socket may
// hold the rest of.
func (c *client) loopRead() (end readEnd, again bool) {
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
		return c.stopped(), false
	}
	switch {
	case err != nil:
		return endGone, false
	case !c.loopable() || c.in.handOff:
		c.in.handOff = false
		return endToGoroutine, false
	}
	return endStay, c.in.readFull && len(c.in.rbuf) > 0
}

// passStep is the poller's turn with a client it reads but does not
// handle (it has a private connection, is in a transaction or the relay:
// not loopable): it reads, and once a whole command came, raises the order
// barrier the client's goroutine will send it behind and hands the client
// over. So the commands of such a client take their place among the
// others' in the order they reached the proxy, as the kernel lists the
// sockets that became readable, where a goroutine of its own would read
// them whenever the scheduler runs it (order.go).
func (c *client) passStep() readEnd {
	if c.in.rbuf == nil {
		c.in.rbuf = getReadBuf()
	} else {
		c.growRead()
	}
	room := cap(c.in.rbuf) - len(c.in.rbuf)
	n, err := c.readOnce(c.in.rbuf[len(c.in.rbuf):cap(c.in.rbuf)])
	c.in.rbuf = c.in.rbuf[:len(c.in.rbuf)+n]
	c.in.readFull = n == room && err == nil
	switch c.commandReady() {
	case readyWhole:
		if c.pinned.held == nil {
			c.pinned.held = c.s.pool.raiseOrderFor(c.inputScope())
		}
		return endToGoroutine
	case readyStream:
		return endToGoroutine
	}
	if err != nil {
		return endGone
	}
	return endStay
}

// inputScope is what the whole commands in rbuf touch, for the barrier
// raised for them (passStep): commands of clients with a private
// connection on keys the table places hold, and wait for, only those on
// the same keys (orderscope.go). Poller only, while it has the client.
func (c *client) inputScope() *reqScope { return c.scopeFrom(0) }

// scopeFrom is what the whole commands in rbuf from off touch (see
// inputScope). Command reader only.
func (c *client) scopeFrom(off int) *reqScope {
	s := &reqScope{}
	for b := c.in.rbuf[off:]; len(b) > 0 && !s.any; {
		args, n, err := c.readCommand(b, c.s.maxBulk())
		if err != nil {
			break // the rest: a part of a command (its own barrier), or input refused
		}
		if len(args) == 0 {
			s.any = true
			break
		}
		s.note(c.lookupCommand(args[0]), args, true, c.s.pool.order.mayWake())
		b = b[n:]
	}
	return s
}

// passState is the hand-over of a client between the poller, which keeps
// its socket in the epoll set, and its goroutine, which handles its
// commands (passStep). While the goroutine has the client (away), input
// that comes is noted (came), and the goroutine reads it as soon as it is
// done with what it has (comeBack, readWaiting), rather than joining the
// set again behind the input other clients sent meanwhile. For a client
// with a private connection, the poller also raises the order barrier for
// that input there and then (pending), which the goroutine sends it
// behind: so it keeps its place although the goroutine reads it later.
// Such a barrier cannot hold what the goroutine may still wait for: its
// commands go on its private connection, and a round trip it makes on a
// shared one for the command it handles (an inspect probe, a script's
// preparation) goes ahead of the barriers, under the barrier of that
// command (roundtripShared). (Raised only between batches, as before, it
// let input that came during a batch be read after other clients' later
// commands: 17 of 40 seeds of the order scenes diverged, 6 now.) Once
// the goroutine is done with the client (gone) the poller does nothing
// more with it.
type passState struct {
	mu sync.Mutex
	// kept: in the poller's set while the goroutine has it, on
	// descriptor fd; the poller changes it while it has the client.
	kept    bool
	fd      int32
	away    atomic.Bool // set by the poller, cleared by the goroutine, under mu
	came    bool
	gone    bool
	pending *orderHold
	// pinning: the goroutine has the client for the command that gives
	// it a private connection, for an inspect command read last
	// (client.keepsPlace), or for input it adopted that client.keepPlace
	// found safe, and waits for nothing on the shared
	// connections a barrier raised now could hold (the PING before it
	// pins goes ahead of every barrier; the commands read with it go
	// under that command's barrier, which holds everything; an inspect
	// command's round trips go under its own barrier, which lasts until
	// it is done: client.in.steps); the
	// poller raises a barrier for input that came, as for a private
	// client, until the goroutine resumes.
	pinning bool
	// private: the client has a private connection (setPrivate); only
	// then, or while pinning, does the poller raise a barrier for input
	// that came (a client of the shared connections sends there in the
	// order it read, and a barrier raised before it compresses a large
	// value would hold the others meanwhile).
	private bool
}

// isPrivate reports whether the client has a private connection.
func (ps *passState) isPrivate() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.private
}

// setPrivate notes that the client has a private connection now. Client's
// goroutine only.
func (ps *passState) setPrivate() {
	ps.mu.Lock()
	ps.private = true
	ps.mu.Unlock()
}

// handOver gives the client on descriptor fd to its goroutine, busy with
// what the poller read, keeping it in the set; more: its socket may hold
// more than that (no new edge will announce it), so the goroutine reads
// before it comes back; pinning: see passState.pinning. Poller only.
func (ps *passState) handOver(fd int32, more, pinning bool) {
	ps.mu.Lock()
	ps.kept, ps.fd, ps.came, ps.pinning = true, fd, more, pinning
	ps.away.Store(true)
	ps.mu.Unlock()
}

// isKept reports whether the poller keeps the client in its set, for the
// goroutine that gives it back (poller.run).
func (ps *passState) isKept() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.kept
}

// reserve notes input that came while the goroutine has the client,
// raising its barrier if the goroutine is between batches and none is
// pending; it reports whether the goroutine has the client (then the
// poller must not read it). Poller only.
func (ps *passState) reserve(p *pool) bool {
	if !ps.away.Load() {
		return false // only the poller sets it
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if !ps.away.Load() {
		return false
	}
	ps.came = true
	if (ps.private || ps.pinning) && !ps.gone && ps.pending == nil {
		ps.pending = p.raiseOrder()
	}
	return true
}

// resume notes that the goroutine reads and handles input again, and
// returns the barrier raised for that input, if any. Client's goroutine
// only.
func (ps *passState) resume() *orderHold {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	h := ps.pending
	ps.pending, ps.came, ps.pinning = nil, false, false
	return h
}

// comeBack gives the client back to the poller, unless input came
// meanwhile under a barrier the poller raised for it: then it reports
// came with that barrier (see resume), and the goroutine keeps the client
// and reads it. Input that came without one (the client has no private
// connection, or the socket may hold more than the poller read) goes back
// to the poller with the client (rearm: the caller asks the kernel to
// announce it again, behind what other sockets announced before).
// Client's goroutine only.
func (ps *passState) comeBack() (h *orderHold, came, rearm bool) {
	ps.mu.Lock()
	if !ps.came || ps.pending == nil {
		// Input that came without its barrier goes back to the poller
		// too: rearm it.
		rearm = ps.came
		ps.came, ps.pinning = false, false
		ps.away.Store(false)
		ps.mu.Unlock()
		return nil, false, rearm
	}
	ps.mu.Unlock()
	return ps.resume(), true, false
}

// keepRaising makes the poller raise a barrier for input that comes
// while the goroutine handles what it adopted (client.keepPlace), as
// while pinning, until the goroutine resumes or comes back; for input
// that came since it resumed, it raises that barrier now. Client's
// goroutine only.
func (ps *passState) keepRaising(p *pool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.gone {
		return
	}
	ps.pinning = true
	if ps.came && ps.pending == nil {
		ps.pending = p.raiseOrder()
	}
}

// leave marks the client done, lowering a pending barrier, and reports
// whether the poller still has it in its set. Client's goroutine only.
func (ps *passState) leave() bool {
	ps.mu.Lock()
	h, kept := ps.pending, ps.kept
	ps.pending, ps.gone = nil, true
	ps.mu.Unlock()
	h.end()
	return kept
}

// dropped notes that the client is out of the poller's set. Poller
// only, while the client is not away; or keepAway.
func (ps *passState) dropped() {
	ps.mu.Lock()
	ps.kept, ps.came = false, false
	ps.away.Store(false)
	ps.mu.Unlock()
}

// readWaiting reads, without waiting, what the client sent while its
// goroutine had it (comeBack), until the socket is empty or the buffer
// full (then drainAgain: the edge-triggered poller will not announce the
// rest). Client's goroutine only.
func (c *client) readWaiting() error {
	c.growRead()
	room := cap(c.in.rbuf) - len(c.in.rbuf)
	n, err := c.readOnce(c.in.rbuf[len(c.in.rbuf):cap(c.in.rbuf)])
	c.in.rbuf = c.in.rbuf[:len(c.in.rbuf)+n]
	c.in.drainAgain = n == room && err == nil
	return err
}

// keepPlace lets the poller raise a barrier for what a client of the
// shared connections sends while its goroutine handles the input it
// adopted under one (comeBack), when nothing in that input can be held by
// such a barrier: the adopted barrier covers every command of it (its
// round trips and batches go ahead of later barriers, sendOn) and lasts
// until the last is sent, if the input is whole commands none of which
// ends it sooner or raises one of its own: no script (its barrier ends
// once written), no command of maxLoopCommand or more (a large value
// waits its turn to be compressed, or streams under a barrier of its
// own), nothing that gives the client a private connection or waits at
// the door. Without it such input went back to the poller once the
// goroutine was done, which read it after commands other clients sent
// later (a SET sent while a GETRANGE ran, overtaken by another client's
// GET of the key: order scenes, seed 144). Command reader only.
func (c *client) keepPlace() {
	if c.pinned.held == nil || !c.in.coversRest || c.pinned.conn != nil || c.in.drainAgain {
		return
	}
	if c.plainFrom(0) {
		c.in.pass.keepRaising(c.s.pool)
	}
}

// plainFrom reports whether rbuf holds, from off, whole commands only,
// none of which ends the barrier that covers them before the last is
// sent or raises one of its own (see keepPlace). Command reader only; it
// parses into the reader's args.
func (c *client) plainFrom(off int) bool {
	maxBulk := c.s.maxBulk()
	for off < len(c.in.rbuf) {
		args, m, err := c.readCommand(c.in.rbuf[off:], maxBulk)
		if err != nil || m >= maxLoopCommand {
			return false
		}
		off += m
		if len(args) == 0 {
			continue
		}
		info := c.s.served(conditional(c.lookupCommand(args[0]), args))
		if info.flags&(doorFlags|rediscmd.Script) != 0 || isScriptAdmin(args) ||
			c.mustWait(info, args) && info.flags&rediscmd.Inspect == 0 {
			return false
		}
	}
	return true
}

// adoptHold makes h, raised when the client's input came (passState),
// the barrier its next commands are sent behind, or lowers it if one is
// held already. Command reader only.
func (c *client) adoptHold(h *orderHold) {
	switch {
	case h == nil:
	case c.pinned.held == nil:
		c.pinned.held = h
		// On a shared connection it covers every whole command read
		// with it, as the barrier of a command handed off does
		// (mustHandOff): ended after the first, it let another client's
		// GET held behind it run before the SET read with that first
		// command (order scenes, seed 144).
		c.in.coversRest = c.pinned.conn == nil
	default:
		h.end()
	}
}

// commandReady says whether rbuf begins with a whole command (or input
// Redis refuses, which the goroutine answers), a large value to stream
// as it comes (stream.go), or only part of a command. Command reader only.
func (c *client) commandReady() readiness {
	if len(c.in.rbuf) == 0 {
		return readyPart
	}
	_, _, err := c.readCommand(c.in.rbuf, c.s.maxBulk())
	switch {
	case err == nil || !errors.Is(err, resp.ErrIncomplete):
		return readyWhole
	case c.streamableTail():
		return readyStream
	}
	return readyPart
}

// streamableTail reports whether rbuf begins a SET whose value streams.
func (c *client) streamableTail() bool {
	_, _, _, _, ok := c.streamable(c.in.rbuf)
	return ok
}

// readiness is what commandReady found.
type readiness uint8

const (
	readyPart readiness = iota
	readyWhole
	readyStream
)

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

// trimReader gives back the command reader's large working buffers: the
// batch of requests (sent by now) and the scratch of compression.
func (c *client) trimReader() {
	if !c.in.reqRaw {
		giveBackIdle(&c.in.req)
	}
	c.in.rw.scratch = c.in.rw.scratch[:0]
	giveBackIdle(&c.in.rw.scratch)
}

// growRead makes room in rbuf for the next read: see readGrowth.
func (c *client) growRead() {
	if len(c.in.rbuf) < cap(c.in.rbuf) {
		return
	}
	if c.in.rbuf == nil {
		// A buffer of the usual size, as the poller reads into
		// (passStep): in one of 4 KiB (readGrowth's first), a 6 KB
		// command the client sent while its goroutine was busy was read
		// in two parts, and the order barrier raised for it ended after
		// the first (TestOrder_LongCommandBehindSelectThenOtherPop).
		c.in.rbuf = getReadBuf()
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
// connection must end (QUIT, malformed input). Command reader only: the
// client's goroutine, or the poller during loopStep.
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
	defer func() { c.keepTail(off) }()
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
		var next cmdStep
		off, next = c.processNext(inLoop, off, maxBulk)
		if next == cmdRest {
			break
		}
		if next == cmdEnd {
			return false
		}
	}
	c.in.lastFlush = true // nothing waits after it (sendPrivate)
	c.flush()
	c.in.lastFlush = false
	return true
}

// cmdStep is what process does after a command (processNext).
type cmdStep uint8

const (
	cmdNext cmdStep = iota // on to the next command
	cmdRest                // stop: the rest waits for more input, or for the client's goroutine
	cmdEnd                 // the connection must end
)

// processNext handles the command at off in rbuf, if it is whole, and
// returns the offset after what it handled and what process does next.
// Command reader only, from process.
func (c *client) processNext(inLoop bool, off int, maxBulk int64) (int, cmdStep) {
	args, m, perr := c.readCommand(c.in.rbuf[off:], maxBulk)
	if errors.Is(perr, resp.ErrIncomplete) {
		return c.incomplete(inLoop, off)
	}
	if perr != nil {
		// Redis answers malformed input with an error and closes.
		c.refuseInput(perr)
		c.flush()
		return off, cmdEnd
	}
	if len(args) == 0 {
		return off + m, cmdNext
	}
	// SET and DELEX that compare the value run as inspect commands.
	info := c.s.served(conditional(c.lookupCommand(args[0]), args))
	if info.flags&doorFlags != 0 || c.s.RequireAuth && !c.sess.authed {
		if step, done := c.atDoor(info, args); done {
			return off + m, step
		}
	}
	if inLoop && c.mustHandOff(info, args, m, off+m) {
		return off, cmdRest
	}
	off += m
	// The command to handle, and, as the client sent it, rawCmd (inline
	// here rather than a call of its own: this runs for every command).
	c.in.rawCmd = c.in.rbuf[off-m : off : off]
	ok := c.handle(info, args)
	c.in.rawCmd = nil
	switch {
	case !ok:
		c.flush()
		c.endPinOrder()
		return off, cmdEnd
	case c.pinned.held != nil && c.pinned.conn == nil && (!c.in.coversRest || c.lastWhole(off)):
		// The command raised an order barrier on the shared connection:
		// send the batch now (with the commands read behind it, if the
		// barrier covers them: coversRest), so that the barrier ends.
		// (On a private connection the whole batch goes under it:
		// sendPrivate.)
		c.flush()
		c.endPinOrder()
	}
	return off, cmdNext
}

// readCommand parses the command at the start of b, with the bulk length
// limit of the client's state: maxBulk, or Redis's own for a client that
// has not authenticated yet (RequireAuth). Command reader only.
func (c *client) readCommand(b []byte, maxBulk int64) (args [][]byte, n int, err error) {
	limit := maxBulk
	if c.s.RequireAuth && !c.sess.authed {
		limit = unauthMaxBulk
	}
	args, n, err = resp.ReadCommand(c.in.args, b, limit)
	c.in.args = args[:0]
	if limit == unauthMaxBulk {
		err = unauthLimit(b, err, maxBulk)
	}
	return args, n, err
}

// incomplete is process's step at an incomplete command at off. A large
// value to store as it is passes on as it arrives (stream.go), from the
// client's goroutine: the poller hands the client over for it. Anything
// else waits for more input. Command reader only, from process.
func (c *client) incomplete(inLoop bool, off int) (int, cmdStep) {
	if _, _, _, _, ok := c.streamable(c.in.rbuf[off:]); !ok {
		return off, cmdRest
	}
	if inLoop {
		c.in.handOff = true
		return off, cmdRest
	}
	c.consumeInput(off)
	key, count, at, size, _ := c.streamable(c.in.rbuf)
	streamed, alive := c.streamSet(key, count, at, size)
	switch {
	case !alive:
		return 0, cmdEnd
	case streamed:
		return 0, cmdNext
	}
	return 0, cmdRest
}

// refuseInput queues the error Redis answers malformed input with; the
// connection closes after it. Command reader only.
func (c *client) refuseInput(err error) {
	cl := c.localCall("", resp.AppendError(nil, "ERR "+err.Error()))
	cl.close = true
	c.enqueue(cl)
}

// mustHandOff reports whether the poller must leave a command of size
// bytes to the client's goroutine: the client's state needs waiting, the
// command is larger than maxLoopCommand, or it may wait for Redis or for
// room in the reply queue (loopSafe). If so it sets handOff and, for a
// command that waits, raises the order barrier it is sent behind; for one
// that pins the client, or an inspect command with no whole command
// behind it in rbuf (from end) or only commands that keep its barrier
// until the last is sent (plainFrom), it sets keepsPlace. The poller only,
// from process.
func (c *client) mustHandOff(info *cmdInfo, args [][]byte, size, end int) bool {
	if c.loopable() && size <= maxLoopCommand && c.loopSafe(info, args) {
		return false
	}
	c.in.handOff = true
	if c.pinned.held == nil && c.loopable() && (size > maxLoopCommand || c.mustWait(info, args)) {
		// The command came now: other clients' commands read
		// after it must reach Redis after it, although the client's
		// goroutine sends it later (proxy/order.go). What the
		// client sent before it goes first.
		// So must the commands read behind it, which the goroutine sends
		// after it: the barrier covers them too (coversRest), also when
		// some of them must wait as well and it lasts as many round
		// trips. (It ended with the first such command, and another
		// client's GET ran before the SET sent between two GETRANGEs
		// of a compressed value. What made that rule: 50 clients that
		// pipeline STRLEN of one key ran at a third of their rate; two
		// commands that only read a key no longer wait for each other.)
		c.flush()
		pins := needsPin(info, args)
		c.in.keepsPlace = pins || info.flags&rediscmd.Inspect != 0 && (c.lastWhole(end) || c.plainFrom(end))
		c.in.coversRest = true
		// (args are not read from here on: scopeFrom parses rbuf again,
		// into the same slice.)
		scope := c.scopeFrom(end - size)
		if c.pinned.heldBack.Load() > 0 {
			// Requests the client sent before wait behind barriers (the
			// batch just flushed, say): its goroutine's round trips go
			// ahead of every barrier once this one's turn comes, and a
			// keyed barrier's turn may come before theirs (a DEL held
			// behind another client's barrier on its key, which then
			// ended while an older one on other keys still held it: the
			// client's APPEND of the key, sent after the DEL, ran
			// first). Holding everything, it comes after them all.
			scope = nil
		}
		c.pinned.held = c.s.pool.raiseOrderFor(scope)
	}
	return true
}

// lastWhole reports whether rbuf holds no whole command from off: an
// inspect command that is the last may keep its client's place
// (keepsPlace). One that is not keeps the loop's set: its barrier, which
// holds only its own keys and ends with it, would not cover the commands
// after it, which its goroutine sends after it, and a barrier raised for
// input that came meanwhile would hold them. Command reader only.
func (c *client) lastWhole(off int) bool {
	if off >= len(c.in.rbuf) {
		return true
	}
	_, _, err := c.readCommand(c.in.rbuf[off:], c.s.maxBulk())
	return errors.Is(err, resp.ErrIncomplete)
}

// keepTail keeps the unparsed tail of rbuf, from off, at its start, and
// moves it out of a buffer a huge command grew past 1 MiB into one of the
// usual size. Command reader only, at the end of process: every command
// before off is handled, and its calls hold copies.
func (c *client) keepTail(off int) {
	c.consumeInput(off)
	if cap(c.in.rbuf) > 1<<20 && len(c.in.rbuf) < 16<<10 {
		old := c.in.rbuf
		c.in.rbuf = append(getReadBuf(), c.in.rbuf...)
		bufpool.Put(old) // every command in it is handled: its calls hold copies
	}
}

// consumeInput removes the first n bytes of rbuf, moving the rest to its
// start. Command reader only.
func (c *client) consumeInput(n int) {
	c.in.rbuf = c.in.rbuf[:copy(c.in.rbuf, c.in.rbuf[n:])]
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
