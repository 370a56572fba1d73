package proxy

import (
	"bytes"
	"net"
	"testing"

	"github.com/squeeze-kv/squeeze/internal/bufpool"
)

// gatedConn is a net.Conn whose writes wait for the test: each Write
// announces itself on started, waits on proceed, and then records what
// its buffer holds at that moment.
type gatedConn struct {
	net.Conn
	started, proceed chan struct{}
	written          [][]byte
}

func (g *gatedConn) Write(p []byte) (int, error) {
	g.started <- struct{}{}
	<-g.proceed
	g.written = append(g.written, bytes.Clone(p))
	return len(p), nil
}

// began returns how each write began, for messages.
func (g *gatedConn) began() []string {
	var got []string
	for _, w := range g.written {
		got = append(got, string(w[:min(len(w), 8)]))
	}
	return got
}

// appendWhileWriting lets the write under way wait while a sender queues
// s on c, then lets it and the write of s go, and waits for done.
func appendWhileWriting(c *upConn, g *gatedConn, s string, done chan struct{}) {
	<-g.started
	c.mu.Lock()
	c.wbuf = append(c.wbuf, s...)
	c.mu.Unlock()
	g.proceed <- struct{}{}
	<-g.started // writing s
	g.proceed <- struct{}{}
	<-done
}

// TestUpConn_WriteQueuedLargeKeepsSpareApart: once a queue of over 1 MiB
// is written and goes back to the free lists, the next queue is written
// from a buffer no sender appends to. The spare buffer had just become the
// queue and stayed the spare as well, so the write after the large one
// sent the bytes of a sender appending meanwhile in place of its own.
func TestUpConn_WriteQueuedLargeKeepsSpareApart(t *testing.T) {
	g := &gatedConn{started: make(chan struct{}), proceed: make(chan struct{})}
	c := &upConn{nc: g}
	c.written.L = &c.mu
	large := bytes.Repeat([]byte{'L'}, 1<<20+1)
	c.wbuf = append(bufpool.Get(len(large)), large...)
	c.spare = make([]byte, 0, 64<<10)
	c.writing = true
	done := make(chan struct{})
	c.mu.Lock()
	go func() { c.writeQueued(); close(done) }()
	<-g.started // writing the large queue
	c.mu.Lock()
	c.wbuf = append(c.wbuf, "first"...) // a sender queues meanwhile
	c.mu.Unlock()
	g.proceed <- struct{}{}
	appendWhileWriting(c, g, "other", done) // another sender, while "first" is written
	if len(g.written) != 3 || !bytes.Equal(g.written[0], large) || string(g.written[1]) != "first" || string(g.written[2]) != "other" {
		t.Fatalf("writes began %q, want the large queue, then \"first\", then \"other\"", g.began())
	}
}

// TestUpConn_SendHeldLargeKeepsSpareApart is the same for an event
// loop's large request written behind a queue of over 1 MiB (sendHeld).
func TestUpConn_SendHeldLargeKeepsSpareApart(t *testing.T) {
	g := &gatedConn{started: make(chan struct{}), proceed: make(chan struct{})}
	c := &upConn{nc: g}
	c.written.L = &c.mu
	by := &poller{}
	large := bytes.Repeat([]byte{'L'}, 1<<20+1)
	c.wbuf = append(bufpool.Get(len(large)), large...)
	c.spare = make([]byte, 0, 64<<10)
	c.writing, c.heldBy = true, by
	held := make(chan struct{})
	go func() { c.sendHeld(by, []byte("held"), nil, nil); close(held) }()
	for range 2 { // the queue, then the request
		<-g.started
		g.proceed <- struct{}{}
	}
	<-held
	c.mu.Lock()
	c.wbuf = append(c.wbuf, "first"...) // queued while the loop holds the writes
	written := make(chan struct{})
	go func() { c.writeQueued(); close(written) }() // the loop releases them
	appendWhileWriting(c, g, "other", written)      // another sender, while "first" is written
	if len(g.written) != 4 || string(g.written[1]) != "held" || string(g.written[2]) != "first" || string(g.written[3]) != "other" {
		t.Fatalf("writes began %q, want the large queue, \"held\", \"first\", \"other\"", g.began())
	}
}
