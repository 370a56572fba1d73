package proxy

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// readEnd reads what is left on c until its connection ends, for at most
// 5 s, and returns what came before the end; it fails the test on a
// timeout (the connection stayed open).
func (c *rawConn) readEnd() string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := string(c.buf)
	c.buf = nil
	buf := make([]byte, 4096)
	for {
		n, err := c.br.Read(buf)
		got += string(buf[:n])
		var ne net.Error
		switch {
		case err == nil:
		case errors.As(err, &ne) && ne.Timeout():
			c.t.Fatalf("the connection stayed open for 5 s (read %q)", got)
		default: // EOF, or a reset: the connection ended
			return got
		}
	}
}

// TestProxy_PinnedClientsSeeUpstreamEnd: a client whose commands need a
// connection of its own (a subscriber in RESP2 or RESP3, a blocked BLPOP,
// an open MULTI, MONITOR, a RESP3 client with tracking) sees its connection
// end, without a reply, when that upstream connection ends (here: CLIENT
// KILL of it, as a restart or failover does), exactly as a client of Redis
// sees its own connection end. Before, a subscriber stayed open and silent
// for good, and the others got an error reply, which libraries take for a
// failed command rather than a lost connection.
func TestProxy_PinnedClientsSeeUpstreamEnd(t *testing.T) {
	e := startEnv(t)
	admin := dialRaw(t, e.redis.Addr)
	setups := map[string][][]string{
		"subscribe":       {{"SUBSCRIBE", "ch"}},
		"resp3-subscribe": {{"HELLO", "3"}, {"SUBSCRIBE", "ch"}},
		"blpop":           {{"BLPOP", "nolist", "0"}},
		"multi":           {{"MULTI"}, {"SET", "k", "v"}},
		"monitor":         {{"MONITOR"}},
		"tracking":        {{"HELLO", "3"}, {"CLIENT", "TRACKING", "ON"}},
	}
	for name, setup := range setups {
		t.Run(name, func(t *testing.T) {
			for _, target := range []struct{ name, addr string }{{"direct", e.redis.Addr}, {"proxy", e.addr}} {
				c := dialRaw(t, target.addr)
				// The id of the connection Redis sees for this client (through
				// the proxy: its private one, which CLIENT pins).
				id := strings.TrimSuffix(strings.TrimPrefix(c.do("CLIENT", "ID"), ":"), "\r\n")
				for _, cmd := range setup {
					c.send(cmd)
					if cmd[0] != "BLPOP" {
						c.read()
					}
				}
				if name == "blpop" {
					waitBlocked(t, e.redis.Addr, 1)
				}
				if r := admin.do("CLIENT", "KILL", "ID", id); r != ":1\r\n" {
					t.Fatalf("%s: CLIENT KILL ID %s = %q", target.name, id, r)
				}
				start := time.Now()
				rest := c.readEnd()
				if strings.Contains(rest, "-ERR") {
					t.Errorf("%s: an error before the end: %q", target.name, rest)
				}
				t.Logf("%s: the connection ended %v after the kill", target.name, time.Since(start).Round(time.Millisecond))
			}
		})
	}
}

// TestProxy_HalfCloseWhileBlocked: a client that half-closes its socket
// while its blocking command waits gets no reply, and its connection ends,
// as with Redis (before, the proxy wrote an "upstream connection closed"
// error, which BullMQ and others raised as a command failure).
func TestProxy_HalfCloseWhileBlocked(t *testing.T) {
	e := startEnv(t)
	for _, target := range []struct{ name, addr string }{{"direct", e.redis.Addr}, {"proxy", e.addr}} {
		for _, cmd := range [][]string{{"BZPOPMIN", "nozset", "0"}, {"XREAD", "BLOCK", "0", "STREAMS", "nostream", "$"}} {
			c := dialRaw(t, target.addr)
			c.send(cmd)
			waitBlocked(t, e.redis.Addr, 1)
			c.nc.(*net.TCPConn).CloseWrite()
			if rest := c.readEnd(); rest != "" {
				t.Errorf("%s %s: %q before the end, want nothing", target.name, cmd[0], rest)
			}
			waitBlocked(t, e.redis.Addr, 0)
		}
	}
}
