package difftest

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Order scenes: seeded multi-client scenes for the proxy's order across
// clients (docs/design/ordering.md). Clients change their connection state
// (SELECT to the same database as others or another, CLIENT SETNAME,
// HELLO 3) and their subscriptions (SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE,
// PUNSUBSCRIBE, again and again), block (BRPOPLPUSH), write and read keys
// the others write and read, and PUBLISH, whose reply counts the receivers.
// Every client sends without waiting for its replies and reads them later,
// so what a command does depends on the order of the commands of
// different clients.
//
// Redis runs commands that reach it on several sockets at the same moment
// in the order its event loop happens to read them, so the reference
// server plays each scene settled: before the next command is sent, the
// previous one's reply has been read (and kept for the scene's own read)
// or, for a command that blocks, the server counts it blocked. The server
// under test gets the scene as written, without any wait: a proxy that
// runs commands in the order they reached it gives the same replies. A
// model of the scene (each client's database, protocol, subscriptions and
// blocked state, each list's length) tells how many replies and messages
// each command brings, and to whom, so that every scene's outcome is
// defined: UNSUBSCRIBE without channels is sent only by a client with at
// most one channel, and a client holds at most one pattern (the order of
// several confirmations or messages would be the server's hash order).

// settle is what a command of an order scene brings, for the settled play.
type settle struct {
	replies int // items the sender receives for it (replies, confirmations, its own messages)
	// blocked > 0: the command blocks; the server then counts this many
	// blocked clients.
	blocked int
	others  map[int]int // items other clients receive because of it (messages, a served pop)
}

// RunOrder plays cfg.Scenes order scenes, settled on ref and as written on
// target, and returns the first difference as a *Mismatch (Step is the
// scene, Index the recorded reply).
func RunOrder(ref, target string, cfg MultiConfig) (int, error) {
	return runOrder(ref, target, cfg, func(addr string, sc scene, timeout time.Duration) ([]string, error) {
		return playGap(addr, sc, timeout, cfg.Gap)
	})
}

// runOrder is RunOrder with the target's player: play, or playSettled to
// check the harness on two servers that do not order as the proxy does.
func runOrder(ref, target string, cfg MultiConfig, playTarget func(string, scene, time.Duration) ([]string, error)) (int, error) {
	switch {
	case !cfg.LargeCommands:
		// Three values of up to 4 KiB and some: an LPUSH stays under 16 KiB.
		cfg.MaxValue = 4 << 10
	case cfg.MaxValue == 0:
		cfg.MaxValue = 64 << 10
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	g := &orderGen{multiGen: multiGen{r: newMultiRand(cfg.Seed ^ 0x0dde5), max: cfg.MaxValue},
		sendAfterPin: cfg.SendAfterPin, privateAfterShared: cfg.PrivateAfterShared, inspect: cfg.Inspect}
	replays := 0
	for i := 0; i < cfg.Scenes; i++ {
		sc := g.scene(i)
		departed, err := playOrderScene(ref, target, i, sc, cfg.Timeout, playTarget)
		if departed && replays < cfg.Replays {
			replays++
			if cfg.Logf != nil {
				cfg.Logf("scene %d departed from the settled play; played again under new names (%d of %d replays): %v", i, replays, cfg.Replays, err)
			}
			sc = sc.renamed("o:"+strconv.Itoa(i)+":", "o:"+strconv.Itoa(i)+"."+strconv.Itoa(replays)+":")
			_, err = playOrderScene(ref, target, i, sc, cfg.Timeout, playTarget)
		}
		if err != nil {
			return i, err
		}
	}
	return cfg.Scenes, nil
}

// playOrderScene plays scene i settled on ref and with playTarget on
// target; departed says the target's play differs (or failed).
func playOrderScene(ref, target string, i int, sc scene, timeout time.Duration, playTarget func(string, scene, time.Duration) ([]string, error)) (departed bool, err error) {
	ta, err := playSettled(ref, sc, timeout)
	if err != nil {
		return false, fmt.Errorf("scene %d (%s) on the reference: %w", i, sc.name, err)
	}
	tb, err := playTarget(target, sc, timeout)
	// A reply that differs explains a read that then timed out.
	if m := firstDifference(i, sc, ta, tb, err != nil); m != nil {
		return true, m
	}
	if err != nil {
		return true, fmt.Errorf("scene %d (%s) on the target: %w\n  %s", i, sc.name, err, sc.describe(len(tb))[0])
	}
	return false, nil
}

// renamed returns sc with every argument that starts with prefix (the
// scene's keys, channels and patterns) starting with to instead.
func (sc scene) renamed(prefix, to string) scene {
	out := sc
	out.acts = make([]action, len(sc.acts))
	for i, a := range sc.acts {
		if a.send != nil {
			args := make([]string, len(a.send))
			for j, arg := range a.send {
				if strings.HasPrefix(arg, prefix) {
					arg = to + arg[len(prefix):]
				}
				args[j] = arg
			}
			a.send = args
		}
		out.acts[i] = a
	}
	return out
}

// firstDifference compares two plays' records; with prefix, only as far
// as the shorter one goes.
func firstDifference(i int, sc scene, ta, tb []string, prefix bool) *Mismatch {
	n := max(len(ta), len(tb))
	if prefix {
		n = min(len(ta), len(tb))
	}
	for j := range n {
		var a, b string
		if j < len(ta) {
			a = ta[j]
		}
		if j < len(tb) {
			b = tb[j]
		}
		if a != b {
			return &Mismatch{Step: i, Commands: sc.describe(j), A: a, B: b}
		}
	}
	return nil
}

// playSettled plays a scene as play does, except that each command has
// been run by the server before the next is sent: the items it brings
// the sender are read at once and kept until the scene reads them, and a
// command that blocks is waited for until the server counts it blocked.
func playSettled(addr string, sc scene, timeout time.Duration) ([]string, error) {
	conns, admin, closeAll, err := dialScene(addr, sc.clients)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	kept := make([][]*Reply, sc.clients)
	pending := make([]int, sc.clients) // items on their way, not kept yet
	pull := func(i int) (*Reply, error) {
		r, err := ReadReply(conns[i].r)
		if err != nil {
			return nil, fmt.Errorf("client %d: %w", i, err)
		}
		return r, nil
	}
	var out []string
	for _, a := range sc.acts {
		c := conns[a.client]
		c.SetDeadline(time.Now().Add(timeout))
		switch {
		case a.send != nil:
			st := a.settle
			if st == nil {
				return out, fmt.Errorf("client %d: %s has no settle", a.client, abridge(a.send))
			}
			if err := c.send([][]string{a.send}); err != nil {
				return out, err
			}
			for o, n := range st.others {
				pending[o] += n
			}
			if st.blocked > 0 {
				if err := waitBlocked(admin, st.blocked, timeout); err != nil {
					return out, fmt.Errorf("client %d: %s: %w", a.client, abridge(a.send), err)
				}
				continue
			}
			for pending[a.client] += st.replies; pending[a.client] > 0; pending[a.client]-- {
				r, err := pull(a.client)
				if err != nil {
					return out, err
				}
				kept[a.client] = append(kept[a.client], r)
			}
		case a.read:
			var r *Reply
			if k := kept[a.client]; len(k) > 0 {
				r, kept[a.client] = k[0], k[1:]
			} else {
				if r, err = pull(a.client); err != nil {
					return out, err
				}
				pending[a.client]--
			}
			s := r.String()
			if a.hello {
				s = string(r.Type)
			}
			out = append(out, strconv.Itoa(a.client)+" "+s)
		default:
			return out, fmt.Errorf("an order scene holds only sends and reads")
		}
	}
	return out, nil
}

type orderGen struct {
	multiGen
	// See MultiConfig.
	sendAfterPin, privateAfterShared, inspect bool
}

// orderKinds are the scene kinds, each with the weight of every op.
var orderKinds = []struct {
	name    string
	clients int
	weights map[string]int
}{
	{"order state", 3, map[string]int{
		"select": 4, "setname": 2, "getname": 1, "hello": 1,
		"set": 4, "get": 4, "append": 1, "del": 1, "getrange": 1, "setget": 2,
		"push": 1, "llen": 1,
	}},
	{"order pubsub", 4, map[string]int{
		"subscribe": 4, "unsubscribe": 3, "psubscribe": 2, "punsubscribe": 2,
		"publish": 6, "select": 1, "setname": 1, "hello": 1, "set": 1, "get": 1,
	}},
	{"order blocking", 4, map[string]int{
		"select": 4, "pop": 4, "push": 3, "lrange": 2, "llen": 1,
		"setname": 1, "hello": 1, "set": 1, "get": 1,
	}},
}

// orderOps are the ops scenes draw from, in a fixed order (a map's order
// would change the seeded draw).
var orderOps = []string{
	"select", "setname", "getname", "hello", "set", "get", "append", "del",
	"getrange", "setget", "push", "pop", "lrange", "llen",
	"subscribe", "unsubscribe", "psubscribe", "punsubscribe", "publish",
}

func (g *orderGen) scene(i int) scene {
	k := orderKinds[g.r.IntN(len(orderKinds))]
	m := newOrderModel(g, i, k.name, k.clients)
	// Each client's first command is a PING it waits for: a new
	// connection's first command may be read after commands other clients
	// sent a little later (ordering.md, Limits).
	for c := range m.clients {
		m.emit(c, settle{replies: 1}, false, "PING")
		m.readAll(c)
	}
	total := 0
	for _, op := range orderOps {
		total += k.weights[op]
	}
	for range 10 + g.r.IntN(16) {
		for try := 0; try < 20; try++ {
			c := g.r.IntN(k.clients)
			n := g.r.IntN(total)
			var op string
			for _, op = range orderOps {
				if n -= k.weights[op]; n < 0 {
					break
				}
			}
			wasPinned := m.clients[c].pinned
			if !m.clients[c].blocked && m.do(c, op) {
				m.afterSend(c, op, wasPinned)
				break
			}
		}
		// Replies are read later, now and then all of a client's.
		if g.r.IntN(3) == 0 {
			m.readAll(g.r.IntN(k.clients))
		}
	}
	m.finish()
	return m.sc
}

// orderClient is the model of one client of an order scene.
type orderClient struct {
	db       int
	resp3    bool
	channels map[string]bool
	pattern  string
	blocked  bool
	pinned   bool // it sent a command that gives it a private connection through the proxy
	// owed are the items the client will receive that the scene has not
	// read yet; true marks HELLO's reply.
	owed []bool
}

// subscribedRESP2 says the client may only send subscription commands.
func (cl *orderClient) subscribedRESP2() bool {
	return !cl.resp3 && (len(cl.channels) > 0 || cl.pattern != "")
}

// orderModel follows a scene as it is generated.
type orderModel struct {
	g        *orderGen
	i        int
	clients  []*orderClient
	lists    map[string]int   // "db key" -> length
	waiters  map[string][]int // "db key" -> clients blocked on it, first first
	nblocked int
	sc       scene
	// sender is the client that sent last (-1: none yet).
	sender int
}

// newOrderModel starts scene i with n clients and one more, the last,
// which only ends the scene (it serves who is still blocked and reads
// what every database holds).
func newOrderModel(g *orderGen, i int, name string, n int) *orderModel {
	m := &orderModel{g: g, i: i, lists: map[string]int{}, waiters: map[string][]int{},
		sc: scene{name: name, clients: n + 1}, sender: -1}
	for range n + 1 {
		m.clients = append(m.clients, &orderClient{channels: map[string]bool{}})
	}
	return m
}

func (m *orderModel) name(kind string, j int) string {
	return "o:" + strconv.Itoa(m.i) + ":" + kind + strconv.Itoa(j)
}

// emit sends args from client c and notes what it brings whom. A client
// that is owed replies reads them first if another client sent since it
// did: a server reads a client's pipelined commands together when they
// are all there, so its next command could run before the other client's
// earlier one (Redis itself runs them so in most rounds when nothing
// waits), and the scene's outcome would not be defined.
func (m *orderModel) emit(c int, st settle, hello bool, args ...string) {
	if m.sender != c && len(m.clients[c].owed) > 0 {
		m.readAll(c)
	}
	m.sender = c
	if m.clients[c].pinned && !m.g.privateAfterShared {
		for o, other := range m.clients {
			if !other.pinned {
				m.readAll(o)
			}
		}
	}
	m.sc.acts = append(m.sc.acts, action{client: c, send: args, settle: &st})
	for range st.replies {
		m.clients[c].owed = append(m.clients[c].owed, hello)
	}
	for o, n := range st.others {
		for range n {
			m.clients[o].owed = append(m.clients[o].owed, false)
		}
	}
}

// readAll reads every item client c is owed.
func (m *orderModel) readAll(c int) {
	for _, hello := range m.clients[c].owed {
		m.sc.acts = append(m.sc.acts, action{client: c, read: true, hello: hello})
	}
	m.clients[c].owed = nil
}

// afterSend has client c read its replies after SELECT, HELLO, the
// command that pinned it, APPEND or GETRANGE, unless the scenes may send
// on.
func (m *orderModel) afterSend(c int, op string, wasPinned bool) {
	cl := m.clients[c]
	if !m.g.inspect && (op == "append" || op == "getrange") {
		m.readAll(c)
		return
	}
	if m.g.sendAfterPin || cl.blocked || op != "select" && op != "hello" && (wasPinned || !cl.pinned) {
		return
	}
	m.readAll(c)
}

// do adds op by client c to the scene, if c may send it now.
func (m *orderModel) do(c int, op string) bool {
	cl := m.clients[c]
	if cl.subscribedRESP2() && !strings.HasSuffix(op, "subscribe") {
		return false
	}
	// Through the proxy these give the client a private connection; emit
	// needs to know before it sends.
	wasPinned := cl.pinned
	switch op {
	case "select", "setname", "getname", "hello", "pop", "subscribe", "unsubscribe", "psubscribe", "punsubscribe":
		cl.pinned = true
	}
	if !m.doOp(c, op) {
		cl.pinned = wasPinned
		return false
	}
	return true
}

// doOp is do once c may send op.
func (m *orderModel) doOp(c int, op string) bool {
	g, cl := m.g, m.clients[c]
	key := m.name("k", g.r.IntN(2))
	listKey := strconv.Itoa(cl.db) + " " + m.name("src", 0)
	one := settle{replies: 1}
	switch op {
	case "select":
		cl.db = []int{0, 0, 1, 1, 2}[g.r.IntN(5)]
		m.emit(c, one, false, "SELECT", strconv.Itoa(cl.db))
	case "setname":
		m.emit(c, one, false, "CLIENT", "SETNAME", "o"+strconv.Itoa(c)+"n"+strconv.Itoa(g.r.IntN(3)))
	case "getname":
		m.emit(c, one, false, "CLIENT", "GETNAME")
	case "hello":
		if cl.resp3 {
			return false
		}
		cl.resp3 = true
		m.emit(c, one, true, "HELLO", "3")
	case "set":
		m.emit(c, one, false, "SET", key, g.value())
	case "setget":
		m.emit(c, one, false, "SET", key, g.value(), "GET")
	case "get":
		m.emit(c, one, false, "GET", key)
	case "append":
		m.emit(c, one, false, "APPEND", key, g.value())
	case "del":
		m.emit(c, one, false, "DEL", key)
	case "getrange":
		m.emit(c, one, false, "GETRANGE", key, "0", strconv.Itoa(g.r.IntN(100)))
	case "push":
		args := []string{"LPUSH", m.name("src", 0)}
		for range 1 + g.r.IntN(3) {
			args = append(args, g.value())
		}
		st := settle{replies: 1, others: map[int]int{}}
		n := len(args) - 2
		w := m.waiters[listKey]
		for len(w) > 0 && n > 0 {
			st.others[w[0]]++
			m.clients[w[0]].blocked = false
			m.nblocked--
			w, n = w[1:], n-1
		}
		m.waiters[listKey] = w
		m.lists[listKey] += n
		m.emit(c, st, false, args...)
	case "pop":
		// At least one client of the scene stays free to push.
		if m.nblocked >= len(m.clients)-3 && m.lists[listKey] == 0 {
			return false
		}
		args := []string{"BRPOPLPUSH", m.name("src", 0), m.name("dst", c), "0"}
		if m.lists[listKey] > 0 {
			m.lists[listKey]--
			m.emit(c, one, false, args...)
			break
		}
		cl.blocked = true
		m.nblocked++
		m.waiters[listKey] = append(m.waiters[listKey], c)
		m.emit(c, settle{blocked: m.nblocked}, false, args...)
	case "lrange":
		m.emit(c, one, false, "LRANGE", m.name("dst", g.r.IntN(len(m.clients)-1)), "0", "-1")
	case "llen":
		m.emit(c, one, false, "LLEN", m.name("src", 0))
	case "subscribe":
		args := []string{"SUBSCRIBE"}
		for _, j := range g.r.Perm(3)[:1+g.r.IntN(2)] {
			ch := m.name("ch", j)
			args = append(args, ch)
			cl.channels[ch] = true
		}
		m.emit(c, settle{replies: len(args) - 1}, false, args...)
	case "unsubscribe":
		if len(cl.channels) == 0 && cl.pattern == "" {
			return false // Valkey 8.0 answers NOSUB, not one reply per channel
		}
		if len(cl.channels) <= 1 && g.r.IntN(2) == 0 {
			// Without channels: one confirmation per channel, or one.
			clear(cl.channels)
			m.emit(c, one, false, "UNSUBSCRIBE")
			break
		}
		args := []string{"UNSUBSCRIBE"}
		for _, j := range g.r.Perm(3)[:1+g.r.IntN(2)] {
			ch := m.name("ch", j)
			args = append(args, ch)
			delete(cl.channels, ch)
		}
		m.emit(c, settle{replies: len(args) - 1}, false, args...)
	case "psubscribe":
		if cl.pattern != "" {
			return false
		}
		cl.pattern = "o:" + strconv.Itoa(m.i) + ":ch" + []string{"*", "1*"}[g.r.IntN(2)]
		m.emit(c, one, false, "PSUBSCRIBE", cl.pattern)
	case "punsubscribe":
		if len(cl.channels) == 0 && cl.pattern == "" {
			return false // as UNSUBSCRIBE
		}
		switch g.r.IntN(3) {
		case 0:
			cl.pattern = ""
			m.emit(c, one, false, "PUNSUBSCRIBE")
		case 1:
			if cl.pattern == "" {
				return false
			}
			m.emit(c, one, false, "PUNSUBSCRIBE", cl.pattern)
			cl.pattern = ""
		default:
			// A pattern the client may not hold.
			p := "o:" + strconv.Itoa(m.i) + ":ch1*"
			if cl.pattern == p {
				cl.pattern = ""
			}
			m.emit(c, one, false, "PUNSUBSCRIBE", p)
		}
	case "publish":
		ch := m.name("ch", g.r.IntN(3))
		st := settle{replies: 1, others: map[int]int{}}
		for o, sub := range m.clients {
			n := 0
			if sub.channels[ch] {
				n++
			}
			if sub.pattern != "" && strings.HasPrefix(ch, strings.TrimSuffix(sub.pattern, "*")) {
				n++
			}
			if o == c {
				st.replies += n
			} else if n > 0 {
				st.others[o] = n
			}
		}
		m.emit(c, st, false, "PUBLISH", ch, g.value())
	default:
		return false
	}
	return true
}

// finish ends the scene with its last client: it serves every client
// still blocked, reads the keys of every database the scene used, and
// then every client reads what it is owed.
func (m *orderModel) finish() {
	last := len(m.clients) - 1
	for db := range 3 {
		m.emit(last, settle{replies: 1}, false, "SELECT", strconv.Itoa(db))
		m.readAll(last)
		listKey := strconv.Itoa(db) + " " + m.name("src", 0)
		if w := m.waiters[listKey]; len(w) > 0 {
			args := []string{"LPUSH", m.name("src", 0)}
			st := settle{replies: 1, others: map[int]int{}}
			for _, c := range w {
				args = append(args, "end"+strconv.Itoa(c))
				st.others[c] = 1
				m.clients[c].blocked = false
			}
			m.nblocked -= len(w)
			m.waiters[listKey] = nil
			m.emit(last, st, false, args...)
			m.readAll(last)
		}
		for _, args := range [][]string{
			{"MGET", m.name("k", 0), m.name("k", 1)},
			{"LRANGE", m.name("src", 0), "0", "-1"},
		} {
			m.emit(last, settle{replies: 1}, false, args...)
			m.readAll(last)
		}
		for c := range last {
			m.emit(last, settle{replies: 1}, false, "LRANGE", m.name("dst", c), "0", "-1")
			m.readAll(last)
		}
	}
	for c := range last {
		m.readAll(c)
	}
}
