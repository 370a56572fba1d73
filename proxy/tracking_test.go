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
