package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	prom "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/squeeze-kv/squeeze/codec"
)

// passEnv starts a proxy that stores values as they are, with metrics, and
// stores big values (spliced: 2 MiB and more) at keys big0..big(n-1)
// directly in Redis.
func passEnv(t *testing.T, n int) (*env, *Metrics, []string) {
	return passEnvSize(t, n, 2<<20)
}

// passEnvSize is passEnv with values of size bytes and more.
func passEnvSize(t *testing.T, n, size int) (*env, *Metrics, []string) {
	m := NewMetrics(prometheus.NewRegistry(), codec.DefaultAlgorithm)
	e := startEnv(t, withMinSize(64<<20), func(s *Server) { s.Metrics = m })
	direct := dialRaw(t, e.redis.Addr)
	vals := make([]string, n)
	for i := range vals {
		vals[i] = rawValue(size+i*1001, byte(i+1))
		direct.write(setCommand("SET", fmt.Sprintf("big%d", i), vals[i]))
		if r := direct.read(); r != "+OK\r\n" {
			t.Fatalf("SET big%d: %q", i, r)
		}
	}
	return e, m, vals
}

// TestProxy_PassedReply: large raw values go to their clients as they
// arrive, in their place among each client's replies and among other
// clients' replies on the shared connection.
func TestProxy_PassedReply(t *testing.T) {
	testPassedReply(t, passEnv)
}

// TestProxy_PassedReplyCopied: the same with values under passSpliceMin,
// copied through the reader's buffer instead of spliced (one of them whole
// in it, one larger).
func TestProxy_PassedReplyCopied(t *testing.T) {
	testPassedReply(t, func(t *testing.T, n int) (*env, *Metrics, []string) {
		e, m, vals := passEnvSize(t, n, 100_000)
		big := rawValue(1<<20, 7)
		dialRaw(t, e.redis.Addr).do("SET", fmt.Sprintf("big%d", n-1), big)
		vals[n-1] = big
		return e, m, vals
	})
}

func testPassedReply(t *testing.T, setup func(*testing.T, int) (*env, *Metrics, []string)) {
	e, m, vals := setup(t, 3)
	c := dialRaw(t, e.addr)
	// A reply is passed when the reader finds it incomplete in its buffer
	// and its client's writer is not at work: mostly the first time, not
	// always (a reply that came whole in one read goes the usual way).
	// (The count moves once the last byte is written: a GET may return
	// before it.)
	for try := 1; prom.ToFloat64(m.passed.WithLabelValues("whole")) == 0; try++ {
		if try > 20 {
			t.Fatal("none of 20 GETs of a large raw value was passed through")
		}
		if r := c.do("GET", "big0"); r != bulk(vals[0]) {
			t.Fatalf("GET big0 = %.80q (%d bytes)", r, len(r))
		}
		time.Sleep(time.Millisecond)
	}

	// A pipeline mixing small and passed replies, from several clients at
	// once: each gets its replies whole and in order.
	c.do("SET", "small", "v")
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for k := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", e.addr)
			if err != nil {
				errs <- err
				return
			}
			defer nc.Close()
			rc := &rawConn{t: t, nc: nc, br: newReader(nc)}
			for round := range 3 {
				i := (k + round) % len(vals)
				rc.send([]string{"GET", fmt.Sprintf("big%d", i)}, []string{"GET", "small"}, []string{"GET", "big2"}, []string{"PING"})
				for j, want := range []string{bulk(vals[i]), bulk("v"), bulk(vals[2]), "+PONG\r\n"} {
					if r := rc.read(); r != want {
						errs <- fmt.Errorf("client %d round %d reply %d: %.80q (%d bytes), want %d bytes", k, round, j, r, len(r), len(want))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := prom.ToFloat64(m.passed.WithLabelValues("whole")); n < 2 {
		t.Fatalf("passed replies = %v after the pipelines, want several", n)
	}

	// A frame is not passed: it is decoded, as before.
	doc := rawValue(2<<20, 9)
	enc, _ := codec.NewEncoder(codec.DefaultAlgorithm)
	frame, _ := enc.AppendFrame(nil, []byte(doc))
	dialRaw(t, e.redis.Addr).do("SET", "framed", string(frame))
	before := prom.ToFloat64(m.passed.WithLabelValues("whole"))
	if r := c.do("GET", "framed"); r != bulk(doc) {
		t.Fatalf("GET framed = %.80q", r)
	}
	if n := prom.ToFloat64(m.passed.WithLabelValues("whole")); n != before {
		t.Fatalf("a frame was passed through (%v -> %v)", before, n)
	}
}

// TestProxy_PassedReplySlowClient: a client that does not read its large
// replies holds up no one: the reply it is sent goes the stored way, other
// clients' commands go on, and it gets every byte once it reads.
func TestProxy_PassedReplySlowClient(t *testing.T) {
	for _, size := range []int{2 << 20, 1 << 20} { // spliced, copied
		t.Run(fmt.Sprint(size), func(t *testing.T) { testPassedReplySlowClient(t, size) })
	}
}

func testPassedReplySlowClient(t *testing.T, size int) {
	e, m, vals := passEnvSize(t, 2, size)
	slow, err := net.DialTCP("tcp", nil, resolveTCP(t, e.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	slow.SetReadBuffer(64 << 10) // the proxy's writes to it block soon
	sc := &rawConn{t: t, nc: slow, br: newReader(slow)}
	const gets = 6
	for i := range gets {
		sc.send([]string{"GET", fmt.Sprintf("big%d", i%2)})
	}
	// Meanwhile another client's commands are answered.
	other := dialRaw(t, e.addr)
	for range 20 {
		if r := other.do("PING"); r != "+PONG\r\n" {
			t.Fatalf("PING = %q", r)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := other.do("GET", "big1"); r != bulk(vals[1]) {
		t.Fatalf("another client's GET big1 = %.80q", r)
	}
	if n := prom.ToFloat64(m.passed.WithLabelValues("stored")); n < 1 {
		t.Fatalf("stored passes = %v, want at least 1 for the client that does not read", n)
	}
	for i := range gets {
		if r := sc.read(); r != bulk(vals[i%2]) {
			t.Fatalf("slow client's reply %d: %.80q (%d bytes)", i, r, len(r))
		}
	}
}

// TestProxy_PassedReplyFaults: a client that leaves while its reply passes
// leaves the shared connection in step for the others; Redis dying while
// a reply passes ends that client's connection without a wrong byte.
func TestProxy_PassedReplyFaults(t *testing.T) {
	e, _, vals := passEnv(t, 1)
	other := dialRaw(t, e.addr)
	other.do("SET", "small", "v")
	for range 5 {
		nc, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(setCommand("GET", "big0"))
		buf := make([]byte, 1000)
		io.ReadFull(nc, buf)
		nc.Close()
		if r := other.do("GET", "small"); r != bulk("v") {
			t.Fatalf("GET small after a client left mid-reply = %.80q", r)
		}
	}
	if r := other.do("GET", "big0"); r != bulk(vals[0]) {
		t.Fatalf("GET big0 = %.80q", r)
	}

	// Redis goes away while the reply passes: the client has a part of
	// the value, then its connection ends; no error text inside the value.
	c := dialRaw(t, e.addr)
	c.write(setCommand("GET", "big0"))
	head := make([]byte, 100)
	if _, err := io.ReadFull(c.br, head); err != nil {
		t.Fatal(err)
	}
	e.redis.Stop()
	// Either the whole reply had passed already (the connection stays, as
	// a client's connection stays when Redis goes away between replies),
	// or the client has a part of it and its connection ends.
	want := bulk(vals[0])
	got := append([]byte(nil), head...)
	c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 256<<10)
	for len(got) < len(want) {
		n, err := c.br.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			if err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("after Redis died, with %d bytes of %d: %v", len(got), len(want), err)
			}
			break
		}
	}
	if len(got) > len(want) || string(got) != want[:len(got)] {
		t.Fatalf("after Redis died mid-reply the client got %d bytes that are not a prefix of the reply", len(got))
	}
}

func resolveTCP(t *testing.T, addr string) *net.TCPAddr {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func newReader(nc net.Conn) *bufio.Reader { return bufio.NewReaderSize(nc, 64<<10) }
