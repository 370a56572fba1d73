package difftest

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Multi-client sequences: several connections to each server take turns in
// seeded scenes where what one client does decides what another sees:
// blocking pops served by another client's push, pub/sub, client-side
// caching invalidations, and writes to shared keys from a client with a
// private connection (through the proxy) and one without. Each scene is
// played on server A, then on server B, and every client's replies and
// push messages must be the same.

// MultiConfig controls RunMulti.
type MultiConfig struct {
	Seed     uint64
	Scenes   int
	MaxValue int           // largest generated value (default 64 kB)
	Timeout  time.Duration // per read (default 10 s)
	// Order scenes avoid what the proxy is known not to order yet
	// (TestOrder_PinThen*, TestOrder_SharedWriteThenPinnedRead) unless
	// these are set. SendAfterPin lets a client send on before the reply
	// to SELECT, HELLO or its first command that gives it a private
	// connection through the proxy (CLIENT, SUBSCRIBE ..., BRPOPLPUSH).
	// PrivateAfterShared lets a client with a private connection send
	// while a client on the shared connection has replies outstanding.
	// LargeCommands lets commands pass 16 KiB, one read of the proxy and of
	// Redis (TestOrder_LargeCommandThenOtherClient): values are then up to
	// MaxValue, else up to 4 KiB.
	// Inspect lets other clients send before the reply to APPEND or
	// GETRANGE, which the proxy runs as a script
	// (TestOrder_AppendThenOtherClientRead).
	SendAfterPin, PrivateAfterShared, LargeCommands, Inspect bool
	// Gap is the time an order scene played as written (RunOrder's
	// target) lets pass between one send and the next, measured from
	// the start of the one before; 0 sends each at once. Redis itself
	// runs commands that reach it on several sockets within a few
	// microseconds in the order its event loop reads them, a client's
	// whole read at a time: the gap at which Redis played as written
	// agrees with the settled play is the resolution of its own order
	// (docs/design/ordering.md).
	Gap time.Duration
	// Replays is how many order scenes that depart from the settled play
	// are played once more, on both servers, under new key and channel
	// names; the run fails when a replay departs too, or when one more
	// scene departs. A machine's scheduler can stall a server longer than
	// Gap (then Redis itself departs: see Gap); a fault of the order rule
	// departs again. Logf, when set, reports each replay and what it
	// replaced.
	Replays int
	Logf    func(format string, args ...any)
}

// action is one thing a scene does on one side.
type action struct {
	client int      // index of the scene's connection
	send   []string // a command to send without waiting, or nil
	read   bool     // read one reply and record it
	until  string   // read replies until a simple string equal to it, recording all
	// blocked waits until the server counts this many blocked clients.
	blocked int
	// hello: the reply to record is only its type (HELLO names the server).
	hello bool
	// settle: what a send brings whom, for order scenes (order.go).
	settle *settle
}

// scene is a named list of actions over clients connections.
type scene struct {
	name    string
	clients int
	acts    []action
}

// RunMulti plays cfg.Scenes scenes on both servers and returns the first
// difference as a *Mismatch (Step is the scene, Index the recorded reply).
func RunMulti(addrA, addrB string, cfg MultiConfig) (int, error) {
	if cfg.MaxValue == 0 {
		cfg.MaxValue = 64 << 10
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	g := &multiGen{r: newMultiRand(cfg.Seed), max: cfg.MaxValue}
	for i := 0; i < cfg.Scenes; i++ {
		sc := g.scene(i)
		ta, err := play(addrA, sc, cfg.Timeout)
		if err != nil {
			return i, fmt.Errorf("scene %d (%s) on A: %w", i, sc.name, err)
		}
		tb, err := play(addrB, sc, cfg.Timeout)
		if err != nil {
			return i, fmt.Errorf("scene %d (%s) on B: %w", i, sc.name, err)
		}
		for j := range max(len(ta), len(tb)) {
			var a, b string
			if j < len(ta) {
				a = ta[j]
			}
			if j < len(tb) {
				b = tb[j]
			}
			if a != b {
				return i, &Mismatch{Step: i, Commands: sc.describe(j), A: a, B: b}
			}
		}
	}
	return cfg.Scenes, nil
}

// describe lists a scene's commands, abridged, for a mismatch report at
// recorded reply j, as one entry.
func (sc scene) describe(j int) []string {
	out := []string{sc.name + " scene, recorded reply " + strconv.Itoa(j) + " of:"}
	for _, a := range sc.acts {
		if a.send != nil {
			out = append(out, "c"+strconv.Itoa(a.client)+": "+abridge(a.send))
		}
	}
	return []string{strings.Join(out, "\n  ")}
}

// play runs a scene on one server and returns what its clients received,
// in the order the scene read it, each prefixed with the client's index.
func play(addr string, sc scene, timeout time.Duration) ([]string, error) {
	return playGap(addr, sc, timeout, 0)
}

// playGap is play with at least gap between the starts of two sends
// (the kernel's timer slack and the scheduler may add to it).
func playGap(addr string, sc scene, timeout, gap time.Duration) ([]string, error) {
	conns, admin, closeAll, err := dialScene(addr, sc.clients)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	var out []string
	record := func(i int, r *Reply, hello bool) {
		s := r.String()
		if hello {
			s = string(r.Type)
		}
		out = append(out, strconv.Itoa(i)+" "+s)
	}
	var lastSend time.Time
	if gap > 0 {
		defer exactPauses()()
	}
	for _, a := range sc.acts {
		c := conns[a.client]
		c.SetDeadline(time.Now().Add(timeout))
		switch {
		case a.send != nil:
			if gap > 0 {
				if d := gap - time.Since(lastSend); d > 0 {
					pause(d)
				}
				lastSend = time.Now()
			}
			if err := c.send([][]string{a.send}); err != nil {
				return out, err
			}
		case a.read:
			r, err := ReadReply(c.r)
			if err != nil {
				return out, fmt.Errorf("client %d: %w", a.client, err)
			}
			record(a.client, r, a.hello)
		case a.until != "":
			for n := 0; ; n++ {
				r, err := ReadReply(c.r)
				if err != nil {
					return out, fmt.Errorf("client %d: %w", a.client, err)
				}
				record(a.client, r, false)
				if r.Type == '+' && r.Str == a.until || n > 1000 {
					break
				}
			}
		case a.blocked > 0:
			if err := waitBlocked(admin, a.blocked, timeout); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// waitBlocked polls INFO clients until the server counts n blocked clients.
func waitBlocked(c *conn, n int, timeout time.Duration) error {
	want := "blocked_clients:" + strconv.Itoa(n) + "\r\n"
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		c.SetDeadline(deadline)
		if err := c.send([][]string{{"INFO", "clients"}}); err != nil {
			return err
		}
		r, err := ReadReply(c.r)
		if err != nil {
			return err
		}
		if strings.Contains(r.Str, want) {
			return nil
		}
	}
	return fmt.Errorf("the server did not count %d blocked clients", n)
}

func newMultiRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x5eed)) }

type multiGen struct {
	r   *rand.Rand
	max int
}

// value is a compressible document, random bytes, a short word or a number.
func (g *multiGen) value() string {
	switch g.r.IntN(4) {
	case 0:
		n := 64 + g.r.IntN(g.max)
		var b strings.Builder
		for b.Len() < n {
			fmt.Fprintf(&b, `{"id":%d,"user":"squeeze","tags":["a","b"]},`, g.r.IntN(1000))
		}
		return b.String()[:n]
	case 1:
		b := make([]byte, 1+g.r.IntN(2048))
		for i := range b {
			b[i] = byte(g.r.IntN(256))
		}
		return string(b)
	case 2:
		return "w" + strconv.Itoa(g.r.IntN(100))
	default:
		return strconv.Itoa(g.r.IntN(1 << 20))
	}
}

func (g *multiGen) scene(i int) scene {
	switch g.r.IntN(4) {
	case 0:
		return g.blocking(i)
	case 1:
		return g.pubsub(i)
	case 2:
		return g.tracking(i)
	default:
		return g.turns(i)
	}
}

func send(c int, args ...string) action { return action{client: c, send: args} }
func read(c int) action                 { return action{client: c, read: true} }

// blocking: one to three clients block on a key, in turn, then the last
// client pushes as many values, and each blocked client gets its own.
func (g *multiGen) blocking(i int) scene {
	n := 1 + g.r.IntN(3)
	sc := scene{name: "blocking", clients: n + 1}
	key := "bk:" + strconv.Itoa(i)
	kind := g.r.IntN(4)
	for c := range n {
		switch kind {
		case 0:
			sc.acts = append(sc.acts, send(c, "BLPOP", key, "0"))
		case 1:
			sc.acts = append(sc.acts, send(c, "BRPOPLPUSH", key, key+":dst"+strconv.Itoa(c), "0"))
		case 2:
			sc.acts = append(sc.acts, send(c, "BLMOVE", key, key+":dst", "RIGHT", "LEFT", "0"))
		default:
			sc.acts = append(sc.acts, send(c, "XREAD", "BLOCK", "0", "STREAMS", key, "0-0"))
		}
		sc.acts = append(sc.acts, action{blocked: c + 1})
	}
	pusher := n
	if kind == 3 {
		sc.acts = append(sc.acts, send(pusher, "XADD", key, "1-1", "f", g.value(), "g", g.value()), read(pusher))
	} else {
		push := []string{"RPUSH", key}
		for range n {
			push = append(push, g.value())
		}
		sc.acts = append(sc.acts, send(pusher, push...), read(pusher))
	}
	for c := range n {
		sc.acts = append(sc.acts, read(c))
	}
	sc.acts = append(sc.acts, send(pusher, "LRANGE", key+":dst", "0", "-1"), read(pusher))
	return sc
}

// pubsub: a subscriber (RESP2 or RESP3) subscribes, another client
// publishes, the subscriber reads the messages and unsubscribes.
func (g *multiGen) pubsub(i int) scene {
	sc := scene{name: "pubsub", clients: 2}
	ch := "ch:" + strconv.Itoa(i)
	if g.r.IntN(2) == 0 {
		sc.acts = append(sc.acts, send(0, "HELLO", "3"), action{client: 0, read: true, hello: true})
	}
	pattern := g.r.IntN(2) == 0
	if pattern {
		sc.acts = append(sc.acts, send(0, "PSUBSCRIBE", "ch:*"), read(0))
	} else {
		sc.acts = append(sc.acts, send(0, "SUBSCRIBE", ch), read(0))
	}
	n := 1 + g.r.IntN(3)
	for range n {
		sc.acts = append(sc.acts, send(1, "PUBLISH", ch, g.value()), read(1))
	}
	for range n {
		sc.acts = append(sc.acts, read(0))
	}
	if pattern {
		sc.acts = append(sc.acts, send(0, "PUNSUBSCRIBE"), read(0))
	} else {
		sc.acts = append(sc.acts, send(0, "UNSUBSCRIBE"), read(0))
	}
	sc.acts = append(sc.acts, send(0, "PING"), action{client: 0, until: "PONG"})
	return sc
}

// tracking: a RESP3 client caches keys it reads; another client and the
// client itself change them, or keys it never read; every invalidation
// arrives before the PONG that ends the scene, in its place.
func (g *multiGen) tracking(i int) scene {
	sc := scene{name: "tracking", clients: 2}
	k := func(j int) string { return "tk:" + strconv.Itoa(i) + ":" + strconv.Itoa(j) }
	sc.acts = append(sc.acts,
		send(1, "SET", k(0), g.value()), read(1),
		send(1, "HSET", k(1), "f", g.value()), read(1),
		send(0, "HELLO", "3"), action{client: 0, read: true, hello: true},
		send(0, "CLIENT", "TRACKING", "ON"), read(0),
		send(0, "GET", k(0)), read(0),
		send(0, "HGET", k(1), "f"), read(0),
	)
	for range 1 + g.r.IntN(4) {
		c := g.r.IntN(2)
		key := k(g.r.IntN(3))
		var cmd []string
		switch g.r.IntN(6) {
		case 0:
			cmd = []string{"SET", key, g.value()}
		case 1:
			cmd = []string{"APPEND", key, g.value()}
		case 2:
			cmd = []string{"DEL", key}
		case 3:
			cmd = []string{"GET", key}
		case 4:
			cmd = []string{"STRLEN", key}
		default:
			cmd = []string{"HSET", k(1), "f", g.value()}
		}
		sc.acts = append(sc.acts, send(c, cmd...))
		if c == 0 {
			// The tracking client's reply and any push it caused.
			sc.acts = append(sc.acts, send(0, "PING"), action{client: 0, until: "PONG"})
		} else {
			sc.acts = append(sc.acts, read(1))
		}
	}
	sc.acts = append(sc.acts, send(0, "PING"), action{client: 0, until: "PONG"})
	return sc
}

// turns: three clients, one with connection state (SELECT), take turns
// writing and reading shared keys, each waiting for its reply.
func (g *multiGen) turns(i int) scene {
	sc := scene{name: "turns", clients: 3}
	sc.acts = append(sc.acts, send(2, "SELECT", "0"), read(2))
	k := func() string { return "sk:" + strconv.Itoa(i) + ":" + strconv.Itoa(g.r.IntN(2)) }
	for range 4 + g.r.IntN(8) {
		c := g.r.IntN(3)
		var cmd []string
		switch g.r.IntN(7) {
		case 0, 1:
			cmd = []string{"SET", k(), g.value()}
		case 2:
			cmd = []string{"APPEND", k(), g.value()}
		case 3:
			cmd = []string{"GETDEL", k()}
		case 4:
			cmd = []string{"GETRANGE", k(), "0", strconv.Itoa(g.r.IntN(100))}
		case 5:
			cmd = []string{"SET", k(), g.value(), "GET"}
		default:
			cmd = []string{"GET", k()}
		}
		sc.acts = append(sc.acts, send(c, cmd...), read(c))
	}
	return sc
}

// dialScene connects a scene's clients and one more connection for the
// scene's own questions (admin); closeAll closes them all.
func dialScene(addr string, clients int) (conns []*conn, admin *conn, closeAll func(), err error) {
	closeAll = func() {
		for _, c := range conns {
			c.Close()
		}
		if admin != nil {
			admin.Close()
		}
	}
	for range clients {
		c, err := dial(addr)
		if err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		conns = append(conns, c)
	}
	if admin, err = dial(addr); err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	return conns, admin, closeAll, nil
}
