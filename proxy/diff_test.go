package proxy

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/difftest"
	"github.com/squeeze-kv/squeeze/internal/testutil"
	"github.com/squeeze-kv/squeeze/resp"
)

var (
	diffN    = flag.Int("diff.n", 1500, "commands per differential run (TestDifferential)")
	diffSeed = flag.Uint64("diff.seed", 0, "seed of the differential run (0: derived from the time, printed on failure)")
)

// gen makes random commands over all value families with values of 0 B to 1 MB.
type gen struct {
	r      *rand.Rand
	xid    map[string]int // next stream id per key, so XADD is deterministic
	groups map[string]bool
	big    int // 1 MB values left in this run
	// fieldTTL adds Redis 8's HSETEX, HGETEX and HGETDEL, and field
	// expiry (HPEXPIREAT, HPEXPIRETIME), when the server has them.
	fieldTTL bool
	// setIf adds SET ... IFEQ and IFNE (Valkey 8.1, Redis 8.4), delIfEq
	// DELIFEQ (Valkey 9); half of their comparisons use the value last
	// SET under the key (last).
	setIf, delIfEq bool
	last           map[string]string
	msetex         bool // MSETEX (Valkey 9.1, Redis 8.4)
	delex          bool // DELEX, DIGEST, SET ... IFDEQ/IFDNE (Redis 8.4)
	xaddRef        bool // XADD's KEEPREF, DELREF, ACKED (Redis 8.2)
}

var words = []string{"squeeze", "redis", "value", "json", "proxy", "{\"a\":1}", "lorem", "ipsum"}

func (g *gen) value() string {
	var n int
	switch p := g.r.IntN(100); {
	case p < 45:
		n = g.r.IntN(100)
	case p < 80:
		n = 100 + g.r.IntN(10_000)
	case p < 97:
		n = 10_000 + g.r.IntN(90_000)
	default:
		if g.big > 0 {
			g.big--
			n = 100_000 + g.r.IntN(900_001)
		} else {
			n = g.r.IntN(50_000)
		}
	}
	b := make([]byte, 0, n)
	switch g.r.IntN(4) {
	case 0: // random bytes, sometimes starting like a frame
		if g.r.IntN(5) == 0 {
			b = append(b, "\xC1SQ"...)
		}
		for len(b) < n {
			b = append(b, byte(g.r.UintN(256)))
		}
	case 1: // a number, now and then a long one (the policy stores it raw)
		if g.r.IntN(4) == 0 {
			d := strings.Repeat(strconv.Itoa(g.r.IntN(10)), 1+n%300)
			return []string{"", "-", " "}[g.r.IntN(3)] + d + []string{"", ".5", "e-3"}[g.r.IntN(3)]
		}
		return strconv.Itoa(g.r.IntN(1000) - 500)
	default: // text that compresses
		for len(b) < n {
			b = append(b, words[g.r.IntN(len(words))]...)
			b = append(b, ' ')
		}
	}
	return string(b[:n])
}

func (g *gen) key(family string) string { return family + ":" + strconv.Itoa(g.r.IntN(6)) }
func (g *gen) num(lo, hi int) string    { return strconv.Itoa(lo + g.r.IntN(hi-lo+1)) }

// command returns a random command and whether its reply is an unordered
// collection (hash iteration order is undefined and differs between servers).
func (g *gen) command() (args []string, unordered bool) {
	s, h, l, x := g.key("s"), g.key("h"), g.key("l"), g.key("x")
	if g.r.IntN(30) == 0 { // cross-family access: WRONGTYPE both ways
		s, h, l = h, l, s
	}
	n := 73
	if g.fieldTTL {
		n = 78
	}
	if (g.setIf || g.delIfEq || g.delex) && g.r.IntN(25) == 0 {
		return g.compare(s), false
	}
	if g.msetex && g.r.IntN(40) == 0 {
		cmd := []string{"MSETEX", "2", s, g.remember(s, g.value()), g.key("s"), g.value()}
		return append(cmd, [][]string{nil, {"NX"}, {"XX", "PXAT", "4102444800000"}, {"KEEPTTL"}}[g.r.IntN(4)]...), false
	}
	switch g.r.IntN(n) {
	case 0:
		return []string{"SET", s, g.remember(s, g.value())}, false
	case 1:
		opts := [][]string{{"EX", "100000"}, {"PX", "100000000"}, {"NX"}, {"XX"}, {"KEEPTTL"}, {"GET"}, {"XX", "GET"}, {"EXAT", "4102444800"}}
		return append([]string{"SET", s, g.remember(s, g.value())}, opts[g.r.IntN(len(opts))]...), false
	case 2, 3:
		return []string{"GET", s}, false
	case 4:
		return []string{"SETEX", s, "100000", g.value()}, false
	case 5:
		return []string{"PSETEX", s, "100000000", g.value()}, false
	case 6:
		return []string{"SETNX", s, g.value()}, false
	case 7:
		return []string{"GETSET", s, g.value()}, false
	case 8:
		return []string{"GETEX", s, []string{"PERSIST", "EXAT", "EX"}[g.r.IntN(3)], "4102444800"}[:3+g.r.IntN(2)], false
	case 9:
		return []string{"GETDEL", s}, false
	case 10:
		return []string{"MSET", g.key("s"), g.value(), g.key("s"), g.value()}, false
	case 11:
		return []string{"MSETNX", g.key("s"), g.value(), "s:new" + g.num(0, 20), g.value()}, false
	case 12:
		return []string{"MGET", g.key("s"), g.key("s"), "nokey", g.key("h")}, false
	case 13:
		return []string{"STRLEN", s}, false
	case 14:
		return []string{"GETRANGE", s, g.num(-100, 100), g.num(-100, 2000)}, false
	case 15:
		v := g.value()
		return []string{"SETRANGE", s, g.num(0, 200), v[:min(10, len(v))]}, false
	case 16:
		return []string{"APPEND", s, g.value()}, false
	case 17:
		return []string{"INCRBY", s, g.num(-10, 10)}, false
	case 18:
		return []string{"INCRBYFLOAT", s, "1.5"}, false
	case 19:
		return []string{"GETBIT", s, g.num(0, 300)}, false
	case 20:
		return []string{"SETBIT", s, g.num(0, 300), g.num(0, 1)}, false
	case 21:
		return []string{"BITCOUNT", s}, false
	case 22:
		return []string{"BITPOS", s, g.num(0, 1)}, false
	case 23:
		return []string{"LCS", g.key("s"), g.key("s"), []string{"LEN", "IDX", "MINMATCHLEN"}[g.r.IntN(3)], "4"}[:3+g.r.IntN(2)], false
	case 24:
		return []string{"HSET", h, "f" + g.num(0, 5), g.value(), "f" + g.num(0, 5), g.value()}, false
	case 25:
		return []string{"HSETNX", h, "f" + g.num(0, 5), g.value()}, false
	case 26:
		return []string{"HGET", h, "f" + g.num(0, 5)}, false
	case 27:
		return []string{"HMGET", h, "f" + g.num(0, 5), "f" + g.num(0, 5)}, false
	case 28:
		return []string{"HGETALL", h}, true
	case 29:
		return []string{"HVALS", h}, true
	case 30:
		return []string{"HSTRLEN", h, "f" + g.num(0, 5)}, false
	case 31:
		return []string{"HINCRBYFLOAT", h, "f" + g.num(0, 5), "2.5"}, false
	case 32:
		return []string{"HSCAN", h, "0", "COUNT", "1000"}, true
	case 33, 34:
		return []string{[]string{"LPUSH", "RPUSH", "LPUSHX", "RPUSHX"}[g.r.IntN(4)], l, g.value(), g.value()}, false
	case 35:
		return []string{"LINSERT", l, []string{"BEFORE", "AFTER"}[g.r.IntN(2)], g.pick(), g.value()}, false
	case 36:
		return []string{"LSET", l, g.num(-3, 3), g.value()}, false
	case 37, 38:
		return []string{"LRANGE", l, g.num(-5, 2), g.num(-2, 10)}, false
	case 39:
		return []string{"LINDEX", l, g.num(-3, 3)}, false
	case 40:
		return []string{[]string{"LPOP", "RPOP"}[g.r.IntN(2)], l, g.num(1, 3)}[:2+g.r.IntN(2)], false
	case 41:
		return []string{"LMOVE", l, g.key("l"), "LEFT", "RIGHT"}, false
	case 42:
		return []string{"LMPOP", "2", l, g.key("l"), "LEFT", "COUNT", g.num(1, 3)}, false
	case 43:
		return []string{"RPOPLPUSH", l, g.key("l")}, false
	case 44:
		cmd := []string{"LPOS", l, g.pick()}
		if g.r.IntN(2) == 0 {
			cmd = append(cmd, "RANK", g.num(-3, 3), "COUNT", g.num(0, 3), "MAXLEN", g.num(0, 5))
		}
		return cmd, false
	case 45:
		return []string{"LREM", l, g.num(-1, 1), g.pick()}, false
	case 46:
		return []string{"BLPOP", l, g.key("l"), "0.01"}, false
	case 47, 48:
		id := g.xid[x] + 1
		g.xid[x] = id
		cmd := []string{"XADD", x, "MAXLEN", "~", "1000", "1-" + strconv.Itoa(id), "f1", g.value(), "f2", g.value()}
		if g.xaddRef && g.r.IntN(2) == 0 {
			cmd = slices.Insert(cmd, 2, []string{"KEEPREF", "DELREF", "ACKED"}[g.r.IntN(3)])
		}
		return cmd, false
	case 49:
		return []string{"XRANGE", x, "-", "+", "COUNT", g.num(1, 5)}, false
	case 50:
		return []string{"XREVRANGE", x, "+", "-"}, false
	case 51:
		return []string{"XREAD", "COUNT", "3", "STREAMS", x, g.key("x"), "0-0", "1-2"}, false
	case 52:
		if !g.groups[x] {
			g.groups[x] = true
			return []string{"XGROUP", "CREATE", x, "g", "0", "MKSTREAM"}, false
		}
		return []string{"XREADGROUP", "GROUP", "g", "c1", "COUNT", "2", "STREAMS", x, ">"}, false
	case 53:
		return []string{"XCLAIM", x, "g", "c2", "0", "1-1", "1-2", "1-3"}, false
	case 54:
		return []string{"XAUTOCLAIM", x, "g", "c3", "0", "0-0", "COUNT", "2"}, false
	case 55:
		return []string{"EXPIREAT", g.key("s"), []string{"4102444800", "1000"}[g.r.IntN(2)]}, false
	case 56:
		return []string{"EXPIRETIME", g.key("s")}, false
	case 57:
		return []string{"DEL", g.key("s"), g.key("l")}, false
	case 58:
		return []string{"TYPE", g.key("h")}, false
	case 59:
		return []string{"LLEN", l}, false
	case 60:
		return []string{"HRANDFIELD", h, "-0", "WITHVALUES"}, false // count 0: deterministic empty
	case 61:
		ops := [][]string{{"GET", "u8", g.num(0, 200)}, {"SET", "i16", "#" + g.num(0, 20), g.num(-999, 999)}, {"INCRBY", "u4", g.num(0, 300), g.num(-20, 20)}, {"OVERFLOW", "SAT", "INCRBY", "i8", "0", "100"}}
		cmd := []string{"BITFIELD", s}
		for range 1 + g.r.IntN(2) {
			cmd = append(cmd, ops[g.r.IntN(len(ops))]...)
		}
		return cmd, false
	case 62:
		return []string{"BITFIELD_RO", s, "GET", "u16", g.num(0, 500), "GET", "i5", g.num(0, 50)}, false
	case 63:
		op := []string{"AND", "OR", "XOR", "NOT"}[g.r.IntN(4)]
		if op == "NOT" {
			return []string{"BITOP", op, g.key("s"), s}, false
		}
		return []string{"BITOP", op, g.key("s"), s, g.key("s")}, false
	case 64:
		return []string{"SUBSTR", s, g.num(-50, 50), g.num(-50, 500)}, false
	case 65:
		return []string{[]string{"INCR", "DECR"}[g.r.IntN(2)], s}, false
	case 66:
		return []string{"HINCRBY", h, "f" + g.num(0, 5), g.num(-5, 5)}, false
	case 67:
		return []string{"HMSET", h, "f" + g.num(0, 5), g.value()}, false
	case 68:
		// Numeric sorts only: ALPHA over compressed elements is refused
		// by design (TestProxy_SortCompressed).
		cmd := []string{"SORT", l}
		if g.r.IntN(2) == 0 {
			cmd = append(cmd, "DESC", "LIMIT", g.num(0, 2), g.num(1, 3))
		}
		return cmd, false
	case 69:
		// One case for the blocking family: a timeout on an empty list
		// takes up to 100 ms (Redis checks them at hz 10).
		switch g.r.IntN(4) {
		case 0:
			return []string{"BRPOP", l, "0.01"}, false
		case 1:
			return []string{"BLMOVE", l, g.key("l"), "RIGHT", "LEFT", "0.01"}, false
		case 2:
			return []string{"BLMPOP", "0.01", "1", l, "RIGHT", "COUNT", g.num(1, 2)}, false
		}
		return []string{"BRPOPLPUSH", l, g.key("l"), "0.01"}, false
	case 70:
		return []string{"COPY", s, g.key("s"), "REPLACE"}[:3+g.r.IntN(2)], false
	case 71:
		return []string{"RENAME", s, g.key("s")}, false
	// Hash fields with expiry, only with fieldTTL. Times are absolute, so
	// both servers give the same replies.
	case 73, 74:
		opts := [][]string{nil, {"FNX"}, {"FXX"}, {"PXAT", "4102444800000"}, {"FXX", "EXAT", "4102444800"}, {"KEEPTTL"}}
		cmd := append([]string{"HSETEX", h}, opts[g.r.IntN(len(opts))]...)
		if g.r.IntN(2) == 0 {
			return append(cmd, "FIELDS", "1", "f"+g.num(0, 5), g.value()), false
		}
		// Two distinct fields: Redis 8.6.3 aborts on a repeated field of
		// HSETEX with an expiry once the hash is a hashtable (assertion
		// 'dictExpireMeta->expireMeta.trash == 0', t_hash.c:3463).
		i := g.r.IntN(6)
		j := (i + 1 + g.r.IntN(5)) % 6
		return append(cmd, "FIELDS", "2", "f"+strconv.Itoa(i), g.value(), "f"+strconv.Itoa(j), g.value()), false
	case 75:
		opts := [][]string{nil, {"PERSIST"}, {"PXAT", "4102444800001"}}
		cmd := append([]string{"HGETEX", h}, opts[g.r.IntN(len(opts))]...)
		return append(cmd, "FIELDS", "2", "f"+g.num(0, 5), "f"+g.num(0, 5)), false
	case 76:
		return []string{"HGETDEL", h, "FIELDS", "1", "f" + g.num(0, 5)}, false
	case 77:
		if g.r.IntN(2) == 0 {
			return []string{"HPEXPIREAT", h, "4102444800002", "FIELDS", "1", "f" + g.num(0, 5)}, false
		}
		return []string{"HPEXPIRETIME", h, "FIELDS", "2", "f" + g.num(0, 5), "f" + g.num(0, 5)}, false
	default:
		return []string{"EXISTS", s, h, l, x}, false
	}
}

// remember notes v as the value last SET under key s, for compare.
func (g *gen) remember(s, v string) string {
	if g.last != nil {
		g.last[s] = v
	}
	return v
}

// compare returns SET ... IFEQ or IFNE (setIf), DELIFEQ (delIfEq), or
// DELEX, DIGEST, SET ... IFDEQ or IFDNE (delex), with the value last SET
// under s or another.
func (g *gen) compare(s string) []string {
	cmp, ok := g.last[s]
	if !ok || g.r.IntN(2) == 0 {
		cmp = g.value()
	}
	if g.delex && (!g.setIf && !g.delIfEq || g.r.IntN(2) == 0) {
		if c := difftest.DelexCommand(g.r, s, cmp, func() string { return g.remember(s, g.value()) }); c != nil {
			return c
		}
	}
	if !g.setIf && !g.delIfEq {
		return []string{"DIGEST", s}
	}
	if g.delIfEq && (!g.setIf || g.r.IntN(4) == 0) {
		return []string{"DELIFEQ", s, cmp}
	}
	cmd := []string{"SET", s, g.remember(s, g.value()), []string{"IFEQ", "IFNE"}[g.r.IntN(2)], cmp}
	return append(cmd, [][]string{nil, {"GET"}, {"PXAT", "4102444800000"}, {"KEEPTTL", "GET"}}[g.r.IntN(4)]...)
}

// pick returns a short value that LINSERT, LPOS and LREM may find.
func (g *gen) pick() string {
	return []string{"1", "-3", "", "squeeze "}[g.r.IntN(4)]
}

// canon returns a reply in a canonical form: as is, or with the elements of
// unordered collections sorted (pairs kept together for maps, HGETALL and
// HSCAN).
func canon(reply string, unordered bool, cmd string) string {
	if cmd == "EXPIRETIME" && len(reply) > 2 && reply[1] != '-' {
		// Relative TTLs (SETEX 100000) give absolute times one second
		// apart when the two servers run the command across a second.
		return ":<future>\r\n"
	}
	if !unordered {
		return reply
	}
	v, _, err := resp.ReadValue([]byte(reply))
	if err != nil || !v.Type.IsAggregate() {
		return reply
	}
	if cmd == "HSCAN" { // [cursor, pairs]
		it := v.Elements()
		cur, _ := it.Next()
		pairs, _ := it.Next()
		return string(cur.Raw) + canon(string(pairs.Raw), true, "HGETALL")
	}
	var items []string
	it := v.Elements()
	pair := cmd == "HGETALL" || v.Type == resp.Map
	for {
		e, ok := it.Next()
		if !ok {
			break
		}
		s := string(e.Raw)
		if pair {
			f, _ := it.Next()
			s += string(f.Raw)
		}
		items = append(items, s)
	}
	sort.Strings(items)
	return string(v.Header()) + strings.Join(items, "")
}

// TestDifferential sends the same seeded random commands (all value
// families, values of 0 B to 1 MB, compressible and random, transactions,
// pipelines, expiry, RESP2 and RESP3, databases 0 and 1) to one Redis
// directly and to another through the proxy with min-size 0, and requires
// identical replies. Each new connection goes through one of five proxies
// with other settings (s2, zstd:1, raw, per-prefix rules, RequireAuth) on
// the same Redis, so values are also read and searched under settings other
// than the ones that wrote them. On servers with Redis 8's HSETEX it sends
// the hash field expiry commands too. Run it longer with -diff.n=100000.
// diffSeedFor returns -diff.seed, or a new seed, and logs how to run it
// again.
func diffSeedFor(t *testing.T) uint64 {
	seed := *diffSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -diff.seed=%d)", seed, seed)
	return seed
}

func TestDifferential(t *testing.T) {
	seed := diffSeedFor(t)
	direct := testutil.StartRedis(t)
	e := startEnv(t)
	// Proxies with other write settings in front of the same Redis: each
	// new connection goes through one of them, so values written under
	// one setting are read, searched and changed under another, as after
	// a change of settings.
	proxies := []*env{
		e,
		startProxy(t, e.redis.URL(), e.redis, withCodec("zstd:1")),
		startProxy(t, e.redis.URL(), e.redis, withMinSize(1<<20)), // stores raw
		// Per-prefix rules: MSET writes keys of several policies at once.
		startProxy(t, e.redis.URL(), e.redis, func(s *Server) {
			s.Rules = []Rule{
				{Prefix: "s:", Encoder: mustEnc(t, "lz4", codec.WithMinSize(0))},
				{Prefix: "s:1", Encoder: mustEnc(t, "none")},
				{Prefix: "l:", Encoder: mustEnc(t, "zstd:1", codec.WithMinSize(0))},
				{Prefix: "h:2", Encoder: mustEnc(t, "brotli:1", codec.WithMinSize(0))},
				{Prefix: "x:", Encoder: mustEnc(t, "minlz", codec.WithMinSize(0))},
				{Prefix: "s:3", Encoder: mustEnc(t, "minlz:superfast", codec.WithMinSize(0))},
			}
		}),
		// Every client on a private connection from its first command.
		startProxy(t, e.redis.URL(), e.redis, func(s *Server) { s.RequireAuth = true }),
	}
	g := &gen{r: rand.New(rand.NewPCG(seed, 1)), xid: map[string]int{}, groups: map[string]bool{}, big: 4 + *diffN/2000,
		fieldTTL: testutil.HasCommand(t, direct.Addr, "HSETEX"),  // Redis 8
		setIf:    testutil.HasSetIf(t, direct.Addr),              // Valkey 8.1, Redis 8.4
		delIfEq:  testutil.HasCommand(t, direct.Addr, "DELIFEQ"), // Valkey 9
		last:     map[string]string{},
		msetex:   testutil.HasCommand(t, direct.Addr, "MSETEX"), // Valkey 9.1, Redis 8.4
		delex:    testutil.HasCommand(t, direct.Addr, "DIGEST"), // Redis 8.4
		xaddRef:  testutil.HasXaddRef(t, direct.Addr)}           // Redis 8.2
	n := *diffN
	var a, b *rawConn
	var hist []string
	defer func() {
		if t.Failed() {
			for _, h := range hist[max(0, len(hist)-12):] {
				t.Log(h)
			}
		}
	}()
	for done := 0; done < n; {
		if a == nil || g.r.IntN(100) == 0 { // new connections now and then, RESP2 or RESP3
			p := g.r.IntN(len(proxies))
			a, b = dialRaw(t, direct.Addr), dialRaw(t, proxies[p].addr)
			hist = append(hist, fmt.Sprintf("new connection, through proxy %d", p))
			if g.r.IntN(2) == 0 {
				ra, rb := a.do("HELLO", "3"), b.do("HELLO", "3")
				if strings.Contains(ra, "ERR") || strings.Contains(rb, "ERR") {
					t.Fatalf("HELLO 3: %q / %q", ra, rb)
				}
			}
		}
		if g.r.IntN(40) == 0 { // another database now and then, between batches
			db := strconv.Itoa(g.r.IntN(2))
			if ra, rb := a.do("SELECT", db), b.do("SELECT", db); ra != rb {
				t.Fatalf("SELECT %s: %q / %q", db, ra, rb)
			}
			hist = append(hist, "SELECT "+db)
		}
		var cmds [][]string
		var unord []bool
		mode := g.r.IntN(10)
		k := 1
		switch {
		case mode < 2:
			k = 2 + g.r.IntN(30) // pipeline
		case mode < 3:
			k = 1 + g.r.IntN(6) // transaction
		}
		for i := 0; i < k; i++ {
			c, u := g.command()
			cmds = append(cmds, c)
			unord = append(unord, u)
		}
		if mode == 2 {
			if g.r.IntN(3) == 0 {
				w := []string{"WATCH", g.key("s")}
				if ra, rb := a.do(w...), b.do(w...); ra != rb {
					t.Fatalf("WATCH: %q / %q", ra, rb)
				}
			}
			end := "EXEC"
			if g.r.IntN(8) == 0 {
				end = "DISCARD"
			}
			cmds = append(append([][]string{{"MULTI"}}, cmds...), []string{end})
			unord = append(append([]bool{false}, unord...), false)
		}
		a.send(cmds...)
		b.send(cmds...)
		for i, c := range cmds {
			ra, rb := a.read(), b.read()
			u := unord[i]
			hist = append(hist, fmt.Sprintf("%d %s -> %.80q | %.80q", done+i, difftest.Short(c), ra, rb))
			if c[0] == "EXEC" {
				ra, rb = canonExec(ra, cmds[1:len(cmds)-1], unord[1:len(unord)-1]), canonExec(rb, cmds[1:len(cmds)-1], unord[1:len(unord)-1])
				u = false
			}
			if ca, cb := canon(ra, u, c[0]), canon(rb, u, c[0]); ca != cb {
				at := 0
				for at < min(len(ca), len(cb)) && ca[at] == cb[at] {
					at++
				}
				lo := max(0, at-120)
				t.Logf("canonical replies differ at byte %d of %d / %d:\ndirect: %q\nproxy:  %q\ncommands: %q", at, len(ca), len(cb), ca[lo:min(len(ca), at+200)], cb[lo:min(len(cb), at+200)], shortAll(cmds))
				t.Fatalf("command %d %s: replies differ (seed %d)\ndirect: %.300q\nproxy:  %.300q", done+i, difftest.Short(c), seed, ra, rb)
			}
		}
		done += len(cmds)
	}
}

func shortAll(cmds [][]string) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, difftest.Short(c))
	}
	return out
}

func canonExec(reply string, cmds [][]string, unord []bool) string {
	v, _, err := resp.ReadValue([]byte(reply))
	if err != nil || !v.Type.IsAggregate() || v.N != len(cmds) {
		return reply
	}
	out := string(v.Header())
	it := v.Elements()
	for i := 0; ; i++ {
		e, ok := it.Next()
		if !ok {
			return out
		}
		out += canon(string(e.Raw), unord[i], cmds[i][0])
	}
}
