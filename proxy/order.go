package proxy

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/squeeze-kv/squeeze/resp"
)

// Order across clients.
//
// Redis runs commands in the order they reach it. Through the proxy, the
// commands of clients that share an upstream connection keep that order by
// construction: they are written to one socket in the order the proxy read
// them. A command that goes over a private connection (a blocking pop,
// SUBSCRIBE, MULTI and everything after it, a client that ran SELECT or
// HELLO) takes another socket, and without care it would overtake, or be
// overtaken by, commands that other clients sent around the same time: a
// PUBLISH sent right after another client's SUBSCRIBE would reach Redis
// first (the private connection is still being dialled), or an LPUSH would
// run before the BRPOPLPUSH that was sent before it.
//
// An order barrier prevents that. While a client sends on its private
// connection (and while it dials one), the shared connections hold what
// other clients send after that moment in a separate buffer (upConn.after)
// and write what came before at once, without waiting for earlier replies as
// they otherwise would. When the private write is done, the held requests
// follow, in order. So every request reaches Redis's sockets in the order
// the proxy read it, which on one host is the order Redis runs it in. The
// barrier costs the shared connections nothing while no client is pinned,
// and holds them for about one write when one is.

// orderHold is one order barrier: its place among the barriers raised
// (ticket) and the shared connections it holds.
type orderHold struct {
	ticket  uint64
	conns   []*upConn
	awaited bool        // awaitOrder returned: it is this barrier's turn
	ended   atomic.Bool // endOrder ran
}

// afterSeg is the part of a connection's held requests (upConn.after) that
// came while barrier ticket was the newest: from off (afterCalls from
// calls) to the next segment.
type afterSeg struct {
	ticket    uint64
	off, call int
}

// orderState keeps the barriers in the order they were raised: a barrier's
// owner writes its command only once every earlier barrier has ended, so
// that two commands that both wait (two clients' BRPOPLPUSH) reach Redis in
// the order they came, too.
type orderState struct {
	mu     sync.Mutex
	turn   sync.Cond // signalled when a barrier ends
	next   uint64
	active []uint64 // raised and not ended, oldest first
}

// beginOrder raises an order barrier and waits for its turn: every earlier
// barrier ended, and nothing sent to the shared connections before it left
// unwritten. Every beginOrder needs its endOrder.
func (p *pool) beginOrder() *orderHold {
	h := p.raiseOrder()
	p.awaitOrder(h)
	return h
}

// raiseOrder raises an order barrier on every live shared connection: what
// clients send to them from now on waits (see upConn.send) until endOrder.
// It does not wait, so an event loop that holds the connections' writes
// may call it.
func (p *pool) raiseOrder() *orderHold {
	o := &p.order
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.turn.L == nil {
		o.turn.L = &o.mu
	}
	o.next++
	h := &orderHold{ticket: o.next}
	o.active = append(o.active, h.ticket)
	p.mu.Lock()
	for _, c := range p.conns {
		if c != nil {
			h.conns = append(h.conns, c)
		}
	}
	p.mu.Unlock()
	live := h.conns[:0]
	for _, c := range h.conns {
		c.mu.Lock()
		if !c.dead {
			c.segs = append(c.segs, afterSeg{h.ticket, len(c.after), len(c.afterCalls)})
			c.holdN++
			live = append(live, c)
		}
		c.mu.Unlock()
	}
	h.conns = live
	return h
}

// awaitOrder waits until every barrier raised before h has ended, then
// writes what the held connections queued before h, and returns once it is
// written.
func (p *pool) awaitOrder(h *orderHold) {
	o := &p.order
	o.mu.Lock()
	for len(o.active) > 0 && o.active[0] != h.ticket {
		o.turn.Wait()
	}
	o.mu.Unlock()
	for _, c := range h.conns {
		c.writeBeforeBarrier()
	}
	h.awaited = true
}

// endOrder lowers a barrier: on each connection, the requests held since it
// was raised join those of the barrier before it, or, for the oldest, are
// no longer held: they go out in the order they came, at once if another
// barrier waits for them, else as send would have written them.
func (p *pool) endOrder(h *orderHold) {
	if h == nil || !h.ended.CompareAndSwap(false, true) {
		return
	}
	o := &p.order
	o.mu.Lock()
	for _, c := range h.conns {
		c.endSeg(h.ticket)
	}
	for i, t := range o.active {
		if t == h.ticket {
			o.active = append(o.active[:i], o.active[i+1:]...)
			break
		}
	}
	o.turn.Broadcast()
	o.mu.Unlock()
}

// endSeg ends barrier ticket on c (see endOrder).
func (c *upConn) endSeg(ticket uint64) {
	c.mu.Lock()
	i := 0
	for i < len(c.segs) && c.segs[i].ticket != ticket {
		i++
	}
	if i == len(c.segs) {
		c.mu.Unlock()
		return
	}
	c.holdN--
	if i > 0 || c.dead {
		// Its requests came after the barrier before it: they stay held
		// with those. (A dead connection failed them already.)
		c.segs = append(c.segs[:i], c.segs[i+1:]...)
		c.mu.Unlock()
		return
	}
	end, endCall := len(c.after), len(c.afterCalls)
	if len(c.segs) > 1 {
		end, endCall = c.segs[1].off, c.segs[1].call
	}
	calls := c.afterCalls[:endCall]
	c.inflight = append(c.inflight, calls...)
	c.wbuf = append(c.wbuf, c.after[:end]...)
	c.queued += int64(len(calls))
	c.awaiting.Add(int64(len(calls)))
	// Drop the segment and what it held.
	n := copy(c.after, c.after[end:])
	c.after = c.after[:n]
	m := copy(c.afterCalls, c.afterCalls[endCall:])
	clear(c.afterCalls[m:])
	c.afterCalls = c.afterCalls[:m]
	c.segs = append(c.segs[:0], c.segs[1:]...)
	for j := range c.segs {
		c.segs[j].off -= end
		c.segs[j].call -= endCall
	}
	if len(c.segs) == 0 && cap(c.after) > 1<<20 {
		c.after = nil
	}
	if c.writing || len(c.wbuf) == 0 || (c.holdN == 0 && c.awaiting.Load() > c.queued) {
		// The current writer writes them (it sees holdN), or the reader
		// when the replies to what was written come (as in send).
		c.mu.Unlock()
		return
	}
	c.writing = true
	c.writeQueued()
}

// writeBeforeBarrier writes the requests queued before the barrier, at
// once, and waits until they are written: by this goroutine if nobody
// writes to the connection, else by its writer (a sender, the reader, or an
// event loop that holds the connection, which see holdN and write without
// waiting for replies). A writer that holds the connection with nothing
// left to write does not make it wait.
func (c *upConn) writeBeforeBarrier() {
	c.mu.Lock()
	if !c.dead && !c.writing && len(c.wbuf) > 0 {
		c.writing = true
		c.writeQueued() // unlocks
		c.mu.Lock()
	}
	for !c.dead && (c.inWrite || len(c.wbuf) > 0) {
		c.written.Wait()
	}
	c.mu.Unlock()
}

// sendAhead sends requests of the client that raised a barrier on this
// (shared) connection ahead of the barrier: they came before what it holds
// (the command that made the client wait, or the PING that makes sure its
// own earlier commands ran before it moves to a private connection). On a
// connection that no barrier holds it is send.
func (c *upConn) sendAhead(req []byte, calls []*call) {
	c.mu.Lock()
	if c.holdN == 0 || c.dead {
		c.mu.Unlock()
		c.send(req, calls)
		return
	}
	c.inflight = append(c.inflight, calls...)
	if !c.writing && len(c.wbuf) == 0 {
		// Nothing queued: write req without copying it (a large value).
		c.awaiting.Add(int64(len(calls)))
		c.writing = true
		c.writeNow(req)
		return
	}
	c.wbuf = appendBig(c.wbuf, req)
	c.queued += int64(len(calls))
	c.awaiting.Add(int64(len(calls)))
	if c.writing {
		c.mu.Unlock() // the writer writes it (holdN > 0)
		return
	}
	c.writing = true
	c.writeQueued()
}

// takeHeld empties the requests held behind barriers, for a connection
// that died: the caller holds mu, has set dead, and fails the calls.
func (c *upConn) takeHeld() []*call {
	calls := c.afterCalls
	c.after, c.afterCalls = nil, nil
	for j := range c.segs {
		c.segs[j].off, c.segs[j].call = 0, 0
	}
	return calls
}

// isBlocking reports whether a command may block its client in Redis.
func isBlocking(info *cmdInfo, args [][]byte) bool {
	return info.spec != nil && info.spec.Blocks(args)
}

// maxBlockedWait bounds how long endWhenBlocked asks Redis.
const maxBlockedWait = 2 * time.Second

// endWhenBlocked ends barrier h once Redis counts the client whose private
// connection has id among its blocked clients (CLIENT LIST ID, flags b), or
// once h ended otherwise (the command's reply came), asking for at most
// maxBlockedWait over a shared connection, ahead of the barriers.
// A blocking command holds the other clients only until Redis has it
// waiting: from then on, whatever they send finds it there, as it would
// without the proxy.
func (s *Server) endWhenBlocked(h *orderHold, id int64) {
	defer s.pool.endOrder(h)
	req := resp.AppendCommand(nil, []byte("CLIENT"), []byte("LIST"), []byte("ID"), strconv.AppendInt(nil, id, 10))
	for deadline := time.Now().Add(maxBlockedWait); time.Now().Before(deadline); {
		if h.ended.Load() {
			return
		}
		up, err := s.pool.get(context.Background(), 0)
		if err != nil {
			return
		}
		cl := newCall()
		up.sendAhead(req, []*call{cl})
		<-cl.done
		blocked := cl.err != nil || clientListBlocked(cl.reply)
		cl.release()
		if blocked {
			return
		}
	}
}

// clientListBlocked reports whether a CLIENT LIST reply for one client
// shows it blocked (flags b), or is no such reply (an error, an empty list:
// the client is gone, so nothing is left to wait for).
func clientListBlocked(reply []byte) bool {
	i := bytes.Index(reply, []byte(" flags="))
	if i < 0 {
		return true
	}
	flags := reply[i+len(" flags="):]
	if end := bytes.IndexAny(flags, " \r\n"); end >= 0 {
		flags = flags[:end]
	}
	return bytes.IndexByte(flags, 'b') >= 0
}
