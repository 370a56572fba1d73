package proxy

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/resp"
)

// sampleHeld records the most the proxy held for its clients until stop.
func sampleHeld(s *Server) (peak func() int64, stop func()) {
	var most atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if h := s.HeldBytes(); h > most.Load() {
				most.Store(h)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	var once sync.Once
	return most.Load, func() { once.Do(func() { close(done); wg.Wait() }) }
}

// waitHeldZero waits until the proxy holds nothing for its clients: the
// accounting of every request and reply returns what it took.
func waitHeldZero(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.HeldBytes() != 0 || s.expectedTotal.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy still counts %d bytes held, %d expected, with no command in flight", s.HeldBytes(), s.expectedTotal.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestProxy_NonReadingClientClosedAtLimit: one socket with a small receive
// buffer pipelines 300 GETs of an 8 MiB value and reads nothing. Before the
// hard limit, the proxy held every reply that came (1.5-2.3 GB of RSS).
// Now it closes that client once it holds more than ClientBufferLimit,
// counts it, and holds little more than the limit meanwhile; another
// client's PINGs go on being answered, and the accounting returns to zero.
func TestProxy_NonReadingClientClosedAtLimit(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, codec.DefaultAlgorithm)
	e := startEnv(t, func(s *Server) { s.MaxReplyBytes = 1 << 20; s.ClientBufferLimit = 16 << 20; s.Metrics = m })
	noise := make([]byte, 8<<20)
	rand.NewChaCha8([32]byte{8}).Read(noise)
	if got := dialRaw(t, e.redis.Addr).do("SET", "big", string(noise)); got != "+OK\r\n" {
		t.Fatal(got)
	}
	peak, stop := sampleHeld(e.srv)
	defer stop()

	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// (A smaller receive buffer makes loopback TCP crawl: the replies
	// the kernel took would then take minutes to drain.)
	nc.(*net.TCPConn).SetReadBuffer(64 << 10)
	var pipeline []byte
	for range 300 {
		pipeline = resp.AppendCommand(pipeline, []byte("GET"), []byte("big"))
	}
	if _, err := nc.Write(pipeline); err != nil {
		t.Fatal(err)
	}

	// Meanwhile another client is answered.
	other := dialRaw(t, e.addr)
	deadline := time.Now().Add(20 * time.Second)
	for testutil.ToFloat64(m.dropped.WithLabelValues("client-buffer-limit")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the non-reading client was not closed; the proxy holds %d bytes", e.srv.HeldBytes())
		}
		if got := other.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("PING of another client: %q", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The client sees its connection end after the replies it was sent.
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := io.Copy(io.Discard, nc)
	if err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("reading the closed client's socket: %v after %d bytes", err, n)
	}
	if n >= 300*(8<<20) {
		t.Fatalf("the client got all %d bytes of its replies: not closed", n)
	}
	waitHeldZero(t, e.srv)
	stop()
	// The limit, plus the reply that crossed it and the one being written.
	if bound := int64(16<<20 + 2*(8<<20+64<<10)); peak() > bound {
		t.Fatalf("the proxy held %d bytes at most for a client limited to %d; want at most %d", peak(), e.srv.ClientBufferLimit, bound)
	}
	t.Logf("held at most %d bytes; the client read %d bytes before its connection ended", peak(), n)
	if got := other.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after: %q", got)
	}
}

// TestProxy_OneBigReplyNeverCut: a client that holds nothing else may
// receive a value larger than its hard limit, and a slow reader that asks
// one value at a time is never closed.
func TestProxy_OneBigReplyNeverCut(t *testing.T) {
	e := startEnv(t, func(s *Server) { s.MaxReplyBytes = 256 << 10; s.ClientBufferLimit = 1 << 20; s.MaxMemory = 2 << 20 })
	noise := make([]byte, 6<<20)
	rand.NewChaCha8([32]byte{9}).Read(noise)
	big := string(noise)
	c := dialRaw(t, e.addr)
	c.nc.(*net.TCPConn).SetReadBuffer(16 << 10)
	if got := c.do("SET", "big", big); got != "+OK\r\n" {
		t.Fatal(got)
	}
	for i := range 3 {
		if got := c.do("GET", "big"); got != bulk(big) {
			t.Fatalf("GET %d: %d bytes", i, len(got))
		}
	}
	waitHeldZero(t, e.srv)
}

// TestProxy_MemoryPressureOneInFlight: past half of MaxMemory each client
// gets one command in flight. Four clients pipelining 40 GETs of a 1 MiB
// value (160 MiB of replies; each client's window allows all 40) and
// reading them all get every reply, correct, none is closed, and the proxy
// holds within the bound: their first 16 GETs each (the window of a new
// client) make 64 MiB, past half of it, and from then on they wait.
func TestProxy_MemoryPressureOneInFlight(t *testing.T) {
	const maxMem = 96 << 20
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, codec.DefaultAlgorithm)
	e := startEnv(t, func(s *Server) { s.MaxMemory = maxMem; s.Metrics = m })
	noise := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{10}).Read(noise)
	big := string(noise)
	if got := dialRaw(t, e.redis.Addr).do("SET", "big", big); got != "+OK\r\n" {
		t.Fatal(got)
	}
	peak, stop := sampleHeld(e.srv)
	defer stop()
	const clients, gets = 4, 40
	var wg sync.WaitGroup
	errs := make(chan string, clients)
	for range clients {
		c := dialRaw(t, e.addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmds := make([][]string, gets)
			for i := range cmds {
				cmds[i] = []string{"GET", "big"}
			}
			c.send(cmds...)
			for i := range gets {
				if got := c.read(); got != bulk(big) {
					errs <- fmt.Sprintf("reply %d: %d bytes, want %d", i, len(got), len(bulk(big)))
					return
				}
				time.Sleep(time.Millisecond) // a slowish reader
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitHeldZero(t, e.srv)
	stop()
	if peak() > maxMem {
		t.Fatalf("held %d bytes at most under MaxMemory %d", peak(), maxMem)
	}
	if n := testutil.ToFloat64(m.dropped.WithLabelValues("max-memory")); n != 0 {
		t.Fatalf("%v clients closed; they all read their replies", n)
	}
	t.Logf("held at most %d bytes for %d clients pipelining %d GETs of 1 MiB", peak(), clients, gets)
}

// TestProxy_MaxMemoryClosesTheLargest: with several non-reading clients
// past MaxMemory, the proxy closes the one holding the most, and the
// process holds within the bound afterwards.
func TestProxy_MaxMemoryClosesTheLargest(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, codec.DefaultAlgorithm)
	e := startEnv(t, func(s *Server) {
		s.Metrics = m
		s.MaxMemory = 24 << 20
		s.ClientBufferLimit = 1 << 30 // only the process bound acts
	})
	noise := make([]byte, 4<<20)
	rand.NewChaCha8([32]byte{11}).Read(noise)
	if got := dialRaw(t, e.redis.Addr).do("SET", "big", string(noise)); got != "+OK\r\n" {
		t.Fatal(got)
	}
	var pipeline []byte
	for range 64 {
		pipeline = resp.AppendCommand(pipeline, []byte("GET"), []byte("big"))
	}
	for range 3 {
		nc, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.(*net.TCPConn).SetReadBuffer(4 << 10)
		if _, err := nc.Write(pipeline); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for testutil.ToFloat64(m.dropped.WithLabelValues("max-memory")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no client closed past MaxMemory; the proxy holds %d bytes", e.srv.HeldBytes())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := dialRaw(t, e.addr).do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING: %q", got)
	}
	t.Logf("closed %v clients; holds %d bytes", testutil.ToFloat64(m.dropped.WithLabelValues("max-memory")), e.srv.HeldBytes())
}

// TestProxy_RequestsBoundedWhileRedisWaits: while Redis runs nothing
// (CLIENT PAUSE), a client that pipelines 100 SETs of 1 MiB stops being
// read once its requests in flight reach MaxReplyBytes, instead of the
// proxy holding all 100 MiB; when Redis goes on, every SET is answered.
func TestProxy_RequestsBoundedWhileRedisWaits(t *testing.T) {
	const soft = 4 << 20
	e := startEnv(t, func(s *Server) { s.MaxReplyBytes = soft; s.Encoder = nil })
	noise := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{12}).Read(noise)
	c := dialRaw(t, e.addr)
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatal(got)
	}
	if got := dialRaw(t, e.redis.Addr).do("CLIENT", "PAUSE", "1500", "ALL"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	peak, stop := sampleHeld(e.srv)
	defer stop()
	const n = 100
	wrote := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < n && err == nil; i++ {
			_, err = c.nc.Write(resp.AppendCommand(nil, []byte("SET"), []byte(fmt.Sprint("k", i)), noise))
		}
		wrote <- err
	}()
	for i := range n {
		if got := c.read(); got != "+OK\r\n" {
			t.Fatalf("SET %d: %q", i, got)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	waitHeldZero(t, e.srv)
	stop()
	// The bound, the request that crossed it, and the reservation of the
	// commands read with it.
	if bound := int64(soft + 2<<20); peak() > bound {
		t.Fatalf("held %d bytes at most for requests waiting for Redis; want at most %d", peak(), bound)
	}
	t.Logf("held at most %d bytes while Redis was paused", peak())
}

// TestProxy_ClientWaitingForRoomLeaves: a client whose command blocks for
// good on its private connection, with more commands pipelined behind it
// than its window takes, leaves: the proxy lets go of it (the reader that
// waits for room watches the socket) instead of keeping it and its
// upstream connection for ever.
func TestProxy_ClientWaitingForRoomLeaves(t *testing.T) {
	e := startEnv(t)
	c := dialRaw(t, e.addr)
	cmds := [][]string{{"BLPOP", "never", "0"}}
	for range 20 {
		cmds = append(cmds, []string{"PING"})
	}
	c.send(cmds...)
	waitBlocked(t, e.redis.Addr, 1)
	c.nc.Close()
	waitNoClients(t, e.srv, 10*time.Second)
}

// TestProxy_AccountingSettlesAfterPipelines: the counts of bytes held and
// expected change once per batch of commands and once per batch of replies
// (flush, deliver, settleHeld), not once per command. Many clients
// pipelining small commands of every kind (values, counters, errors, the
// proxy's own replies, a script, a transaction) must leave both totals at
// zero once every reply is read, and every reply must be Redis's.
func TestProxy_AccountingSettlesAfterPipelines(t *testing.T) {
	e := startEnv(t)
	pipelineClients(t, e, 12, 40, func(i, r int) ([][]string, []string) {
		key, n := fmt.Sprintf("acct:%d", i), fmt.Sprintf("acct:n:%d", i)
		val := strings.Repeat("v", 1+r*37)
		cmds := [][]string{
			{"SET", key, val}, {"GET", key}, {"INCR", n}, {"INCR", key},
			{"PING"}, {"ECHO", val}, {"EVAL", "return ARGV[1]", "0", "s"},
			{"MULTI"}, {"INCR", n}, {"GET", key}, {"EXEC"},
		}
		want := []string{
			"+OK\r\n", bulk(val), fmt.Sprintf(":%d\r\n", 2*r+1), "-ERR value is not an integer or out of range\r\n",
			"+PONG\r\n", bulk(val), bulk("s"),
			"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", fmt.Sprintf("*2\r\n:%d\r\n%s", 2*r+2, bulk(val)),
		}
		return cmds, want
	})
	waitHeldZero(t, e.srv)
}

// pipelineClients runs clients connections to the proxy at once, each
// sending rounds pipelines: round r of client i is the commands pipeline
// returns, which must get the replies it returns, in order.
func pipelineClients(t *testing.T, e *env, clients, rounds int, pipeline func(i, r int) (cmds [][]string, want []string)) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan string, clients)
	for i := range clients {
		c := dialRaw(t, e.addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				cmds, want := pipeline(i, r)
				c.send(cmds...)
				for j, w := range want {
					if got := c.read(); got != w {
						errs <- fmt.Sprintf("client %d round %d %.80q: got %.80q, want %.80q", i, r, cmds[j], got, w)
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
}

// TestProxy_FloodGivesMemoryBack: 40 clients each pipeline 10 SETs of a
// 1 MiB random value and read nothing, through a proxy with MaxMemory
// 32 MiB and the Go runtime's soft memory limit at it (as the squeeze
// command sets it); then they all leave. Within seconds the process gives
// back what the flood took: before, the free lists of big buffers (64 MiB)
// stayed for good and the sync.Pools held the rest of the burst until two
// collections had run (minutes, in an idle process: the proxy
// held 1.69 GB for 80 s after its 200 clients left).
//
// The flood's peak heap stays under MaxMemory plus, for each client, the
// read buffer and the batch its 1 MiB SET takes, each at most a quarter
// larger than the command (see docs/design/memory.md): 1.25 MiB each,
// where buffers of powers of two took 2 MiB each, and the peak heap was
// 168-175 MiB above what it was before the flood (now 111-119 MiB).
func TestProxy_FloodGivesMemoryBack(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads VmRSS from /proc")
	}
	const (
		maxMemory = 32 << 20
		clients   = 40
		pipelined = 10
	)
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(maxMemory))
	e := startEnv(t, func(s *Server) { s.MaxMemory = maxMemory })
	value := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{33}).Read(value)
	var batch []byte
	for range pipelined {
		batch = resp.AppendCommand(batch, []byte("SET"), []byte("flood"), value)
	}
	runtime.GC()
	baseRSS, baseHeap := vmRSS(t), heapObjects()

	var peak, peakHeap atomic.Int64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if r := vmRSS(t); r > peak.Load() {
				peak.Store(r)
			}
			if h := heapObjects(); h > peakHeap.Load() {
				peakHeap.Store(h)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var conns []net.Conn
	var wg sync.WaitGroup
	for range clients {
		nc, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc.SetWriteDeadline(time.Now().Add(time.Minute))
			if _, err := nc.Write(batch); err != nil {
				t.Errorf("flood write: %v", err)
			}
		}()
	}
	wg.Wait()
	waitHeldZero(t, e.srv)
	close(done)
	<-sampled
	if got := dialRaw(t, e.redis.Addr).do("STRLEN", "flood"); got != ":1048576\r\n" {
		t.Fatalf("STRLEN flood after the flood: %q", got)
	}
	for _, nc := range conns {
		nc.Close()
	}
	waitNoClients(t, e.srv, 10*time.Second)
	left := time.Now()
	t.Logf("before the flood: RSS %d MiB, heap %d MiB; peak RSS %d MiB, heap %d MiB (MaxMemory %d MiB)",
		baseRSS>>20, baseHeap>>20, peak.Load()>>20, peakHeap.Load()>>20, maxMemory>>20)
	perClient := int64(2 * 1280 << 10) // a read buffer and a batch of the 1.25 MiB class
	if bound := baseHeap + maxMemory + clients*perClient + 16<<20; peakHeap.Load() > bound {
		t.Errorf("peak heap %d MiB, over %d MiB", peakHeap.Load()>>20, bound>>20)
	}
	// (The race detector's shadow memory grows RSS and keeps it: there,
	// only the heap is judged.)
	if bound := baseRSS + maxMemory + clients*perClient + 32<<20; peak.Load() > bound && !raceEnabled {
		t.Errorf("peak RSS %d MiB, over %d MiB", peak.Load()>>20, bound>>20)
	}

	// Back within seconds: heap within 16 MiB of what it was before the
	// flood, and RSS too (it was 22-25 MiB above it for good, the heap
	// 62-70 MiB above).
	for {
		rss, heap := vmRSS(t), heapObjects()
		if heap <= baseHeap+16<<20 && (rss <= baseRSS+16<<20 || raceEnabled) {
			t.Logf("%v after the clients left: RSS %d MiB, heap %d MiB (%d MiB before the flood)", time.Since(left).Round(100*time.Millisecond), rss>>20, heap>>20, baseHeap>>20)
			break
		}
		if time.Since(left) > 10*time.Second {
			t.Fatalf("10 s after the clients left the process holds RSS %d MiB, heap %d MiB; %d MiB, %d MiB before the flood", rss>>20, heap>>20, baseRSS>>20, baseHeap>>20)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// vmRSS returns the process's resident memory (VmRSS).
func vmRSS(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS: %q", line)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// heapObjects returns the bytes of the heap's objects, live or not yet
// swept (runtime/metrics).
func heapObjects() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// TestLetGo: once a client is closed from the proxy's side, the replies
// that still come for it are let go, except those something still needs.
func TestLetGo(t *testing.T) {
	open, closed := &client{}, &client{}
	closed.life.aborted.Store(true)
	for _, tc := range []struct {
		name string
		cl   *call
		want bool
	}{
		{"GET of a closed client", &call{owner: closed, cmd: "GET", kind: shapeValue}, true},
		{"GET of an open client", &call{owner: open, cmd: "GET", kind: shapeValue}, false},
		{"no client", &call{cmd: "GET", kind: shapeValue}, false},
		{"GETDEL: its value may be quarantined", &call{owner: closed, cmd: "GETDEL", kind: shapeValue}, false},
		{"EXEC", &call{owner: closed, cmd: "EXEC", kind: shapeExec}, false},
		{"something waits for it", &call{owner: closed, cmd: "GET", kind: shapeValue, onFinish: func() {}}, false},
	} {
		if got := letGo(tc.cl); got != tc.want {
			t.Errorf("%s: letGo = %v, want %v", tc.name, got, tc.want)
		}
	}
}
