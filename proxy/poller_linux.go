//go:build linux

package proxy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// A poller reads many client connections from one goroutine. Go's own way,
// a goroutine blocked in Read per connection, costs a read system call that
// fails with EAGAIN after every command of a request-reply client: the
// goroutine reads the command, finds nothing more, and only then parks. A
// poller instead keeps the clients in an epoll set of its own and reads a
// client only when the kernel says it has data: one epoll_wait for all the
// clients that are ready, then one read each.
//
// The set is edge triggered: the kernel lists clients in the order their
// data arrived, so the poller handles commands of different clients in the
// order they came, as Redis's event loop does, and the order barriers of
// proxy/order.go start from that order. (Level triggered, the kernel puts a
// client it just reported back at the head of the list, ahead of clients
// whose data came before the reported one's next command.) A read that
// fills the buffer may leave data behind, which no new edge will announce:
// such a client is read again in the next round, before the new ones.
//
// The poller's goroutine still sleeps in Go's scheduler, not in a blocking
// system call: the epoll descriptor is itself registered with Go's network
// poller (an epoll set becomes readable when one of its members is), so the
// goroutine parks like any network read and the thread stays free.
//
// A client is read by the poller only while each command can be handled
// without waiting (see client.loopSafe); a command that must wait (a round
// trip to Redis, a private connection, HELLO, a full reply queue) hands the
// client back to its own goroutine, which gives it to the poller again
// once its state allows.
type poller struct {
	srv     *Server
	epfd    int
	file    *os.File // epfd, registered with Go's network poller
	rc      syscall.RawConn
	events  []syscall.EpollEvent
	mu      sync.Mutex
	clients map[int32]*client // by descriptor; the loop deletes, register adds
	// waitFn runs epoll_wait for wait, made once (a closure per call
	// would escape); n and werr are its results.
	waitFn func(fd uintptr) bool
	n      int
	werr   error
	// handoffs counts clients given to their goroutine for a command.
	handoffs atomic.Int64
	// held is the list of shared connections a round holds (holdWrites),
	// kept from round to round.
	held []*upConn
	// again are the clients whose last read filled the buffer: read them
	// again in the next round (loop only); next is the list being filled.
	again, next []pollerClient
	// noPark makes wait return at once (clients wait in again).
	noPark bool
	// rbuf is the read buffer of the loop's clients that have no partial
	// command waiting (client.loopStep).
	rbuf []byte
}

// pollerClient is a client and its descriptor.
type pollerClient struct {
	c  *client
	fd int32
}

// errNoPoller is what newPoller returns where there is no poller.
var errNoPoller = errors.New("no event loop on this system")

// newPoller creates a poller and starts its goroutine.
func newPoller(srv *Server) (*poller, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	if err := syscall.SetNonblock(epfd, true); err != nil {
		syscall.Close(epfd)
		return nil, fmt.Errorf("epoll set non-blocking: %w", err)
	}
	f := os.NewFile(uintptr(epfd), "squeeze-poller")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	p := &poller{srv: srv, epfd: epfd, file: f, rc: rc, events: make([]syscall.EpollEvent, 128), clients: map[int32]*client{}, rbuf: make([]byte, 0, readBufSize)}
	p.waitFn = func(fd uintptr) bool {
		p.n, p.werr = rawEpollWait(fd, p.events)
		return p.n > 0 || p.werr != nil || p.noPark
	}
	go p.loop()
	return p, nil
}

// run reads c in the poller until c must be read by its own goroutine
// again (endToGoroutine) or its input ended (endGone, endDrained, endStop).
// The caller is c's serve goroutine; kept: it gave c back to the poller,
// which kept c in its set (readLoop's endToSet). That is known from the
// goroutine's own last look, not asked again: once c is given back, the
// poller may already have read it, dropped it from the set and handed it
// over again, and a goroutine that then saw it out of the set added it
// anew, and handled its command while the poller read it too.
func (p *poller) run(c *client, kept bool) readEnd {
	if kept {
		return <-c.in.handback // still in the set, or handed over again (passState)
	}
	select {
	case <-c.life.draining:
		return endDrained
	default:
	}
	var fd int32 = -1
	var addErr error
	p.mu.Lock()
	cerr := c.raw.Control(func(sysfd uintptr) {
		fd = int32(sysfd)
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | epollET, Fd: fd}
		addErr = syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_ADD, int(sysfd), &ev)
		if addErr == nil {
			p.clients[fd] = c
		}
	})
	p.mu.Unlock()
	if cerr != nil {
		return endGone // closed
	}
	if addErr != nil {
		// Cannot poll this descriptor: read it from the goroutine, for
		// good.
		c.in.noLoop = true
		return endToGoroutine
	}
	return <-c.in.handback
}

// keepAway puts c, which its goroutine has and which just got a private
// connection, in the set (passState): from now on what it sends keeps its
// place among the others' (order.go), where joining the set once the
// goroutine gives it back would read it after input other clients sent
// meanwhile. Client's goroutine only, while the client is in no set.
func (p *poller) keepAway(c *client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.raw.Control(func(sysfd uintptr) {
		fd := int32(sysfd)
		// Away before the poller can see it: it holds p.mu to look it up.
		// Input may have come before the set had it: read it (more).
		c.in.pass.handOver(fd, true, false)
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | epollET, Fd: fd}
		if syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_ADD, int(sysfd), &ev) != nil {
			c.in.pass.dropped()
			return
		}
		p.clients[fd] = c
	})
}

// rearm asks the kernel to announce c's descriptor again if it has input:
// modifying an edge-triggered entry puts it on the ready list when it is
// readable, behind the descriptors already there, so the loop reads it in
// its place. Client's goroutine, having given c back (passState.comeBack).
func (p *poller) rearm(c *client) {
	c.raw.Control(func(sysfd uintptr) {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | epollET, Fd: int32(sysfd)}
		syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_MOD, int(sysfd), &ev)
	})
}

// unregisterKept removes c from the set for its goroutine, which is done
// with it while the poller kept it (passState.leave: the poller no longer
// touches it).
func (p *poller) unregisterKept(c *client, fd int32) {
	p.mu.Lock()
	if p.clients[fd] == c {
		delete(p.clients, fd)
	}
	p.mu.Unlock()
	c.raw.Control(func(sysfd uintptr) {
		syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_DEL, int(sysfd), nil)
	})
}

// unregister removes c, whose descriptor was fd, from the set. Loop only.
func (p *poller) unregister(c *client, fd int32) {
	p.mu.Lock()
	if p.clients[fd] == c {
		delete(p.clients, fd)
	}
	p.mu.Unlock()
	// Through Control: if c's descriptor is closed already, its number may
	// belong to another connection now, and the kernel dropped c from the
	// set when it closed.
	c.raw.Control(func(sysfd uintptr) {
		syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_DEL, int(sysfd), nil)
	})
}

// wait returns the number of ready events, parking the goroutine in Go's
// network poller while there are none.
func (p *poller) wait() (int, error) {
	err := p.rc.Read(p.waitFn)
	if err == nil {
		err = p.werr
	}
	return p.n, err
}

// epollET is EPOLLET as the uint32 of EpollEvent.Events.
const epollET = 1 << 31

func (p *poller) loop() {
	for {
		p.noPark = len(p.again) > 0
		n, err := p.wait()
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			// Not expected from a valid epoll set; give every client
			// back to its goroutine so nobody hangs.
			p.mu.Lock()
			for fd, c := range p.clients {
				delete(p.clients, fd)
				c.in.noLoop = true
				c.in.handback <- endToGoroutine
			}
			p.mu.Unlock()
			return
		}
		held := p.srv.pool.holdWrites(p, p.held[:0])
		// Data left behind by the last round came before the new events'.
		again := p.again
		p.next = p.next[:0]
		for _, pc := range again {
			held = p.step(pc.c, pc.fd, false, held)
		}
		for i := 0; i < n; i++ {
			ev := p.events[i]
			held = p.step(nil, ev.Fd, ev.Events&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0, held)
		}
		clear(again)
		p.again, p.next = p.next, again[:0]
		p.srv.pool.releaseWrites(held)
		clear(held)
		p.held = held[:0]
	}
}

// step is the loop's turn with the client on descriptor fd (c, if known,
// must still be the one registered there). hup says the event announced
// the end of the client's input (EPOLLRDHUP): edge triggered, no later
// event will come, so a client whose read stopped short of that end (the
// last bytes and the FIN arrived together: "*1" then close) is read again
// in the next round, until it sees the end. It returns the connections
// whose writes the loop holds.
func (p *poller) step(c *client, fd int32, hup bool, held []*upConn) []*upConn {
	p.mu.Lock()
	cur := p.clients[fd]
	p.mu.Unlock()
	if cur == nil || (c != nil && cur != c) {
		return held
	}
	c = cur
	if c.in.pass.reserve(p.srv.pool) {
		return held // its goroutine has it, and will read it (passState)
	}
	end := c.loopStep()
	if end == endToGoroutine {
		p.handoffs.Add(1)
	}
	keepsPlace := c.in.keepsPlace
	c.in.keepsPlace = false
	switch {
	case end == endToGoroutine && (c.in.pass.isPrivate() || keepsPlace):
		// What the loop sent for c must reach Redis before the
		// goroutine sends more. A client with a private connection
		// stays in the set, so that input it sends meanwhile keeps its
		// place (passState); one of the shared connections leaves it, as
		// below, and is read by its goroutine until it comes back (its
		// commands go out in the order it reads them, and it reads only
		// as it has room, which bounds what a flood of large commands
		// holds). So does one that gets its private connection for a
		// command the loop read, or that waits for an inspect command's
		// round trips (keepsPlace): what it sends next, before its
		// goroutine is done with that command, gets its barrier when it
		// comes (passState.pinning).
		p.srv.pool.releaseWrites(held)
		held = held[:0]
		c.in.pass.handOver(fd, c.in.readFull || hup || c.in.inputEnds, keepsPlace)
		c.in.handback <- end
	case end != endStay:
		c.in.pass.dropped()
		// What the loop sent for c must reach Redis before the
		// goroutine sends more.
		p.srv.pool.releaseWrites(held)
		held = held[:0]
		p.unregister(c, fd)
		c.in.handback <- end
	default:
		if c.in.readFull || hup || c.in.inputEnds {
			// Read again next round: more data, or the end of input,
			// waits that no new edge will announce.
			c.in.inputEnds = hup || c.in.inputEnds
			p.next = append(p.next, pollerClient{c, fd})
		}
		if queuedTooMany(held) {
			// Unwritten calls count against the connection's queue
			// of calls awaiting replies, which must not fill up.
			p.srv.pool.releaseWrites(held)
			held = p.srv.pool.holdWrites(p, held[:0])
		}
	}
	return held
}

// close stops the poller. Clients still registered must have been given
// back before (Shutdown drains them first).
func (p *poller) close() { p.file.Close() }

// readOnce reads once from c's socket without waiting: the poller said it
// has data. It returns 0, nil when the socket had nothing after all.
func (c *client) readOnce(b []byte) (int, error) {
	if c.in.rd.read == nil {
		c.in.rd.read = func(fd uintptr) { c.in.rd.n, c.in.rd.errno = rawRead(fd, c.in.rd.buf) }
	}
	c.in.rd.buf = b
	err := c.raw.Control(c.in.rd.read)
	c.in.rd.buf = nil
	if err != nil {
		return 0, err
	}
	n := c.in.rd.n
	switch c.in.rd.errno {
	case 0:
	case syscall.EAGAIN:
		return 0, nil
	default:
		return 0, c.in.rd.errno
	}
	if n == 0 && len(b) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// shutdownSocket shuts down c's socket for reading, writing or both,
// without closing the descriptor: a goroutine blocked in Read or Write
// returns, and the poller sees the end of input and gives the client back.
// Only serve closes the descriptor, so the poller never sees it vanish.
func (c *client) shutdownSocket(how int) bool {
	if c.raw == nil {
		return false
	}
	c.raw.Control(func(fd uintptr) { syscall.Shutdown(int(fd), how) })
	return true
}

const (
	shutRead  = syscall.SHUT_RD
	shutWrite = syscall.SHUT_WR
	shutBoth  = syscall.SHUT_RDWR
)

// peerGone reports whether c's socket has reached the end of its input or
// failed, without reading what it holds (MSG_PEEK): for a reader that waits
// on something else (a reply behind a blocked command) and must not miss
// that the client left.
func (c *client) peerGone() bool {
	if c.raw == nil {
		return false
	}
	gone := false
	c.raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		gone = (n == 0 && err == nil) || (err != nil && err != syscall.EAGAIN && err != syscall.EINTR)
	})
	return gone
}
