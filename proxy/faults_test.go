package proxy

import (
	"context"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
	"github.com/squeeze-kv/squeeze/resp"
)

// readAll reads until the peer closes or nothing comes for a while.
func readAll(t *testing.T, nc net.Conn) string {
	var out []byte
	buf := make([]byte, 4096)
	for {
		nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := nc.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return string(out)
		}
	}
}

// TestProxy_ProtocolErrors sends malformed input to Redis and to the proxy:
// both must answer the same bytes and then close.
func TestProxy_ProtocolErrors(t *testing.T) {
	e := startEnv(t)
	inputs := []string{
		"*2\r\n$3\r\nGET\r\n:1\r\n",
		"*x\r\n",
		"*1\r\n$-5\r\n",
		"*1\r\n$999999999999\r\n",
		"GET \"unbalanced\r\n",
		"SET k 'a'b\r\n",
		"PING\r\n*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n+oops\r\n",
		"*" + strings.Repeat("9", 70000),
		strings.Repeat("x", 70000),
	}
	for _, in := range inputs {
		var got [2]string
		for i, addr := range []string{e.redis.Addr, e.addr} {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			nc.Write([]byte(in))
			got[i] = readAll(t, nc)
			nc.Close()
		}
		if in == "SET k 'a'b\r\n" && strings.HasPrefix(got[0], "+OK") {
			// Valkey 9 joins a quoted part with the text after it; the
			// proxy parses inline commands as Redis does (documented).
			t.Logf("the server takes %q (Valkey 9): skipped", in)
			continue
		}
		if got[0] != got[1] {
			t.Errorf("input %.40q:\nredis: %q\nproxy: %q", in, got[0], got[1])
		}
		if !strings.Contains(got[1], "Protocol error") {
			t.Errorf("input %.40q: no protocol error in %q", in, got[1])
		}
	}
}

// startRedisAt starts redis-server on a fixed port (to restart it there).
func startRedisAt(t *testing.T, dir string, port int) *exec.Cmd {
	t.Helper()
	bin := testutil.ServerPath()
	if bin == "" {
		t.Skip("redis-server not installed")
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if nc, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			nc.Close()
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			return cmd
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	t.Fatal("redis-server did not start")
	return nil
}

// TestProxy_UpstreamRestart kills Redis under in-flight commands: clients
// on the shared connections get an error, keep their connection, and the
// proxy reconnects once Redis is back; a client with a private connection
// (a blocked BLPOP) sees its connection end, as with Redis.
func TestProxy_UpstreamRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	dir := t.TempDir()
	port := testutil.FreePort(t)
	srv := startRedisAt(t, dir, port)
	e := startProxy(t, "redis://127.0.0.1:"+strconv.Itoa(port), nil)
	shared := dialRaw(t, e.addr)
	blocked := dialRaw(t, e.addr)
	if got := shared.do("SET", "k", compressible(5000, 0)); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	blocked.send([]string{"BLPOP", "nolist", "0"}) // in flight on a pinned connection
	waitBlocked(t, "127.0.0.1:"+strconv.Itoa(port), 1)
	srv.Process.Kill()
	srv.Wait()
	// The pinned client lost its connection state: its connection ends
	// without a reply, as a client of the killed Redis sees it, so its
	// library reconnects instead of taking an error for a failed command.
	if got := blocked.read(); got != "" {
		t.Fatalf("in-flight BLPOP got %q, want the connection closed without a reply", got)
	}
	if got := shared.do("GET", "k"); !strings.HasPrefix(got, "-ERR squeeze: upstream") {
		t.Fatalf("GET with Redis down got %q, want an upstream error", got)
	}
	// The commands that run scripts synchronously say so too.
	if got := shared.do("LPOS", "l", "x"); !strings.HasPrefix(got, "-ERR squeeze: LPOS: upstream") {
		t.Fatalf("LPOS with Redis down got %q, want an upstream error", got)
	}
	startRedisAt(t, dir, port)
	var got string
	for i := 0; i < 50; i++ { // the first command after a restart may still see the old connection fail
		if got = shared.do("SET", "k2", "v"); got == "+OK\r\n" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got != "+OK\r\n" || shared.do("GET", "k2") != bulk("v") {
		t.Fatalf("after restart: %q", got)
	}
	// A restarted Redis has no scripts cached: the list search sends its
	// text after NOSCRIPT.
	shared.do("RPUSH", "l2", "a", compressible(300, 1))
	if got := shared.do("LPOS", "l2", compressible(300, 1)); got != ":1\r\n" {
		t.Fatalf("LPOS after restart: %q", got)
	}
}

// TestProxy_SlowClient pipelines many large GETs without reading replies:
// the proxy stops reading from the client instead of buffering replies.
func TestProxy_SlowClient(t *testing.T) {
	e := startEnv(t, func(s *Server) { s.MaxInFlight = 16 })
	c := dialRaw(t, e.addr)
	big := compressible(200_000, 3)
	if got := c.do("SET", "big", big); got != "+OK\r\n" {
		t.Fatal(got)
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	req := resp.AppendCommand(nil, []byte("GET"), []byte("big"))
	const n = 20000 // 4 GB of replies if the proxy buffered them all
	sent := 0
	c.nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
	for ; sent < n; sent++ {
		if _, err := c.nc.Write(req); err != nil {
			break // the proxy stopped reading: backpressure
		}
	}
	time.Sleep(200 * time.Millisecond)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapInuse) - int64(before.HeapInuse); grown > 64<<20 {
		t.Fatalf("heap grew by %d MB with a slow client", grown>>20)
	}
	if sent == n {
		t.Logf("all %d requests written (kernel buffers absorbed them)", n)
	}
	// Reading resumes, and the replies are right.
	c.nc.SetWriteDeadline(time.Time{})
	for i := 0; i < 3; i++ {
		if got := c.read(); got != bulk(big) {
			t.Fatalf("reply %d: %d bytes", i, len(got))
		}
	}
}

// getCalls returns how many GETs the Redis behind direct has run (INFO
// commandstats).
func getCalls(direct *rawConn) int {
	info := direct.do("INFO", "commandstats")
	_, rest, ok := strings.Cut(info, "cmdstat_get:calls=")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
	return n
}

// TestProxy_ClientGoneMidPipeline: a client that pipelines thousands of
// GETs of a large value and leaves without reading stops costing Redis
// work soon after its replies can no longer be written: the proxy runs no
// more of the commands it has already read, as Redis drops the query
// buffer of a client it frees. (Before, it ran every command it had read,
// and under the race detector Close waited seconds for them.)
func TestProxy_ClientGoneMidPipeline(t *testing.T) {
	e := startEnv(t)
	setup := dialRaw(t, e.addr)
	big := compressible(200_000, 4)
	if got := setup.do("SET", "big", big); got != "+OK\r\n" {
		t.Fatal(got)
	}
	direct := dialRaw(t, e.redis.Addr)
	gets := func() int { return getCalls(direct) }
	const n = 5000
	var pipeline []byte
	for range n {
		pipeline = resp.AppendCommand(pipeline, []byte("GET"), []byte("big"))
	}
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.(*net.TCPConn).SetReadBuffer(4 << 10) // the replies pile up at once
	if _, err := nc.Write(pipeline); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	nc.(*net.TCPConn).SetLinger(0) // leave with a reset, replies unread
	nc.Close()
	last, stable := gets(), 0
	for stable < 5 {
		time.Sleep(100 * time.Millisecond)
		if now := gets(); now != last {
			last, stable = now, 0
		} else {
			stable++
		}
	}
	t.Logf("Redis ran %d of the %d GETs", last, n)
	if last > n/2 {
		t.Fatalf("Redis ran %d of %d GETs for a client that had left", last, n)
	}
	// The proxy still serves others.
	if got := dialRaw(t, e.addr).do("STRLEN", "big"); got != ":200000\r\n" {
		t.Fatalf("STRLEN after: %q", got)
	}
}

// TestProxy_SlowClientReplyBytes: a client that sends GETs of large values
// one at a time and reads none of the replies stops being read once
// MaxReplyBytes of replies wait for it, long before MaxInFlight commands;
// when it reads, every reply arrives.
func TestProxy_SlowClientReplyBytes(t *testing.T) {
	e := startEnv(t, func(s *Server) { s.MaxInFlight = 4096; s.MaxReplyBytes = 1 << 20 })
	c := dialRaw(t, e.addr)
	c.nc.(*net.TCPConn).SetReadBuffer(64 << 10)
	noise := make([]byte, 400_000) // incompressible: stored as it is
	rand.NewChaCha8([32]byte{5}).Read(noise)
	big := string(noise)
	if got := c.do("SET", "big", big); got != "+OK\r\n" {
		t.Fatal(got)
	}
	direct := dialRaw(t, e.redis.Addr)
	gets := func() int { return getCalls(direct) }
	const n = 100
	req := resp.AppendCommand(nil, []byte("GET"), []byte("big"))
	for range n { // one command per write, so each is read on its own
		c.write(req)
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	// 40 MB of replies: the socket buffers take a few MB, the proxy 1 MiB
	// (3 replies), and then it stops reading the client.
	if ran := gets(); ran > n/2 {
		t.Fatalf("Redis ran %d of %d GETs for a client that reads nothing; want at most %d", ran, n, n/2)
	} else {
		t.Logf("Redis ran %d of %d GETs before the proxy stopped reading", ran, n)
	}
	for i := range n {
		if got := c.read(); got != bulk(big) {
			t.Fatalf("reply %d: %d bytes", i, len(got))
		}
	}
}

// TestProxy_CorruptValue stores a frame with a bad checksum directly in
// Redis: the proxy answers with an error naming the key and keeps the
// connection open.
func TestProxy_CorruptValue(t *testing.T) {
	e := startEnv(t)
	enc, _ := codec.NewEncoder(codec.DefaultAlgorithm, codec.WithMinSize(0))
	frame := enc.AppendEncode(nil, []byte(compressible(10_000, 5)))
	bad := append([]byte(nil), frame...)
	h, err := codec.ParseHeader(bad)
	if err != nil || !h.HasChecksum {
		t.Fatalf("frame header: %+v %v", h, err)
	}
	bad[h.Len-1] ^= 0xFF // last checksum byte
	d := dialRaw(t, e.redis.Addr)
	// A none frame without checksum (the form the inspect script writes)
	// is read by the script itself; one whose length does not match its
	// bytes is left to the proxy, which refuses it.
	d.send([]string{"SET", "broken", string(bad)}, []string{"SET", "fine", string(frame)}, []string{"HSET", "h", "f", string(bad)},
		[]string{"SET", "plain", "\xC1SQ\x01\x00\x00\x03abc"}, []string{"SET", "short", "\xC1SQ\x01\x00\x00\x05abc"})
	for i := 0; i < 5; i++ {
		d.read()
	}
	p := dialRaw(t, e.addr)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"GET", "broken"}, `-ERR squeeze: GET: stored value of key "broken" cannot be decoded: codec: corrupt frame: checksum mismatch`},
		// One bad value does not hide its neighbours: an error element in
		// its place.
		{[]string{"MGET", "broken", "fine"}, "*2\r\n-ERR squeeze: MGET: stored value of key \"broken\" cannot be decoded: codec: corrupt frame: checksum mismatch"},
		{[]string{"HGET", "h", "f"}, `-ERR squeeze: HGET: stored value of key "h" cannot be decoded`},
		{[]string{"APPEND", "broken", "x"}, `-ERR squeeze: APPEND: stored value of key "broken" cannot be decoded`},
		{[]string{"GET", "fine"}, bulk(compressible(10_000, 5))},
		{[]string{"GETRANGE", "plain", "1", "-1"}, bulk("bc")},
		{[]string{"STRLEN", "plain"}, ":3\r\n"},
		// STRLEN and HSTRLEN decode as GET does: a corrupt frame is an
		// error, not the length its header claims.
		{[]string{"STRLEN", "broken"}, `-ERR squeeze: STRLEN: stored value of key "broken" cannot be decoded: codec: corrupt frame: checksum mismatch`},
		{[]string{"HSTRLEN", "h", "f"}, `-ERR squeeze: HSTRLEN: stored value of key "h" cannot be decoded`},
		{[]string{"STRLEN", "fine"}, ":10000\r\n"},
		{[]string{"GETRANGE", "short", "0", "-1"}, `-ERR squeeze: GETRANGE: stored value of key "short" cannot be decoded`},
		{[]string{"APPEND", "short", "x"}, `-ERR squeeze: APPEND: stored value of key "short" cannot be decoded`},
		{[]string{"GET", "short"}, `-ERR squeeze: GET: stored value of key "short" cannot be decoded`},
		{[]string{"PING"}, "+PONG\r\n"},
	}
	for _, tt := range tests {
		if got := p.do(tt.args...); !strings.HasPrefix(got, tt.want) {
			t.Errorf("%q: got %.200q, want prefix %q", tt.args, got, tt.want)
		}
	}
	if got := p.do("MGET", "broken", "fine"); !strings.HasSuffix(got, "\r\n"+bulk(compressible(10_000, 5))) {
		t.Errorf("MGET broken fine: the good value is not in its place: %.120q", got)
	}
	if got := d.do("GET", "short"); got != bulk("\xC1SQ\x01\x00\x00\x05abc") {
		t.Errorf("the refused value changed in Redis: %q", got)
	}
}

// TestProxy_MaxValue refuses to decode values above the decoder's limit.
func TestProxy_MaxValue(t *testing.T) {
	// (A limit under the zstd minimum window, 1 KiB, makes the codec refuse
	// every zstd frame; reported to the codec's owner.)
	dec, err := codec.NewDecoder(codec.WithMaxDecodedSize(100_000))
	if err != nil {
		t.Fatal(err)
	}
	e := startEnv(t, func(s *Server) { s.Decoder = dec })
	p := dialRaw(t, e.addr)
	p.do("SET", "small", compressible(90_000, 1))
	p.do("SET", "large", compressible(500_000, 1))
	if got := p.do("GET", "small"); got != bulk(compressible(90_000, 1)) {
		t.Fatalf("small: %.200q", got)
	}
	if got := p.do("GET", "large"); !strings.Contains(got, `key "large"`) || !strings.Contains(got, "above limit") {
		t.Fatalf("large: %q", got)
	}
	if got := p.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("connection after refusal: %q", got)
	}
}

// TestProxy_RejectScripts: --scripts=reject answers an error and keeps the
// connection open; by default scripts run, on plain values.
func TestProxy_RejectScripts(t *testing.T) {
	e := startEnv(t, func(s *Server) { s.RejectScripts = true })
	p := dialRaw(t, e.addr)
	if got := p.do("EVAL", "return 1", "0"); !strings.HasPrefix(got, "-ERR squeeze: EVAL is disabled by --scripts=reject") {
		t.Fatalf("EVAL: %q", got)
	}
	if got := p.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("after EVAL: %q", got)
	}
	e2 := startEnv(t)
	p2 := dialRaw(t, e2.addr)
	p2.do("SET", "k", compressible(1000, 2))
	if got := p2.do("EVAL", "return redis.call('GET', KEYS[1])", "1", "k"); got != bulk(compressible(1000, 2)) {
		t.Fatalf("EVAL GET through proxy: %.80q", got)
	}
	// The declared key was made plain before the script (issue 22).
	if got := p2.do("EVAL", "return redis.call('STRLEN', KEYS[1])", "1", "k"); got != ":1000\r\n" {
		t.Fatalf("STRLEN in a script = %q, want the value's length", got)
	}
}

var _ = context.Background
var _ = os.Getenv
var _ = filepath.Join

// TestProxy_SlowClientDoesNotStallOthers: the reader of a shared
// connection writes replies to clients itself, but never blocks on one: a
// client that stops reading leaves its replies to its own writer, and
// another client on the same shared connection keeps getting answers.
func TestProxy_SlowClientDoesNotStallOthers(t *testing.T) {
	e := startEnv(t, func(s *Server) { s.MaxInFlight = 16; s.SharedConns = 1 })
	slow := dialRaw(t, e.addr)
	big := compressible(200_000, 3)
	if got := slow.do("SET", "big", big); got != "+OK\r\n" {
		t.Fatal(got)
	}
	req := resp.AppendCommand(nil, []byte("GET"), []byte("big"))
	slow.nc.SetWriteDeadline(time.Now().Add(time.Second))
	for i := 0; i < 2000; i++ { // bounded; stops when the proxy stops reading
		if _, err := slow.nc.Write(req); err != nil {
			break
		}
	}
	other := dialRaw(t, e.addr)
	other.nc.SetDeadline(time.Now().Add(10 * time.Second)) // a hang guard, not a speed target
	for i := 0; i < 100; i++ {
		if got := other.do("SET", "k", "v"); got != "+OK\r\n" {
			t.Fatalf("SET %d: %q", i, got)
		}
		if got := other.do("GET", "k"); got != "$1\r\nv\r\n" {
			t.Fatalf("GET %d: %q", i, got)
		}
	}
	slow.nc.SetDeadline(time.Now().Add(10 * time.Second))
	for i := 0; i < 3; i++ {
		if got := slow.read(); got != bulk(big) {
			t.Fatalf("slow reply %d: %d bytes", i, len(got))
		}
	}
}
