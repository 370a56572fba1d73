package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/squeeze-kv/squeeze/internal/bufpool"
	"github.com/squeeze-kv/squeeze/resp"
)

// client is one client connection: a reader goroutine (serve) and a writer
// goroutine (writeLoop) joined by the out channel of calls in order.
type client struct {
	s  *Server
	nc net.Conn
	id uint64
	// The calls in order, from the reader to the writer. The reader
	// appends; the writer takes the head once it is ready. ready wakes the
	// writer (a call completed or was queued complete); space wakes a
	// reader waiting for room.
	qmu     sync.Mutex
	queue   []*call
	qhead   int
	qclosed bool
	ready   chan struct{}
	space   chan struct{}
	// push carries RESP3 push messages and relayed pub/sub or MONITOR
	// traffic from the pinned connection to the writer. It is made when
	// the client pins (pin), before the connection that sends on it:
	// only pinned clients get pushes, and the channel's buffer of 128
	// messages was a third of an idle client's memory.
	push atomic.Pointer[chan pushMsg]
	// passOff is the time (Unix nanoseconds) until which large replies go
	// the stored way: the client read a passed one too slowly (passreply.go).
	passOff atomic.Int64
	// pinDone is the highest pinSeq whose reply has been consumed, by the
	// writer or by the reader's own round trips.
	pinDone atomic.Uint64
	// held is the bytes of replies that arrived for queued calls and are
	// not written yet, and of large output being written (memory.go).
	held atomic.Int64
	// replyEst estimates the size of the client's replies, for its window
	// of commands in flight (memory.go); 0 before the first reply.
	replyEst atomic.Int64
	// writing is the bytes of output the writer is writing now; expected
	// the part of held that commands in flight reserved (memory.go).
	writing  atomic.Int64
	expected atomic.Int64

	pinMu  sync.Mutex // guards pinned for forceClose
	pinned *upConn
	// pinHeld is the order barrier raised for a command that had to wait
	// (pin, process), lowered once it is written (endPinOrder).
	pinHeld *orderHold
	// pinByCall: the call of the command that raised pinHeld ends it when
	// Redis has run the command (or, blocking, holds it waiting).
	pinByCall bool
	// pinBlocking: that command may block (see endWhenBlocked).
	pinBlocking bool
	// pinID is the private connection's CLIENT ID (0: unknown).
	pinID int64
	// readFull: the poller's last read filled the buffer (loopStep).
	readFull bool
	// looping: an event loop is running process for this client.
	looping bool
	// user is the ACL user the client is logged in as, set by the writer
	// when an AUTH or HELLO ... AUTH succeeds (with RequireAuth), nil
	// before and after RESET.
	user atomic.Pointer[[]byte]
	// scriptUp, when set, is the shared connection the scripts of the
	// command being handled run on (see aclscript.go).
	scriptUp *upConn
	// inputEnds: the event loop saw the end of input announced (EPOLLRDHUP)
	// and reads again each round until the client sees it (poller.step).
	inputEnds bool
	proto     int
	inMulti   bool
	tx        []shape     // shapes of the commands queued in MULTI
	txNames   []string    // and their names
	txSets    []candidate // values SET in the open transaction
	txCopies  [][2][]byte // {destination, source} of COPY and RENAME queued in it
	relay     bool        // RESP2 pub/sub or MONITOR: replies are relayed as they come
	relayGen  uint64      // the pinned connection's relayEnds when relay began
	replyOff  bool        // CLIENT REPLY OFF
	skip      int         // CLIENT REPLY SKIP: commands whose reply Redis skips

	// txRaw: the writes of the open transaction that may leave values raw,
	// recompressed after EXEC (recompress.go).
	txRaw txRecompress

	// rbuf holds the client's unparsed input: an event loop's read buffer
	// during a loop step (loopStep), else a buffer of the client's own,
	// which a client keeps only while part of a command waits in it.
	rbuf   []byte
	readAt time.Time // when the commands in rbuf were read (with metrics on)
	// authed: the private connection is authenticated (Server.RequireAuth;
	// until then commands are held to Redis's limits for unauthenticated
	// clients).
	authed bool
	// db is the database the client's commands run in: the URL's, or the
	// one its last successful SELECT chose. The proxy's own reads for the
	// client (the frames a queued STRLEN will look inside) go there too.
	// dbQueued: a SELECT is queued in the open transaction (db is then the
	// database it selects); txDB is db when MULTI began.
	db       int
	dbQueued bool
	txDB     int
	args     [][]byte
	// lastName and lastInfo: the name of the last command read, as sent,
	// and its entry in the command table, for pipelines that repeat one
	// command (lookupCommand).
	lastName []byte
	lastInfo *cmdInfo
	req      []byte
	// rawCmd is the command handle is handling as the client sent it (a
	// slice of rbuf); reqRaw: req is rawCmd itself, forwarded without a
	// copy, and reqOwn the client's own buffer meanwhile (flush).
	rawCmd []byte
	reqRaw bool
	reqOwn []byte
	batch  []*call
	// batchExpected is what the calls in batch reserved, counted (expect)
	// once per batch, before it is sent (flush); roomLocked counts it
	// meanwhile.
	batchExpected int64
	// roomCredit is how many more calls the reply queue takes, by its
	// count under qmu (hasRoom); command reader only.
	roomCredit int
	one        [1]*call
	rw         rewriter // the reader's
	wrw        rewriter // the writer's

	// seq numbers calls; the writer publishes the last one it wrote, so
	// the reader can wait for earlier commands to have run.
	seq      uint64
	multiSeq uint64
	// writtenSeq is the last call whose reply was written; writtenWaiters
	// counts readers waiting in waitWritten, which the writer wakes
	// through writtenC (guarded by writtenMu) only when there are some.
	writtenMu      sync.Mutex
	writtenC       *sync.Cond
	writtenSeq     atomic.Uint64
	writtenWaiters atomic.Int32
	// direct is writeDirect's list of the replies it takes (output owner
	// only).
	direct []*call
	// obs gathers the metrics of the replies being emitted; the output
	// owner's (emit, settleHeld).
	obs pendingObs
	// unheld is what replies written since the last settleHeld gave back,
	// still to come off the process's total (output owner only).
	unheld int64

	// Output ownership (guarded by qmu): the writer goroutine or, for a
	// client on a shared connection only, that connection's reader may
	// take calls off the queue and write their replies, one at a time.
	owned bool
	// noDirect is set when the client pins a connection, or its socket
	// has no raw descriptor, or the system no non-blocking raw write
	// (directWrites): from then on only the writer goroutine writes.
	noDirect atomic.Bool
	// aborted is set when the connection is ended from the proxy's side (a
	// write failed: the client is gone; or the server closes): the reader
	// then runs no more of the commands it has already read.
	aborted atomic.Bool
	// Owned by the output owner: replies not written yet, and whether the
	// socket failed.
	out    []byte
	broken bool
	raw    syscall.RawConn
	// rd and wr carry the arguments and results of the non-blocking reads
	// (the reader's: poller or serve goroutine) and writes (the output
	// owner's) through functions made once per client: a closure made per
	// call would escape to the heap through syscall.RawConn.
	rd, wr sockIO

	writerDone chan struct{} // closed when writeLoop returns
	helloProto atomic.Int64  // protocol from the last HELLO reply, 0 if it failed

	drainOnce sync.Once
	draining  chan struct{}

	// The poller that reads this client while its commands need no
	// waiting (nil: always its own goroutine), and the channel on which
	// the poller gives it back. noLoop: never the poller again; handOff:
	// the poller stopped before a command that must wait. Reader only.
	poller   *poller
	handback chan readEnd
	noLoop   bool
	handOff  bool
}

func (s *Server) newClient(nc net.Conn, pollers []*poller) *client {
	if tcp, ok := nc.(*net.TCPConn); ok {
		tcp.SetNoDelay(true)
	}
	c := &client{
		s:        s,
		nc:       nc,
		id:       s.nextID.Add(1),
		ready:    make(chan struct{}, 1),
		space:    make(chan struct{}, 1),
		proto:    2,
		db:       s.up.DB,
		args:     make([][]byte, 0, 16),
		draining: make(chan struct{}),
		handback: make(chan readEnd, 1),

		writerDone: make(chan struct{}),
	}
	c.rw.s, c.wrw.s = s, s
	c.writtenC = sync.NewCond(&c.writtenMu)
	if sc, ok := nc.(syscall.Conn); ok {
		c.raw, _ = sc.SyscallConn()
	}
	c.wr.write = func(fd uintptr) bool {
		c.wr.n, c.wr.errno = rawWrite(fd, c.wr.buf)
		return true // never wait: the writer goroutine finishes a full socket
	}
	c.nc = newRawSock(nc)
	if c.raw == nil || !directWrites || s.RequireAuth { // RequireAuth: pinned from the start
		c.noDirect.Store(true)
		c.noLoop = true
	}
	if len(pollers) > 0 {
		c.poller = pollers[c.id%uint64(len(pollers))]
	}
	return c
}

// drain makes the reader stop after the commands it has already read; the
// writer then writes their replies and the connection closes.
func (c *client) drain() {
	c.drainOnce.Do(func() {
		close(c.draining)
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
	go func() { c.writeLoop(); close(c.writerDone) }()
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
			if end = c.poller.run(c); end != endToGoroutine {
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
					case <-c.writerDone:
					default:
						c.closePinned()
					}
					return
				}
			}
		}()
	}
	c.qmu.Lock()
	c.qclosed = true
	c.qmu.Unlock()
	c.wake()
	<-c.writerDone
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
	return c.poller != nil && !c.noLoop && c.pinned == nil && !c.inMulti && !c.relay && !c.replyOff && c.skip == 0
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
	return info.flags&(flagInspect|flagHello) != 0 || needsPin(info, args) || c.exactListSearch(info, args) ||
		(!c.s.RejectScripts && (info.flags&flagScript != 0 || isScriptAdmin(args)) && !c.s.scriptFast(info, args))
}

// hasRoom reports whether the reply queue may take one more call: fewer
// than MaxInFlight calls, and no more than MaxReplyBytes of replies held
// (an empty queue always has room).
//
// The count needs qmu, but the writer only ever shortens the queue: a
// count taken under it says how many more calls fit (roomCredit), and the
// commands after it in the same read use that instead of the lock.
func (c *client) hasRoom() bool {
	if c.roomCredit > 0 && c.bytesRoom() {
		return true
	}
	c.qmu.Lock()
	ok := c.roomLocked()
	c.qmu.Unlock()
	return ok
}

// roomLocked is hasRoom for the command reader holding qmu. It sets
// roomCredit to the calls that may be queued before the count must be
// taken again.
func (c *client) roomLocked() bool {
	n := len(c.queue) - c.qhead
	w := c.replyWindow()
	c.roomCredit = 0
	if n < w && c.bytesRoom() {
		c.roomCredit = w - n
		return true
	}
	return n == 0
}

// bytesRoom reports whether the client holds and expects no more than
// MaxReplyBytes, and the process is not under pressure. Command reader
// only (it counts batchExpected).
func (c *client) bytesRoom() bool {
	return c.held.Load()+c.expected.Load()+c.batchExpected <= c.s.maxReplyBytes() && !c.s.pressure()
}

// closePinned closes the private upstream connection, failing its calls.
func (c *client) closePinned() {
	c.pinMu.Lock()
	p := c.pinned
	c.pinMu.Unlock()
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
	c.aborted.Store(true)
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
		case <-c.draining:
			return endDrained
		default:
		}
		if rerr != nil {
			return endGone
		}
		if c.loopable() {
			if len(c.rbuf) == 0 {
				// Idle in the loop until the client sends more: the
				// loop reads it into its own buffer.
				c.dropReadBuf()
				c.trimReader()
			}
			return endToLoop
		}
		if len(c.rbuf) == 0 && cap(c.rbuf) != readBufSize {
			// The read may wait for hours (a subscriber): with a buffer
			// of the usual size, not one grown for a large command.
			c.dropReadBuf()
			c.rbuf = getReadBuf()
		}
		if len(c.rbuf) == 0 {
			c.trimReader()
		}
		c.growRead()
		var n int
		n, rerr = c.nc.Read(c.rbuf[len(c.rbuf):cap(c.rbuf)])
		c.rbuf = c.rbuf[:len(c.rbuf)+n]
	}
}

// stopped is why a reader stopped when process returned false: the
// connection was aborted (endGone: nobody reads the replies, so what a
// pinned connection still owes is failed), or QUIT or malformed input
// (endStop: close after the replies).
func (c *client) stopped() readEnd {
	if c.aborted.Load() {
		return endGone
	}
	return endStop
}

// loopStep is the poller's turn with a client whose socket is readable:
// read once, handle the complete commands, send them upstream.
func (c *client) loopStep() readEnd {
	select {
	case <-c.draining:
		return endDrained
	default:
	}
	// With nothing pending, read into the loop's buffer: an idle client
	// then holds no read buffer (as Redis's clients share one query
	// buffer), and the loop reads every such client into the same memory.
	shared := len(c.rbuf) == 0
	if shared {
		putReadBuf(c.rbuf)
		c.rbuf = c.poller.rbuf[:0]
	} else {
		c.growRead()
	}
	room := cap(c.rbuf) - len(c.rbuf)
	n, err := c.readOnce(c.rbuf[len(c.rbuf):cap(c.rbuf)])
	c.rbuf = c.rbuf[:len(c.rbuf)+n]
	// The socket may hold more, which an edge-triggered poller hears of
	// only if it asks again.
	c.readFull = n == room && err == nil
	ok := c.process(true)
	switch {
	case shared && len(c.rbuf) > 0:
		// Part of a command, or commands for the client's goroutine:
		// they move to a buffer of the client's own (nothing refers to
		// the loop's buffer once process returns), sized at once for a
		// large argument that is still arriving.
		size := max(readBufSize, readGrowth(len(c.rbuf), resp.PendingBulkEnd(c.rbuf)))
		c.rbuf = append(bufpool.Get(size), c.rbuf...)
	case shared:
		c.rbuf = nil
		c.trimReader()
	case len(c.rbuf) == 0:
		c.dropReadBuf()
		c.trimReader()
	}
	if !ok {
		return c.stopped()
	}
	switch {
	case err != nil:
		return endGone
	case !c.loopable() || c.handOff:
		c.handOff = false
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
	putReadBuf(c.rbuf)
	c.rbuf = nil
	clear(c.args[:cap(c.args)]) // slices of it: it must not stay reachable
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
	if !c.reqRaw {
		giveBackIdle(&c.req)
	}
	c.rw.scratch = c.rw.scratch[:0]
	giveBackIdle(&c.rw.scratch)
}

// trimWriter gives back the output owner's large working buffers once
// everything is written.
func (c *client) trimWriter() {
	giveBackIdle(&c.out)
	c.wrw.scratch = c.wrw.scratch[:0]
	giveBackIdle(&c.wrw.scratch)
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
	if len(c.rbuf) < cap(c.rbuf) {
		return
	}
	nb := bufpool.Get(readGrowth(len(c.rbuf), resp.PendingBulkEnd(c.rbuf)))[:len(c.rbuf)]
	copy(nb, c.rbuf)
	bufpool.Put(c.rbuf) // between two runs of process: no argument points into it
	c.rbuf = nb
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
	c.looping = inLoop
	c.roomCredit = 0 // counted afresh for each read (hasRoom)
	defer func() { c.looping = false }()
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
		c.readAt = time.Now()
	}
	defer func() {
		// Keep the unparsed tail; shrink a buffer grown by a huge command.
		rest := copy(c.rbuf, c.rbuf[off:])
		c.rbuf = c.rbuf[:rest]
		if cap(c.rbuf) > 1<<20 && rest < 16<<10 {
			old := c.rbuf
			c.rbuf = append(getReadBuf(), c.rbuf...)
			bufpool.Put(old) // every command in it is handled: its calls hold copies
		}
	}()
	for off < len(c.rbuf) {
		if c.aborted.Load() {
			// Nobody will read the replies: like Redis, which drops the
			// query buffer of a client it frees, run no more of them (a
			// pipeline of thousands read in one go would keep Redis busy
			// and Close waiting). What was batched still goes upstream,
			// so that the calls queued for the writer end.
			c.flush()
			return false
		}
		limit := maxBulk
		if c.s.RequireAuth && !c.authed {
			limit = unauthMaxBulk
		}
		args, m, perr := resp.ReadCommand(c.args, c.rbuf[off:], limit)
		c.args = args[:0]
		if limit == unauthMaxBulk {
			perr = unauthLimit(c.rbuf[off:], perr, maxBulk)
		}
		if errors.Is(perr, resp.ErrIncomplete) {
			// A large value to store as it is passes on as it arrives
			// (stream.go), from the client's goroutine.
			if _, _, _, _, ok := c.streamable(c.rbuf[off:]); ok {
				if inLoop {
					c.handOff = true
					break
				}
				c.rbuf = c.rbuf[:copy(c.rbuf, c.rbuf[off:])]
				off = 0
				key, count, at, size, _ := c.streamable(c.rbuf)
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
			c.handOff = true
			if c.pinHeld == nil && c.loopable() && (m > maxLoopCommand || c.mustWait(info, args)) {
				// The command came now: other clients' commands read
				// after it must reach Redis after it, although the client's
				// goroutine sends it later (proxy/order.go). What the
				// client sent before it goes first.
				c.flush()
				c.pinHeld = c.s.pool.raiseOrder()
			}
			break
		}
		off += m
		c.rawCmd = c.rbuf[off-m : off : off]
		ok := c.handle(info, args)
		c.rawCmd = nil
		if !ok {
			c.flush()
			c.endPinOrder()
			return false
		}
		if c.pinHeld != nil {
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
	if c.lastInfo != nil && bytes.Equal(name, c.lastName) {
		return c.lastInfo
	}
	info := lookup(name)
	if len(name) <= 24 { // as long as lookup looks up
		c.lastName = append(c.lastName[:0], name...)
		c.lastInfo = info
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
	cl.notify = c.ready
	cl.finish()
	return cl
}

// wake nudges the writer.
func (c *client) wake() {
	select {
	case c.ready <- struct{}{}:
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
	if c.roomCredit > 0 {
		c.roomCredit-- // one call fewer fits now
	}
	for {
		if c.looping {
			c.qmu.Lock()
			c.queue = append(c.queue, cl)
			c.qmu.Unlock()
			break
		}
		c.qmu.Lock()
		if c.roomLocked() {
			c.queue = append(c.queue, cl)
			c.roomCredit = max(c.roomCredit-1, 0)
			c.qmu.Unlock()
			break
		}
		c.qmu.Unlock()
		c.flush()
		stop := func() {}
		if c.pinned != nil {
			// A reply that never comes (a command blocked for good, a
			// subscriber's) must not keep a client that left waiting here,
			// where it reads nothing and so never sees the end.
			stop = c.watchPeer()
		}
		<-c.space
		stop()
	}
	if cl.ready.Load() {
		c.wake()
	}
}

// next returns the call at the head of the queue, or nil, and whether the
// reader is done.
func (c *client) next() (*call, bool) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.qhead < len(c.queue) {
		return c.queue[c.qhead], c.qclosed
	}
	return nil, c.qclosed
}

// pop removes the head of the queue.
func (c *client) pop() {
	c.qmu.Lock()
	c.queue[c.qhead] = nil
	c.qhead++
	if c.qhead == len(c.queue) {
		c.queue, c.qhead = c.queue[:0], 0
	}
	c.qmu.Unlock()
	select {
	case c.space <- struct{}{}:
	default:
	}
}

// conn returns the upstream connection for this client's next commands.
func (c *client) conn() (*upConn, error) {
	if c.pinned != nil {
		return c.pinned, nil
	}
	return c.s.pool.get(context.Background(), int(c.id))
}

// sendOn sends requests on up in the order they came among all clients'
// (proxy/order.go): ahead of the barrier the client raised for a command
// that had to wait, or, on its private connection, behind a barrier of
// its own so that other clients' later commands follow it.
func (c *client) sendOn(up *upConn, req []byte, calls []*call) {
	switch {
	case c.pinHeld != nil:
		if !c.pinHeld.awaited {
			c.s.pool.awaitOrder(c.pinHeld)
		}
		up.sendAhead(req, calls)
	case up.onPush != nil:
		h := c.s.pool.beginOrder()
		up.send(req, calls)
		c.s.pool.endOrder(h)
	case c.looping && len(req) >= forwardAsIsMin:
		up.sendHeld(c.poller, req, calls)
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
	if c.pinHeld != nil {
		switch {
		case !c.pinByCall:
			c.s.pool.endOrder(c.pinHeld)
		case c.pinBlocking && c.pinID > 0:
			// Written: end the barrier once Redis holds it blocked.
			go c.s.endWhenBlocked(c.pinHeld, c.pinID)
		}
		c.pinHeld, c.pinByCall, c.pinBlocking = nil, false, false
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
	if c.pinned != nil && c.pinned.awaiting.Load() > 0 {
		return // behind an earlier command that has not run yet
	}
	if c.pinHeld == nil {
		c.flush() // what the client sent before goes first
		c.pinHeld = c.s.pool.raiseOrder()
	}
	h := c.pinHeld
	c.pinByCall, c.pinBlocking = true, blocking
	cl.onFinish = func() { c.s.pool.endOrder(h) }
	time.AfterFunc(maxBlockedWait, func() { c.s.pool.endOrder(h) })
}

// flush sends the batch of rewritten requests upstream.
func (c *client) flush() {
	if c.batchExpected != 0 {
		// Before the batch goes: its replies give the reservations back.
		c.expect(c.batchExpected)
		c.batchExpected = 0
	}
	if len(c.req) == 0 {
		return
	}
	up, err := c.conn()
	if err != nil {
		for _, cl := range c.batch {
			cl.err = err
			cl.finish()
		}
	} else {
		c.sendOn(up, c.req, c.batch)
	}
	for i := range c.batch {
		c.batch[i] = nil
	}
	c.batch = c.batch[:0]
	if c.reqRaw { // req was the client's read buffer: back to its own
		c.req, c.reqOwn, c.reqRaw = c.reqOwn[:0], nil, false
		return
	}
	c.req = c.req[:0]
	if cap(c.req) > 1<<20 {
		bufpool.Put(c.req) // sent: the connection wrote it or copied it
		c.req = nil
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
	c.one[0] = cl
	c.sendOn(up, req, c.one[:])
	c.endPinOrder() // if a command waited, it is written now
	c.one[0] = nil
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
	if c.pinned == nil || c.pinned.awaiting.Load() <= 1 {
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
	if c.scriptUp != nil {
		return roundtripOn(c.scriptUp, req)
	}
	cl := newCall()
	up, err := c.conn()
	if err != nil {
		cl.err = err
		return cl
	}
	if up.onPush == nil {
		c.one[0] = cl
		c.sendOn(up, req, c.one[:])
		c.endPinOrder() // if a command waited, it is written now
		c.one[0] = nil
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
	if c.pinned != nil {
		return nil
	}
	c.noDirect.Store(true)
	if c.push.Load() == nil {
		ch := make(chan pushMsg, 128)
		c.push.Store(&ch)
		c.wake() // a writer asleep on no channel waits on this one
	}
	// Other clients' requests from now on reach Redis after the command
	// that made this client pin, however long the dial takes: an order
	// barrier (raised already if an event loop handed the client over)
	// holds them until that command is written (proxy/order.go).
	if c.pinHeld == nil {
		c.flush() // this client's earlier commands go before the barrier
		c.pinHeld = c.s.pool.raiseOrder()
	}
	if !c.pinHeld.awaited {
		c.s.pool.awaitOrder(c.pinHeld)
	}
	if !c.s.RequireAuth { // else the client pins before its first command
		// This client's own commands sent before must have run, not only
		// been written: PING on its shared connection, ahead of the
		// barrier, and wait for the reply.
		if shared, err := c.conn(); err == nil {
			ping := newCall()
			c.one[0] = ping
			shared.sendAhead(pingRequest, c.one[:])
			c.one[0] = nil
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
			c.pinID, _ = strconv.ParseInt(string(bytes.TrimSpace(idc.reply[1:])), 10, 64)
		}
		c.notePin(idc.pinSeq)
		idc.release()
	}
	c.authed = up.authed
	c.pinMu.Lock()
	c.pinned = up
	c.pinMu.Unlock()
	return nil
}

// pushes returns the channel of push messages, nil (which never
// delivers) before the client pins.
func (c *client) pushes() chan pushMsg {
	if p := c.push.Load(); p != nil {
		return *p
	}
	return nil
}

// onPush runs on the pinned connection's reader for push messages and
// relayed replies.
func (c *client) onPush(msg []byte, seq uint64) {
	select {
	case *c.push.Load() <- pushMsg{append([]byte(nil), msg...), seq}: // made by pin, which dialed
	case <-c.writerDone: // nobody will write it
	}
}

// handle processes one command. It returns false when the connection must
// end (QUIT).
func (c *client) handle(info *cmdInfo, args [][]byte) bool {
	start := c.readAt
	if c.relay && c.pinned != nil && c.pinned.relayEnds.Load() > c.relayGen {
		c.relay = false // Redis left the subscribed state
	}
	if c.pinned != nil && c.pinned.isDead() {
		// The private connection's state (transaction, subscriptions,
		// database, protocol) is gone: end the client's connection as a
		// failed Redis would, without a reply, so that the client's
		// library reconnects (an error reply reads as a failed command).
		c.enqueue(c.lostCall(info.name))
		return false
	}
	if info.flags&flagQuit != 0 {
		cl := c.localCall(info.name, []byte("+OK\r\n"))
		cl.close = true
		c.enqueue(cl)
		return false
	}
	if info.flags&flagScript != 0 && c.s.RejectScripts {
		c.enqueue(c.localCall(info.name, resp.AppendError(nil, "ERR squeeze: "+info.name+" is disabled by --scripts=reject: scripts would see compressed values")))
		return true
	}
	justPinned := false
	if c.pinned == nil && (needsPin(info, args) || c.s.RequireAuth) {
		justPinned = true
		if err := c.pin(); err != nil {
			c.enqueue(c.localCall(info.name, resp.AppendError(nil, "ERR squeeze: cannot open a private upstream connection for "+info.name+": "+err.Error())))
			return true
		}
	}
	if info.name == "SELECT" && len(args) == 2 && c.inMulti {
		// Queued: the commands after it in the transaction run in that
		// database, if EXEC runs it; EXEC then asks Redis (see below).
		if n, ok := resp.ParseInt(args[1]); ok && n >= 0 {
			c.db, c.dbQueued = int(n), true
		}
	}
	if info.name == "SELECT" && len(args) == 2 && c.pinned != nil && !c.inMulti && !c.relay && !c.replyOff && c.skip == 0 {
		// Run it now, to know the database the client is in.
		cl := c.roundtrip(resp.AppendCommand(nil, args...))
		if cl.err != nil && cl.connLost {
			cl.release()
			c.enqueue(c.lostCall(info.name))
			return false
		}
		reply := resp.AppendError(nil, "ERR squeeze: upstream: "+fmt.Sprint(cl.err))
		if cl.err == nil {
			reply = append(reply[:0], cl.reply...)
			if n, ok := resp.ParseInt(args[1]); ok && string(cl.reply) == "+OK\r\n" {
				c.db = int(n)
			}
		}
		cl.release()
		local := c.localCall(info.name, reply)
		local.start = start
		c.enqueue(local)
		return true
	}
	if info.flags&flagInspect != 0 && !arityOK(info.arity, len(args)) {
		info = unknownCmd // Redis will reply with its arity error
	}
	if info.flags&flagInspect != 0 && !c.inMulti && !c.relay && !c.replyOff && c.skip == 0 {
		cl := c.inspect(info, args)
		cl.start = start
		c.enqueue(cl)
		return true
	}
	var fastScriptKeys [][]byte
	fastScript := false
	if !c.s.RejectScripts && (info.flags&flagScript != 0 || isScriptAdmin(args)) {
		// Scripts: see scripts.go.
		fast := c.s.scriptFast(info, args)
		if fast && !c.inMulti {
			fastScript = true
			fastScriptKeys, _ = scriptKeysOf(args)
		}
		if !fast && !c.inMulti && !c.relay && !c.replyOff && c.skip == 0 {
			cl := c.runScript(info, args)
			cl.start = start
			c.enqueue(cl)
			return true
		}
		if c.inMulti && !c.relay {
			// An error here leaves the frames, which the prologue then
			// reports at EXEC: the command is queued all the same.
			c.flush()
			c.waitWritten(c.multiSeq)
			_ = c.queueScriptPrep(info, args)
		}
		args, _ = c.s.scriptArgs(info, args)
	}
	listSearch := c.exactListSearch(info, args) && !c.relay // subscribed: Redis refuses it by name
	if listSearch && !c.inMulti && !c.relay && !c.replyOff && c.skip == 0 {
		cl := c.listSearch(info, args)
		cl.start = start
		c.enqueue(cl)
		return true
	}
	// Does this command get a reply we must wait for?
	expect := true
	switch {
	case c.relay:
		expect = false
	case c.replyOff:
		expect = false
	case c.skip > 0:
		c.skip--
		expect = false
	}
	if info.flags&flagClient != 0 && len(args) > 2 && is(args[1], "REPLY") {
		switch {
		case is(args[2], "OFF"):
			c.replyOff, expect = true, false
		case is(args[2], "SKIP"):
			if !c.replyOff {
				c.skip, expect = 1, false
			}
		case is(args[2], "ON"):
			c.replyOff, expect = false, true
		}
	}
	if c.proto == 3 && info.flags&(flagSubscribe|flagUnsubscribe) != 0 {
		expect = false // RESP3 confirms with push messages
	}
	kind := replyShape(info, args)
	if info.flags&flagInspect != 0 || listSearch {
		// Inside MULTI or with replies off, run the check script: it
		// executes the command on uncompressed values and refuses, with a
		// marker, on compressed ones.
		kind = shapeInspect
		if c.proto == 3 {
			kind = shapeInspect3
		}
	}
	if c.inMulti && info.flags&flagNotQueued == 0 {
		switch info.vals {
		case argsAt2, argsAt3:
			if info.name == "SET" || info.name == "GETSET" || info.name == "SETNX" || info.name == "SETEX" || info.name == "PSETEX" || info.name == "HSETNX" {
				if first, _, _ := valueArgs(info.vals, args); first > 0 {
					c.noteTxSet(args[1], args[first])
				}
			}
		case argsEvery2, argsMsetex: // MSET, MSETNX, MSETEX: each key's value
			first, step, end := valueArgs(info.vals, args)
			for i := first; step > 0 && i < end; i += step {
				c.noteTxSet(args[i-1], args[i])
			}
		case argsEvery2At3, argsHsetex: // HSET, HMSET, HSETEX: the hash's key, each field's value
			first, step, end := valueArgs(info.vals, args)
			for i := first; step > 0 && i < end; i += step {
				c.noteTxSet(args[1], args[i])
			}
		}
		if len(args) >= 3 && (is(args[0], "COPY") || is(args[0], "RENAME") || is(args[0], "RENAMENX")) {
			c.txCopies = append(c.txCopies, [2][]byte{bytes.Clone(args[2]), bytes.Clone(args[1])})
		}
	}
	queued := c.inMulti && info.flags&flagNotQueued == 0
	if queued {
		c.txRaw.note(c.s, len(c.tx), info, args)
		c.tx, c.txNames = append(c.tx, kind), append(c.txNames, info.name)
		kind = shapeNone // the reply now is +QUEUED
	}
	var cl *call
	if expect {
		cl = newCall()
		cl.notify, cl.owner = c.ready, c
		cl.cmd, cl.cmdID, cl.kind, cl.start = info.name, info.id, kind, start
		if c.s.RequireAuth && authenticates(info, args) {
			// Until its reply says it succeeded, the client is nobody
			// the proxy knows (aclscript.go), never the user before.
			c.user.Store(nil)
			cl.authUser = authUser(info, args)
		}
		c.seq++
		cl.seq = c.seq
		if info.flags&flagMulti != 0 {
			c.multiSeq = c.seq
		}
		if kind != shapeNone && kind != shapeSniff {
			// The keys, for decode errors that name them (keyOf): every
			// argument of MGET, the first of the others. Never a value:
			// copying a 10 MB SET ... GET value here was 2% of the proxy's
			// CPU on large documents.
			if info.name == "MGET" {
				cl.saveArgs(args)
			} else {
				cl.saveArgs(args[:min(len(args), 2)])
			}
		}
	}
	switch {
	case info.flags&flagMulti != 0:
		if !c.inMulti {
			c.txDB = c.db
		}
		c.inMulti, c.tx, c.txNames, c.txSets, c.txCopies = true, c.tx[:0], c.txNames[:0], nil, nil
		c.txRaw.reset()
	case info.flags&flagExec != 0:
		if cl != nil && c.inMulti {
			cl.tx = append(cl.tx[:0], c.tx...)
			cl.txNames = append(cl.txNames[:0], c.txNames...)
		}
		// The values noted for the commands queued are needed no more:
		// a client whose last transaction wrote a 300 kB value kept it
		// twice, plain and framed, until its next MULTI.
		c.inMulti, c.txSets, c.txCopies = false, nil, nil
	case info.flags&flagDiscard != 0:
		if c.inMulti && c.dbQueued {
			c.db, c.dbQueued = c.txDB, false
		}
		c.inMulti, c.txSets, c.txCopies = false, nil, nil
	case info.flags&flagHello != 0:
		c.helloProto.Store(0)
	case info.flags&flagReset != 0:
		c.proto, c.inMulti, c.replyOff, c.skip = 2, false, false, 0
		c.txSets, c.txCopies = nil, nil
	case info.flags&(flagSubscribe|flagMonitor) != 0 && (c.proto == 2 || info.flags&flagMonitor != 0):
		if cl != nil {
			cl.kind = shapeRelay
		}
		if !c.relay {
			c.relay, c.relayGen = true, c.pinned.relayEnds.Load()
		}
	}
	if cl != nil && !queued && c.pinned != nil {
		blocking := isBlocking(info, args)
		if justPinned || blocking || cl.kind == shapeRelay {
			c.holdUntilRun(cl, blocking)
		}
	}
	reqMark := len(c.req)
	var owed *execRecompress // recompression after EXEC (recompress.go)
	if info.flags&flagExec != 0 && cl != nil && len(cl.tx) > 0 {
		owed = c.txRaw.arm(cl, len(cl.tx), c.dbQueued)
	}
	if info.flags&flagInspect != 0 {
		// Commands before MULTI must have run before probing the keys.
		c.flush()
		c.waitWritten(c.multiSeq)
		c.req = c.appendQueuedInspect(c.req, info, args)
	} else if listSearch {
		c.flush()
		c.waitWritten(c.multiSeq)
		c.req = c.appendQueuedListSearch(c.req, info, args)
	} else if by, alpha, patterns, ok := sortNeedsCheck(info, args); ok {
		c.req = appendSortCheck(c.req, by, alpha, patterns, args)
	} else if raw := c.rawCmd; len(raw) >= forwardAsIsMin && c.rw.forwardsAsIs(info, args, raw) {
		// A large command that goes to Redis as it came: sent from the
		// read buffer, after the batch before it, rather than copied
		// into the batch (flush sends it before rbuf changes).
		c.flush()
		c.reqOwn, c.req, c.reqRaw = c.req, raw, true
		reqMark = 0
	} else {
		if m := len(c.rbuf); m >= bufpool.MinSize && cap(c.req)-len(c.req) < m {
			// A large command: room for it from the reused buffers.
			c.req = append(bufpool.Get(len(c.req)+m), c.req...)
		}
		c.req = c.rw.appendRequest(c.req, info, args)
	}
	if cl != nil && fastScript {
		c.s.noteFastScript(cl, fastScriptKeys)
	}
	if cl != nil {
		held := max(int64(len(c.req)-reqMark), c.expectedReply())
		cl.reserved = held
		c.batch = append(c.batch, cl)
		c.enqueue(cl)           // the writer owns cl from here on
		c.batchExpected += held // counted in flush, before it is sent
	}
	if c.reqRaw {
		c.flush() // req is rbuf's: sent now, alone
	}
	if info.flags&flagHello != 0 && cl != nil {
		// The protocol changes only if HELLO succeeds (HELLO 3 AUTH with a
		// wrong password does not): wait for the reply, which the writer
		// reads the protocol from.
		c.flush()
		c.waitWritten(c.seq)
		if p := c.helloProto.Load(); p == 2 || p == 3 {
			c.proto = int(p)
		}
	}
	switch {
	case cl == nil || c.inMulti:
	case c.s.RequireAuth && c.authed && authenticates(info, args):
		// Another login: the commands after it run as whoever it logs in
		// as, which its reply tells (see client.user).
		c.flush()
		c.waitWritten(c.seq)
	case c.s.RequireAuth && !c.authed && authenticates(info, args):
		// The connection was dialed without credentials, so its SELECT of
		// the URL's database failed: select it once the client's own AUTH
		// has run. Its reply says whether that AUTH succeeded.
		c.flush()
		c.waitWritten(c.seq)
		c.restoreSetup(c.s.connSetup(false, c.s.up.DB))
	case info.flags&flagExec != 0 && c.dbQueued:
		// A SELECT ran in the transaction, or did not (an error, WATCH):
		// ask Redis which database the client is in now.
		c.flush()
		c.waitWritten(c.seq)
		c.dbQueued = false
		r := c.roundtrip(resp.AppendCommand(nil, []byte("CLIENT"), []byte("INFO")))
		if db, ok := clientInfoDB(r.reply); r.err == nil && ok {
			c.db = db
		}
		r.release()
	case info.flags&flagReset != 0:
		// RESET selects database 0 and, where Redis requires a password,
		// logs the connection out: put it back in the state the proxy
		// stands for (the URL's credentials unless RequireAuth, and its
		// database).
		c.flush()
		c.waitWritten(c.seq)
		c.authed, c.db = false, c.s.up.DB
		c.user.Store(nil)
		c.restoreSetup(c.s.connSetup(!c.s.RequireAuth, c.s.up.DB))
	}
	if owed != nil {
		c.recompressAfterExec(owed)
	}
	return true
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
	c.authed = true
	for _, cmd := range cmds {
		r := c.roundtrip(cmd)
		if r.err != nil || bytes.HasPrefix(r.reply, []byte("-NOAUTH")) {
			c.authed = false
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
	c.qmu.Lock()
	ok := !c.owned
	c.owned = true
	c.qmu.Unlock()
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
	c.qmu.Lock()
	c.owned = false
	more := direct && (c.qclosed || len(c.out) > 0 || c.noDirect.Load() ||
		(c.qhead < len(c.queue) && c.queue[c.qhead].ready.Load()))
	c.qmu.Unlock()
	if more {
		c.wake()
	}
}

// settleHeld takes what the replies written since the last call gave back
// off the process's total: once per batch of replies, not once per reply,
// as the total is shared by every goroutine. Output owner only.
func (c *client) settleHeld() {
	c.obs.flush() // the commands counted, as the totals, before the write
	if c.unheld != 0 {
		c.s.heldTotal.Add(-c.unheld)
		c.unheld = 0
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
		c.out = resp.AppendError(c.out, "ERR squeeze: upstream: "+cl.err.Error())
	} else if c.broken && !destructive(cl.cmd) && cl.kind != shapeExec {
		// The client is gone: nothing to write, and no value to decode
		// (a destructive read is still decoded: see quarantine.go).
	} else {
		c.out = rw.appendReply(c.out, cl)
	}
	if cl.cmd != "" && c.s.metrics != nil {
		if now.Before(cl.start) { // also the zero time: not read yet
			*now = time.Now()
		}
		// Replies written together mostly share their command and
		// their batch's clock readings: counted in one go (pendingObs).
		c.obs.note(c.s.metrics.statsOf(cl.cmdID, cl.cmd), now.Sub(cl.start))
	}
	if cl.cmd == "HELLO" && cl.err == nil {
		c.helloProto.Store(helloReplyProto(cl.reply))
	}
	if cl.authUser != nil && cl.err == nil && len(cl.reply) > 0 && cl.reply[0] != '-' {
		u := cl.authUser
		c.user.Store(&u) // the login succeeded: the client is this user now
	}
	c.notePin(cl.pinSeq)
	if cl.owner != nil {
		c.held.Add(-cl.held)
		c.unheld += cl.held   // the process's total: in settleHeld
		if cl.reserved != 0 { // no reply came (a failure, a local reply)
			c.expect(-cl.reserved)
		}
	}
	closeAfter := cl.close
	if cl.seq != 0 {
		c.writtenSeq.Store(cl.seq)
		if c.writtenWaiters.Load() > 0 {
			c.writtenMu.Lock()
			c.writtenC.Broadcast()
			c.writtenMu.Unlock()
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
	if c.noDirect.Load() {
		return false
	}
	// Become the output owner (as acquire does) and take the run of ready
	// replies at the head of the queue, up to 64 KiB, with one lock; write
	// them with one system call.
	c.qmu.Lock()
	if c.owned {
		c.qmu.Unlock()
		return false
	}
	c.owned = true
	if len(c.out) > 0 || c.broken {
		c.qmu.Unlock()
		c.release(true)
		return false
	}
	run, size := c.direct[:0], 0
	for c.qhead < len(c.queue) && size < 64<<10 {
		cl := c.queue[c.qhead]
		if !cl.ready.Load() || cl.close || cl.cmd == "HELLO" || len(cl.reply) >= handOverReply || bigDecode(cl) {
			// Large replies: the writer goroutine writes them from their
			// buffer, or decodes them, while this reader goes on.
			break
		}
		c.queue[c.qhead] = nil
		c.qhead++
		run = append(run, cl)
		size += len(cl.reply)
	}
	if c.qhead == len(c.queue) {
		c.queue, c.qhead = c.queue[:0], 0
	}
	c.qmu.Unlock()
	if len(run) > 0 {
		select { // as pop does
		case c.space <- struct{}{}:
		default:
		}
	}
	var now time.Time
	for i, cl := range run {
		c.emit(rw, cl, &now)
		run[i] = nil
	}
	c.direct = run[:0]
	c.obs.flush() // counted before the client can see the replies
	if len(c.out) > 0 {
		c.wr.buf = c.out
		rerr := c.raw.Write(c.wr.write)
		n := c.wr.n
		var err error
		switch {
		case rerr != nil:
			err = rerr
		case c.wr.errno != 0:
			err = c.wr.errno
		}
		c.wr.buf = nil
		switch {
		case err == syscall.EAGAIN || err == syscall.EINTR:
			n = 0
		case err != nil:
			c.broken = true
			c.abort() // ends the reader
			n = len(c.out)
		}
		if n < 0 {
			n = 0
		}
		rest := copy(c.out, c.out[n:])
		c.out = c.out[:rest]
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
		if len(c.out) > 0 && !c.broken {
			// The output counts against the client's bounds while the
			// socket takes it (memory.go).
			// Large output counts against the client's bounds while
			// the socket takes it (memory.go); small output is not
			// worth the bookkeeping.
			n := int64(len(c.out))
			if n < minOtherHeld {
				n = 0
			}
			if n > 0 {
				c.hold(n)
				c.writing.Store(n)
			}
			if _, err := c.nc.Write(c.out); err != nil {
				c.broken = true
				c.abort() // ends the reader
			}
			if n > 0 {
				c.writing.Store(0)
				c.hold(-n)
			}
		}
		c.out = c.out[:0]
		if cap(c.out) > 1<<20 {
			bufpool.Put(c.out) // only the writer held it
			c.out = nil
		}
	}
	var held []pushMsg // pushes that came after replies not written yet
	writePushesUpTo := func(done uint64) {
		for len(held) > 0 && held[0].seq <= done {
			m := held[0].msg
			held = held[1:]
			v, _, err := resp.ReadValue(m)
			mark := len(c.out)
			if err == nil {
				c.out, err = c.wrw.walk(c.out, v, shapeAny, nil, nil)
			}
			if err != nil {
				c.out = append(c.out[:mark], m...)
			}
		}
	}
	writePushes := func() { writePushesUpTo(c.pinDone.Load()) }
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
		case <-c.ready:
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
			if lost && !c.broken {
				c.abort()
				c.broken = true
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
		if verbatimReply(cl) && !c.broken {
			// Written from the reply's own buffer, after what is before it.
			// (No second copy: the reply counts as held until emit.)
			write()
			if _, err := c.nc.Write(cl.reply); err != nil {
				c.broken = true
				c.abort()
			}
			bufpool.Put(cl.reply)
			cl.local = true // the reply is written: emit only does the bookkeeping
			cl.reply = nil
		} else if frame, ok := decodedAsWritten(cl); ok && !c.broken && c.writeDecoded(cl, frame, write) {
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
			closeAfter = c.emit(&c.wrw, cl, &now)
			release()
		} else {
			closeAfter = c.emit(&c.wrw, cl, &now)
		}
		writePushes()
		if closeAfter {
			write()
			c.abort()
			c.broken = true
		}
		if len(c.out) >= 64<<10 {
			write()
		}
	}
}

// waitWritten waits until the writer has written the reply of call seq.
// The caller must have flushed: the call must be on its way.
func (c *client) waitWritten(seq uint64) {
	defer c.watchGone()()
	c.writtenMu.Lock()
	c.writtenWaiters.Add(1) // before the test: emit then sees it, or we see its seq
	for c.writtenSeq.Load() < seq {
		c.writtenC.Wait()
	}
	c.writtenWaiters.Add(-1)
	c.writtenMu.Unlock()
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
		cur := c.pinDone.Load()
		if seq <= cur || c.pinDone.CompareAndSwap(cur, seq) {
			return
		}
	}
}
