// Package difftest sends the same seeded random sequence of Redis commands
// to two servers, typically Redis directly and Redis through the squeeze
// proxy, and reports the first reply that differs.
//
// The sequence covers the command families the proxy rewrites (strings,
// hashes, lists, streams), commands that look inside values, transactions,
// pipelines and expiry, with values from 0 bytes to 1 MB, compressible and
// random, in RESP2 or RESP3. Replies whose order Redis leaves undefined
// (HGETALL, HKEYS, HVALS, SMEMBERS) are compared as sets, since the order
// follows the internal encoding, which follows the stored value sizes; TTLs
// are compared as "has a TTL" / "has none".
package difftest

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
)

// Config controls one run.
type Config struct {
	Seed     uint64
	Steps    int             // steps to run; each is a command, a pipeline or a transaction
	RESP3    bool            // send HELLO 3 first on both connections
	MaxValue int             // largest generated value (default 1 MB)
	Skip     map[string]bool // command names (upper case) not to generate
	// HashFieldExpiry adds Redis 8's HSETEX, HGETEX and HGETDEL, and
	// HTTL and HPEXPIRE, to the sequence: set it when both servers have
	// them. Without it a seed's sequence is what it was before them.
	HashFieldExpiry bool
	// SetIf adds SET with IFEQ and IFNE (Valkey 8.1, Redis 8.4), and
	// DelIfEq Valkey 9's DELIFEQ: set them when both servers have them.
	// Half of the comparisons use the value last SET under the key, so
	// that both outcomes occur. Without them a seed's sequence is what it
	// was before them.
	SetIf, DelIfEq bool
	// Msetex adds MSETEX (Redis 8.4, Valkey 9.1), likewise.
	Msetex bool
	// Delex adds Redis 8.4's DELEX (with IFEQ or IFNE), DIGEST, and SET
	// with IFDEQ or IFDNE (with a digest that seldom matches), likewise.
	Delex bool
	// XaddRef adds Redis 8.2's KEEPREF, DELREF or ACKED to XADD, likewise.
	XaddRef bool
	Timeout time.Duration // per step (default 10 s)
}

// Mismatch describes the first difference found.
type Mismatch struct {
	Step     int
	Commands []string // the step's commands, abridged
	Index    int      // which command of the step
	A, B     string   // the two replies, abridged
	History  []string // the last commands before the step
}

func (m *Mismatch) Error() string {
	return fmt.Sprintf("step %d, command %d %s:\n  A: %s\n  B: %s\nrecent history:\n  %s",
		m.Step, m.Index, m.Commands[m.Index], m.A, m.B, strings.Join(m.History, "\n  "))
}

// Result summarizes a run without mismatches.
type Result struct {
	Steps, Commands int
	ByCommand       map[string]int
	BytesSent       int64
}

// Run connects to both addresses ("host:port" or a unix socket path starting
// with "/"), runs cfg.Steps steps, and returns the first mismatch as a
// *Mismatch error. Both servers should start empty.
func Run(addrA, addrB string, cfg Config) (*Result, error) {
	if cfg.MaxValue == 0 {
		cfg.MaxValue = 1 << 20
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	a, err := dial(addrA)
	if err != nil {
		return nil, fmt.Errorf("connect A %s: %w", addrA, err)
	}
	defer a.Close()
	b, err := dial(addrB)
	if err != nil {
		return nil, fmt.Errorf("connect B %s: %w", addrB, err)
	}
	defer b.Close()
	g := newGen(cfg)
	res := &Result{ByCommand: map[string]int{}}
	var history []string
	if cfg.RESP3 {
		if err := compareStep(a, b, cfg, -1, [][]string{{"HELLO", "3"}}, nil); err != nil {
			// Ignore HELLO's server details (version, id): they differ.
			if _, ok := err.(*Mismatch); !ok {
				return nil, err
			}
		}
	}
	for step := 0; step < cfg.Steps; step++ {
		cmds := g.step()
		res.Steps++
		for _, c := range cmds {
			res.Commands++
			res.ByCommand[strings.ToUpper(c[0])]++
			for _, arg := range c {
				res.BytesSent += int64(len(arg))
			}
		}
		if err := compareStep(a, b, cfg, step, cmds, history); err != nil {
			return res, err
		}
		for _, c := range cmds {
			history = append(history, abridge(c))
		}
		if len(history) > 12 {
			history = history[len(history)-12:]
		}
	}
	return res, nil
}

type conn struct {
	net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func dial(addr string) (*conn, error) {
	network := "tcp"
	if strings.HasPrefix(addr, "/") {
		network = "unix"
	}
	c, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10)}, nil
}

func (c *conn) send(cmds [][]string) error {
	for _, cmd := range cmds {
		fmt.Fprintf(c.w, "*%d\r\n", len(cmd))
		for _, a := range cmd {
			fmt.Fprintf(c.w, "$%d\r\n", len(a))
			c.w.WriteString(a)
			c.w.WriteString("\r\n")
		}
	}
	return c.w.Flush()
}

// compareStep sends cmds (pipelined) to both servers and compares replies.
func compareStep(a, b *conn, cfg Config, step int, cmds [][]string, history []string) error {
	deadline := time.Now().Add(cfg.Timeout)
	a.SetDeadline(deadline)
	b.SetDeadline(deadline)
	if err := a.send(cmds); err != nil {
		return fmt.Errorf("step %d: send A: %w", step, err)
	}
	if err := b.send(cmds); err != nil {
		return fmt.Errorf("step %d: send B: %w", step, err)
	}
	inMulti := false
	var queued [][]string
	for i, cmd := range cmds {
		ra, err := ReadReply(a.r)
		if err != nil {
			return fmt.Errorf("step %d: read A reply to %s: %w", step, abridge(cmd), err)
		}
		rb, err := ReadReply(b.r)
		if err != nil {
			return fmt.Errorf("step %d: read B reply to %s: %w", step, abridge(cmd), err)
		}
		name := strings.ToUpper(cmd[0])
		switch {
		case name == "MULTI":
			inMulti, queued = true, nil
		case name == "EXEC" && inMulti:
			inMulti = false
			if !ra.Null && len(ra.Elems) == len(queued) && len(rb.Elems) == len(queued) {
				for j, q := range queued {
					normalize(q, ra.Elems[j])
					normalize(q, rb.Elems[j])
				}
			}
		case name == "DISCARD":
			inMulti = false
		case inMulti:
			queued = append(queued, cmd)
		default:
			normalize(cmd, ra)
			normalize(cmd, rb)
		}
		if name == "HELLO" {
			continue
		}
		if !Equal(ra, rb) {
			ab := make([]string, len(cmds))
			for j, c := range cmds {
				ab[j] = abridge(c)
			}
			return &Mismatch{Step: step, Commands: ab, Index: i, A: ra.String(), B: rb.String(), History: history}
		}
	}
	return nil
}

// normalize makes replies comparable where Redis leaves details undefined,
// as the command table says: the order of some replies' elements (field,
// value pairs kept together), and a time left, which counts down.
func normalize(cmd []string, r *Reply) {
	spec := rediscmd.LookupString(cmd[0])
	switch {
	case spec == nil:
	case spec.Has(rediscmd.Unordered):
		r.sortElems(spec.Reply == rediscmd.ReplyPairs)
	case spec.Has(rediscmd.TimeToLive):
		for _, e := range append([]*Reply{r}, r.Elems...) {
			if n, err := strconv.Atoi(e.Str); err == nil && n > 0 {
				e.Str = "positive"
			}
		}
	}
}

func abridge(cmd []string) string {
	parts := make([]string, len(cmd))
	for i, a := range cmd {
		if len(a) > 40 {
			parts[i] = fmt.Sprintf("<%d bytes %08x>", len(a), crc(a))
		} else {
			parts[i] = strconv.Quote(a)
		}
	}
	return strings.Join(parts, " ")
}

// gen produces the random command sequence.
type gen struct {
	cfg      Config
	r        *rand.Rand
	streamID map[string]int
	recent   []string          // values sent earlier, for LREM, LPOS and LINSERT pivots
	last     map[string]string // the value last SET under a string key (SetIf)
}

func newGen(cfg Config) *gen {
	return &gen{cfg: cfg, r: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), streamID: map[string]int{}, last: map[string]string{}}
}

func (g *gen) step() [][]string {
	switch p := g.r.IntN(100); {
	case p < 8: // transaction
		n := 1 + g.r.IntN(5)
		cmds := [][]string{{"MULTI"}}
		for i := 0; i < n; i++ {
			cmds = append(cmds, g.command())
		}
		if g.r.IntN(10) == 0 {
			return append(cmds, []string{"DISCARD"})
		}
		return append(cmds, []string{"EXEC"})
	case p < 20: // pipeline
		n := 2 + g.r.IntN(30)
		cmds := make([][]string, n)
		for i := range cmds {
			cmds[i] = g.command()
		}
		return cmds
	}
	return [][]string{g.command()}
}

func (g *gen) key(kind string, n int) string { return kind + ":" + strconv.Itoa(g.r.IntN(n)) }

// value returns a generated value: often short, sometimes large,
// compressible (JSON-like) or random, sometimes an integer or a float, and
// now and then one that starts with squeeze's frame magic.
func (g *gen) value() string {
	switch p := g.r.IntN(100); {
	case p < 8:
		return strconv.Itoa(g.r.IntN(2000) - 1000)
	case p < 10:
		return strconv.FormatFloat(g.r.Float64()*100, 'f', 3, 64)
	case p < 12:
		return "\xC1SQ" + g.text(g.r.IntN(200))
	case p < 14:
		return ""
	}
	var n int
	switch p := g.r.IntN(100); {
	case p < 40:
		n = g.r.IntN(64)
	case p < 80:
		n = 64 + g.r.IntN(4096)
	case p < 97:
		n = 4096 + g.r.IntN(64<<10)
	default:
		n = g.r.IntN(g.cfg.MaxValue + 1)
	}
	if len(g.recent) > 0 && g.r.IntN(6) == 0 {
		return g.recent[g.r.IntN(len(g.recent))]
	}
	if g.r.IntN(5) == 0 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(g.r.Uint32())
		}
		return g.remember(string(b))
	}
	return g.remember(g.text(n))
}

func (g *gen) remember(v string) string {
	if len(v) < 64<<10 {
		if len(g.recent) < 16 {
			g.recent = append(g.recent, v)
		} else {
			g.recent[g.r.IntN(16)] = v
		}
	}
	return v
}

func (g *gen) old() string {
	if len(g.recent) == 0 {
		return "none-yet"
	}
	return g.recent[g.r.IntN(len(g.recent))]
}

var words = strings.Fields(`id name user order status shipped pending price total items created updated
	email region eu-west us-east true false null "tags" {"a": [1, 2, 3]} lorem ipsum redis squeeze
	compress value cache session token 2026-11-29T12:00:00Z`)

func (g *gen) text(n int) string {
	var b strings.Builder
	b.WriteString(`{"doc":`)
	for b.Len() < n {
		b.WriteString(words[g.r.IntN(len(words))])
		if g.r.IntN(4) == 0 {
			b.WriteString(strconv.Itoa(g.r.IntN(100000)))
		}
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

func (g *gen) num(lo, hi int) string { return strconv.Itoa(lo + g.r.IntN(hi-lo+1)) }

// command returns one random command, drawing again when cfg.Skip names it.
func (g *gen) command() []string {
	for {
		c := g.draw()
		if !g.cfg.Skip[strings.ToUpper(c[0])] {
			return c
		}
	}
}

func (g *gen) draw() []string {
	s, h, l, x := g.key("s", 12), g.key("h", 6), g.key("l", 6), g.key("x", 3)
	n := 80
	if g.cfg.HashFieldExpiry {
		n = 86
	}
	if (g.cfg.SetIf || g.cfg.DelIfEq || g.cfg.Delex) && g.r.IntN(20) == 0 {
		return g.compare(s)
	}
	if g.cfg.Msetex && g.r.IntN(40) == 0 {
		c := []string{"MSETEX", "2", s, g.value(), g.key("s", 12), g.value()}
		return append(c, [][]string{nil, {"NX"}, {"XX", "EX", "1000"}, {"KEEPTTL"}, {"PX", "900000"}}[g.r.IntN(5)]...)
	}
	switch g.r.IntN(n) {
	// strings
	case 0, 1, 2:
		c := []string{"SET", s, g.value()}
		if g.cfg.SetIf || g.cfg.DelIfEq || g.cfg.Delex {
			g.last[s] = c[2]
		}
		switch g.r.IntN(8) {
		case 0:
			c = append(c, "EX", "1000")
		case 1:
			c = append(c, "NX")
		case 2:
			c = append(c, "XX", "GET")
		case 3:
			c = append(c, "GET")
		case 4:
			c = append(c, "PX", "900000", "XX")
		case 5:
			c = append(c, "KEEPTTL")
		}
		return c
	case 3, 4, 5:
		return []string{"GET", s}
	case 6:
		return []string{"SETEX", s, "1000", g.value()}
	case 7:
		return []string{"PSETEX", s, "1000000", g.value()}
	case 8:
		return []string{"SETNX", s, g.value()}
	case 9:
		return []string{"GETSET", s, g.value()}
	case 10:
		if g.r.IntN(2) == 0 {
			return []string{"GETEX", s, "EX", "500"}
		}
		return []string{"GETEX", s, "PERSIST"}
	case 11:
		return []string{"GETDEL", s}
	case 12:
		return []string{"MSET", s, g.value(), g.key("s", 12), g.value()}
	case 13:
		return []string{"MSETNX", g.key("s", 20), g.value(), g.key("s", 20), g.value()}
	case 14, 15:
		return []string{"MGET", s, g.key("s", 12), g.key("s", 20)}
	case 16:
		return []string{"STRLEN", s}
	case 17:
		return []string{"GETRANGE", s, g.num(-100, 100), g.num(-100, 5000)}
	case 18:
		return []string{"SETRANGE", s, g.num(0, 300), g.text(g.r.IntN(100))}
	case 19:
		return []string{"APPEND", s, g.value()}
	case 20:
		return []string{[]string{"INCR", "DECR"}[g.r.IntN(2)], s}
	case 21:
		return []string{[]string{"INCRBY", "DECRBY"}[g.r.IntN(2)], s, g.num(-50, 50)}
	case 22:
		return []string{"INCRBYFLOAT", s, "1.5"}
	case 23:
		return []string{"GETBIT", s, g.num(0, 2000)}
	case 24:
		return []string{"SETBIT", s, g.num(0, 2000), g.num(0, 1)}
	case 25:
		return []string{"BITCOUNT", s}
	case 26:
		return []string{"BITPOS", s, g.num(0, 1)}
	case 27:
		return []string{"LCS", s, g.key("s", 12), "LEN"}
	case 28:
		return []string{"EXPIRE", s, "1000"}
	case 29:
		return []string{"TTL", s}
	case 30:
		return []string{"DEL", s, g.key("h", 6)}
	case 31:
		return []string{"EXISTS", s, h, l}
	case 32:
		return []string{"TYPE", []string{s, h, l, x}[g.r.IntN(4)]}
	// hashes
	case 33, 34, 35:
		return []string{"HSET", h, "f" + g.num(0, 8), g.value(), "f" + g.num(0, 8), g.value()}
	case 36:
		return []string{"HSETNX", h, "f" + g.num(0, 8), g.value()}
	case 37, 38:
		return []string{"HGET", h, "f" + g.num(0, 8)}
	case 39:
		return []string{"HMGET", h, "f" + g.num(0, 8), "f" + g.num(0, 8), "missing"}
	case 40:
		return []string{"HGETALL", h}
	case 41:
		return []string{"HVALS", h}
	case 42:
		return []string{"HSTRLEN", h, "f" + g.num(0, 8)}
	case 43:
		return []string{"HINCRBY", h, "f" + g.num(0, 8), g.num(-5, 5)}
	case 44:
		return []string{"HMSET", h, "f" + g.num(0, 8), g.value()}
	case 45:
		return []string{"HDEL", h, "f" + g.num(0, 8)}
	// lists
	case 46, 47:
		return []string{[]string{"LPUSH", "RPUSH"}[g.r.IntN(2)], l, g.value(), g.value()}
	case 48:
		return []string{[]string{"LPUSHX", "RPUSHX"}[g.r.IntN(2)], l, g.value()}
	case 49:
		return []string{"LRANGE", l, "0", g.num(-1, 10)}
	case 50:
		return []string{"LINDEX", l, g.num(-3, 3)}
	case 51:
		if g.r.IntN(2) == 0 {
			return []string{[]string{"LPOP", "RPOP"}[g.r.IntN(2)], l}
		}
		return []string{[]string{"LPOP", "RPOP"}[g.r.IntN(2)], l, g.num(1, 3)}
	case 52:
		return []string{"LSET", l, g.num(-2, 2), g.value()}
	case 53:
		return []string{"LMOVE", l, g.key("l", 6), []string{"LEFT", "RIGHT"}[g.r.IntN(2)], "LEFT"}
	case 54:
		return []string{"RPOPLPUSH", l, g.key("l", 6)}
	case 55:
		return []string{"LMPOP", "2", l, g.key("l", 6), "LEFT", "COUNT", "2"}
	case 56:
		return []string{"BLPOP", l, g.key("l", 6), "0.01"}
	case 57:
		return []string{"LINSERT", l, []string{"BEFORE", "AFTER"}[g.r.IntN(2)], g.old(), g.value()}
	case 58:
		return []string{"LPOS", l, g.old()}
	case 66:
		return []string{"LREM", l, g.num(-1, 1), g.old()}
	case 67:
		return []string{"XGROUP", "CREATE", x, "grp", "0", "MKSTREAM"}
	case 68:
		return []string{"XREADGROUP", "GROUP", "grp", "c1", "COUNT", "2", "STREAMS", x, ">"}
	case 69:
		return []string{"XAUTOCLAIM", x, "grp", "c2", "0", "0-0", "COUNT", "2"}
	case 70:
		return []string{"XCLAIM", x, "grp", "c3", "0", strconv.Itoa(1+g.r.IntN(max(g.streamID[x], 1))) + "-1"}
	case 71:
		return []string{"HKEYS", h}
	case 72:
		return []string{"BITOP", []string{"AND", "OR", "XOR"}[g.r.IntN(3)], g.key("s", 12), s, g.key("s", 12)}
	case 73:
		return []string{"BITOP", "NOT", g.key("s", 12), []string{s, h}[g.r.IntN(2)]}
	case 74:
		return []string{"COPY", s, g.key("s", 12), "REPLACE"}
	case 75:
		return []string{"RENAME", []string{s, h}[g.r.IntN(2)], g.key("s", 12)}
	case 76:
		return []string{"SORT", l, "LIMIT", "0", g.num(1, 5)}
	case 77:
		if g.r.IntN(2) == 0 {
			// Fields wider than a double's 53 bits, with values near the
			// edges: the replies must be exact.
			wide := []string{"i64", "u63", "i60", "u54"}
			big := []string{"9007199254740993", "-9223372036854775808", "9223372036854775807", "-1", "1152921504606846977"}
			return []string{"BITFIELD", s, "OVERFLOW", []string{"WRAP", "SAT", "FAIL"}[g.r.IntN(3)],
				"SET", wide[g.r.IntN(4)], g.num(0, 200), big[g.r.IntN(5)],
				"INCRBY", wide[g.r.IntN(4)], "#" + g.num(0, 3), big[g.r.IntN(5)],
				"GET", wide[g.r.IntN(4)], g.num(0, 200)}
		}
		return []string{"BITFIELD", s, "GET", "u8", g.num(0, 100), "INCRBY", "i5", g.num(0, 100), g.num(-3, 3)}
	case 78:
		return []string{"SUBSTR", s, g.num(-20, 20), g.num(-20, 200)}
	case 79:
		return []string{"HINCRBYFLOAT", h, "f" + g.num(0, 8), "0.25"}
	// hash fields with expiry (Redis 8), only with cfg.HashFieldExpiry
	case 80, 81:
		c := []string{"HSETEX", h}
		c = append(c, [][]string{nil, {"FNX"}, {"FXX"}, {"EX", "1000"}, {"FXX", "PX", "900000"}, {"KEEPTTL"}}[g.r.IntN(6)]...)
		if g.r.IntN(2) == 0 {
			return append(c, "FIELDS", "1", "f"+g.num(0, 8), g.value())
		}
		// Two distinct fields: Redis 8.6.3 aborts on a repeated field of
		// HSETEX with an expiry once the hash is a hashtable (assertion
		// 'dictExpireMeta->expireMeta.trash == 0', t_hash.c:3463).
		i := g.r.IntN(9)
		j := (i + 1 + g.r.IntN(8)) % 9
		return append(c, "FIELDS", "2", "f"+strconv.Itoa(i), g.value(), "f"+strconv.Itoa(j), g.value())
	case 82:
		c := []string{"HGETEX", h}
		c = append(c, [][]string{nil, {"PERSIST"}, {"EX", "500"}}[g.r.IntN(3)]...)
		return append(c, "FIELDS", "2", "f"+g.num(0, 8), "f"+g.num(0, 8))
	case 83:
		return []string{"HGETDEL", h, "FIELDS", "1", "f" + g.num(0, 8)}
	case 84:
		return []string{"HTTL", h, "FIELDS", "2", "f" + g.num(0, 8), "f" + g.num(0, 8)}
	case 85:
		return []string{"HPEXPIRE", h, "900000", "FIELDS", "1", "f" + g.num(0, 8)}
	case 59:
		return []string{"LLEN", l}
	// streams (explicit ids, so both servers agree)
	case 60, 61:
		g.streamID[x]++
		id := strconv.Itoa(g.streamID[x]) + "-1"
		if g.cfg.XaddRef && g.r.IntN(2) == 0 {
			return []string{"XADD", x, []string{"KEEPREF", "DELREF", "ACKED"}[g.r.IntN(3)], id, "f", g.value(), "g", g.value()}
		}
		return []string{"XADD", x, id, "f", g.value(), "g", g.value()}
	case 62:
		return []string{"XRANGE", x, "-", "+", "COUNT", g.num(1, 10)}
	case 63:
		return []string{"XREVRANGE", x, "+", "-", "COUNT", g.num(1, 10)}
	case 64:
		return []string{"XREAD", "COUNT", "5", "STREAMS", x, "0"}
	default:
		return []string{"XLEN", x}
	}
}

// compare returns a command that compares the value of string key s with
// an argument: SET ... IFEQ or IFNE (cfg.SetIf), DELIFEQ (cfg.DelIfEq),
// DELEX, DIGEST or SET ... IFDEQ or IFDNE (cfg.Delex).
func (g *gen) compare(s string) []string {
	cmp, ok := g.last[s]
	if !ok || g.r.IntN(2) == 0 {
		cmp = g.value()
	}
	if g.cfg.Delex && (!g.cfg.SetIf && !g.cfg.DelIfEq || g.r.IntN(2) == 0) {
		if c := DelexCommand(g.r, s, cmp, func() string { v := g.value(); g.last[s] = v; return v }); c != nil {
			return c
		}
	}
	if !g.cfg.SetIf && !g.cfg.DelIfEq {
		return []string{"DIGEST", s}
	}
	if g.cfg.DelIfEq && (!g.cfg.SetIf || g.r.IntN(4) == 0) {
		return []string{"DELIFEQ", s, cmp}
	}
	v := g.value()
	g.last[s] = v
	c := []string{"SET", s, v, []string{"IFEQ", "IFNE"}[g.r.IntN(2)], cmp}
	return append(c, [][]string{nil, {"GET"}, {"EX", "1000"}, {"KEEPTTL", "GET"}}[g.r.IntN(4)]...)
}

// DelexCommand returns, three times in four, one of Redis 8.4's
// comparison commands on string key s: DELEX with IFEQ or IFNE and cmp,
// DIGEST, or SET of newValue() with IFDEQ or IFDNE and a random digest
// (which seldom matches). It returns nil the fourth time. The generators
// of this package and of the proxy's own differential test share it.
func DelexCommand(r *rand.Rand, s, cmp string, newValue func() string) []string {
	switch r.IntN(4) {
	case 0:
		return []string{"DELEX", s, []string{"IFEQ", "IFNE"}[r.IntN(2)], cmp}
	case 1:
		return []string{"DIGEST", s}
	case 2:
		return []string{"SET", s, newValue(), []string{"IFDEQ", "IFDNE"}[r.IntN(2)], fmt.Sprintf("%016x", r.Uint64()), "GET"}
	}
	return nil
}

// Generator produces the command sequence Run sends, for harnesses that
// drive another client, such as the go-redis hook of package client.
type Generator struct{ g *gen }

// NewGenerator returns the generator of cfg's sequence (Seed, MaxValue,
// Skip).
func NewGenerator(cfg Config) *Generator {
	if cfg.MaxValue == 0 {
		cfg.MaxValue = 1 << 20
	}
	return &Generator{newGen(cfg)}
}

// Step returns the next step: one command, a pipeline, or a transaction
// (MULTI, commands, then EXEC or DISCARD).
func (g *Generator) Step() [][]string { return g.g.step() }

// Short prints a command for failure messages, each argument cut to 24
// bytes with its length.
func Short(args []string) string {
	var b strings.Builder
	for _, a := range args {
		if len(a) > 24 {
			a = fmt.Sprintf("%.24q...(%d bytes)", a, len(a))
		}
		b.WriteString(a + " ")
	}
	return b.String()
}
