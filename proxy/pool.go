package proxy

import (
	"context"
	"sync"
	"time"
)

// pool holds the shared upstream connections and redials dead ones.
type pool struct {
	srv   *Server
	mu    sync.Mutex
	conns []*upConn
	// byDB are connections to other databases than the URL's, for the
	// reads the proxy makes on behalf of clients that selected one.
	byDB map[int]*upConn
	// streams are idle connections for large values passed on as they
	// arrive (stream.go).
	streams []*upConn
	// spares are idle shared connections for the stall watcher, parked
	// those Redis held, which still serve their calls (stall.go);
	// watching: the watcher runs.
	spares, parked []*upConn
	watching       bool
	// spareAt is when a spare was last taken or kept: spares idle for
	// spareIdle close (recycleParked).
	spareAt time.Time
	// closed is set by closeAll: no connection is dialed after it.
	closed bool
	// order keeps the order barriers (proxy/order.go).
	order orderState
}

// getDB returns a live shared connection to database db.
func (p *pool) getDB(ctx context.Context, db, i int) (*upConn, error) {
	if db == p.srv.up.DB {
		return p.get(ctx, i)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrServerClosed
	}
	if c := p.byDB[db]; c != nil && !c.isDead() {
		return c, nil
	}
	c, err := p.srv.dialUpAs(ctx, nil, true, db)
	if err != nil {
		return nil, err
	}
	if p.byDB == nil {
		p.byDB = map[int]*upConn{}
	}
	p.byDB[db] = c
	return c, nil
}

// get returns live shared connection i, dialing it if needed.
func (p *pool) get(ctx context.Context, i int) (*upConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrServerClosed
	}
	i %= len(p.conns)
	if c := p.conns[i]; c != nil && !c.isDead() {
		return c, nil
	}
	c, err := p.srv.dialUp(ctx, nil)
	if err != nil {
		return nil, err
	}
	p.conns[i] = c
	if !p.watching {
		p.watching = true
		go p.watchStalls()
	}
	return c, nil
}

// holdWrites makes the caller the writer of every live shared connection
// that nobody is writing to, so that what clients send meanwhile collects
// in the connections' queues: an event loop holds them while it handles
// the clients that are ready, then releases them, and the requests of all
// those clients reach Redis in one write per connection.
// It appends them to held.
func (p *pool) holdWrites(by *poller, held []*upConn) []*upConn {
	p.mu.Lock()
	for _, c := range p.conns {
		if c == nil {
			continue
		}
		c.mu.Lock()
		if !c.dead && !c.writing {
			c.writing, c.heldBy = true, by
			held = append(held, c)
		}
		c.mu.Unlock()
	}
	p.mu.Unlock()
	return held
}

// releaseWrites ends holdWrites: each connection writes what was queued,
// unless earlier requests still await their replies, in which case its
// reader writes the queue when they come (as send does).
func (p *pool) releaseWrites(held []*upConn) {
	for _, c := range held {
		c.mu.Lock()
		c.heldBy = nil
		if len(c.wbuf) > 0 && (c.awaiting.Load() <= c.queued || c.holdN > 0) {
			c.writeQueued() // unlocks
			continue
		}
		c.writing = false
		c.wakeWriteWaiters()
		c.mu.Unlock()
	}
}

// maxHeldCalls bounds the calls an event loop lets queue on a held
// connection, far below the depth of its queue of calls in flight.
const maxHeldCalls = 8192

// queuedTooMany reports whether a held connection queued maxHeldCalls.
func queuedTooMany(held []*upConn) bool {
	for _, c := range held {
		c.mu.Lock()
		n := c.queued
		c.mu.Unlock()
		if n >= maxHeldCalls {
			return true
		}
	}
	return false
}

// failAll fails every shared connection with err; the next get dials anew.
func (p *pool) failAll(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.conns {
		if c != nil {
			c.fail(err)
			p.conns[i] = nil
		}
	}
	for db, c := range p.byDB {
		c.fail(err)
		delete(p.byDB, db)
	}
	for _, c := range p.streams {
		c.fail(err)
	}
	p.streams = nil
	for _, c := range append(p.spares, p.parked...) {
		c.fail(err)
	}
	p.spares, p.parked = nil, nil
}

func (p *pool) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for i, c := range p.conns {
		if c != nil {
			c.close()
			p.conns[i] = nil
		}
	}
	for db, c := range p.byDB {
		c.close()
		delete(p.byDB, db)
	}
	for _, c := range p.streams {
		c.close()
	}
	p.streams = nil
	for _, c := range append(p.spares, p.parked...) {
		c.close()
	}
	p.spares, p.parked = nil, nil
}
