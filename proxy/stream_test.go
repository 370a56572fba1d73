package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	prom "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/resp"
)

// rawValue is n bytes that no policy of the tests compresses (min size
// above n) and that read back recognisably.
func rawValue(n int, seed byte) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte((i*7+int(seed))%26)
	}
	return string(b)
}

func setCommand(args ...string) []byte {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	return resp.AppendCommand(nil, bs...)
}

// TestProxy_StreamedSet: a SET of a large value the policy stores as it is
// passes through as it arrives: Redis holds the value exactly, with its
// options (EX, GET of the old value, which is a frame and reads decoded),
// this client's pipelined GET after it sees it, and the metric counts it.
func TestProxy_StreamedSet(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), codec.DefaultAlgorithm)
	e := startEnv(t, withMinSize(64<<20), func(s *Server) { s.Metrics = m })
	c := dialRaw(t, e.addr)
	direct := dialRaw(t, e.redis.Addr)

	big := rawValue(3<<20+17, 1)
	// Written in pieces with pauses, so the proxy sees the value arrive.
	cmd := append(setCommand("SET", "big", big, "EX", "100"), setCommand("GET", "big")...)
	for i := 0; i < len(cmd); i += 256 << 10 {
		c.write(cmd[i:min(i+256<<10, len(cmd))])
		time.Sleep(2 * time.Millisecond)
	}
	if r := c.read(); r != "+OK\r\n" {
		t.Fatalf("SET = %.80q", r)
	}
	if r := c.read(); r != bulk(big) {
		t.Fatalf("pipelined GET = %.80q (%d bytes), want the %d written", r, len(r), len(big))
	}
	if r := direct.do("GET", "big"); r != bulk(big) {
		t.Fatalf("Redis holds %.80q", r)
	}
	if ttl := direct.do("TTL", "big"); ttl != ":100\r\n" && ttl != ":99\r\n" {
		t.Fatalf("TTL = %q: EX after the value was lost", ttl)
	}
	if n := prom.ToFloat64(m.streams); n != 1 {
		t.Fatalf("streamed values = %v, want 1", n)
	}

	// SET ... GET returns the old value, decoded: a small compressed one.
	doc := compressible(4000, 3)
	enc, _ := codec.NewEncoder(codec.DefaultAlgorithm)
	frame, _ := enc.AppendFrame(nil, []byte(doc))
	direct.do("SET", "old", string(frame))
	if r := c.do("SET", "old", big, "GET"); r != bulk(doc) {
		t.Fatalf("SET old <big> GET = %.80q, want the old value decoded", r)
	}
	if r := direct.do("STRLEN", "old"); r != fmt.Sprintf(":%d\r\n", len(big)) {
		t.Fatalf("STRLEN old = %q", r)
	}
	if n := prom.ToFloat64(m.streams); n != 2 {
		t.Fatalf("streamed values = %v, want 2", n)
	}

	// A value that begins with the frame magic is wrapped, so it arrives
	// whole: no stream, and it reads back as written.
	magic := string(codec.Magic) + big[3:]
	if r := c.do("SET", "magic", magic); r != "+OK\r\n" {
		t.Fatalf("SET magic = %q", r)
	}
	if r := c.do("GET", "magic"); r != bulk(magic) {
		t.Fatalf("GET magic = %.80q", r)
	}
	if n := prom.ToFloat64(m.streams); n != 2 {
		t.Fatalf("streamed values = %v after a magic value, want 2", n)
	}

	// NX on an existing key: Redis's nil reply.
	if r := c.do("SET", "big", big, "NX"); r != "$-1\r\n" {
		t.Fatalf("SET NX = %q", r)
	}
	// IFEQ compares the stored value, which the proxy learns of only
	// after the value: a clear error, nothing written, the connection
	// goes on.
	if r := c.do("SET", "big", rawValue(2<<20, 9), "IFEQ", "x"); !strings.Contains(r, "IFEQ") || r[0] != '-' {
		t.Fatalf("SET IFEQ = %q", r)
	}
	if r := c.do("GET", "big"); r != bulk(big) {
		t.Fatalf("GET after the refused IFEQ = %.80q", r)
	}
	// A syntax error is Redis's.
	if r, w := c.do("SET", "big", big, "BOGUS"), direct.do("SET", "big", "v", "BOGUS"); r != w {
		t.Fatalf("SET BOGUS = %q, Redis %q", r, w)
	}
}

// TestProxy_StreamedSetOrder: while a client's large SET is on its way,
// other clients' commands run (as with Redis, which runs a command once it
// has all of it), and a command that reaches the proxy after the SET's last
// byte runs after it.
func TestProxy_StreamedSetOrder(t *testing.T) {
	e := startEnv(t, withMinSize(64<<20))
	a, b := dialRaw(t, e.addr), dialRaw(t, e.addr)
	b.do("SET", "k", "old")
	big := rawValue(4<<20, 2)
	cmd := setCommand("SET", "k", big)
	half := len(cmd) / 2
	a.write(cmd[:half])
	time.Sleep(20 * time.Millisecond)
	// Half of the value is in: another client is not held up, and sees
	// the old value, since the SET has not arrived whole.
	done := make(chan string, 1)
	go func() { done <- b.do("GET", "k") }()
	select {
	case r := <-done:
		if r != bulk("old") {
			t.Fatalf("GET during the stream = %.40q", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("another client's GET waited for the streamed SET")
	}
	a.write(cmd[half : len(cmd)-10])
	time.Sleep(20 * time.Millisecond)
	a.write(cmd[len(cmd)-10:])
	// The SET is whole: it runs, and another client's GET then reads it,
	// before the SET's own reply is read.
	time.Sleep(20 * time.Millisecond)
	if r := b.do("GET", "k"); r != bulk(big) {
		t.Fatalf("GET after the SET's last byte = %.40q (%d bytes)", r, len(r))
	}
	if r := a.read(); r != "+OK\r\n" {
		t.Fatalf("SET = %.80q", r)
	}
}

// TestProxy_StreamedSetClientLeaves: a client that leaves in the middle of
// a large value writes nothing (Redis drops the part it got with the
// connection that carried it), and the proxy serves the others.
func TestProxy_StreamedSetClientLeaves(t *testing.T) {
	e := startEnv(t, withMinSize(64<<20))
	other := dialRaw(t, e.addr)
	if r := other.do("PING"); r != "+PONG\r\n" {
		t.Fatalf("PING = %q", r)
	}
	// The proxy's own connections (the shared one, those that share
	// script prefixes): the stream's comes on top of them.
	base := upstreamClients(t, e.redis.Addr)
	c := dialRaw(t, e.addr)
	cmd := setCommand("SET", "partial", rawValue(4<<20, 3))
	c.write(cmd[:len(cmd)/2])
	time.Sleep(50 * time.Millisecond)
	c.nc.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if r := other.do("EXISTS", "partial"); r != ":0\r\n" {
			t.Fatalf("EXISTS partial = %q", r)
		}
		if time.Now().After(deadline) {
			break
		}
		if n := upstreamClients(t, e.redis.Addr); n <= base {
			break // only the proxy's own: the stream's is gone
		}
	}
	if r := other.do("SET", "x", "1"); r != "+OK\r\n" {
		t.Fatalf("SET after = %q", r)
	}
	if n := upstreamClients(t, e.redis.Addr); n > base {
		t.Fatalf("Redis has %d clients, %d before: the stream's connection stayed\n%s", n, base, dialRaw(t, e.redis.Addr).do("CLIENT", "LIST"))
	}
}

// upstreamClients counts Redis's clients other than the one asking.
func upstreamClients(t *testing.T, addr string) int {
	t.Helper()
	c := dialRaw(t, addr)
	defer c.nc.Close()
	list := c.do("CLIENT", "LIST")
	return bytes.Count([]byte(list), []byte("id=")) - 1
}

// TestProxy_DecodedAsWritten: a GET of a zstd frame that decodes to many
// MiB is decoded as it is written, byte for byte the value; one whose
// checksum is wrong ends the client's connection before the end of the
// value (never a whole wrong value), and other clients go on; one that
// fails at once gets the usual error.
func TestProxy_DecodedAsWritten(t *testing.T) {
	e := startEnv(t)
	direct := dialRaw(t, e.redis.Addr)
	enc, err := codec.NewEncoder(codec.Algorithm{ID: codec.IDZstd, Level: 3}, codec.WithMinSize(0))
	if err != nil {
		t.Fatal(err)
	}
	val := []byte(rawValue(20<<20+5, 4))
	frame, _ := enc.AppendFrame(nil, val)
	direct.do("SET", "doc", string(frame))
	c := dialRaw(t, e.addr)
	if r := c.do("GET", "doc"); r != bulk(string(val)) {
		t.Fatalf("GET doc: %d bytes, want the %d of the value", len(r), len(val))
	}
	if r := c.do("STRLEN", "doc"); r != fmt.Sprintf(":%d\r\n", len(val)) {
		t.Fatalf("STRLEN doc = %q", r)
	}

	h, _ := codec.ParseHeader(frame)
	h.Checksum ^= 1
	bad := append(codec.AppendHeader(nil, h), frame[h.Len:]...)
	direct.do("SET", "bad", string(bad))
	b := dialRaw(t, e.addr)
	b.write(setCommand("GET", "bad"))
	b.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(b.nc)
	if err != nil {
		t.Fatalf("reading the bad value: %v after %d bytes", err, len(got))
	}
	if len(got) >= len(bulk(string(val))) || !bytes.HasPrefix(got, []byte(fmt.Sprintf("$%d\r\n", len(val)))) {
		t.Fatalf("bad value: %d bytes, want a reply cut short (%.20q)", len(got), got)
	}
	if r := c.do("GET", "doc"); r != bulk(string(val)) {
		t.Fatalf("GET doc after: %d bytes", len(r))
	}

	// Cut inside its first piece: the usual error, the connection goes on.
	direct.do("SET", "cut", string(frame[:h.Len+100]))
	if r := c.do("GET", "cut"); !strings.HasPrefix(r, "-ERR squeeze: GET: stored value of key \"cut\" cannot be decoded") {
		t.Fatalf("GET cut = %.120q", r)
	}
	if r := c.do("PING"); r != "+PONG\r\n" {
		t.Fatalf("PING after = %q", r)
	}
}

// TestProxy_StreamedSetBadInput: a large value followed by malformed RESP
// gets Redis's protocol error and the connection closes, as directly, and
// nothing is stored; a Redis that dies while a value streams ends the
// client's connection or answers an error, never +OK.
func TestProxy_StreamedSetBadInput(t *testing.T) {
	e := startEnv(t, withMinSize(64<<20))
	big := rawValue(2<<20, 5)
	bad := append(setCommand("SET", "k", big), "XX\r\n"...)
	bad = append([]byte("*4"), bad[2:]...) // one more argument, malformed
	// Redis 7, 8.0 and Valkey answer with a protocol error and close; Redis
	// 8.6 reads nothing more from such a connection and never answers. The
	// proxy answers as the former do: a client is told, not left hanging.
	c0 := dialRaw(t, e.addr)
	c0.write(bad)
	c0.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(c0.nc)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("proxy: %v after %q", err, got)
	}
	if !bytes.HasPrefix(got, []byte("-ERR Protocol error")) || !bytes.HasSuffix(got, []byte("\r\n")) || bytes.Count(got, []byte("\r\n")) != 1 {
		t.Fatalf("malformed after a streamed value: proxy %q, want one protocol error, then the connection closed", got)
	}
	if r := dialRaw(t, e.addr).do("EXISTS", "k"); r != ":0\r\n" {
		t.Fatalf("EXISTS k = %q after the malformed command", r)
	}

	// Redis dies with half the value sent.
	c := dialRaw(t, e.addr)
	cmd := setCommand("SET", "k", rawValue(4<<20, 6))
	c.write(cmd[:len(cmd)/2])
	time.Sleep(50 * time.Millisecond)
	e.redis.Stop()
	c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	c.nc.Write(cmd[len(cmd)/2:]) // may fail: the proxy may have closed already
	rest, err := io.ReadAll(c.nc)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after Redis died: %v (%q)", err, rest)
	}
	if len(rest) > 0 && rest[0] != '-' {
		t.Fatalf("after Redis died mid-value the client got %.80q, want an error or a closed connection", rest)
	}
}

// TestStream_ReadRest: once the value has passed but for its tail, the
// rest of the streamed SET (the tail, its CRLF, the options) is read into
// the read buffer, however it arrives, and what follows it stays there.
func TestStream_ReadRest(t *testing.T) {
	s := newTestServer(t)
	mine, theirs := net.Pipe()
	defer mine.Close()
	defer theirs.Close()
	c := &client{s: s, nc: mine}
	tail := bytes.Repeat([]byte("v"), streamTail)
	rest := append(append(tail, "\r\n"...), resp.AppendCommand(nil, []byte("EX"), []byte("10"))[4:]...) // the options without their array header
	next := resp.AppendCommand(nil, []byte("PING"))
	c.in.rbuf = append(getReadBuf(), rest[:1000]...)
	go func() {
		theirs.Write(rest[1000 : len(rest)-3]) // the options cut in the middle
		theirs.Write(append(rest[len(rest)-3:len(rest):len(rest)], next...))
	}()
	st := streamedSet{c: c, key: []byte("k")}
	opts, whole, ok := st.readRest(5)
	if !ok || whole != len(rest) || len(opts) != 2 || string(opts[0]) != "EX" || string(opts[1]) != "10" {
		t.Fatalf("options %q, %d bytes of %d, ok %v", opts, whole, len(rest), ok)
	}
	if !bytes.Equal(c.in.rbuf[:whole], rest) {
		t.Fatal("the command in the read buffer is not the one sent")
	}
	if got := string(c.in.rbuf[whole:]); got != "" && !strings.HasPrefix(string(next), got) {
		t.Fatalf("after the command: %q", got)
	}
}

// writeCounter counts the writes to the connection it wraps.
type writeCounter struct {
	net.Conn
	writes int
}

func (w *writeCounter) Write(b []byte) (int, error) {
	w.writes++
	return w.Conn.Write(b)
}

// TestStream_PassPieces: a streamed value goes to Redis in pieces of
// streamPiece bytes, the part of it that came with the command's head
// in the first, whatever sizes the client writes it in, and arrives
// exactly as sent.
func TestStream_PassPieces(t *testing.T) {
	for _, tc := range []struct {
		name       string
		head, rest int
		writes     int
	}{
		{"head only", 100, 0, 1},
		{"less than a piece", 100, 5000, 1},
		{"a piece with the head", 1000, streamPiece - 1000, 1},
		{"a byte more than a piece", 1000, streamPiece - 999, 2},
		{"two pieces and a part", 64 << 10, 2*streamPiece + 12345 - 64<<10, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t)
			mine, theirs, upMine, upTheirs := streamPipes(t)
			value := []byte(rawValue(tc.head+tc.rest, 5))
			go func() { // the client writes in small pieces
				for b := value[tc.head:]; len(b) > 0; {
					n := min(len(b), 40000)
					if _, err := theirs.Write(b[:n]); err != nil {
						return
					}
					b = b[n:]
				}
			}()
			got := make(chan []byte)
			go func() { // Redis's side
				b, _ := io.ReadAll(upTheirs)
				got <- b
			}()
			counter := &writeCounter{Conn: upMine}
			st := streamedSet{c: &client{s: s, nc: mine}, up: &upConn{nc: counter}}
			if !st.passPieces(value[:tc.head], int64(tc.rest)) {
				t.Fatal("passPieces failed")
			}
			upMine.Close()
			if b := <-got; !bytes.Equal(b, value) {
				t.Fatalf("Redis got %d bytes, not the %d sent", len(b), len(value))
			}
			if counter.writes != tc.writes {
				t.Fatalf("%d writes to Redis, want %d", counter.writes, tc.writes)
			}
		})
	}
}

// TestStream_PassPiecesRedisGone: Redis's side closed while a value
// passes: passPieces reports the failure (the caller drops the SET with
// its connection) and does not hang on the client's remaining bytes.
func TestStream_PassPiecesRedisGone(t *testing.T) {
	s := newTestServer(t)
	mine, theirs, upMine, upTheirs := streamPipes(t)
	upTheirs.Close() // Redis is gone
	value := []byte(rawValue(3*streamPiece, 7))
	go theirs.Write(value)
	up := &upConn{nc: upMine, srv: s, closed: make(chan struct{})}
	st := streamedSet{c: &client{s: s, nc: mine}, up: up}
	done := make(chan bool)
	go func() { done <- st.passPieces(nil, int64(len(value))) }()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("passPieces succeeded with Redis gone")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("passPieces hung with Redis gone")
	}
}

// streamPipes returns the two pipes a streamed value passes through: the
// client's socket (the proxy's end, the client's) and Redis's (the
// proxy's end, Redis's), closed when the test ends.
func streamPipes(t *testing.T) (mine, theirs, upMine, upTheirs net.Conn) {
	mine, theirs = net.Pipe()
	upMine, upTheirs = net.Pipe()
	for _, c := range []net.Conn{mine, theirs, upMine, upTheirs} {
		t.Cleanup(func() { c.Close() })
	}
	return mine, theirs, upMine, upTheirs
}
