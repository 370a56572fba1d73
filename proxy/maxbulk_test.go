package proxy

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/internal/testutil"
	"github.com/squeeze-kv/squeeze/resp"
)

// TestProxy_MaxBulkFromRedis: with MaxBulk zero the proxy holds clients to
// Redis's own proto-max-bulk-len, read on its shared connections, so a
// value Redis would refuse gets Redis's reply, byte for byte, and never
// reaches Redis, where its protocol error would close a shared connection
// under other clients. A Redis that refuses CONFIG leaves the default.
func TestProxy_MaxBulkFromRedis(t *testing.T) {
	r := testutil.StartRedis(t)
	admin := dialRaw(t, r.Addr)
	if got := admin.do("CONFIG", "SET", "proto-max-bulk-len", "2mb"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	var log lockedBuffer
	e := startProxy(t, r.URL(), r, func(s *Server) { s.Logger = slog.New(slog.NewTextHandler(&log, nil)) }) // MaxBulk 0
	// Serve connects at once, before any client: the limit is Redis's
	// for the first command.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, fromRedis := e.srv.MaxBulkInForce(); n == 2<<20 && fromRedis {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no connection read Redis's limit: %d in force (from Redis: %v), want 2 MiB", n, fromRedis)
		}
	}
	other := dialRaw(t, e.addr)
	if got := other.do("SET", "small", "v"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if want := `msg="clients held to Redis's proto-max-bulk-len" bytes=2097152 before=0`; !strings.Contains(log.String(), want) {
		t.Errorf("log lacks %s:\n%s", want, log.String())
	}

	// 3 MB of JSON compresses far below 2 MB, but Redis refuses the
	// argument as sent, from its length alone: so does the proxy, with the
	// same error, and closes the connection as Redis does. (The test sends
	// the start of the argument only: both close before the rest.)
	big := compressible(3<<20, 1)
	head := []byte("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$" + strconv.Itoa(len(big)) + "\r\n" + big[:1000])
	direct := dialRaw(t, e.redis.Addr)
	direct.write(head)
	want := direct.read()
	if want != "-ERR Protocol error: invalid bulk length\r\n" {
		t.Fatalf("Redis answered %q", want)
	}
	via := dialRaw(t, e.addr)
	via.write(head)
	if got := via.read(); got != want {
		t.Fatalf("through the proxy: %q, want Redis's %q", got, want)
	}
	if got := via.read(); got != "" {
		t.Fatalf("the connection stays open: %q", got)
	}
	if got := other.do("GET", "small"); got != bulk("v") {
		t.Fatalf("another client after the refused value: %q", got)
	}
	if got := admin.do("EXISTS", "big"); got != ":0\r\n" {
		t.Fatalf("EXISTS big: %q", got)
	}
	// Within the limit, values pass.
	if got := other.do("SET", "mid", compressible(1<<20, 2)); got != "+OK\r\n" {
		t.Fatal(got)
	}

	// An explicit MaxBulk wins over Redis's.
	fixed := startProxy(t, e.redis.URL(), e.redis, func(s *Server) { s.MaxBulk = 4 << 20 })
	c := dialRaw(t, fixed.addr)
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatal(got)
	}
	if n, fromRedis := fixed.srv.MaxBulkInForce(); n != 4<<20 || fromRedis {
		t.Fatalf("MaxBulk 4 MiB: %d in force (from Redis: %v)", n, fromRedis)
	}
	if got := c.do("SET", "big", big); got != "+OK\r\n" { // stored compressed, under Redis's limit
		t.Fatalf("MaxBulk 4 MiB, 3 MB of JSON: %q", got)
	}

	// A user without CONFIG: the default stays.
	if got := admin.do("ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all", "-config"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	noConfig := startProxy(t, "redis://app:pw@"+e.redis.Addr, e.redis)
	c = dialRaw(t, noConfig.addr)
	if got := c.do("SET", "small", "v"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if n, fromRedis := noConfig.srv.MaxBulkInForce(); n != 512<<20 || fromRedis {
		t.Fatalf("CONFIG refused: %d (from Redis: %v), want the default", n, fromRedis)
	}
}

// lockedBuffer is a bytes.Buffer that goroutines may share, for logs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLearnBulkLimit: only a name and a positive number, as an array
// (RESP2) or a map (RESP3), change the limit; anything else from Redis
// (an error, an empty reply of a server without the setting, a value
// that is not a number) leaves it as it was.
func TestLearnBulkLimit(t *testing.T) {
	tests := []struct {
		reply string
		want  int64
	}{
		{"*2\r\n$18\r\nproto-max-bulk-len\r\n$7\r\n2097152\r\n", 2097152},
		{"%1\r\n$18\r\nproto-max-bulk-len\r\n$7\r\n4194304\r\n", 4194304},
		{"*0\r\n", 0},
		{"-NOPERM this user has no permissions to run the 'config|get' command\r\n", 0},
		{"*2\r\n$18\r\nproto-max-bulk-len\r\n$3\r\nbig\r\n", 0},
		{"*2\r\n$18\r\nproto-max-bulk-len\r\n$2\r\n-1\r\n", 0},
		{"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n", 0},
		{"+OK\r\n", 0},
	}
	for _, tt := range tests {
		v, _, err := resp.ReadValue([]byte(tt.reply))
		if err != nil {
			t.Fatalf("%q: %v", tt.reply, err)
		}
		s := &Server{Logger: quietLogger()}
		s.learnBulkLimit(v)
		if got := s.upstreamBulk.Load(); got != tt.want {
			t.Errorf("%q: learned %d, want %d", tt.reply, got, tt.want)
		}
	}
}
