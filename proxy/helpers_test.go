package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
	"github.com/squeeze-kv/squeeze/resp"
)

// env is a redis-server with a proxy in front of it, in-process.
type env struct {
	redis *testutil.Redis
	srv   *Server
	addr  string // the proxy's address
}

type envOpt func(*Server)

func withMinSize(n int) envOpt {
	return func(s *Server) {
		enc, err := codec.NewEncoder(codec.DefaultAlgorithm, codec.WithMinSize(n))
		if err != nil {
			panic(err)
		}
		s.Encoder = enc
	}
}

// startEnv starts Redis and a proxy with min-size 0 (everything that
// compresses is compressed) unless opts say otherwise.
func startEnv(t testing.TB, opts ...envOpt) *env {
	t.Helper()
	r := testutil.StartRedis(t)
	return startProxy(t, r.URL(), r, opts...)
}

func startProxy(t testing.TB, upstream string, r *testutil.Redis, opts ...envOpt) *env {
	t.Helper()
	s := &Server{Upstream: upstream, Logger: quietLogger()}
	withMinSize(0)(s)
	for _, o := range opts {
		o(s)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, s, ln, r)
}

// serveOn runs s on ln until the test ends.
func serveOn(t testing.TB, s *Server, ln net.Listener, r *testutil.Redis) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		s.Close()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return after Close")
		}
	})
	return &env{redis: r, srv: s, addr: ln.Addr().String()}
}

// rawConn speaks RESP by hand, to compare replies byte for byte.
type rawConn struct {
	t   testing.TB
	nc  net.Conn
	br  *bufio.Reader
	buf []byte
	// settle, when set, is a pause between reading a reply and sending
	// again (dialOrdered); justRead says a reply was read since the last send.
	settle   time.Duration
	justRead bool
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReaderSize(nc, 64<<10)}
}

// send writes commands without reading replies.
func (c *rawConn) send(cmds ...[]string) {
	c.t.Helper()
	var b []byte
	for _, cmd := range cmds {
		args := make([][]byte, len(cmd))
		for i, a := range cmd {
			args[i] = []byte(a)
		}
		b = resp.AppendCommand(b, args...)
	}
	c.write(b)
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	if c.settle > 0 && c.justRead {
		time.Sleep(c.settle)
	}
	c.justRead = false
	c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// read returns the next whole reply as raw bytes ("" on EOF).
func (c *rawConn) read() string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if len(c.buf) > 0 {
			v, _, err := resp.ReadValue(c.buf)
			if err == nil {
				n := len(v.Raw)
				if v.Type == resp.Attribute {
					v2, _, err2 := resp.ReadValue(c.buf[n:])
					if err2 != nil {
						goto more
					}
					n += len(v2.Raw)
				}
				out := string(c.buf[:n])
				c.buf = c.buf[n:]
				c.justRead = true
				return out
			}
			if !errors.Is(err, resp.ErrIncomplete) {
				c.t.Fatalf("bad reply %q: %v", c.buf, err)
			}
		}
	more:
		tmp := make([]byte, 64<<10)
		n, err := c.br.Read(tmp)
		c.buf = append(c.buf, tmp[:n]...)
		if err != nil {
			if n > 0 {
				continue
			}
			return ""
		}
	}
}

// do sends one command and returns its raw reply.
func (c *rawConn) do(args ...string) string {
	c.t.Helper()
	c.send(args)
	return c.read()
}

func bulk(s string) string { return string(resp.AppendBulkString(nil, s)) }

func quietLogger() *slogLogger { return discardLogger }

// compressible returns n bytes of JSON-like text that compresses well.
func compressible(n int, seed int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(`{"id":`)
		b.WriteString(strings.Repeat("7", 1+(i+seed)%5))
		b.WriteString(`,"name":"squeeze user","tags":["redis","proxy"]},`)
	}
	return b.String()[:n]
}

type slogLogger = slog.Logger

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// waitBlocked waits until Redis at addr counts n clients blocked (INFO
// clients, blocked_clients), for at most 5 s.
func waitBlocked(t testing.TB, addr string, n int) {
	t.Helper()
	c := dialRaw(t, addr)
	want := "blocked_clients:" + strconv.Itoa(n) + "\r\n"
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		info := c.do("INFO", "clients")
		if strings.Contains(info, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis did not count %d blocked clients in 5 s: %q", n, info)
		}
	}
}

// waitNoClients waits until s holds no client connection, as after every
// client left, and fails the test after d.
func waitNoClients(t testing.TB, s *Server, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		s.mu.Lock()
		n := len(s.clients)
		s.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d clients still held %v after they left", n, d)
		}
		time.Sleep(time.Millisecond)
	}
}
