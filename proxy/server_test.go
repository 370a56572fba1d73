package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/internal/testutil"
	"github.com/squeeze-kv/squeeze/resp"
)

func TestParseUpstream(t *testing.T) {
	tests := []struct {
		in      string
		want    Upstream
		wantErr string
	}{
		{"redis://127.0.0.1:6379", Upstream{Network: "tcp", Addr: "127.0.0.1:6379"}, ""},
		{"127.0.0.1:7000", Upstream{Network: "tcp", Addr: "127.0.0.1:7000"}, ""},
		{"redis://localhost", Upstream{Network: "tcp", Addr: "localhost:6379"}, ""},
		{"redis://:secret@h:1/3", Upstream{Network: "tcp", Addr: "h:1", Password: "secret", DB: 3}, ""},
		{"redis://secret@h:1", Upstream{Network: "tcp", Addr: "h:1", Password: "secret"}, ""},
		{"redis://user:pw@h:1/0", Upstream{Network: "tcp", Addr: "h:1", Username: "user", Password: "pw"}, ""},
		{"unix:///run/redis.sock?db=2", Upstream{Network: "unix", Addr: "/run/redis.sock", DB: 2}, ""},
		{"http://h:1", Upstream{}, "scheme must be redis"},
		{"redis://h:1/x", Upstream{}, "not a number"},
		{"unix://", Upstream{}, "missing socket path"},
	}
	for _, tt := range tests {
		got, err := ParseUpstream(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.Network != tt.want.Network || got.Addr != tt.want.Addr || got.Username != tt.want.Username || got.Password != tt.want.Password || got.DB != tt.want.DB {
			t.Errorf("%s: got %+v %v, want %+v", tt.in, got, err, tt.want)
		}
	}
	if u, _ := ParseUpstream("rediss://h:1"); u.TLS == nil || u.TLS.ServerName != "h" {
		t.Errorf("rediss: no TLS config: %+v", u)
	}
}

// TestProxy_UpstreamAuthDBUnix: the password and database come from the
// URL, and unix sockets work.
func TestProxy_UpstreamAuthDBUnix(t *testing.T) {
	r := testutil.StartRedis(t)
	if r.Socket == "" {
		t.Skip("no unix socket (path too long)")
	}
	// Set the password after start: testutil's readiness check pings
	// without one.
	if got := dialRaw(t, r.Addr).do("CONFIG", "SET", "requirepass", "s3cret"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	for _, url := range []string{"redis://:s3cret@" + r.Addr + "/2", "unix://:s3cret@" + r.Socket + "?db=2"} {
		e := startProxy(t, url, r)
		p := dialRaw(t, e.addr)
		if got := p.do("SET", "in2", compressible(1000, 1)); got != "+OK\r\n" {
			t.Fatalf("%s: SET: %q", url, got)
		}
		d := dialRaw(t, r.Addr)
		d.do("AUTH", "s3cret")
		d.do("SELECT", "2")
		if got := d.do("EXISTS", "in2"); got != ":1\r\n" {
			t.Fatalf("%s: key not in db 2: %q", url, got)
		}
		d.do("DEL", "in2")
	}
	// An ACL user with its password.
	d := dialRaw(t, r.Addr)
	d.do("AUTH", "s3cret")
	if got := d.do("ACL", "SETUSER", "alice", "on", ">alicepw", "~*", "&*", "+@all"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	ea := startProxy(t, "redis://alice:alicepw@"+r.Addr, r)
	if got := dialRaw(t, ea.addr).do("ACL", "WHOAMI"); got != "$5\r\nalice\r\n" {
		t.Fatalf("ACL user: %q", got)
	}
	e := startProxy(t, "redis://:wrong@"+r.Addr, r)
	if got := dialRaw(t, e.addr).do("PING"); !strings.Contains(got, "refused AUTH") {
		t.Fatalf("wrong password: %q", got)
	}
}

// TestServer_ShutdownDrains: Shutdown lets commands already read finish,
// a blocked BLPOP included, then closes the connection.
func TestServer_ShutdownDrains(t *testing.T) {
	e := startEnv(t)
	c := dialRaw(t, e.addr)
	big := compressible(5000, 2)
	c.do("SET", "k", big)
	c.send([]string{"GET", "k"}, []string{"BLPOP", "none", "1"}, []string{"GET", "k"})
	waitBlocked(t, e.redis.Addr, 1) // the proxy has passed the BLPOP on
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.srv.Shutdown(ctx) }()
	for i, want := range []string{bulk(big), "*-1\r\n", bulk(big), ""} {
		if got := c.read(); got != want {
			t.Fatalf("reply %d: %.80q, want %.80q", i, got, want)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// TestServer_Ready: ready while Redis answers; the deadline's error while
// Redis does not answer (CLIENT PAUSE); the dial error once Redis is gone;
// ErrServerClosed after Close.
func TestServer_Ready(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.srv.Ready(ctx); err != nil {
		t.Fatalf("Ready with Redis up: %v", err)
	}
	// A Redis that does not answer: the deadline ends the check.
	if got := dialRaw(t, e.redis.Addr).do("CLIENT", "PAUSE", "1500", "ALL"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	if err := e.srv.Ready(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Ready with Redis paused: %v, want the deadline", err)
	}
	e.redis.Stop()
	start := time.Now()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	err := e.srv.Ready(ctx2)
	if err == nil {
		t.Fatal("Ready with Redis stopped: nil")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Ready took %v", d)
	}
	t.Logf("Redis stopped: %v", err)
	e.srv.Close()
	if err := e.srv.Ready(context.Background()); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Ready after Close: %v, want ErrServerClosed", err)
	}
}

// TestLearnCaps: what the server lacks comes from COMMAND INFO (nil for an
// unknown command) and COMMAND DOCS SET (IFEQ named or not); a refusal or a
// reply of another form changes nothing, and the commands count as known.
func TestLearnCaps(t *testing.T) {
	val := func(raw string) resp.Value {
		v, _, err := resp.ReadValue([]byte(raw))
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		return v
	}
	docsWith := "*2\r\n$3\r\nset\r\n*2\r\n$5\r\ntoken\r\n$4\r\nIFEQ\r\n"
	docsWithout := "*2\r\n$3\r\nset\r\n*2\r\n$5\r\ntoken\r\n$2\r\nNX\r\n"
	for _, tt := range []struct {
		name, info, docs string
		want             uint32
	}{
		{"Redis 7", "*3\r\n*-1\r\n*-1\r\n*-1\r\n", docsWithout, lacksSetIf | lacksDelex | lacksDigest | lacksDelifeq},
		{"Valkey 9", "*3\r\n*-1\r\n*-1\r\n*1\r\n$7\r\ndelifeq\r\n", docsWith, lacksDelex | lacksDigest},
		{"Redis 8.4", "*3\r\n*1\r\n$5\r\ndelex\r\n*1\r\n$6\r\ndigest\r\n*-1\r\n", docsWith, lacksDelifeq},
		{"RESP3 nulls", "*3\r\n_\r\n_\r\n_\r\n", "%1\r\n$3\r\nset\r\n*0\r\n", lacksSetIf | lacksDelex | lacksDigest | lacksDelifeq},
		{"COMMAND refused", "-NOPERM no\r\n", "-NOPERM no\r\n", 0},
		{"DOCS refused", "*3\r\n*-1\r\n*-1\r\n*-1\r\n", "-ERR unknown subcommand\r\n", 0},
		{"wrong count", "*2\r\n*-1\r\n*-1\r\n", docsWith, 0},
	} {
		s := &Server{}
		s.lacks.Store(0)
		s.learnCaps(val(tt.info), val(tt.docs))
		if got := s.lacks.Load(); got != tt.want {
			t.Errorf("%s: lacks %04b, want %04b", tt.name, got, tt.want)
		}
		for _, c := range []struct {
			in, lacking *cmdInfo
			bit         uint32
		}{{setIf, setCmd, lacksSetIf}, {delexIf, delexCmd, lacksDelex}, {digestCmd, unknownCmd, lacksDigest}, {delifeqCmd, unknownCmd, lacksDelifeq}} {
			want := c.in
			if tt.want&c.bit != 0 {
				want = c.lacking
			}
			if got := s.served(c.in); got != want {
				t.Errorf("%s: served(%s) = %s, want %s", tt.name, c.in.name, got.name, want.name)
			}
		}
	}
}
