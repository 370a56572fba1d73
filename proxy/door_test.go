package proxy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// readUntilEnd reads what c's peer sends until it closes the connection
// or within d sends nothing more, and reports whether it closed.
func readUntilEnd(t testing.TB, c *rawConn, d time.Duration) (got string, closed bool) {
	t.Helper()
	buf := make([]byte, 4096)
	out := c.buf
	for {
		c.nc.SetReadDeadline(time.Now().Add(d))
		n, err := c.br.Read(buf)
		out = append(out, buf[:n]...)
		var ne net.Error
		switch {
		case err == nil:
		case errors.As(err, &ne) && ne.Timeout():
			return string(out), false
		default: // the end, or a reset (closed with input unread)
			return string(out), true
		}
	}
}

// innocents runs n clients that pipeline SET and GET through the proxy at
// addr until stop, and counts their failed round trips: an error reply,
// a wrong value, or a connection that ended.
func innocents(t testing.TB, addr string, n int) (stop func() (failed, done int64)) {
	t.Helper()
	var failed, done atomic.Int64
	quit := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialRaw(t, addr)
			for j := 0; ; j++ {
				select {
				case <-quit:
					return
				default:
				}
				key, val := fmt.Sprintf("innocent:%d", i), fmt.Sprintf("value %d %d", i, j)
				c.send([]string{"SET", key, val}, []string{"GET", key})
				if a, b := c.read(), c.read(); a != "+OK\r\n" || b != bulk(val) {
					failed.Add(1)
					if a == "" || b == "" { // the proxy closed it: a new one
						c.nc.Close()
						c = dialRaw(t, addr)
					}
					continue
				}
				done.Add(1)
				time.Sleep(time.Millisecond) // busy, not a flood: the machine is shared
			}
		}()
	}
	return func() (int64, int64) {
		close(quit)
		wg.Wait()
		return failed.Load(), done.Load()
	}
}

// TestProxy_HostileInput: an HTTP request's POST or Host: line, inline or
// as a command, makes Redis close the connection it came on. The proxy
// closes the sender's connection at once, without a reply, as Redis
// does, and never passes the line on: other clients' round trips on the
// shared connection meanwhile all succeed, and the proxy's shared
// connection to Redis is still the one it was.
func TestProxy_HostileInput(t *testing.T) {
	e := startEnv(t)
	ref := testutil.StartRedis(t)
	admin := dialRaw(t, e.redis.Addr)
	conns := func() string { // Redis's count of connections it accepted
		for _, line := range strings.Split(admin.do("INFO", "stats"), "\r\n") {
			if v, ok := strings.CutPrefix(line, "total_connections_received:"); ok {
				return v
			}
		}
		t.Fatal("INFO stats: no total_connections_received")
		return ""
	}
	warm := dialRaw(t, e.addr)
	if got := warm.do("PING"); got != "+PONG\r\n" {
		t.Fatal(got)
	}
	before := conns()
	stop := innocents(t, e.addr, 4)
	for _, tt := range []struct{ name, input string }{
		{"POST inline", "POST / HTTP/1.1\r\n"},
		{"Host: inline", "Host: 127.0.0.1:6379\r\n"},
		{"post, lower case", "post /x HTTP/1.0\r\n"},
		{"HOST: as a command", "*2\r\n$5\r\nHOST:\r\n$9\r\nexample.x\r\n"},
		{"POST after a PING", "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPOST\r\n"},
		{"a whole request", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"},
	} {
		for _, addr := range []string{ref.Addr, e.addr} {
			for range 4 {
				c := dialRaw(t, addr)
				c.write([]byte(tt.input))
				got, closed := readUntilEnd(t, c, 2*time.Second)
				got = strings.TrimPrefix(got, "+PONG\r\n") // Redis may drop it, the proxy writes it
				if !closed || got != "" {
					t.Errorf("%s to %s: %q, closed %v; want the connection closed without a reply", tt.name, addr, got, closed)
				}
				c.nc.Close()
			}
		}
	}
	time.Sleep(100 * time.Millisecond) // round trips in flight when the last line went
	failed, done := stop()
	if failed > 0 || done == 0 {
		t.Errorf("other clients: %d failed round trips, %d succeeded; want none failed", failed, done)
	}
	if after := conns(); after != before {
		t.Errorf("Redis accepted %s connections before the hostile lines, %s after: the proxy lost its shared connection", before, after)
	}
	// A line that only begins with the name is a command Redis does not
	// know, and its error passes on.
	for _, addr := range []string{ref.Addr, e.addr} {
		c := dialRaw(t, addr)
		c.write([]byte("Host:example\r\nPING\r\n"))
		if got := c.read(); !strings.HasPrefix(got, "-ERR unknown command 'Host:example'") {
			t.Errorf("Host:example to %s: %q", addr, got)
		}
		if got := c.read(); got != "+PONG\r\n" {
			t.Errorf("PING after Host:example to %s: %q", addr, got)
		}
	}
}

// TestProxy_HostileLogged: the proxy logs hostile input once, with the
// sender's address, as Redis logs its warning, not once per line.
func TestProxy_HostileLogged(t *testing.T) {
	var log strings.Builder
	var mu sync.Mutex
	e := startEnv(t, func(s *Server) { s.Logger = newTestLogger(&mu, &log) })
	for range 3 {
		c := dialRaw(t, e.addr)
		c.write([]byte("POST / HTTP/1.1\r\n"))
		if _, closed := readUntilEnd(t, c, 2*time.Second); !closed {
			t.Fatal("POST: the connection stayed open")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(log.String(), "possible security attack"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, log.String())
	}
}

// TestProxy_ReplicationRefused: SYNC and PSYNC are refused with an error
// that says why, the client's connection stays, and Redis never sees
// them (no fork, no replica): the shared connection and the other
// clients on it go on. Inside MULTI they pass to Redis, which refuses
// them there itself and aborts the transaction, as directly.
func TestProxy_ReplicationRefused(t *testing.T) {
	e := startEnv(t)
	ref := testutil.StartRedis(t)
	admin := dialRaw(t, e.redis.Addr)
	info := func(field string) string {
		for _, line := range strings.Split(admin.do("INFO", "all"), "\r\n") {
			if v, ok := strings.CutPrefix(line, field+":"); ok {
				return v
			}
		}
		t.Fatalf("INFO: no %s", field)
		return ""
	}
	stop := innocents(t, e.addr, 4)
	c := dialRaw(t, e.addr)
	for _, cmd := range [][]string{{"SYNC"}, {"PSYNC", "?", "-1"}, {"sync"}, {"PSYNC", "0123456789012345678901234567890123456789", "1"}} {
		got := c.do(cmd...)
		want := "-ERR squeeze: " + strings.ToUpper(cmd[0]) + " is refused: replication does not pass through the proxy"
		if !strings.HasPrefix(got, want) {
			t.Errorf("%q: %q, want %q...", cmd, got, want)
		}
		if got := c.do("PING"); got != "+PONG\r\n" {
			t.Errorf("PING after %q: %q", cmd, got)
		}
	}
	time.Sleep(100 * time.Millisecond)
	failed, done := stop()
	if failed > 0 || done == 0 {
		t.Errorf("other clients: %d failed round trips, %d succeeded; want none failed", failed, done)
	}
	if n := info("total_forks"); n != "0" {
		t.Errorf("Redis forked %s times: a SYNC reached it", n)
	}
	if n := info("connected_slaves"); n != "0" {
		t.Errorf("Redis counts %s replicas", n)
	}
	// In a transaction, as directly.
	steps := [][]string{{"MULTI"}, {"SET", "k", "v"}, {"SYNC"}, {"PSYNC", "?", "-1"}, {"EXEC"}, {"GET", "k"}}
	direct, via := dialRaw(t, ref.Addr), dialRaw(t, e.addr)
	for _, cmd := range steps {
		direct.send(cmd)
		via.send(cmd)
	}
	for _, cmd := range steps {
		if want, got := direct.read(), via.read(); got != want {
			t.Errorf("%q in MULTI: proxy %q, Redis %q", cmd, got, want)
		}
	}
	// With replies off or skipped the refusal is not written, and the
	// replies after it are the right ones (Redis skips the next command's
	// reply after CLIENT REPLY SKIP: SYNC's here; directly, SYNC would
	// start a replication, so the reference is what Redis does for a
	// command it refuses).
	for _, tt := range []struct {
		steps [][]string
		want  string
	}{
		{[][]string{{"CLIENT", "REPLY", "SKIP"}, {"SYNC"}, {"PING", "after"}}, bulk("after")},
		{[][]string{{"CLIENT", "REPLY", "SKIP"}, {"PSYNC", "?", "-1"}, {"CLIENT", "REPLY", "SKIP"}, {"SYNC"}, {"PING", "after"}}, bulk("after")},
		{[][]string{{"CLIENT", "REPLY", "OFF"}, {"SYNC"}, {"PING"}, {"CLIENT", "REPLY", "ON"}}, "+OK\r\n"},
	} {
		via := dialRaw(t, e.addr)
		for _, cmd := range tt.steps {
			via.send(cmd)
		}
		if got := via.read(); got != tt.want {
			t.Errorf("%q: first reply %q, want %q", tt.steps, got, tt.want)
		}
		if got := via.do("PING"); got != "+PONG\r\n" {
			t.Errorf("%q, then PING: %q", tt.steps, got)
		}
	}
	if n := info("total_forks"); n != "0" {
		t.Errorf("Redis forked %s times", n)
	}
}

// TestProxy_RequireAuthBeforeLogin: with RequireAuth, before the client
// logs in, every command gets Redis's own answer, the commands the proxy
// serves itself (inspect, list search, scripts, SORT's check) too:
// -NOAUTH, or Redis's arity error before that, with the connection kept;
// SYNC and PSYNC too. After the login they work.
func TestProxy_RequireAuthBeforeLogin(t *testing.T) {
	e := startEnv(t)
	ref := testutil.StartRedis(t)
	for _, addr := range []string{e.redis.Addr, ref.Addr} {
		if got := dialRaw(t, addr).do("CONFIG", "SET", "requirepass", "s3cret"); got != "+OK\r\n" {
			t.Fatal(got)
		}
	}
	p := startProxy(t, "redis://:s3cret@"+e.redis.Addr, e.redis, func(s *Server) { s.RequireAuth = true })
	before := [][]string{
		{"GETRANGE", "k", "0", "3"},
		{"STRLEN", "k"},
		{"APPEND", "k", "x"},
		{"SETRANGE", "k", "1", "x"},
		{"GETBIT", "k", "1"},
		{"BITCOUNT", "k"},
		{"BITFIELD", "k", "GET", "u8", "0"},
		{"LCS", "k", "k2"},
		{"HSTRLEN", "h", "f"},
		{"LPOS", "l", "x"},
		{"LREM", "l", "0", "x"},
		{"LINSERT", "l", "BEFORE", "x", "y"},
		{"EVAL", "return 1", "0"},
		{"EVAL", "return redis.call('GET', KEYS[1])", "1", "k"},
		{"FCALL", "f", "0"},
		{"SCRIPT", "LOAD", "return 1"},
		{"SORT", "l", "BY", "w_*"},
		{"SORT", "l", "GET", "#"},
		{"SYNC"},
		{"PSYNC", "?", "-1"},
		{"STRLEN"}, // Redis's arity error comes first
		{"GETRANGE", "k"},
		{"LPOS", "l"},
		{"NOSUCH", "x"},
		{"MULTI"}, // refused: no transaction opens
		{"STRLEN", "k"},
		{"LPOS", "l", "x"},
		{"EXEC"},
		{"GET", "k"},
		{"PING"},
		{"AUTH", "s3cret"},
		{"SET", "k", compressible(3000, 1)},
		{"GETRANGE", "k", "0", "3"},
		{"STRLEN", "k"},
		{"RPUSH", "l", "x"},
		{"LPOS", "l", "x"},
	}
	direct, via := dialRaw(t, ref.Addr), dialRaw(t, p.addr)
	for _, c := range before {
		want, got := direct.do(c...), via.do(c...)
		if got != want {
			t.Errorf("%q: proxy %.100q, Redis %.100q", c, got, want)
		}
	}
	// Pipelined, the same.
	direct, via = dialRaw(t, ref.Addr), dialRaw(t, p.addr)
	for _, c := range before {
		direct.send(c)
		via.send(c)
	}
	for _, c := range before {
		if want, got := direct.read(), via.read(); got != want {
			t.Errorf("pipelined %q: proxy %.100q, Redis %.100q", c, got, want)
		}
	}
}

// newTestLogger returns a logger that writes text lines to b under mu.
func newTestLogger(mu *sync.Mutex, b *strings.Builder) *slogLogger {
	return slog.New(slog.NewTextHandler(lockedWriter{mu: mu, w: b}, nil))
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
