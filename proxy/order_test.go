package proxy

import (
	"fmt"
	"strings"
	"testing"
)

// The order in which commands of several clients reach the proxy is the
// order Redis runs them in, also when some of them go over a private
// upstream connection that must first be dialled, or block (see
// proxy/order.go). The clients here send without any pause between them,
// which Redis itself orders only as its event loop happens to read the
// sockets; through the proxy the order is certain for these commands.

// orderTargets returns the address each case runs against: the proxy.
func orderTargets(t *testing.T) []struct{ name, addr string } {
	e := startEnv(t)
	return []struct{ name, addr string }{{"proxy", e.addr}}
}

func TestOrder_BlockingPopsFirstComeFirstServed(t *testing.T) {
	for _, tg := range orderTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			pusher := dialRaw(t, tg.addr)
			for i := range 10 {
				src := fmt.Sprintf("src:%d", i)
				// New clients every round: each must pin a new private
				// connection through the proxy.
				a, b := dialWarm(t, tg.addr), dialWarm(t, tg.addr)
				a.send([]string{"BRPOPLPUSH", src, "dst:a", "0"})
				b.send([]string{"BRPOPLPUSH", src, "dst:b", "0"})
				pusher.send([]string{"LPUSH", src, "first"})
				if got := pusher.read(); got != ":1\r\n" && got != ":0\r\n" {
					t.Fatalf("round %d: LPUSH = %q", i, got)
				}
				if got := a.read(); got != bulk("first") {
					t.Fatalf("round %d: the first client blocked got %q, want the first element (it came first)", i, got)
				}
				if got := pusher.do("LPUSH", src, "second"); got != ":1\r\n" && got != ":0\r\n" {
					t.Fatalf("round %d: LPUSH = %q", i, got)
				}
				if got := b.read(); got != bulk("second") {
					t.Fatalf("round %d: the second client blocked got %q, want the second element", i, got)
				}
			}
		})
	}
}

func TestOrder_SubscribeThenPublish(t *testing.T) {
	for _, tg := range orderTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			pub := dialRaw(t, tg.addr)
			for i := range 30 {
				ch := fmt.Sprintf("ch:%d", i)
				sub := dialWarm(t, tg.addr)
				sub.send([]string{"SUBSCRIBE", ch})
				// Without waiting for the subscriber's confirmation: Redis
				// read SUBSCRIBE first, so it counts one receiver.
				if got := pub.do("PUBLISH", ch, "m"); got != ":1\r\n" {
					t.Fatalf("round %d: PUBLISH right after another client's SUBSCRIBE = %q, want :1", i, got)
				}
				if got := sub.read(); !strings.Contains(got, "subscribe") {
					t.Fatalf("round %d: subscribe reply %q", i, got)
				}
				if got := sub.read(); !strings.Contains(got, "message") || !strings.HasSuffix(got, bulk("m")) {
					t.Fatalf("round %d: message %q", i, got)
				}
			}
		})
	}
}

func TestOrder_LastWriterWins(t *testing.T) {
	// Two clients SET the same key, one right after the other: the second
	// value stays (before, clients on two shared connections, or read by
	// two event loops, overtook each other).
	for _, tg := range orderTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			// Values that compress, so that the proxy rewrites both SETs.
			v1, v2 := compressible(300, 1), compressible(300, 2)
			check := dialRaw(t, tg.addr)
			for i := range 50 {
				a, b := dialWarm(t, tg.addr), dialWarm(t, tg.addr)
				a.send([]string{"SET", "k", v1})
				b.send([]string{"SET", "k", v2})
				a.read()
				b.read()
				if got := check.do("GET", "k"); got != bulk(v2) {
					t.Fatalf("round %d: the first SET's value survived the second's", i)
				}
			}
		})
	}
}

func TestOrder_BlockedStreamReadThenDelete(t *testing.T) {
	// XREADGROUP BLOCK, then another client deletes the stream: Redis runs
	// the XREADGROUP first, so the blocked client gets Redis's error for a
	// stream that no longer exists, not NOGROUP (which it would get had the
	// DEL run first). Newer servers (Redis 7.2 and later, Valkey) answer
	// NOGROUP in both orders (they run the blocked command again once the
	// key is gone), so the order is read where it is decided: in MONITOR
	// on the server, which lists commands as the server runs them.
	e := startEnv(t)
	mon := dialRaw(t, e.redis.Addr)
	if r := mon.do("MONITOR"); r != "+OK\r\n" {
		t.Fatalf("MONITOR = %q", r)
	}
	admin := dialRaw(t, e.addr)
	for i := range 5 {
		key := fmt.Sprintf("stream:%d", i)
		if r := admin.do("XGROUP", "CREATE", key, "g", "$", "MKSTREAM"); r != "+OK\r\n" {
			t.Fatalf("XGROUP CREATE = %q", r)
		}
		reader := dialWarm(t, e.addr)
		reader.send([]string{"XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", key, ">"})
		if r := admin.do("DEL", key); r != ":1\r\n" {
			t.Fatalf("DEL = %q", r)
		}
		r := reader.read()
		// MONITOR's lines up to the DEL of this round's key.
		var order []string
		for len(order) < 200 {
			line := mon.read()
			if line == "" {
				t.Fatalf("MONITOR ended after %q", order)
			}
			q := `"` + key + `"`
			switch {
			case strings.Contains(line, `"XREADGROUP"`) && strings.Contains(line, q):
				order = append(order, "XREADGROUP")
			case strings.Contains(line, `"DEL"`) && strings.Contains(line, q):
				order = append(order, "DEL")
			}
			if len(order) > 0 && order[len(order)-1] == "DEL" {
				break
			}
		}
		if len(order) == 0 || order[0] != "XREADGROUP" {
			t.Fatalf("round %d: the server ran %q: the DEL before the XREADGROUP sent before it (reply %q)", i, order, r)
		}
		if !strings.HasPrefix(r, "-UNBLOCKED") && !strings.HasPrefix(r, "-NOGROUP") {
			t.Fatalf("round %d: blocked XREADGROUP after DEL: %q, want the server's error for a deleted stream", i, r)
		}
	}
}

// dialWarm connects and runs a PING, as a client of a connection pool
// would have before: the connection is established at both ends.
func dialWarm(t *testing.T, addr string) *rawConn {
	c := dialRaw(t, addr)
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING = %q", got)
	}
	return c
}
