package abuse

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"time"
)

// probeEvery is how often a prober starts a round trip (the memory
// part's pinger is one too).
const probeEvery = 10 * time.Millisecond

// probeTimeout bounds one round trip of a prober: longer than a CLIENT
// PAUSE, so that a held reply is a slow round trip, not a failed one.
const probeTimeout = 10 * time.Second

// probeOp is one round trip of a prober on c, number i: nil when the
// reply was right, else what was wrong. An I/O error makes the prober
// dial again for the next round trip.
type probeOp func(c *conn, i int) error

// sample is one round trip: when it started, how long it waited, whether
// it failed.
type sample struct {
	at     time.Time
	d      time.Duration
	failed bool
}

// prober is an innocent client: on its own connection it runs op every
// probeEvery and records each round trip.
type prober struct {
	mu        sync.Mutex
	samples   []sample
	failed    int
	firstFail string
	done      chan struct{}
	stopped   chan struct{}
	stopOnce  sync.Once
}

// startProber starts a prober against addr; name labels its failures. It
// connects, and makes sure with a PING that the server serves the
// connection, before it returns: its round trips are those of a client
// that was there before the load began, as an application's pooled
// connections are (connecting during a flood is measured apart:
// startDialProber). Failing that, it connects at its first round trip.
func startProber(addr, name string, op probeOp) *prober {
	c, err := dial(addr, time.Second, 0)
	switch {
	case err != nil:
		c = nil
	case pingOp(c, 0) != nil:
		c.Close()
		c = nil
	}
	return runProber(addr, name, op, c, false)
}

// startDialProber starts a prober that connects anew for each round trip
// and closes the connection after it: its latencies are those of a client
// that connects during the load, its connection included.
func startDialProber(addr, name string, op probeOp) *prober {
	return runProber(addr, name, op, nil, true)
}

// runProber runs a prober on c (nil: it connects at its first round trip);
// redial: it closes the connection after each round trip.
func runProber(addr, name string, op probeOp, c *conn, redial bool) *prober {
	p := &prober{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(p.stopped)
		defer func() {
			if c != nil {
				c.Close()
			}
		}()
		t := time.NewTicker(probeEvery)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-p.done:
				return
			case <-t.C:
			}
			t0 := time.Now()
			if c == nil {
				var err error
				if c, err = dial(addr, time.Second, 0); err != nil {
					c = nil
					p.record(sample{at: t0, d: time.Since(t0), failed: true}, name, err)
					continue
				}
			}
			err := op(c, i)
			p.record(sample{at: t0, d: time.Since(t0), failed: err != nil}, name, err)
			if _, inStep := err.(replyError); redial || err != nil && !inStep {
				c.Close()
				c = nil
			}
		}
	}()
	return p
}

func (p *prober) record(s sample, name string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples = append(p.samples, s)
	if s.failed {
		p.failed++
		if p.firstFail == "" {
			p.firstFail = fmt.Sprintf("%s: %v", name, err)
		}
	}
}

// stop ends the prober, after the round trip in flight (bounded by
// probeTimeout).
func (p *prober) stop() { p.signal(); <-p.stopped }

// signal tells the prober to stop; it may be called more than once.
func (p *prober) signal() { p.stopOnce.Do(func() { close(p.done) }) }

// window is a span of time: [from, to).
type window struct{ from, to time.Time }

// has reports whether t is in w.
func (w window) has(t time.Time) bool { return !t.Before(w.from) && t.Before(w.to) }

// during summarises the round trips that started in any of ws; no ws:
// all of them.
func (p *prober) during(ws ...window) latencies {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ds []time.Duration
	failed := 0
	for _, s := range p.samples {
		if len(ws) > 0 && !slices.ContainsFunc(ws, func(w window) bool { return w.has(s.at) }) {
			continue
		}
		ds = append(ds, s.d)
		if s.failed {
			failed++
		}
	}
	return summarize(ds, failed)
}

// failures is the number of failed round trips and the first one's text.
func (p *prober) failures() (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed, p.firstFail
}

// probers are the probers of one phase, for their failures together.
type probers []*prober

func (ps probers) stop() {
	for _, p := range ps {
		p.signal()
	}
	for _, p := range ps {
		<-p.stopped
	}
}

// failures sums the probers' failed round trips and gives the first
// prober's first failure.
func (ps probers) failures() (int, string) {
	n, first := 0, ""
	for _, p := range ps {
		f, s := p.failures()
		n += f
		if first == "" {
			first = s
		}
	}
	return n, first
}

// all summarises the round trips of all the probers together.
func (ps probers) all() latencies {
	var ds []time.Duration
	failed := 0
	for _, p := range ps {
		p.mu.Lock()
		for _, s := range p.samples {
			ds = append(ds, s.d)
			if s.failed {
				failed++
			}
		}
		p.mu.Unlock()
	}
	return summarize(ds, failed)
}

// replyError is a wrong reply on a connection that is still in step:
// the prober keeps it.
type replyError struct{ msg string }

func (e replyError) Error() string { return e.msg }

// pingOp sends PING and wants PONG.
func pingOp(c *conn, _ int) error {
	r, err := c.do(probeTimeout, "PING")
	if err != nil {
		return err
	}
	if r.text != "PONG" {
		return replyError{fmt.Sprintf("PING: %c%.60s", r.kind, r.text)}
	}
	return nil
}

// getOp returns an op that GETs key and wants want back.
func getOp(key string, want []byte) probeOp {
	return func(c *conn, _ int) error {
		r, err := c.do(probeTimeout, "GET", key)
		if err != nil {
			return err
		}
		return checkBulk("GET "+key, r, want)
	}
}

// setGetOp returns the op of an innocent writer, number w: SET a value
// of its own (valueFor), then GET it back and compare. It cycles over
// 1,000 keys of its own, so that Redis holds little however long it runs.
func setGetOp(seed uint64, w int) probeOp {
	return func(c *conn, i int) error {
		key, val := keyFor(w, i%1000), valueFor(seed, w, i)
		r, err := c.do(probeTimeout, "SET", key, string(val))
		if err != nil {
			return err
		}
		if r.kind != '+' {
			return replyError{fmt.Sprintf("SET %s: %c%.60s", key, r.kind, r.text)}
		}
		if r, err = c.do(probeTimeout, "GET", key); err != nil {
			return err
		}
		return checkBulk("GET "+key, r, val)
	}
}

// checkBulk wants r to be the bulk string want.
func checkBulk(what string, r reply, want []byte) error {
	switch {
	case r.isError():
		return replyError{fmt.Sprintf("%s: %.60s", what, r.text)}
	case r.null:
		return replyError{what + ": nil"}
	case r.kind != '$' || !bytes.Equal(r.bulk, want):
		return replyError{fmt.Sprintf("%s: %d bytes that are not the value", what, len(r.bulk))}
	}
	return nil
}

// innocentWriters is how many innocent clients SET and GET their own
// values in the flood and hostile parts.
const innocentWriters = 4

// startInnocents starts the innocent writers against the proxy at addr:
// writers numbered from 100 up, apart from the fault part's.
func startInnocents(addr string, seed uint64) probers {
	var ps probers
	for i := range innocentWriters {
		w := 100 + i
		ps = append(ps, startProber(addr, fmt.Sprintf("innocent writer %d", i), setGetOp(seed, w)))
	}
	return ps
}
