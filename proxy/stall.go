package proxy

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/squeeze-kv/squeeze/resp"
)

// Shared connections that Redis holds.
//
// During CLIENT PAUSE WRITE (a failover, a resharding tool), Redis holds a
// connection whose next command writes until the pause ends, and with it
// every command pipelined behind that one. Redis's own clients that only
// read go on being served; but on a shared upstream connection the reads
// of every other client of the proxy queue behind the one held write.
//
// So a watcher (watchStalls) looks at the shared connections while they
// have requests in flight: one that has delivered no reply for stallAfter
// is asked about, on a connection of its own (CLIENT LIST ID): if Redis
// shows it blocked ("b" among its flags: a shared connection never sends a
// blocking command, so only a pause holds it), the connection is parked.
// What it queued and has not written moves to a new connection, which
// takes its place in the pool, unless a client of those requests has one
// written behind the held command (then they stay, and wait with it);
// and each client moves to it once the requests it sent before have their
// replies (client.conn), so its own commands never overtake each other.
// Requests of other clients go to the new connection: Redis serves their
// reads and holds their writes, as it would for them directly. Barriers
// hold parked connections too. A parked connection serves its calls to
// the end and becomes a spare for the next time.

// stallAfter is how long a shared connection with requests in flight may
// deliver no reply before the watcher asks Redis whether it holds it.
const stallAfter = 15 * time.Millisecond

// stallRecheck spaces the questions about one connection.
const stallRecheck = 100 * time.Millisecond

// maxSpares bounds the idle shared connections kept for parking; they
// close after spareIdle unused (a proxy that saw no pause for that long
// holds no more connections than before).
const (
	maxSpares = 2
	spareIdle = time.Second
)

// stallState is what the watcher saw of one shared connection.
type stallState struct {
	conn      *upConn
	delivered uint64
	since     time.Time // delivered last changed, or the connection came
	asked     time.Time
}

// watchStalls runs while the pool is open (see the top of this file).
func (p *pool) watchStalls() {
	var seen []stallState
	var conns []*upConn
	for {
		busy := false
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		conns = append(conns[:0], p.conns...)
		p.mu.Unlock()
		now := time.Now()
		for len(seen) < len(conns) {
			seen = append(seen, stallState{})
		}
		for i, c := range conns {
			st := &seen[i]
			if c == nil || c.isDead() || c.redisID == 0 {
				*st = stallState{}
				continue
			}
			a, d := c.awaiting.Load(), c.delivered.Load()
			busy = busy || a > 0
			if a == 0 || c != st.conn || d != st.delivered {
				*st = stallState{conn: c, delivered: d, since: now, asked: st.asked}
				continue
			}
			if now.Sub(st.since) < stallAfter || now.Sub(st.asked) < stallRecheck {
				continue
			}
			st.asked = now
			if p.heldByRedis(c) {
				p.park(i, c)
			}
		}
		p.recycleParked()
		if busy {
			time.Sleep(stallAfter / 2)
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// heldByRedis asks Redis, on a spare connection, whether it holds c.
func (p *pool) heldByRedis(c *upConn) bool {
	sp, err := p.spare()
	if err != nil {
		return false
	}
	cl := roundtripOn(sp, resp.AppendCommand(nil, []byte("CLIENT"), []byte("LIST"), []byte("ID"), strconv.AppendInt(nil, c.redisID, 10)))
	defer cl.release()
	return cl.err == nil && blockedInList(cl.reply)
}

// blockedInList reports whether a CLIENT LIST reply shows its client
// blocked: "b" among its flags.
func blockedInList(reply []byte) bool {
	v, _, err := resp.ReadValue(reply)
	if err != nil || (v.Type != resp.BulkString && v.Type != resp.Verbatim) {
		return false
	}
	_, rest, ok := bytes.Cut(v.Str, []byte(" flags="))
	if !ok {
		return false
	}
	flags, _, _ := bytes.Cut(rest, []byte(" "))
	return bytes.IndexByte(flags, 'b') >= 0
}

// spare returns an idle shared connection, dialing one if there is none.
func (p *pool) spare() (*upConn, error) {
	p.mu.Lock()
	for len(p.spares) > 0 {
		sp := p.spares[len(p.spares)-1]
		if !sp.isDead() {
			p.spareAt = time.Now()
			p.mu.Unlock()
			return sp, nil
		}
		p.spares = p.spares[:len(p.spares)-1]
	}
	p.mu.Unlock()
	sp, err := p.srv.dialUp(context.Background(), nil)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		sp.close()
		return nil, ErrServerClosed
	}
	p.spares = append(p.spares, sp)
	p.spareAt = time.Now()
	return sp, nil
}

// park moves c, which Redis holds, out of place i for a spare. What c
// queued and has not written moves to the spare first, when none of its
// clients has a request written on c (behind the held command); else it
// stays, and goes to Redis behind the held command when its reply comes.
// Not while a barrier is raised: a connection that joins the pool then
// would not hold what the barrier must (a later tick parks it).
func (p *pool) park(i int, c *upConn) {
	if p.order.up.Load() > 0 {
		return
	}
	p.mu.Lock()
	if p.closed || i >= len(p.conns) || p.conns[i] != c || len(p.spares) == 0 {
		p.mu.Unlock()
		return
	}
	sp := p.spares[len(p.spares)-1]
	p.spares = p.spares[:len(p.spares)-1]
	p.mu.Unlock()
	req, calls := c.takeQueueIfFree()
	p.mu.Lock()
	if len(calls) > 0 {
		// Under the pool's lock: no client can reach sp before them.
		sp.send(req, calls)
	}
	if p.closed || p.conns[i] != c {
		p.spares = append(p.spares, sp)
		p.mu.Unlock()
		return
	}
	p.conns[i] = sp
	p.parked = append(p.parked, c)
	p.mu.Unlock()
	moved := len(calls)
	p.srv.metrics.parked()
	p.srv.logger().Info("Redis holds a shared upstream connection (a CLIENT PAUSE?): other clients' commands go on a new one meanwhile",
		"still_awaiting", c.awaiting.Load(), "moved", moved)
}

// takeQueueIfFree takes the requests queued on c and not written, with
// their calls, when no client of theirs has an earlier request of its
// own still unanswered (written on c: moving its later ones would make
// them overtake it). Nil when they stay: c writes them, or someone
// writes to c, or the set changed while it looked.
func (c *upConn) takeQueueIfFree() ([]byte, []*call) {
	c.mu.Lock()
	n := c.queued
	if c.dead || c.writing || c.inWrite || c.holdN > 0 || n == 0 || len(c.inflight) < int(n) {
		c.mu.Unlock()
		return nil, nil
	}
	c.writing = true // nobody writes the queue while we look
	calls := slices.Clone(c.inflight[len(c.inflight)-int(n):])
	c.mu.Unlock()
	free := callsFree(calls)
	c.mu.Lock()
	tail := c.inflight[max(0, len(c.inflight)-int(n)):]
	if !free || c.dead || c.queued != n || !slices.Equal(tail, calls) {
		c.writing = false
		c.written.Broadcast()
		c.mu.Unlock()
		return nil, nil
	}
	req := bytes.Clone(c.wbuf)
	c.wbuf = c.wbuf[:0]
	c.queued = 0
	clear(tail)
	c.inflight = c.inflight[:len(c.inflight)-int(n)]
	c.awaiting.Add(-n)
	// Gone to another connection: nothing waits for them here
	// (awaitTaken; the written.Broadcast below wakes it).
	c.delivered.Add(uint64(n))
	c.writing = false
	c.written.Broadcast()
	c.mu.Unlock()
	return req, calls
}

// callsFree reports whether each call's client has no other unanswered
// call than those in calls (round trips, which have no client in the
// call, never are).
func callsFree(calls []*call) bool {
	for _, cl := range calls {
		o := cl.owner
		if o == nil {
			return false
		}
		o.q.mu.Lock()
		tied := false
		for _, x := range o.q.calls[o.q.head:] {
			if !x.local && !x.ready.Load() && !slices.Contains(calls, x) {
				tied = true
				break
			}
		}
		o.q.mu.Unlock()
		if tied {
			return false
		}
	}
	return true
}

// recycleParked makes parked connections whose calls have all had their
// replies spares again (up to maxSpares; the others stay parked until
// their clients move on), and closes spares unused for spareIdle.
func (p *pool) recycleParked() {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.parked[:0]
	for _, c := range p.parked {
		switch {
		case c.isDead():
		case c.awaiting.Load() > 0:
			kept = append(kept, c)
		case len(p.spares) < maxSpares:
			p.spares = append(p.spares, c)
			p.spareAt = time.Now()
		default:
			// A client that sent on it last has had every reply: it
			// moves to the pool's connection with its next request.
			kept = append(kept, c)
		}
	}
	clear(p.parked[len(kept):])
	p.parked = kept
	if len(p.spares) > 0 && time.Since(p.spareAt) > spareIdle {
		for _, c := range p.spares {
			c.close() // dead first: a client that sent on it last moves on (sharedConn)
		}
		clear(p.spares)
		p.spares = p.spares[:0]
	}
}

// conn returns the shared connection for the client's next batch: the
// pool's, unless the client sent its last requests on another one that
// still owes it replies (a parked one), where its next ones must follow.
func (c *client) sharedConn() (*upConn, error) {
	up, err := c.s.pool.get(context.Background(), int(c.id))
	if err != nil {
		return nil, err
	}
	if prev := c.in.sharedUp; prev != nil && prev != up && !prev.isDead() && c.owesBefore(len(c.in.batch)) {
		return prev, nil
	}
	c.in.sharedUp = up
	return up, nil
}

// owesBefore reports whether a call queued before the last n (the batch
// about to be sent) still waits for its reply. Command reader only.
func (c *client) owesBefore(n int) bool {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	for _, cl := range c.q.calls[c.q.head : len(c.q.calls)-min(n, len(c.q.calls)-c.q.head)] {
		if !cl.local && !cl.ready.Load() {
			return true
		}
	}
	return false
}
