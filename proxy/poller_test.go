//go:build linux

package proxy

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// inLoop reports how many clients the server's event loops read now.
func inLoop(s *Server) int {
	s.mu.Lock()
	pollers := s.pollers
	s.mu.Unlock()
	n := 0
	for _, p := range pollers {
		p.mu.Lock()
		n += len(p.clients)
		p.mu.Unlock()
	}
	return n
}

// waitInLoop waits until the event loops read want clients.
func waitInLoop(t *testing.T, s *Server, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for inLoop(s) != want {
		if time.Now().After(deadline) {
			t.Fatalf("event loops read %d clients, want %d", inLoop(s), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPoller_HandOff moves a client between the event loop and its own
// goroutine: commands that wait for Redis (STRLEN and GETRANGE read the
// stored value) go to the goroutine, and the client comes back to the loop
// afterwards; a client that needs a private connection stays in the
// loop's set, which reads it and hands each command to its goroutine. Replies stay in order throughout, also when one
// pipeline mixes both kinds.
func TestPoller_HandOff(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("event loops are Linux only")
	}
	e := startEnv(t)
	c := dialRaw(t, e.addr)
	doc := compressible(4000, 1)
	if got := c.do("SET", "doc", doc); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	waitInLoop(t, e.srv, 1)
	if got := c.do("STRLEN", "doc"); got != ":4000\r\n" {
		t.Fatalf("STRLEN: %q", got)
	}
	waitInLoop(t, e.srv, 1) // back in the loop
	// One write: loop commands, a hand-off, loop commands again.
	c.send([]string{"GET", "doc"}, []string{"STRLEN", "doc"}, []string{"APPEND", "doc", "!"}, []string{"GET", "doc"}, []string{"GETRANGE", "doc", "-2", "-1"}, []string{"GET", "doc"})
	want := []string{bulk(doc), ":4000\r\n", ":4001\r\n", bulk(doc + "!")}
	for i, w := range want {
		if got := c.read(); got != w {
			t.Fatalf("reply %d: %.60q, want %.60q", i, got, w)
		}
	}
	if got := c.read(); got != bulk(doc[len(doc)-1:]+"!") {
		t.Fatalf("GETRANGE: %.60q", got)
	}
	if got := c.read(); got != bulk(doc+"!") {
		t.Fatalf("GET after GETRANGE: %.60q", got)
	}
	waitInLoop(t, e.srv, 1)
	// SUBSCRIBE pins a private connection: the client stays in the set,
	// so that its commands keep their place among the others' (order.go).
	c.do("SUBSCRIBE", "news")
	waitInLoop(t, e.srv, 1)
	c2 := dialRaw(t, e.addr)
	if got := c2.do("PUBLISH", "news", "hello"); got != ":1\r\n" {
		t.Fatalf("PUBLISH: %q", got)
	}
	if got := c.read(); got != "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n" {
		t.Fatalf("message: %q", got)
	}
	waitInLoop(t, e.srv, 2) // and c2
}

// TestPoller_FullQueue pipelines far more commands than MaxInFlight from
// many clients at once: the loop hands a client whose reply queue is full
// to its goroutine, which waits for room, and every reply arrives in order.
func TestPoller_FullQueue(t *testing.T) {
	e := startEnv(t, func(s *Server) { s.MaxInFlight = 4 })
	const clients, perClient = 8, 300
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialRaw(t, e.addr)
			var cmds [][]string
			for j := range perClient {
				v := fmt.Sprintf("%d:%d:%s", i, j, compressible(100+j, i))
				cmds = append(cmds, []string{"SET", "k" + strconv.Itoa(i), v}, []string{"GET", "k" + strconv.Itoa(i)})
			}
			c.send(cmds...)
			for j := range perClient {
				v := fmt.Sprintf("%d:%d:%s", i, j, compressible(100+j, i))
				if got := c.read(); got != "+OK\r\n" {
					errs <- fmt.Errorf("client %d SET %d: %q", i, j, got)
					return
				}
				if got := c.read(); got != bulk(v) {
					errs <- fmt.Errorf("client %d GET %d: %.40q", i, j, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPoller_ClientLeaves closes clients in the loop and in their
// goroutines: the proxy forgets both.
func TestPoller_ClientLeaves(t *testing.T) {
	e := startEnv(t)
	for i := range 10 {
		c := dialRaw(t, e.addr)
		if got := c.do("SET", "k", "v"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
		if i%2 == 1 {
			c.do("SUBSCRIBE", "x") // goroutine, pinned
		}
		c.nc.Close()
	}
	waitNoClients(t, e.srv, 5*time.Second)
	if n := inLoop(e.srv); n != 0 {
		t.Fatalf("event loops still read %d clients", n)
	}
}

// TestPoller_BigCommand: a command larger than maxLoopCommand is handled by
// the client's goroutine (its value is compressed there), and the client
// comes back to the loop after it.
func TestPoller_BigCommand(t *testing.T) {
	e := startEnv(t)
	c := dialRaw(t, e.addr)
	if got := c.do("SET", "small", "v"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	waitInLoop(t, e.srv, 1)
	before := handoffs(e.srv)
	big := compressible(maxLoopCommand+1000, 9)
	c.send([]string{"SET", "big", big}, []string{"GET", "big"}, []string{"GET", "small"})
	for i, want := range []string{"+OK\r\n", bulk(big), bulk("v")} {
		if got := c.read(); got != want {
			t.Fatalf("reply %d: %.40q", i, got)
		}
	}
	if n := handoffs(e.srv) - before; n != 1 {
		t.Fatalf("%d hand-offs to the goroutine, want 1 (the big SET)", n)
	}
	waitInLoop(t, e.srv, 1)
}

// handoffs counts the clients the event loops gave to their goroutines.
func handoffs(s *Server) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, p := range s.pollers {
		n += p.handoffs.Load()
	}
	return n
}
