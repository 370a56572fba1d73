package proxy

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// The order in which commands of several clients reach the proxy is the
// order Redis runs them in, also when some of them go over a private
// upstream connection that must first be dialled, or block (see
// proxy/order.go). The clients here send without any pause between them,
// which Redis itself orders only as its event loop happens to read the
// sockets; through the proxy the order is certain for these commands.

// dialOrdered connects a client that pauses a millisecond between
// reading a reply and sending again. The pause lets the proxy's writer
// return from the call that sent the reply just read: what a client sends
// while that call holds the socket, the kernel announces after what other
// sockets received later (a limit of the kernel's order, not of the
// proxy's; docs/design/ordering.md "Limits"). The order under test, of
// commands sent one right after the other, is not paused.
func dialOrdered(t *testing.T, addr string) *rawConn {
	c := dialRaw(t, addr)
	c.settle = time.Millisecond
	return c
}

// orderTargets returns the address each case runs against: the proxy.
func orderTargets(t *testing.T) []struct{ name, addr string } {
	e := startEnv(t)
	return []struct{ name, addr string }{{"proxy", e.addr}}
}

func TestOrder_BlockingPopsFirstComeFirstServed(t *testing.T) {
	for _, tg := range orderTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			pusher := dialOrdered(t, tg.addr)
			for i := range 10 {
				src := fmt.Sprintf("src:%d", i)
				// New clients every round: each must pin a new private
				// connection through the proxy.
				a, b := dialWarm(t, tg.addr), dialWarm(t, tg.addr)
				blockingPopRound(t, i, src, a, b, pusher)
			}
		})
	}
}

func TestOrder_SubscribeThenPublish(t *testing.T) {
	for _, tg := range orderTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			pub := dialOrdered(t, tg.addr)
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
			check := dialOrdered(t, tg.addr)
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
	admin := dialOrdered(t, e.addr)
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
	c := dialOrdered(t, addr)
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING = %q", got)
	}
	return c
}

// The cases below follow clients that have a private connection: after
// SELECT, CLIENT SETNAME or SUBSCRIBE, every command they send takes part
// in the order too, until Redis has run it.

func TestOrder_UnsubscribeThenPublish(t *testing.T) {
	for _, tg := range orderTargets(t) {
		for _, kind := range [][2]string{{"SUBSCRIBE", "UNSUBSCRIBE"}, {"PSUBSCRIBE", "PUNSUBSCRIBE"}} {
			t.Run(tg.name+"/"+kind[0], func(t *testing.T) {
				pub := dialWarm(t, tg.addr)
				sub := dialWarm(t, tg.addr)
				for i := range 40 {
					ch := fmt.Sprintf("unsub:%d", i)
					if got := sub.do(kind[0], ch); !strings.Contains(got, strings.ToLower(kind[0])) {
						t.Fatalf("round %d: %s = %q", i, kind[0], got)
					}
					// Without reading the reply: Redis ran it first, so the
					// channel has no receiver left.
					sub.send([]string{kind[1]})
					if got := pub.do("PUBLISH", ch, "x"); got != ":0\r\n" {
						t.Fatalf("round %d: PUBLISH right after the subscriber's %s = %q, want :0", i, kind[1], got)
					}
					if got := sub.read(); !strings.Contains(got, "unsubscribe") {
						t.Fatalf("round %d: %s reply %q", i, kind[1], got)
					}
				}
			})
		}
	}
}

func TestOrder_ResubscribeThenPublish(t *testing.T) {
	// As a pub/sub library does: one connection subscribes, unsubscribes
	// and subscribes again; another publishes right after each SUBSCRIBE.
	for _, tg := range orderTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			pub := dialWarm(t, tg.addr)
			sub := dialWarm(t, tg.addr)
			for i := range 100 {
				ch := fmt.Sprintf("resub:%d", i)
				sub.send([]string{"SUBSCRIBE", ch})
				if got := pub.do("PUBLISH", ch, "m"); got != ":1\r\n" {
					t.Fatalf("round %d: PUBLISH right after SUBSCRIBE on a subscribed connection = %q, want :1", i, got)
				}
				if got := sub.read(); !strings.Contains(got, "subscribe") {
					t.Fatalf("round %d: subscribe reply %q", i, got)
				}
				if got := sub.read(); !strings.HasSuffix(got, bulk("m")) {
					t.Fatalf("round %d: message %q", i, got)
				}
				sub.send([]string{"UNSUBSCRIBE", ch})
				if got := sub.read(); !strings.Contains(got, "unsubscribe") {
					t.Fatalf("round %d: unsubscribe reply %q", i, got)
				}
			}
		})
	}
}

func TestOrder_SelectedBlockingPops(t *testing.T) {
	// Three clients in database 9: the first of two BRPOPLPUSH gets what
	// the third client's LPUSH brings.
	for _, tg := range orderTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			for i := range 20 {
				src := fmt.Sprintf("sel:src:%d", i)
				var cs [3]*rawConn
				for j := range cs {
					cs[j] = dialWarm(t, tg.addr)
					if got := cs[j].do("SELECT", "9"); got != "+OK\r\n" {
						t.Fatalf("SELECT = %q", got)
					}
				}
				a, b, pusher := cs[0], cs[1], cs[2]
				blockingPopRound(t, i, src, a, b, pusher)
			}
		})
	}
}

func TestOrder_NamedClientWriteThenRead(t *testing.T) {
	// A client that ran CLIENT SETNAME writes; another client, on the
	// shared connection or a private one of its own, reads right after.
	for _, tg := range orderTargets(t) {
		for _, readerPinned := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/reader-pinned=%v", tg.name, readerPinned), func(t *testing.T) {
				w := dialWarm(t, tg.addr)
				if got := w.do("CLIENT", "SETNAME", "writer"); got != "+OK\r\n" {
					t.Fatalf("CLIENT SETNAME = %q", got)
				}
				r := dialWarm(t, tg.addr)
				if readerPinned {
					if got := r.do("CLIENT", "SETNAME", "reader"); got != "+OK\r\n" {
						t.Fatalf("CLIENT SETNAME = %q", got)
					}
				}
				for i := range 100 {
					v := fmt.Sprintf("v%d", i)
					w.send([]string{"SET", "named:k", v})
					if got := r.do("GET", "named:k"); got != bulk(v) {
						t.Fatalf("round %d: GET right after another client's SET = %q, want %q", i, got, v)
					}
					if got := w.read(); got != "+OK\r\n" {
						t.Fatalf("round %d: SET = %q", i, got)
					}
				}
			})
		}
	}
}

func TestOrder_KeyedBarrier(t *testing.T) {
	// STRLEN of a compressed value waits for a script under a barrier
	// that holds only the requests on its key (orderscope.go): an MSET
	// that touches the key, sent right after, still runs after it, and a
	// GET of the MSET's other key, sent after the MSET, sees the MSET's
	// value, while another client's PING passes.
	for _, tg := range orderTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			v := compressible(3000, 3)
			setup := dialOrdered(t, tg.addr)
			for i := range 30 {
				k, j := fmt.Sprintf("keyed:%d", i), fmt.Sprintf("other:%d", i)
				if got := setup.do("SET", k, v); got != "+OK\r\n" {
					t.Fatalf("SET = %q", got)
				}
				a, b, c := dialWarm(t, tg.addr), dialWarm(t, tg.addr), dialWarm(t, tg.addr)
				a.send([]string{"STRLEN", k})
				b.send([]string{"MSET", j, "new", k, "small"})
				c.send([]string{"GET", j})
				if got := c.read(); got != bulk("new") {
					t.Fatalf("round %d: GET of the MSET's other key = %q, want the MSET's value (it came after it)", i, got)
				}
				if got := a.read(); got != fmt.Sprintf(":%d\r\n", len(v)) {
					t.Fatalf("round %d: STRLEN = %q, want the length before the MSET (it came first)", i, got)
				}
				if got := b.read(); got != "+OK\r\n" {
					t.Fatalf("round %d: MSET = %q", i, got)
				}
			}
		})
	}
}

// The cases below have a client send a command that gives it a private
// connection, or SELECT, and, without waiting for its reply, one more
// command; another client's command sent after both must run after both.
// (Both failed in most rounds while the event loop left such a client to
// its goroutine until it had pinned: its next command was read outside
// the order the kernel announced the clients in.)
var pinningFirst = [][]string{
	{"SELECT", "0"},
	{"CLIENT", "SETNAME", "first"},
	{"HELLO", "3"},
}

func TestOrder_PinThenBlockingPopUnanswered(t *testing.T) {
	// The first client's BRPOPLPUSH, sent right after its unanswered
	// pinning command, blocks before the other client's: the first element
	// pushed goes to the first client.
	for _, tg := range orderTargets(t) {
		for _, first := range pinningFirst {
			t.Run(tg.name+"/"+strings.Join(first, "_"), func(t *testing.T) {
				pusher := dialWarm(t, tg.addr)
				for i := range 20 {
					src := fmt.Sprintf("pinpop:src:%d", i)
					a, b := dialWarm(t, tg.addr), dialWarm(t, tg.addr)
					a.send(first)
					a.send([]string{"BRPOPLPUSH", src, "dst:a", "0"})
					b.send([]string{"BRPOPLPUSH", src, "dst:b", "0"})
					pusher.do("LPUSH", src, "first")
					a.read() // the pinning command's reply
					pusher.do("LPUSH", src, "second")
					ga, gb := a.read(), b.read()
					if ga != bulk("first") {
						t.Fatalf("round %d: the client that blocked first (right after its unanswered %s) got %q, the other %q; want the first element", i, first[0], ga, gb)
					}
				}
			})
		}
	}
}

func TestOrder_PinThenWriteUnanswered(t *testing.T) {
	// The first client's SET, sent right after its unanswered pinning
	// command, runs before the other client's GET sent after it.
	for _, tg := range orderTargets(t) {
		for _, first := range pinningFirst {
			t.Run(tg.name+"/"+strings.Join(first, "_"), func(t *testing.T) {
				for i := range 20 {
					key := fmt.Sprintf("pinset:%d", i)
					a, b := dialWarm(t, tg.addr), dialWarm(t, tg.addr)
					a.send(first)
					a.send([]string{"SET", key, "v"})
					if got := b.do("GET", key); got != bulk("v") {
						t.Fatalf("round %d: GET right after another client's SET (sent right after its unanswered %s) = %q, want the value", i, first[0], got)
					}
					a.read()
					a.read()
				}
			})
		}
	}
}

func TestOrder_PinThenAppendUnanswered(t *testing.T) {
	// The first client's APPEND to a missing key, sent right after its
	// unanswered pinning command, runs before the other client's SET of
	// the key sent after it. (APPEND runs as two scripts, a probe and a
	// write; the barrier, which holds everything here, ended once the
	// probe was written, and the SET ran in between in 97 rounds of 100.)
	for _, tg := range orderTargets(t) {
		for _, first := range pinningFirst {
			t.Run(tg.name+"/"+strings.Join(first, "_"), func(t *testing.T) {
				big := strings.Repeat(`{"id":676,"user":"squeeze"},`, 110)
				for i := range 20 {
					key := fmt.Sprintf("pinappend:%s:%d", first[0], i)
					a, b := dialWarm(t, tg.addr), dialWarm(t, tg.addr)
					a.send(first)
					a.send([]string{"APPEND", key, "134961"})
					b.send([]string{"SET", key, big})
					a.read()
					if got := a.read(); got != ":6\r\n" {
						t.Fatalf("round %d: APPEND to a missing key, right after an unanswered %s and before another client's SET = %q, want :6", i, first[0], got)
					}
					b.read()
				}
			})
		}
	}
}

func TestOrder_SharedWriteThenPinnedRead(t *testing.T) {
	// A client on the shared connection writes; another client, with a
	// private connection (CLIENT SETNAME), reads right after: the GET sees
	// the SET (TestOrder_NamedClientWriteThenRead has the writer named).
	// New clients every round, as a pool that grows makes them.
	for _, tg := range orderTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			for i := range 100 {
				w := dialWarm(t, tg.addr)
				r := dialWarm(t, tg.addr)
				if got := r.do("CLIENT", "SETNAME", "reader"); got != "+OK\r\n" {
					t.Fatalf("CLIENT SETNAME = %q", got)
				}
				key := fmt.Sprintf("shared:k:%d", i)
				w.send([]string{"SET", key, "v"})
				if got := r.do("GET", key); got != bulk("v") {
					t.Fatalf("round %d: GET on a private connection right after another client's SET on the shared one = %q, want the value", i, got)
				}
				if got := w.read(); got != "+OK\r\n" {
					t.Fatalf("round %d: SET = %q", i, got)
				}
			}
		})
	}
}

func TestOrder_LargeCommandThenOtherClient(t *testing.T) {
	// A SET of 17 kB (more than one read of 16 KiB), then another client's
	// EXISTS on the key, sent once the SET is written: the EXISTS finds
	// it. (Redis itself lets the EXISTS run first in one round of three or
	// so, as it reads 16 KiB of a client at a time; the proxy orders by
	// when a command reached it.)
	for _, tg := range orderTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			v := strings.Repeat("0123456789abcdef", 17000/16)
			for i := range 30 {
				key := fmt.Sprintf("large:%d", i)
				a, b := dialWarm(t, tg.addr), dialWarm(t, tg.addr)
				a.send([]string{"SET", key, v})
				if got := b.do("EXISTS", key); got != ":1\r\n" {
					t.Fatalf("round %d: EXISTS right after another client's SET of %d bytes = %q, want :1", i, len(v), got)
				}
				if got := a.read(); got != "+OK\r\n" {
					t.Fatalf("round %d: SET = %q", i, got)
				}
			}
		})
	}
}

func TestOrder_AppendThenOtherClientRead(t *testing.T) {
	// APPEND (which the proxy runs as a script on the decoded value), then
	// another client's GET sent once the APPEND was written: the GET sees
	// what the APPEND wrote.
	for _, tg := range orderTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			v := strings.Repeat(`{"id":1,"user":"squeeze"},`, 40)
			for i := range 30 {
				key := fmt.Sprintf("append:%d", i)
				a, b := dialWarm(t, tg.addr), dialWarm(t, tg.addr)
				a.send([]string{"APPEND", key, v})
				if got := b.do("GET", key); got != bulk(v) {
					t.Fatalf("round %d: GET right after another client's APPEND = %.40q, want the appended value", i, got)
				}
				if got := a.read(); got != fmt.Sprintf(":%d\r\n", len(v)) {
					t.Fatalf("round %d: APPEND = %q", i, got)
				}
			}
		})
	}
}

func TestOrder_PrivateAppendThenOtherClientWrite(t *testing.T) {
	// A client with a private connection APPENDs to a missing key (a
	// probe, then the write: two scripts); another client SETs the key
	// right after: the APPEND finds the key missing. (The barrier ended
	// after the probe, and the SET ran in between, in 98 rounds of 100.)
	for _, tg := range orderTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			big := strings.Repeat(`{"id":676,"user":"squeeze"},`, 27)
			a := dialWarm(t, tg.addr)
			if got := a.do("SELECT", "0"); got != "+OK\r\n" {
				t.Fatalf("SELECT = %q", got)
			}
			for i := range 30 {
				key := fmt.Sprintf("papp:%d", i)
				b := dialWarm(t, tg.addr)
				a.send([]string{"APPEND", key, "w14"})
				b.send([]string{"SET", key, big})
				if got := a.read(); got != ":3\r\n" {
					t.Fatalf("round %d: APPEND to a missing key, before another client's SET of it = %q, want :3", i, got)
				}
				if got := b.read(); got != "+OK\r\n" {
					t.Fatalf("round %d: SET = %q", i, got)
				}
			}
		})
	}
}

func TestOrder_ReadOfBlockedDestinationThenPush(t *testing.T) {
	// A client is blocked in BRPOPLPUSH src dst; another, with a private
	// connection, reads dst; a third pushes to src right after: the read
	// sees dst as it was, empty. (The push's key is not the read's, but
	// it serves the blocked client, which writes dst: a barrier keyed on
	// dst let it pass, and the read found the element in 1 round of 3.)
	// Also with the blocking command still on its way (its client is
	// being given its private connection) when the others come, and the
	// pusher on a private connection of its own.
	e := startEnv(t)
	reader := dialWarm(t, e.addr)
	if got := reader.do("CLIENT", "SETNAME", "reader"); got != "+OK\r\n" {
		t.Fatalf("CLIENT SETNAME = %q", got)
	}
	pusher := dialWarm(t, e.addr)
	for i := range 60 {
		src, dst := fmt.Sprintf("wake:src:%d", i), fmt.Sprintf("wake:dst:%d", i)
		blocker := dialWarm(t, e.addr)
		blocker.send([]string{"BRPOPLPUSH", src, dst, "0"})
		if i%2 == 0 {
			waitBlocked(t, e.redis.Addr, 1)
		} else if i == 1 {
			if got := pusher.do("CLIENT", "SETNAME", "pusher"); got != "+OK\r\n" {
				t.Fatalf("CLIENT SETNAME = %q", got)
			}
		}
		reader.send([]string{"LRANGE", dst, "0", "-1"})
		pusher.send([]string{"LPUSH", src, "x"})
		if got := reader.read(); got != "*0\r\n" {
			t.Fatalf("round %d: LRANGE of the blocked client's destination, sent before another client's push = %q, want it empty", i, got)
		}
		if got := pusher.read(); got != ":1\r\n" {
			t.Fatalf("round %d: LPUSH = %q", i, got)
		}
		if got := blocker.read(); got != bulk("x") {
			t.Fatalf("round %d: BRPOPLPUSH = %q", i, got)
		}
	}
}

// blockingPopRound has a and b send BRPOPLPUSH src, in that order, and
// the pusher LPUSH two elements: the first goes to a, which blocked first
// (Redis serves blocked clients in the order they blocked), the second
// to b.
func blockingPopRound(t *testing.T, i int, src string, a, b, pusher *rawConn) {
	t.Helper()
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

// TestUpConn_WriteBeforeBarrierOutlivesBarrier: a goroutine whose turn
// came writes what the shared connection queued before its barrier, and
// waits while another writer writes it; the barrier ends meanwhile (the
// sweeper ended it, or it had ended before its goroutine adopted it). The
// writer must still wake it: it woke waiters only while a barrier was
// raised, and a client's batch on its private connection waited for good
// (a 14 KB HSET sent right after an inspect command, in a differential
// run under load).
func TestUpConn_WriteBeforeBarrierOutlivesBarrier(t *testing.T) {
	g := &gatedConn{started: make(chan struct{}), proceed: make(chan struct{})}
	c := &upConn{nc: g}
	c.written.L = &c.mu
	c.holdN = 1
	c.wbuf = []byte("queued before the barrier")
	c.writing = true
	c.mu.Lock()
	go c.writeQueued() // another sender writes the queue
	<-g.started
	waited := make(chan struct{})
	go func() { c.writeBeforeBarrier(); close(waited) }()
	for { // until it waits for the writer
		c.mu.Lock()
		w := c.writeWait
		c.mu.Unlock()
		if w == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	c.mu.Lock()
	c.holdN = 0 // the barrier ends while the write is under way
	c.mu.Unlock()
	g.proceed <- struct{}{}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("writeBeforeBarrier still waits 5 s after the queue was written")
	}
	if len(g.written) != 1 || string(g.written[0]) != "queued before the barrier" {
		t.Fatalf("written %q, want the queue once", g.written)
	}
}

func TestOrder_InspectThenWriteUnanswered(t *testing.T) {
	// A client of the shared connection sends a command the proxy answers
	// after a round trip of its own (STRLEN of a compressed value), then,
	// without waiting for its reply, a SET of another key; another client
	// reads that key right after: the GET sees the SET, which came first.
	// Apart: the SET in a read of its own (the client's goroutine had the
	// client while it ran the STRLEN, out of the loop's set: the SET was
	// read when it came back, after the GET). Together: in one write with
	// the STRLEN (the barrier raised for the STRLEN held only its key,
	// and ended before the goroutine sent the SET). Between: in one write
	// between two STRLEN of the compressed value (the barrier ended with
	// the first STRLEN when another command of the read waited too).
	for _, tg := range orderTargets(t) {
		for _, form := range []string{"apart", "together", "between"} {
			t.Run(tg.name+"/"+form, func(t *testing.T) {
				v := compressible(3000, 4)
				setup := dialOrdered(t, tg.addr)
				a, b := dialWarm(t, tg.addr), dialWarm(t, tg.addr)
				for i := range 50 {
					k, j := fmt.Sprintf("insp:%d", i), fmt.Sprintf("insp:other:%d", i)
					if got := setup.do("SET", k, v); got != "+OK\r\n" {
						t.Fatalf("SET = %q", got)
					}
					switch form {
					case "apart":
						a.send([]string{"STRLEN", k})
						time.Sleep(200 * time.Microsecond) // the STRLEN in a read of its own
						a.send([]string{"SET", j, "new"})
					case "together":
						a.send([]string{"STRLEN", k}, []string{"SET", j, "new"})
					case "between":
						a.send([]string{"STRLEN", k}, []string{"SET", j, "new"}, []string{"STRLEN", k})
					}
					if got := b.do("GET", j); got != bulk("new") {
						t.Fatalf("round %d: GET right after another client's SET (sent behind its unanswered STRLEN) = %q, want the SET's value", i, got)
					}
					if got := a.read(); got != fmt.Sprintf(":%d\r\n", len(v)) {
						t.Fatalf("round %d: STRLEN = %q", i, got)
					}
					if got := a.read(); got != "+OK\r\n" {
						t.Fatalf("round %d: SET = %q", i, got)
					}
					if form == "between" {
						if got := a.read(); got != fmt.Sprintf(":%d\r\n", len(v)) {
							t.Fatalf("round %d: second STRLEN = %q", i, got)
						}
					}
				}
			})
		}
	}
}

func TestOrder_LongCommandBehindSelectThenOtherPop(t *testing.T) {
	// A client with a private connection sends SELECT, which the proxy
	// answers after its round trip, then, while its goroutine waits for
	// that reply, an LPUSH of 6 KB; another client's BRPOPLPUSH comes
	// right after. Redis runs the LPUSH first: it answers 2, and the pop
	// gets the element that was there. The goroutine read the LPUSH into
	// a 4 KiB buffer, ended the barrier raised for it while it was not
	// whole, and raised another for the rest once it had read it, after
	// the other client's: the pop ran first in most runs (an order
	// scene's LPUSH answered 3 where Redis answered 4).
	// Random bytes: compressed, the value would fit the first read.
	raw := make([]byte, 8000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	v := string(raw)
	for _, tg := range orderTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			setup := dialOrdered(t, tg.addr)
			a, b := dialWarm(t, tg.addr), dialWarm(t, tg.addr)
			// b sends right behind a, without the pause after a read: each
			// round starts with one of its own.
			b.settle = 0
			for _, c := range []*rawConn{a, b} {
				if got := c.do("SELECT", "0"); got != "+OK\r\n" {
					t.Fatalf("SELECT = %q", got)
				}
			}
			wrong := 0
			for i := range 30 {
				src := fmt.Sprintf("longpush:src:%d", i)
				if got := setup.do("RPUSH", src, "old"); got != ":1\r\n" {
					t.Fatalf("RPUSH = %q", got)
				}
				time.Sleep(time.Millisecond)
				a.send([]string{"SELECT", "0"})
				a.send([]string{"LPUSH", src, v})
				// b's BRPOPLPUSH a little after: sent at once, on a
				// loaded machine it was announced before a's LPUSH in one
				// run of 24 (two test processes side by side): a trace
				// showed the loop read a's SELECT alone, a's LPUSH written
				// before b's command but announced after it (the kernel's
				// window, docs/design/ordering.md), not what this test
				// checks.
				time.Sleep(30 * time.Microsecond)
				b.send([]string{"BRPOPLPUSH", src, "dst:b", "0"})
				if got := a.read(); got != "+OK\r\n" {
					t.Fatalf("round %d: SELECT = %q", i, got)
				}
				if got := a.read(); got != ":2\r\n" {
					wrong++
					t.Logf("round %d: LPUSH, sent before the other client's BRPOPLPUSH, = %q; want :2 (the pop ran first)", i, got)
				}
				if got := b.read(); got != bulk("old") {
					t.Fatalf("round %d: the other client's BRPOPLPUSH = %q", i, got)
				}
			}
			// The proxy's rule broken gets most rounds wrong; the
			// kernel's window, rarely one.
			if wrong > 1 {
				t.Errorf("%d of 30 rounds: the other client's BRPOPLPUSH ran before the LPUSH sent before it", wrong)
			}
		})
	}
}

func TestOrder_InspectThenInspectAndWriteWhileBusy(t *testing.T) {
	// A client of the shared connection sends STRLEN of a compressed
	// value, which its goroutine answers after a round trip, and while
	// it does, GETRANGE of the value and a SET of another key in one
	// write; another client reads that key right after. The barrier
	// raised for the second write ended with the GETRANGE, and the GET
	// held behind it ran before the SET.
	for _, tg := range orderTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			v, a, b := busyInspectClients(t, tg.addr)
			wrong := 0
			for i := range 40 {
				k, j := a.setCompressed(t, "busy", i, v)
				a.send([]string{"STRLEN", k})
				time.Sleep(50 * time.Microsecond) // a read of its own, while the STRLEN runs
				a.send([]string{"GETRANGE", k, "0", "1"}, []string{"SET", j, "new"})
				// b's GET a little after. Sent at once, it was announced
				// first in about one run of 30 (1 of 1,200 rounds): a
				// trace showed a's write land while the proxy wrote the
				// STRLEN's reply to a's socket, so the kernel queued it
				// on the socket's backlog until that write returned, and
				// b's, sent 10 us later, was announced before it (the
				// kernel's window, docs/design/ordering.md), not what
				// this test checks.
				time.Sleep(30 * time.Microsecond)
				b.send([]string{"GET", j})
				if got := b.read(); got != bulk("new") {
					wrong++
					t.Logf("round %d: GET right after another client's SET = %q, want the SET's value", i, got)
				}
				for n, want := range []string{fmt.Sprintf(":%d\r\n", len(v)), bulk(v[:2]), "+OK\r\n"} {
					if got := a.read(); got != want {
						t.Fatalf("round %d: reply %d = %q, want %q", i, n, got, want)
					}
				}
			}
			// The proxy's rule broken gets most rounds wrong; the
			// kernel's window, rarely one.
			if wrong > 1 {
				t.Errorf("%d of 40 rounds: another client's GET ran before the SET sent with a GETRANGE while the goroutine answered a STRLEN", wrong)
			}
		})
	}
}

func TestOrder_PrivateCommandAfterPassedReply(t *testing.T) {
	// A GET of a large value stored as it is: its reply passes from
	// Redis's socket to the client's as it arrives. Then another client
	// pins a private connection (SELECT): its command waits until Redis
	// has answered what the shared connection sent before it. The passed
	// reply was not counted as answered, and every later private command
	// waited for good (10 s here, the read's deadline; a differential run
	// in the race stage).
	e := startEnv(t, withMinSize(64<<20))
	big := rawValue(200<<10, 3)
	a := dialRaw(t, e.addr)
	if got := a.do("SET", "passed", big); got != "+OK\r\n" {
		t.Fatalf("SET = %q", got)
	}
	if got := a.do("GET", "passed"); got != bulk(big) {
		t.Fatalf("GET = %.40q", got)
	}
	b := dialRaw(t, e.addr)
	b.send([]string{"SELECT", "0"})
	b.nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 16)
	n, err := b.nc.Read(buf)
	if err != nil {
		t.Fatalf("a command on a private connection, after a reply passed through: %v", err)
	}
	if got := string(buf[:n]); got != "+OK\r\n" {
		t.Fatalf("SELECT = %q", got)
	}
}

func TestOrder_WriteWhileAdoptedInputRuns(t *testing.T) {
	// A client of the shared connection sends STRLEN of a compressed
	// value (its goroutine answers it after a round trip), then, while
	// that runs, GETRANGE of the value (the goroutine adopts it with a
	// barrier and runs its round trip), or both in one write, then, while
	// the GETRANGE runs, a SET of another key; another client reads that
	// key right after. The SET had no barrier: it went back to the event
	// loop, which read it after the GET (order scenes, seed 144's inspect
	// scene 64).
	for _, tg := range orderTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			v, a, b := busyInspectClients(t, tg.addr)
			wrong := 0
			for i := range 60 {
				k, j := a.setCompressed(t, "adopted", i, v)
				if i%2 == 0 {
					a.send([]string{"STRLEN", k})
					time.Sleep(time.Duration(20+i%8*10) * time.Microsecond)
					a.send([]string{"GETRANGE", k, "0", "1"})
				} else {
					// Both in one write: the goroutine takes them at once.
					a.send([]string{"STRLEN", k}, []string{"GETRANGE", k, "0", "1"})
				}
				time.Sleep(time.Duration(20+i/4%4*20) * time.Microsecond)
				a.send([]string{"SET", j, "new"})
				// b's GET a little after: sent at once, it sometimes
				// reached the proxy's socket while the proxy wrote a's
				// replies, and was announced first (the kernel's window,
				// docs/design/ordering.md), not what this test checks.
				time.Sleep(30 * time.Microsecond)
				b.send([]string{"GET", j})
				if got := b.read(); got != bulk("new") {
					wrong++
					t.Logf("round %d: GET right after another client's SET = %q, want the SET's value", i, got)
				}
				for n, want := range []string{fmt.Sprintf(":%d\r\n", len(v)), bulk(v[:2]), "+OK\r\n"} {
					if got := a.read(); got != want {
						t.Fatalf("round %d: reply %d = %q, want %q", i, n, got, want)
					}
				}
			}
			// Before the fix 25-39 of 60 rounds were wrong; after it 1 of
			// 3,600 (60 runs) with b's pause, 2 of 1,200 without it: the
			// kernel's window (ordering.md), likely, which the pause
			// narrows. More than 2 of 60 is the proxy's rule broken.
			if wrong > 2 {
				t.Errorf("%d of 60 rounds: another client's GET ran before the SET sent while the goroutine handled adopted input", wrong)
			}
		})
	}
}

// busyInspectClients dials the clients of the tests where one client
// sends while its goroutine answers an inspect command of a compressed
// value v: a sends, b reads right behind it.
func busyInspectClients(t *testing.T, addr string) (v string, a, b *rawConn) {
	a, b = dialWarm(t, addr), dialWarm(t, addr)
	b.settle = 0 // right behind a: each round starts with a pause
	return compressible(3000, 5), a, b
}

// setCompressed stores v under key prefix:i, waits for the reply and a
// millisecond more, and returns that key and another one, prefix:other:i.
func (c *rawConn) setCompressed(t *testing.T, prefix string, i int, v string) (key, other string) {
	t.Helper()
	key, other = fmt.Sprintf("%s:%d", prefix, i), fmt.Sprintf("%s:other:%d", prefix, i)
	if got := c.do("SET", key, v); got != "+OK\r\n" {
		t.Fatalf("SET = %q", got)
	}
	time.Sleep(time.Millisecond)
	return key, other
}

func TestOrder_PublishAfterUnsubscribeThenOtherSubscribes(t *testing.T) {
	// A RESP2 subscriber sends UNSUBSCRIBE and PUBLISH on its channel in
	// one write, without reading; another subscriber subscribes to that
	// channel right after. Redis runs the PUBLISH first: nobody receives
	// it. The PUBLISH's reply comes relayed, not as a call's, and its
	// barrier ended once written: Redis could then take the other
	// SUBSCRIBE, sent later on another connection, first (order scenes,
	// seed 103, on a loaded machine; too rare to catch here). It ends at
	// that relayed reply now (TestConfirmations_RelayReplyEndsItsBarrier):
	// here, through Redis, every reply is right and no barrier waits for
	// the sweeper (a reply the proxy did not see as one would leave it
	// raised until then).
	e := startEnv(t)
	a := dialWarm(t, e.addr)
	b := dialWarm(t, e.addr)
	b.settle = 0 // right behind a
	if got := b.do("SUBSCRIBE", "pubafter:other"); !strings.Contains(got, "subscribe") {
		t.Fatalf("SUBSCRIBE = %q", got)
	}
	for i := range 60 {
		ch := fmt.Sprintf("pubafter:%d", i)
		if got := a.do("SUBSCRIBE", ch); !strings.Contains(got, "subscribe") {
			t.Fatalf("round %d: SUBSCRIBE = %q", i, got)
		}
		cmds := [][]string{{"UNSUBSCRIBE"}, {"PUBLISH", ch, "m"}}
		if i%2 == 1 {
			cmds = append(cmds, []string{"PING"}) // the pong of the relay
		}
		a.send(cmds...)
		time.Sleep(time.Duration(i%5*20) * time.Microsecond)
		b.send([]string{"SUBSCRIBE", ch})
		if got := a.read(); !strings.Contains(got, "unsubscribe") {
			t.Fatalf("round %d: UNSUBSCRIBE reply %q", i, got)
		}
		if got := a.read(); got != ":0\r\n" {
			t.Fatalf("round %d: PUBLISH sent before another client's SUBSCRIBE of the channel = %q, want :0", i, got)
		}
		if i%2 == 1 {
			if got := a.read(); got != "+PONG\r\n" {
				t.Fatalf("round %d: PING after leaving the subscribed state = %q", i, got)
			}
		}
		if got := b.read(); !strings.Contains(got, "subscribe") {
			t.Fatalf("round %d: the other's SUBSCRIBE reply %q", i, got)
		}
		if got := b.do("UNSUBSCRIBE", ch); !strings.Contains(got, "unsubscribe") {
			t.Fatalf("round %d: the other's UNSUBSCRIBE reply %q", i, got)
		}
	}
	if n := e.srv.pool.order.expired.Load(); n != 0 {
		t.Fatalf("%d barriers ended by the sweeper: a relayed reply did not end its barrier", n)
	}
}

func TestRelay_CommandsAfterUnsubscribeAll(t *testing.T) {
	// A RESP2 subscriber sends UNSUBSCRIBE (every channel) and, in the
	// same write, commands for outside the subscribed state, which Redis
	// runs there once the UNSUBSCRIBE has: they are answered as Redis
	// answers them, the compressed value decoded. HELLO 3 among them went
	// as relayed traffic: Redis switched to RESP3 and the proxy did not
	// see it, so the client's next SUBSCRIBE waited for a reply RESP3
	// does not send and took the GET's (order scenes, seed 115).
	e := startEnv(t)
	v := compressible(3000, 9)
	c := dialRaw(t, e.addr)
	if got := c.do("SET", "relay:after", v); got != "+OK\r\n" {
		t.Fatalf("SET = %q", got)
	}
	for round := range 20 {
		if got := c.do("SUBSCRIBE", "relay:ch"); !strings.Contains(got, "subscribe") {
			t.Fatalf("round %d: SUBSCRIBE = %q", round, got)
		}
		c.send([]string{"UNSUBSCRIBE"}, []string{"GET", "relay:after"}, []string{"STRLEN", "relay:after"})
		if got := c.read(); !strings.Contains(got, "unsubscribe") {
			t.Fatalf("round %d: UNSUBSCRIBE = %q", round, got)
		}
		if got := c.read(); got != bulk(v) {
			t.Fatalf("round %d: GET right after UNSUBSCRIBE = %.60q, want the value", round, got)
		}
		if got := c.read(); got != fmt.Sprintf(":%d\r\n", len(v)) {
			t.Fatalf("round %d: STRLEN right after UNSUBSCRIBE = %q", round, got)
		}
	}
	if got := c.do("SUBSCRIBE", "relay:ch"); !strings.Contains(got, "subscribe") {
		t.Fatalf("SUBSCRIBE = %q", got)
	}
	c.send([]string{"UNSUBSCRIBE"}, []string{"HELLO", "3"})
	if got := c.read(); !strings.Contains(got, "unsubscribe") {
		t.Fatalf("UNSUBSCRIBE = %q", got)
	}
	if got := c.read(); !strings.HasPrefix(got, "%") || !strings.Contains(got, "proto") {
		t.Fatalf("HELLO 3 right after UNSUBSCRIBE = %.80q, want its map", got)
	}
	c.send([]string{"SUBSCRIBE", "relay:ch", "relay:ch2"}, []string{"GET", "relay:after"}, []string{"PING"})
	for i := range 2 {
		if got := c.read(); !strings.HasPrefix(got, ">3\r\n$9\r\nsubscribe") {
			t.Fatalf("SUBSCRIBE in RESP3, confirmation %d = %q, want a push", i, got)
		}
	}
	if got := c.read(); got != bulk(v) {
		t.Fatalf("GET while subscribed in RESP3 = %.60q, want the value", got)
	}
	if got := c.read(); got != "+PONG\r\n" {
		t.Fatalf("PING while subscribed in RESP3 = %q", got)
	}
}

// TestOrder_NewConnectionSubscribeThenPublish: a new connection sends
// SUBSCRIBE as its very first command, without waiting; another client
// PUBLISHes to the channel at once. Redis accepts the connection and reads
// it in one event loop; the proxy accepts it, then adds it to its loop's
// set, so its first command may be read after the PUBLISH
// (docs/design/ordering.md, Limits). The rounds alternate between Redis
// directly and the proxy, so that both meet the same load, and the proxy
// must miss the subscriber no more often than Redis does, within noise.
func TestOrder_NewConnectionSubscribeThenPublish(t *testing.T) {
	direct := testutil.StartRedis(t)
	e := startEnv(t)
	targets := []struct {
		name, addr string
		pub        *rawConn
		missed     int
	}{{name: "direct", addr: direct.Addr}, {name: "proxy", addr: e.addr}}
	for i := range targets {
		targets[i].pub = dialOrdered(t, targets[i].addr)
	}
	const rounds = 200
	for i := range rounds {
		for j := range targets {
			tg := &targets[j]
			ch := fmt.Sprintf("new:%s:%d", tg.name, i)
			sub := dialRaw(t, tg.addr)
			sub.send([]string{"SUBSCRIBE", ch})
			if got := tg.pub.do("PUBLISH", ch, "m"); got != ":1\r\n" {
				tg.missed++
			}
			if got := sub.read(); !strings.Contains(got, "subscribe") {
				t.Fatalf("%s, round %d: subscribe reply %q", tg.name, i, got)
			}
			sub.nc.Close()
		}
	}
	d, p := targets[0].missed, targets[1].missed
	t.Logf("PUBLISH right after a new connection's first SUBSCRIBE missed it: directly %d of %d, through the proxy %d of %d", d, rounds, p, rounds)
	if p > 2*d+3 {
		t.Errorf("through the proxy %d of %d missed, directly %d", p, rounds, d)
	}
}
