package proxy

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
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
	pool    *pool
	ticket  uint64
	conns   []*upConn
	scope   *reqScope // what its command touches; nil: anything (orderscope.go)
	awaited bool      // awaitOrder returned: it is this barrier's turn
	// turn is signalled when it is this barrier's turn (or it ended),
	// made by awaitOrder when it must wait, under orderState.mu: only the
	// new oldest barrier wakes when one ends, not every waiter.
	turn  chan struct{}
	taken bool        // awaitOrderTaken returned
	ended atomic.Bool // endOrder ran
	// behindHeld: requests held when it was raised touch what its
	// command touches; it waits for every barrier raised before it.
	behindHeld bool
	// parts counts what must be taken before the barrier ends when it
	// covers several batches of one read (client.sendPrivate): each batch
	// sent under it, and the goroutine's own while more may follow; 0:
	// the barrier ends at its first end (endPart).
	parts atomic.Int32
}

// endPart ends one part of h (see parts): h ends with its last, or at
// once when it has none.
func (h *orderHold) endPart() {
	if h != nil && h.parts.Add(-1) <= 0 {
		h.end()
	}
}

// end lowers h (pool.endOrder); nil does nothing.
func (h *orderHold) end() {
	if h != nil {
		h.pool.endOrder(h)
	}
}

// afterSeg is the part of a connection's held requests (upConn.after) that
// came while barrier ticket was the newest: from off (afterCalls from
// calls) to the next segment.
type afterSeg struct {
	ticket    uint64
	off, call int
	// key and anyN: where the segment's scopes start in afterKeys, and
	// how many held batches of unknown keys came before it (afterAny).
	key, anyN int
}

// orderState keeps the barriers in the order they were raised: a barrier's
// owner writes its command only once every earlier barrier has ended, so
// that two commands that both wait (two clients' BRPOPLPUSH) reach Redis in
// the order they came, too.
type orderState struct {
	mu     sync.Mutex
	next   uint64
	active []*orderHold // raised and not ended, oldest first
	// headSince is when active[0] became the oldest; sweeping: a sweep
	// goroutine runs (sweepOrder).
	headSince time.Time
	sweeping  bool
	// up counts the barriers raised: while none is, batches do not note
	// their keys (reqScope.note). held are the keys they and the requests
	// they hold touch.
	up   atomic.Int32
	held heldKeys
	// blocked counts the blocking commands sent on private connections
	// and not answered yet (call.blocker), anyUp the barriers raised
	// that hold everything (a blocking command's among them, before it is
	// sent): while there are either, a command that may serve a blocked
	// one (rediscmd.Spec.Wakes) touches anything (mayWake).
	blocked atomic.Int32
	anyUp   atomic.Int32
	// expired counts the barriers the sweeper ended (sweepOrder).
	expired atomic.Uint64
	// heldCalls counts the requests held behind barriers, on every
	// shared connection (orders).
	heldCalls atomic.Int32
}

// mayWake reports whether a command that wakes blocked clients may serve
// one now, or one that is on its way to block.
func (o *orderState) mayWake() bool { return o.blocked.Load() > 0 || o.anyUp.Load() > 0 }

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
func (p *pool) raiseOrder() *orderHold { return p.raiseOrderFor(nil) }

// raiseOrderFor is raiseOrder for a command that touches scope (nil:
// anything): requests that touch none of its keys pass it (orderscope.go).
func (p *pool) raiseOrderFor(scope *reqScope) *orderHold {
	o := &p.order
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next++
	h := &orderHold{pool: p, ticket: o.next, scope: scope}
	// A request held now that its command conflicts with runs before it;
	// it leaves when the barrier it waits behind (maybe on other keys)
	// ends, and the earlier ones: so this one waits for every earlier
	// barrier. (Reads passing reads, a client's LLEN, on a private
	// connection, ran before another client's LPUSH held behind a barrier
	// on other keys; a GETRANGE before a SET held behind a GET's.)
	h.behindHeld = o.heldCalls.Load() > 0 && o.held.holds(scope)
	o.held.add(scope)
	o.up.Add(1)
	if !h.keyed() {
		o.anyUp.Add(1)
	}
	if len(o.active) == 0 {
		o.headSince = time.Now()
	}
	o.active = append(o.active, h)
	if !o.sweeping {
		o.sweeping = true
		go p.sweepOrder()
	}
	p.mu.Lock()
	for _, c := range p.conns {
		if c != nil {
			h.conns = append(h.conns, c)
		}
	}
	h.conns = append(h.conns, p.parked...) // clients still send there (stall.go)
	p.mu.Unlock()
	live := h.conns[:0]
	for _, c := range h.conns {
		c.mu.Lock()
		if !c.dead {
			c.segs = append(c.segs, afterSeg{h.ticket, len(c.after), len(c.afterCalls), len(c.afterKeys), c.afterAny})
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
	for o.waitsFor(h) && !h.ended.Load() {
		if h.turn == nil {
			h.turn = make(chan struct{}, 1)
		}
		o.mu.Unlock()
		<-h.turn
		o.mu.Lock()
	}
	o.mu.Unlock()
	for _, c := range h.conns {
		c.writeBeforeBarrier()
	}
	h.awaited = true
}

// awaitOrderTaken is awaitOrder for a command that goes on a private
// connection: it also waits until Redis has answered what the shared
// connections sent before it (upConn.awaitTaken).
func (p *pool) awaitOrderTaken(h *orderHold) {
	if !h.awaited {
		p.awaitOrder(h)
	}
	if h.taken {
		return
	}
	for _, c := range h.conns {
		c.awaitTaken()
	}
	h.taken = true
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
	o.held.releaseScope(h.scope)
	o.up.Add(-1)
	if !h.keyed() {
		o.anyUp.Add(-1)
	}
	for i, t := range o.active {
		if t == h {
			if i == 0 {
				o.headSince = time.Now()
			}
			copy(o.active[i:], o.active[i+1:])
			o.active[len(o.active)-1] = nil
			o.active = o.active[:len(o.active)-1]
			break
		}
	}
	// Wake the barriers that waited for h (their turn may have come),
	// and h if it still waits (the sweeper ended it).
	for _, t := range o.active {
		if t.turn != nil && (t.behindHeld || t.scope.overlaps(h.scope)) && !o.waitsFor(t) {
			t.signalTurn()
		}
	}
	h.signalTurn()
	o.mu.Unlock()
}

// sweepOrder ends the oldest barrier once it has been the oldest for
// maxOrderHold: a command whose taking Redis does not show soon (it waits
// behind a pause, runs long, or its confirmation never comes) holds the
// other clients no longer than that; what comes after it is then ordered
// as it reaches Redis. It runs while barriers are raised.
func (p *pool) sweepOrder() {
	o := &p.order
	for {
		o.mu.Lock()
		if len(o.active) == 0 {
			o.sweeping = false
			o.mu.Unlock()
			return
		}
		head, wait := o.active[0], time.Until(o.headSince.Add(maxOrderHold))
		o.mu.Unlock()
		if wait <= 0 {
			if !head.ended.Load() {
				o.expired.Add(1)
				if p.srv != nil {
					p.srv.metrics.orderExpired()
				}
			}
			p.endOrder(head)
			continue
		}
		time.Sleep(min(wait, maxOrderHold/4))
	}
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
	end, endCall, endKey, endAny := len(c.after), len(c.afterCalls), len(c.afterKeys), c.afterAny
	if len(c.segs) > 1 {
		next := c.segs[1]
		end, endCall, endKey, endAny = next.off, next.call, next.key, next.anyN
	}
	calls := c.afterCalls[:endCall]
	c.releaseHeld(calls, endKey, endAny)
	c.inflight = append(c.inflight, calls...)
	c.queuedTotal += uint64(len(calls))
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
		c.segs[j].key -= endKey
		c.segs[j].anyN -= endAny
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
// left to write does not make it wait. The barrier may end meanwhile (the
// sweeper ends one that was the oldest too long, and a barrier raised for
// input that came may have ended before its goroutine adopted it): the
// writer wakes this goroutine all the same (writeWait), where waking it
// only while a barrier was raised left it waiting for good once the last
// one had ended, with its client's batch unsent.
func (c *upConn) writeBeforeBarrier() {
	c.mu.Lock()
	c.writeWait++
	for !c.dead && (c.inWrite || len(c.wbuf) > 0) {
		if !c.writing && !c.inWrite {
			c.writing = true
			c.writeQueued() // unlocks
			c.mu.Lock()
			continue
		}
		c.written.Wait()
	}
	c.writeWait--
	c.mu.Unlock()
}

// wakeWriteWaiters wakes the goroutines that wait for a writer to stop:
// while a barrier is raised, or one waits in writeBeforeBarrier. Under mu.
func (c *upConn) wakeWriteWaiters() {
	if c.holdN > 0 || c.writeWait > 0 {
		c.written.Broadcast()
	}
}

// sendAhead sends requests of the client that raised a barrier on this
// (shared) connection ahead of the barrier: they came before what it holds
// (the command that made the client wait, or the PING that makes sure its
// own earlier commands ran before it moves to a private connection). On a
// connection that no barrier holds it is send. Like send, it leaves a
// request under 32 KiB to the reader while earlier ones await replies, to
// go with those of other clients in one write; a larger one, which it
// would copy, goes at once if nobody writes.
func (c *upConn) sendAhead(req []byte, calls []*call) {
	c.mu.Lock()
	if c.holdN == 0 || c.dead {
		c.mu.Unlock()
		c.send(req, calls)
		return
	}
	c.inflight = append(c.inflight, calls...)
	c.queuedTotal += uint64(len(calls))
	if !c.writing && len(c.wbuf) == 0 && (c.awaiting.Load() <= c.queued || len(req) >= forwardAsIsMin) {
		// Nothing queued: write req without copying it (a large value).
		c.awaiting.Add(int64(len(calls)))
		c.writing = true
		c.writeNow(req)
		return
	}
	c.wbuf = appendBig(c.wbuf, req)
	c.queued += int64(len(calls))
	c.awaiting.Add(int64(len(calls)))
	if c.writing || len(req) < forwardAsIsMin && c.awaiting.Load() > c.queued {
		// The writer writes it (holdN > 0), or the reader once the
		// replies to what was written come, together with what other
		// clients send meanwhile, as send does: written at once, each
		// went alone, and 50 clients that pipeline STRLEN of one key
		// cost Redis twice the CPU a request.
		c.mu.Unlock()
		return
	}
	c.writing = true
	c.writeQueued()
}

// takeHeld empties the requests held behind barriers, for a connection
// that died: the caller holds mu, has set dead, and fails the calls.
func (c *upConn) takeHeld() []*call {
	calls := c.afterCalls
	c.releaseHeld(calls, len(c.afterKeys), c.afterAny)
	c.after, c.afterCalls = nil, nil
	for j := range c.segs {
		c.segs[j] = afterSeg{ticket: c.segs[j].ticket}
	}
	return calls
}

// holdBatch holds a batch behind the barriers (send): its bytes, its calls
// and its keys, noted by passOrHold, until endSeg releases them. Under mu.
func (c *upConn) holdBatch(req []byte, calls []*call, s *reqScope) {
	c.after = append(c.after, req...)
	c.afterCalls = append(c.afterCalls, calls...)
	if s == nil || s.any {
		c.afterAny++
	} else {
		c.afterKeys = append(c.afterKeys, s.keys...)
	}
	for _, cl := range calls {
		if cl.owner != nil {
			cl.owner.pinned.heldBack.Add(1)
		}
	}
	if c.srv != nil && c.srv.pool != nil {
		c.srv.pool.order.heldCalls.Add(int32(len(calls)))
	}
}

// releaseHeld forgets the keys of the first calls held, the first nKeys
// of afterKeys and nAny batches of unknown keys, as they leave the held
// requests. Under mu.
func (c *upConn) releaseHeld(calls []*call, nKeys, nAny int) {
	for _, cl := range calls {
		if cl.owner != nil {
			cl.owner.pinned.heldBack.Add(-1)
		}
	}
	if c.srv == nil || c.srv.pool == nil {
		return
	}
	c.srv.pool.order.heldCalls.Add(-int32(len(calls)))
	c.srv.pool.order.held.release(c.afterKeys[:nKeys], nAny)
	c.afterKeys = c.afterKeys[:copy(c.afterKeys, c.afterKeys[nKeys:])]
	c.afterAny -= nAny
}

// isBlocking reports whether a command may block its client in Redis.
func isBlocking(info *cmdInfo, args [][]byte) bool {
	return info.spec != nil && info.spec.Blocks(args)
}

// maxOrderHold bounds how long a barrier holds the others as the oldest
// (sweepOrder).
const maxOrderHold = 250 * time.Millisecond

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

// batchTail is how Redis will show that it took the last command of a
// client's batch (client.endWhenTaken): the reply to last, the last call
// of the batch, unless commands without a reply came after it; confirms:
// the last is a subscription command that gets no reply (RESP2 relay,
// RESP3), whose confirmation shows it; silent: it gets nothing at all.
// blocks counts the batch's blocking commands. The command reader's,
// noted as commands are handled (client.noteTail), emptied by flush.
type batchTail struct {
	last     *call
	blocks   int
	confirms bool
	silent   bool
}

// noteTail notes how Redis will show it took the command just handled,
// which has call cl (nil: it gets no reply). Command reader only.
func (c *client) noteTail(p *plan, cl *call) {
	t := &c.in.tail
	if p.blocking && cl != nil && !p.queued && (c.pinned.conn != nil || p.pin) {
		t.blocks++
		cl.blocker = true
		c.pinned.blockers.Add(1)
		c.s.pool.order.blocked.Add(1)
	}
	switch {
	case cl != nil:
		t.last, t.confirms, t.silent = cl, false, false
		if p.confirmsAfter > 0 {
			c.pinned.confirms.owe(confirmSub, familyOf(p.info.name), p.confirmsAfter)
		}
	case p.confirms > 0:
		kind := confirmSub
		if p.info.flags&rediscmd.Unsubscribe != 0 {
			kind = confirmUnsub
		}
		n := p.confirms
		if p.confirmsEach {
			n = -1 // one per subscription the client has then
		}
		c.pinned.confirms.owe(kind, familyOf(p.info.name), n)
		t.confirms, t.silent = true, false
	case p.relayReply:
		// Its reply is relayed, not a call's: the first relayed reply
		// after the confirmations owed before it shows Redis took it.
		// (Ended once written, a PUBLISH sent after UNSUBSCRIBE let
		// another client's SUBSCRIBE, sent later on another connection,
		// run first: order scenes, seed 103.)
		c.pinned.confirms.owe(confirmReply, famChannel, 1)
		t.confirms, t.silent = true, false
	default:
		t.silent, t.confirms = true, false
	}
}

// confirmations are what a client's subscription commands that get no
// reply (in the RESP2 relay, or RESP3 where push messages confirm them)
// still owe, oldest first: Redis confirms each channel of such a command,
// and the first confirmation shows that Redis took the command, which
// ends the barrier armed on it. An UNSUBSCRIBE without channels (or
// PUNSUBSCRIBE, SUNSUBSCRIBE) owes one confirmation per subscription of
// its family the client has when Redis runs it, one if none: the
// confirmations, which come in the order Redis ran the commands, tell
// how many (each names the count left), so it is sized at its first.
// (Owing one, the others counted for the commands after it and ended
// their barriers before Redis had taken them.) Another command sent in
// the RESP2 relay owes its reply, relayed too (plan.relayReply): the
// first relayed message that is neither a confirmation nor a published
// message. (A MONITOR line counts as one: a command a monitoring client
// sends may end its barrier at the line before its reply.)
type confirmations struct {
	mu   sync.Mutex
	owed []confirmOwed
	// subs are the client's subscriptions by family, as the last
	// confirmation counted them (track).
	subs [3]int64
	// changed is closed, and forgotten, when an owed entry is settled or
	// dropped (awaitOwed); nil while nobody waits.
	changed chan struct{}
}

type confirmOwed struct {
	kind confirmKind
	fam  subFamily
	// left: the confirmations still owed; all: an unsubscription of
	// every subscription of fam, sized at its first (left < 0 until).
	left int
	all  bool
	h    *orderHold
}

// owe notes a command that owes n confirmations of kind, of subscriptions
// of family fam; n < 0: one per subscription of fam the client has when
// Redis runs it (an unsubscription without names). Command reader only.
func (cs *confirmations) owe(kind confirmKind, fam subFamily, n int) {
	cs.mu.Lock()
	cs.owed = append(cs.owed, confirmOwed{kind: kind, fam: fam, left: n, all: n < 0})
	cs.mu.Unlock()
}

// arm makes the first confirmation of the last command noted end h, or
// the part of it that the batch is (parts, client.sendPrivate).
func (cs *confirmations) arm(h *orderHold) {
	cs.mu.Lock()
	if n := len(cs.owed); n > 0 && cs.owed[n-1].h == nil {
		cs.owed[n-1].h = h
		h = nil
	}
	cs.mu.Unlock()
	h.endPart() // nothing owed: the confirmation came already
}

// drop forgets what is owed, lowering the barriers armed on it: the client
// left, and its private connection with it. Client's goroutine only.
func (cs *confirmations) drop() {
	cs.mu.Lock()
	owed := cs.owed
	cs.owed = nil
	cs.wakeLocked()
	cs.mu.Unlock()
	for _, e := range owed {
		e.h.end()
	}
}

// confirmed counts a confirmation that came: the oldest command that owes
// one of its kind is owed one fewer (confirmations of another kind belong
// to a reply the proxy reads as such), and the client's subscriptions are
// counted anew (track). The private connection's reader.
func (cs *confirmations) confirmed(cf confirmation) {
	var h *orderHold
	cs.mu.Lock()
	if len(cs.owed) > 0 && (cs.owed[0].kind == cf.kind || cf.kind == confirmRefused) {
		e := &cs.owed[0]
		if e.left < 0 {
			// Redis confirms each subscription the client had, or once.
			e.left = int(max(1, cs.subs[e.fam]))
		}
		h, e.h = e.h, nil
		if e.left--; e.left <= 0 || cf.kind == confirmRefused {
			n := copy(cs.owed, cs.owed[1:])
			cs.owed[n] = confirmOwed{}
			cs.owed = cs.owed[:n]
			cs.wakeLocked()
		}
	}
	cs.trackLocked(cf)
	cs.mu.Unlock()
	h.endPart() // the part of its batch (client.sendPrivate)
}

// awaitOwed waits until nothing is owed any more, or closed is closed
// (the private connection ended), for at most maxOrderHold: a
// confirmation that never comes (Redis holds the command, or the proxy
// misread one) leaves the client where it was before this wait, not stuck.
// Command reader only.
func (cs *confirmations) awaitOwed(closed <-chan struct{}) {
	var timeout <-chan time.Time
	for {
		cs.mu.Lock()
		if len(cs.owed) == 0 {
			cs.mu.Unlock()
			return
		}
		if cs.changed == nil {
			cs.changed = make(chan struct{})
		}
		ch := cs.changed
		cs.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(maxOrderHold)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ch:
		case <-closed:
			return
		case <-timeout:
			return
		}
	}
}

// wakeLocked wakes awaitOwed. Under mu.
func (cs *confirmations) wakeLocked() {
	if cs.changed != nil {
		close(cs.changed)
		cs.changed = nil
	}
}

// track counts the client's subscriptions anew from a confirmation that
// is the reply of a call (a RESP2 SUBSCRIBE entering the relay), which
// owes nothing. The private connection's reader.
func (cs *confirmations) track(cf confirmation) {
	cs.mu.Lock()
	cs.trackLocked(cf)
	cs.mu.Unlock()
}

func (cs *confirmations) trackLocked(cf confirmation) {
	if cf.count < 0 || cf.kind != confirmSub && cf.kind != confirmUnsub {
		return
	}
	switch cf.fam {
	case famShard: // counted alone
		cs.subs[famShard] = cf.count
	case famPattern: // the count is of channels and patterns together
		cs.subs[famPattern] = max(0, cf.count-cs.subs[famChannel])
	default:
		cs.subs[famChannel] = max(0, cf.count-cs.subs[famPattern])
	}
}

// subFamily is the kind of subscription a command names: channels
// (SUBSCRIBE), patterns (PSUBSCRIBE) or shard channels (SSUBSCRIBE).
type subFamily uint8

const (
	famChannel subFamily = iota
	famPattern
	famShard
)

// familyOf is the family of subscriptions a subscription command changes.
func familyOf(name string) subFamily {
	switch name {
	case "PSUBSCRIBE", "PUNSUBSCRIBE":
		return famPattern
	case "SSUBSCRIBE", "SUNSUBSCRIBE":
		return famShard
	}
	return famChannel
}

// confirmation is what a message from a private connection confirms
// (confirmationOf).
type confirmation struct {
	kind confirmKind
	fam  subFamily
	// count: the subscriptions the client has after it, of channels and
	// patterns together, or of shard channels; -1: not a count.
	count int64
}

// confirmationOf returns what a message from a private connection (a
// RESP2 relayed reply, a RESP3 push) confirms: a subscription (confirmSub)
// or its end (confirmUnsub), from the first element of the array or push
// (subscribe, unsubscribe, or their pattern or shard forms), with the
// count of subscriptions left, its third; an error reply, the refusal of
// such a command (confirmRefused); else confirmNone.
func confirmationOf(msg []byte) confirmation {
	cf := confirmation{count: -1}
	if len(msg) > 0 && msg[0] == '-' {
		cf.kind = confirmRefused
		return cf
	}
	if len(msg) == 0 {
		return cf
	}
	if msg[0] != '*' && msg[0] != '>' {
		cf.kind = confirmReply
		return cf
	}
	v, _, err := resp.ReadValue(msg)
	if err != nil {
		return cf
	}
	it := v.Elements()
	name, _ := it.Next()
	if v.N < 1 || name.Type != resp.BulkString {
		cf.kind = confirmReply // an array reply
		return cf
	}
	if isPublished(name.Str) {
		return cf
	}
	if v.N != 3 || len(name.Str) < 9 || len(name.Str) > 12 {
		cf.kind = confirmReply // PING's pong in the relay, an array reply
		return cf
	}
	var lower [12]byte
	n := copy(lower[:], name.Str)
	for i, b := range lower[:n] {
		if 'A' <= b && b <= 'Z' {
			lower[i] = b + 'a' - 'A'
		}
	}
	word := string(lower[:n]) // no allocation: compared and dropped
	switch word {
	case "subscribe", "unsubscribe":
		cf.fam = famChannel
	case "psubscribe", "punsubscribe":
		cf.fam = famPattern
	case "ssubscribe", "sunsubscribe":
		cf.fam = famShard
	default:
		cf.kind = confirmReply
		return cf
	}
	cf.kind = confirmSub
	if strings.Contains(word, "unsub") {
		cf.kind = confirmUnsub
	}
	it.Next()
	if count, ok := it.Next(); ok && count.Type == resp.Integer {
		if c, ok := resp.ParseInt(count.Str); ok {
			cf.count = c
		}
	}
	return cf
}

// isPublished reports whether name, the first element of a relayed
// array or a push, makes it a published message (message, pmessage,
// smessage), which confirms nothing.
func isPublished(name []byte) bool {
	switch len(name) {
	case 7:
		return bytes.EqualFold(name, []byte("message"))
	case 8:
		return bytes.EqualFold(name, []byte("pmessage")) || bytes.EqualFold(name, []byte("smessage"))
	}
	return false
}

// confirmKind is what a confirmation confirms (confirmationOf).
type confirmKind uint8

const (
	confirmNone confirmKind = iota
	confirmSub
	confirmUnsub
	confirmRefused // an error reply: Redis took the command and refused it
	// confirmReply: a relayed reply other than a subscription's
	// confirmation or a published message, the reply of a command in the
	// relay (relayReply).
	confirmReply
)

// awaitTaken waits until Redis has answered every request queued on c so
// far (c a shared connection): the requests of other clients written
// before a barrier's command, which goes on a private connection
// (sendPrivate). Written is not enough there either: Redis reads its
// sockets in an order of its own, and a GET sent on a private connection
// right after another client's SET was written on the shared one ran
// first in about one round of six. Nothing to wait for costs a lock.
func (c *upConn) awaitTaken() {
	c.mu.Lock()
	target := c.queuedTotal
	if c.delivered.Load() < target {
		c.takenWait.Add(1)
		for !c.dead && c.delivered.Load() < target {
			c.written.Wait()
		}
		c.takenWait.Add(-1)
	}
	c.mu.Unlock()
}

// signalTurn wakes h's awaitOrder, if it waits. Under orderState.mu.
func (h *orderHold) signalTurn() {
	if h.turn != nil {
		select {
		case h.turn <- struct{}{}:
		default:
		}
	}
}

// waitsFor reports whether h must wait for a barrier raised before it:
// one that touches what h's command touches (all of them, when either
// touches anything: orderscope.go). Under orderState.mu.
func (o *orderState) waitsFor(h *orderHold) bool {
	for _, t := range o.active {
		if t == h {
			return false
		}
		if h.behindHeld || t.scope.conflicts(h.scope) {
			return true
		}
	}
	return false // ended
}
