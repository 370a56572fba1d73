package proxy

import (
	"strings"
	"testing"
)

// Client-side caching (CLIENT TRACKING) through the proxy: the same
// invalidation pushes as Redis sends, in the same place among the replies.

// readUntil reads replies until one equals last, and returns them all.
func (c *rawConn) readUntil(last string) []string {
	c.t.Helper()
	var got []string
	for range 20 {
		r := c.read()
		if r == "" {
			c.t.Fatalf("connection ended after %q", got)
		}
		got = append(got, r)
		if r == last {
			return got
		}
	}
	c.t.Fatalf("no %q among %q", last, got)
	return nil
}

func TestTracking_PushAfterOwnWriteReply(t *testing.T) {
	e := startEnv(t)
	var seqs []string
	for _, addr := range []string{e.redis.Addr, e.addr} {
		tr, other := dialRaw(t, addr), dialRaw(t, addr)
		tr.do("HELLO", "3")
		if got := tr.do("CLIENT", "TRACKING", "ON"); got != "+OK\r\n" {
			t.Fatalf("CLIENT TRACKING ON = %q", got)
		}
		other.do("SET", "k", "hello")
		if got := tr.do("GET", "k"); got != bulk("hello") {
			t.Fatalf("GET = %q", got)
		}
		// The client's own write to a key it caches: the reply, then the
		// invalidation (Redis sends it after the reply of the command that
		// caused it).
		tr.send([]string{"APPEND", "k", "x"}, []string{"PING"})
		seqs = append(seqs, strings.Join(tr.readUntil("+PONG\r\n"), ""))
		other.do("DEL", "k")
	}
	if seqs[0] != seqs[1] {
		t.Fatalf("direct %q\nproxy  %q", seqs[0], seqs[1])
	}
	if !strings.HasPrefix(seqs[0], ":6\r\n>2\r\n$10\r\ninvalidate\r\n") {
		t.Fatalf("direct %q: not the reply, then the push", seqs[0])
	}
}

// trackingWrites is what TestTracking_WritesStartNoTracking sends: writes
// to keys the tracking client never read (plain and compressed values),
// each twice, then a read and two more writes; only the write after that
// read may cause an invalidation.
func trackingWrites(big string) [][]string {
	return [][]string{
		{"APPEND", "plain", "x"}, {"APPEND", "plain", "y"},
		{"APPEND", "doc", "x"}, {"APPEND", "doc", "y"},
		{"SETRANGE", "doc2", "3", "zz"}, {"SETRANGE", "doc2", "5", "zz"},
		{"SETBIT", "doc3", "7", "1"}, {"SETBIT", "doc3", "9", "1"},
		{"BITFIELD", "doc4", "SET", "u8", "0", "65"}, {"BITFIELD", "doc4", "INCRBY", "u8", "8", "1"},
		{"INCRBYFLOAT", "num", "1.5"}, {"INCRBYFLOAT", "num", "1.5"},
		{"GET", "doc"}, {"APPEND", "doc", "z"}, {"APPEND", "doc", "w"},
		{"PING"},
	}
}

// TestTracking_WritesStartNoTracking: Redis tracks the keys a client reads,
// not those it writes. The proxy runs APPEND, SETRANGE, SETBIT and BITFIELD
// in a script that reads the key first; it must not make Redis track it, so
// a second write to a key the client never read sends no invalidation.
// RESP3 pushes and RESP2 redirection to a subscribed client alike.
func TestTracking_WritesStartNoTracking(t *testing.T) {
	e := startEnv(t)
	big := compressible(3000, 1)
	setup := func(c *rawConn) {
		for _, k := range []string{"doc", "doc2", "doc3", "doc4"} {
			c.do("SET", k, big)
		}
		c.do("SET", "plain", "hello")
		c.do("SET", "num", "1")
	}
	t.Run("resp3", func(t *testing.T) {
		var seqs []string
		for _, addr := range []string{e.redis.Addr, e.addr} {
			tr, other := dialRaw(t, addr), dialRaw(t, addr)
			other.do("FLUSHALL")
			setup(other)
			tr.do("HELLO", "3")
			if got := tr.do("CLIENT", "TRACKING", "ON"); got != "+OK\r\n" {
				t.Fatalf("CLIENT TRACKING ON = %q", got)
			}
			tr.send(trackingWrites(big)...)
			seqs = append(seqs, strings.Join(tr.readUntil("+PONG\r\n"), ""))
		}
		if seqs[0] != seqs[1] {
			t.Fatalf("direct %q\nproxy  %q", seqs[0], seqs[1])
		}
		if n := strings.Count(seqs[0], "invalidate"); n != 1 {
			t.Fatalf("direct sent %d invalidations, want 1: %q", n, seqs[0])
		}
	})
	t.Run("resp2-redirect", func(t *testing.T) {
		var seqs []string
		for _, addr := range []string{e.redis.Addr, e.addr} {
			tr, other, sub := dialRaw(t, addr), dialRaw(t, addr), dialRaw(t, addr)
			other.do("FLUSHALL")
			setup(other)
			id := strings.TrimSuffix(strings.TrimPrefix(sub.do("CLIENT", "ID"), ":"), "\r\n")
			sub.do("SUBSCRIBE", "__redis__:invalidate")
			if got := tr.do("CLIENT", "TRACKING", "ON", "REDIRECT", id); got != "+OK\r\n" {
				t.Fatalf("CLIENT TRACKING ON REDIRECT %s = %q", id, got)
			}
			tr.send(trackingWrites(big)...)
			tr.readUntil("+PONG\r\n")
			// The subscriber's messages, ended by one the test publishes.
			other.do("PUBLISH", "__redis__:invalidate", "end")
			var got []string
			for r := sub.read(); ; r = sub.read() {
				if r == "" {
					t.Fatalf("subscriber's connection ended after %q", got)
				}
				got = append(got, r)
				if strings.Contains(r, "$3\r\nend\r\n") {
					break
				}
			}
			seqs = append(seqs, strings.Join(got, ""))
		}
		if seqs[0] != seqs[1] {
			t.Fatalf("direct %q\nproxy  %q", seqs[0], seqs[1])
		}
		if n := strings.Count(seqs[0], "doc"); n != 1 {
			t.Fatalf("direct sent %d invalidations, want 1: %q", n, seqs[0])
		}
	})
}

// TestProxy_SlowlogShowsIncrbyfloat: INCRBYFLOAT reaches Redis as the
// client sent it, so SLOWLOG (and MONITOR) show the command, not the
// proxy's script, as without the proxy.
func TestProxy_SlowlogShowsIncrbyfloat(t *testing.T) {
	e := startEnv(t)
	d := dialRaw(t, e.redis.Addr)
	d.do("CONFIG", "SET", "slowlog-log-slower-than", "0")
	d.do("SLOWLOG", "RESET")
	p := dialRaw(t, e.addr)
	if r := p.do("INCRBYFLOAT", "A", "1.0"); r != bulk("1") {
		t.Fatalf("INCRBYFLOAT = %q", r)
	}
	log := d.do("SLOWLOG", "GET", "20")
	if !strings.Contains(log, "$11\r\nINCRBYFLOAT\r\n$1\r\nA\r\n$3\r\n1.0\r\n") || strings.Contains(log, "EVALSHA") {
		t.Fatalf("SLOWLOG does not show INCRBYFLOAT A 1.0 as sent: %.400q", log)
	}
}
