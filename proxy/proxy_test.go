package proxy

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

func TestProxy_Strings(t *testing.T) {
	e := startEnv(t)
	p := dialRaw(t, e.addr)
	d := dialRaw(t, e.redis.Addr)
	big := compressible(50000, 1)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"SET", "k", big}, "+OK\r\n"},
		{[]string{"GET", "k"}, bulk(big)},
		{[]string{"SET", "k", big + "x", "GET"}, bulk(big)},
		{[]string{"SET", "k", big, "XX", "GET", "EX", "100"}, bulk(big + "x")},
		{[]string{"SET", "k", big, "NX"}, "$-1\r\n"},
		{[]string{"SET", "k", big, "KEEPTTL"}, "+OK\r\n"},
		{[]string{"SETEX", "k2", "100", big}, "+OK\r\n"},
		{[]string{"PSETEX", "k3", "100000", big}, "+OK\r\n"},
		{[]string{"SETNX", "k4", big}, ":1\r\n"},
		{[]string{"SETNX", "k4", "x"}, ":0\r\n"},
		{[]string{"GETSET", "k4", "small"}, bulk(big)},
		{[]string{"GETEX", "k2", "PERSIST"}, bulk(big)},
		{[]string{"GETDEL", "k3"}, bulk(big)},
		{[]string{"GET", "k3"}, "$-1\r\n"},
		{[]string{"MSET", "a", big, "b", "", "c", "v"}, "+OK\r\n"},
		{[]string{"MSETNX", "a", "x", "z", big}, ":0\r\n"},
		{[]string{"MGET", "a", "b", "c", "nokey", "k4"}, "*5\r\n" + bulk(big) + bulk("") + bulk("v") + "$-1\r\n" + bulk("small")},
		{[]string{"SET", "magic", "\xC1SQ raw value that starts like a frame"}, "+OK\r\n"},
		{[]string{"GET", "magic"}, bulk("\xC1SQ raw value that starts like a frame")},
	}
	for _, tt := range tests {
		if got := p.do(tt.args...); got != tt.want {
			t.Fatalf("%.40q: got %.80q, want %.80q", tt.args, got, tt.want)
		}
	}
	// Redis holds frames, smaller than the values.
	for _, k := range []string{"k", "a", "k2", "z"} {
		got := d.do("GET", k)
		if k == "z" {
			if got != "$-1\r\n" {
				t.Fatalf("MSETNX wrote z: %.40q", got)
			}
			continue
		}
		v := got[strings.Index(got, "\r\n")+2 : len(got)-2]
		if !codec.IsFramed([]byte(v)) || len(v) > len(big)/4 {
			t.Errorf("key %s stored as %d bytes, framed %v; want a frame under %d", k, len(v), codec.IsFramed([]byte(v)), len(big)/4)
		}
	}
}

func TestProxy_GoRedis(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		rdb := redis.NewClient(&redis.Options{Addr: e.addr, Protocol: proto})
		defer rdb.Close()
		big := compressible(20000, proto)
		if err := rdb.Set(ctx, "g", big, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := rdb.Get(ctx, "g").Result(); err != nil || got != big {
			t.Fatalf("proto %d: GET = %d bytes, %v", proto, len(got), err)
		}
		if err := rdb.HSet(ctx, "h", "f1", big, "f2", "v2").Err(); err != nil {
			t.Fatal(err)
		}
		m, err := rdb.HGetAll(ctx, "h").Result()
		if err != nil || m["f1"] != big || m["f2"] != "v2" {
			t.Fatalf("proto %d: HGETALL = %d fields, %v", proto, len(m), err)
		}
		pipe := rdb.Pipeline()
		for i := 0; i < 100; i++ {
			pipe.Set(ctx, "p"+string(rune('a'+i%26)), big[:1000+i], 0)
			pipe.Get(ctx, "p"+string(rune('a'+i%26)))
		}
		cmds, err := pipe.Exec(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(cmds); i += 2 {
			if got := cmds[i].(*redis.StringCmd).Val(); got != big[:1000+i/2] {
				t.Fatalf("proto %d: pipelined GET %d = %d bytes", proto, i/2, len(got))
			}
		}
		// Transactions decode the replies of queued commands.
		var get *redis.StringCmd
		var hget *redis.StringCmd
		_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "t", big, 0)
			get = p.Get(ctx, "t")
			hget = p.HGet(ctx, "h", "f1")
			return nil
		})
		if err != nil || get.Val() != big || hget.Val() != big {
			t.Fatalf("proto %d: MULTI/EXEC: %v, GET %d bytes, HGET %d bytes", proto, err, len(get.Val()), len(hget.Val()))
		}
	}
}

// TestProxy_UnknownCommandReplies: a command the proxy does not know (here
// HGETALL renamed, as a newer Redis's HGETDEL would be) gets its frames
// decoded, in and out of MULTI; bytes that only begin like a frame, such
// as a binary set member, pass through as they are.
func TestProxy_UnknownCommandReplies(t *testing.T) {
	r := testutil.StartRedis(t, "--rename-command", "HGETALL", "HGETALL_NEW")
	e := startProxy(t, r.URL(), r)
	c := dialRaw(t, e.addr)
	v := compressible(3000, 7)
	if got := c.do("HSET", "h", "f", v); got != ":1\r\n" {
		t.Fatalf("HSET: %q", got)
	}
	if stored := dialRaw(t, r.Addr).do("HGET", "h", "f"); !strings.Contains(stored, codec.Magic) {
		t.Fatalf("the field is stored raw: %.40q", stored)
	}
	want := "*2\r\n" + bulk("f") + bulk(v)
	if got := c.do("HGETALL_NEW", "h"); got != want {
		t.Fatalf("unknown command: %.80q, want %.80q", got, want)
	}
	c.send([]string{"MULTI"}, []string{"HGETALL_NEW", "h"}, []string{"EXEC"})
	c.read()
	c.read()
	if got := c.read(); got != "*1\r\n"+want {
		t.Fatalf("in MULTI: %.80q", got)
	}
	member := codec.Magic + "\x07not a frame"
	c.do("SADD", "s", member)
	if got := c.do("SMEMBERS", "s"); got != "*1\r\n"+bulk(member) {
		t.Fatalf("SMEMBERS of a member that begins like a frame: %q", got)
	}
}

// TestProxy_Compare: SET with IFEQ or IFNE (Valkey 8.1, Redis 8.4), DELEX
// with a condition and DIGEST (Redis 8.4), and DELIFEQ (Valkey 9) compare
// or hash the value, not its frame: every reply equals the server's own on
// the same values, in RESP2, RESP3 and MULTI, errors included. A value the
// condition left alone keeps its frame and its expiry; a value written
// replaces it, compressed. On servers without these commands both sides
// give the same errors.
func TestProxy_Compare(t *testing.T) {
	e := startEnv(t)
	plain := testutil.StartRedis(t)
	setIf := strings.HasPrefix(dialRaw(t, plain.Addr).do("SET", "probe", "v", "IFEQ", "v"), "$-1") // no key: not set
	delIf := testutil.HasCommand(t, plain.Addr, "DELIFEQ")
	digest := testutil.HasCommand(t, plain.Addr, "DIGEST")
	t.Logf("%s: SET IFEQ %v, DELIFEQ %v, DIGEST %v", testutil.ServerPath(), setIf, delIf, digest)
	v1, v2, v3 := compressible(5000, 1), compressible(6000, 2), compressible(7000, 3)
	script := [][]string{
		{"SET", "k", v1},
		{"EXPIREAT", "k", "4102444800"},
		{"SET", "k", v2, "IFEQ", v2}, // differs: not set, k keeps its frame and expiry
		{"EXPIRETIME", "k"},
		{"SET", "k", v2, "IFEQ", v1, "KEEPTTL"},
		{"GET", "k"},
		{"EXPIRETIME", "k"},
		{"SET", "k", v3, "IFEQ", v1, "GET"}, // not set: the old value
		{"SET", "k", v3, "IFNE", v1, "GET"}, // set: the old value
		{"GET", "k"},
		{"SET", "k", "small", "IFNE", v1},         // set: stored raw
		{"SET", "k", v1, "ifeq", v3, "EX", "100"}, // not set (a relative expiry would differ by the ms between the two sides)
		{"SET", "k", v1, "IFEQ", "small", "PXAT", "4102444800000"},
		{"GET", "k"},
		{"PEXPIRETIME", "k"},
		{"SET", "none", v1, "IFEQ", v1},
		{"EXISTS", "none"},
		{"SET", "none", v1, "IFNE", v1},
		{"GET", "none"},
		{"HSET", "h", "f", v1},
		{"SET", "h", v1, "IFEQ", v1},
		{"SET", "k", v2, "IFEQ"},
		{"SET", "k", v2, "IFEQ", v1, "NX"},
		{"SET", "k", v2, "IFEQ", v1, "IFNE", v1},
		{"SET", "k", "IFEQ"}, // the value is the word
		{"SET", "k", v1},
		{"DELIFEQ", "k", v2},
		{"EXISTS", "k"},
		{"DELIFEQ", "k", v1},
		{"EXISTS", "k"},
		{"DELIFEQ", "h", v1},
		{"SET", "k", v1},
		{"DELEX", "k", "IFNE", v1},
		{"DELEX", "k", "IFEQ", v2},
		{"DIGEST", "k"},
		{"DELEX", "k", "IFEQ", v1},
		{"DELEX", "k"},
		{"SET", "k", v1},
		{"MULTI"},
		{"SET", "k", v2, "IFEQ", v1},
		{"GET", "k"},
		{"SET", "k", v3, "IFEQ", v1},
		{"DELIFEQ", "k", v3},
		{"SET", "m", v3},
		{"SET", "m", v1, "IFNE", v1, "GET"},
		{"EXEC"},
		{"GET", "m"},
	}
	// Without HELLO on the proxy's shared connections, with HELLO on a
	// private one; and through a proxy where every client has its own
	// (RequireAuth; this Redis has no password).
	auth := startProxy(t, e.redis.URL(), e.redis, func(s *Server) { s.RequireAuth = true })
	for _, proto := range []string{"", "2", "3", "auth"} {
		p, d := dialRaw(t, e.addr), dialRaw(t, plain.Addr)
		if proto == "auth" {
			p, proto = dialRaw(t, auth.addr), ""
		}
		for _, c := range []*rawConn{p, d} {
			c.do("FLUSHALL")
			if proto == "" {
				continue
			}
			if got := c.do("HELLO", proto); strings.HasPrefix(got, "-") {
				t.Fatalf("HELLO %s: %q", proto, got)
			}
		}
		for _, cmd := range script {
			got, want := p.do(cmd...), d.do(cmd...)
			if got != want {
				t.Fatalf("RESP%s %.60q: proxy %.80q, server %.80q", proto, cmd, got, want)
			}
		}
		if digest { // the digest the server gives for the value, taken from it
			for _, c := range []*rawConn{p, d} {
				c.do("SET", "k", v1)
			}
			dig := d.do("DIGEST", "k")
			_, hex, _ := strings.Cut(strings.TrimSpace(dig), "\r\n")
			for _, cmd := range [][]string{
				{"DIGEST", "k"},
				{"SET", "k", v2, "IFDNE", hex},
				{"SET", "k", v2, "IFDEQ", hex},
				{"GET", "k"},
				{"SET", "k", v1},
				{"DELEX", "k", "IFDNE", hex},
				{"DELEX", "k", "IFDEQ", hex},
				{"EXISTS", "k"},
			} {
				if got, want := p.do(cmd...), d.do(cmd...); got != want {
					t.Fatalf("RESP%s %.60q: proxy %.80q, server %.80q", proto, cmd, got, want)
				}
			}
		}
	}
	if !setIf {
		return
	}
	// A frame that fails its checksum: an error naming the key, and the
	// stored bytes stay as they were.
	frame := e.srv.Encoder.AppendEncode(nil, []byte(v1))
	h, err := codec.ParseHeader(frame)
	if err != nil || !h.HasChecksum {
		t.Fatalf("frame header: %+v %v", h, err)
	}
	frame[h.Len-1] ^= 0xFF
	dialRaw(t, e.redis.Addr).do("SET", "bad", string(frame))
	for _, cmd := range [][]string{{"SET", "bad", v2, "IFEQ", v1}, {"DELIFEQ", "bad", v1}} {
		if !delIf && cmd[0] == "DELIFEQ" {
			continue
		}
		want := `-ERR squeeze: ` + cmd[0] + `: stored value of key "bad" cannot be decoded`
		if got := dialRaw(t, e.addr).do(cmd...); !strings.HasPrefix(got, want) {
			t.Fatalf("%.30q on a corrupt frame: %q, want %q...", cmd, got, want)
		}
		if got := dialRaw(t, e.redis.Addr).do("GET", "bad"); got != bulk(string(frame)) {
			t.Fatalf("after %.30q the corrupt frame changed: %.40q", cmd, got)
		}
	}
	// What Redis holds: frames, where the values would compress.
	c, r := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	c.do("SET", "k", v1)
	before := r.do("GET", "k")
	for _, cmd := range [][]string{{"SET", "k", v2, "IFEQ", v2}, {"SET", "k", v2, "IFNE", v1}, {"DELIFEQ", "k", v2}} {
		c.do(cmd...)
		if got := r.do("GET", "k"); got != before {
			t.Fatalf("after %.40q (a condition not met) Redis holds %.60q, not the frame it held", cmd, got)
		}
	}
	c.do("SET", "k", v2, "IFEQ", v1)
	stored := r.do("GET", "k")
	if _, v, _ := strings.Cut(strings.TrimSuffix(stored, "\r\n"), "\r\n"); !codec.IsFramed([]byte(v)) || stored == before {
		t.Fatalf("SET IFEQ stored %.60q, not a new frame", stored)
	}
}

// TestProxy_Msetex: MSETEX (Redis 8.4, Valkey 9.1) stores the values of its
// pairs compressed, each under its key's rule, and never its options; every
// reply equals the server's, errors included, and a command that looks
// inside a value queued after it in MULTI sees through it.
func TestProxy_Msetex(t *testing.T) {
	e := startEnv(t)
	if !testutil.HasCommand(t, e.redis.Addr, "MSETEX") {
		t.Skipf("%s has no MSETEX (Redis 8.4 and Valkey 9.1 have): scripts/test-valkey9.sh runs this test", testutil.ServerPath())
	}
	plain := testutil.StartRedis(t)
	v1, v2 := compressible(5000, 1), compressible(6000, 2)
	script := [][]string{
		{"MSETEX", "2", "a", v1, "b", v2},
		{"MGET", "a", "b"},
		{"MSETEX", "1", "a", v2, "XX", "PXAT", "4102444800000"},
		{"GET", "a"},
		{"PEXPIRETIME", "a"},
		{"MSETEX", "2", "a", v1, "c", v1, "NX"},
		{"EXISTS", "c"},
		{"MSETEX", "1", "c", "small", "EX", "1000"},
		{"GET", "c"},
		{"MSETEX", "2", "a", v1, "KEEPTTL"},
		{"MSETEX", "0", "a", v1},
		{"MSETEX", "x", "a", v1},
		{"MSETEX", "1", "a", v1, "EX"},
		{"MULTI"},
		{"MSETEX", "1", "m", v2, "EX", "1000"},
		{"STRLEN", "m"},
		{"GETRANGE", "m", "0", "20"},
		{"EXEC"},
	}
	p, d := dialRaw(t, e.addr), dialRaw(t, plain.Addr)
	for _, cmd := range script {
		if got, want := p.do(cmd...), d.do(cmd...); got != want {
			t.Fatalf("%.60q: proxy %.80q, server %.80q", cmd, got, want)
		}
	}
	r := dialRaw(t, e.redis.Addr)
	for _, key := range []string{"a", "b", "m"} {
		stored := r.do("GET", key)
		if _, v, _ := strings.Cut(strings.TrimSuffix(stored, "\r\n"), "\r\n"); !codec.IsFramed([]byte(v)) {
			t.Fatalf("MSETEX stored %.40q in %s, not a frame", stored, key)
		}
	}
	if got := r.do("GET", "c"); got != bulk("small") {
		t.Fatalf("GET c on Redis: %q", got)
	}
}

// TestProxy_XaddOptions: XADD's newer options (Redis 8.2's KEEPREF, DELREF
// and ACKED, Redis 8.6's IDMPAUTO and IDMP) are options, not the entry id:
// the values after them are compressed and the fields stay as they are (the
// proxy took KEEPREF for the id, and compressed field names). An option
// the proxy does not know compresses nothing. On servers without these
// options both sides give the same errors.
func TestProxy_XaddOptions(t *testing.T) {
	e := startEnv(t)
	plain := testutil.StartRedis(t)
	v1, v2 := compressible(5000, 1), compressible(6000, 2)
	field := strings.Repeat("a long field name ", 10) // long enough to be compressed, were it a value
	script := [][]string{
		{"XADD", "s", "KEEPREF", "1-1", field, v1},
		{"XADD", "s", "DELREF", "MAXLEN", "~", "100", "1-2", "f2", v2},
		{"XADD", "s", "nomkstream", "acked", "1-3", "f3", v1, "f4", "small"},
		{"XADD", "s", "IDMP", "p", "i", "1-4", "f", v1}, // IDMP takes only "*"
		{"XADD", "s", "NEWOPTION", "1-5", field, v1},
		{"XRANGE", "s", "-", "+"},
		{"XLEN", "s"},
	}
	p, d := dialRaw(t, e.addr), dialRaw(t, plain.Addr)
	for _, cmd := range script {
		if got, want := p.do(cmd...), d.do(cmd...); got != want {
			t.Fatalf("%.60q: proxy %.80q, server %.80q", cmd, got, want)
		}
	}
	// Idempotent XADD (Redis 8.6): ids are the server's clock, so compare
	// what they do: a repeat returns the first entry's id, on both sides.
	idmp := [][]string{
		{"XADD", "t", "IDMP", "producer", "msg-1", "*", field, v1},
		{"XADD", "t", "IDMP", "producer", "msg-1", "*", field, v1},
		{"XADD", "t", "IDMPAUTO", "producer", "*", "f", v2},
		{"XADD", "t", "IDMPAUTO", "producer", "*", "f", v2},
	}
	for i := 0; i < len(idmp); i += 2 {
		p1, p2 := p.do(idmp[i]...), p.do(idmp[i+1]...)
		d1, d2 := d.do(idmp[i]...), d.do(idmp[i+1]...)
		if strings.HasPrefix(d1, "-") { // a server without IDMP
			if p1 != d1 || p2 != d2 {
				t.Fatalf("%.60q: proxy %q %q, server %q %q", idmp[i], p1, p2, d1, d2)
			}
			continue
		}
		if p1 != p2 || d1 != d2 {
			t.Fatalf("%.60q twice: proxy %q then %q, server %q then %q; want a repeat to return the first id", idmp[i], p1, p2, d1, d2)
		}
	}
	if got, want := p.do("XLEN", "t"), d.do("XLEN", "t"); got != want {
		t.Fatalf("XLEN t: proxy %q, server %q", got, want)
	}
	// XREADGROUP ... CLAIM (Redis 8.4) adds an entry's idle time and
	// delivery count after its fields: the values are still decoded. (The
	// idle time is the server's clock, so the replies are not compared.)
	for _, c := range []*rawConn{p, d} {
		c.do("XGROUP", "CREATE", "s", "g", "0")
		c.do("XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "s", ">")
	}
	claim := []string{"XREADGROUP", "GROUP", "g", "c2", "CLAIM", "0", "COUNT", "5", "STREAMS", "s", ">"}
	got, want := p.do(claim...), d.do(claim...)
	switch {
	case strings.HasPrefix(want, "-"):
		if got != want {
			t.Fatalf("XREADGROUP CLAIM: proxy %q, server %q", got, want)
		}
	case !strings.Contains(want, v1) || !strings.Contains(got, field+"\r\n$5000\r\n"+v1):
		t.Fatalf("XREADGROUP CLAIM: proxy %.120q, want the values decoded as in %.120q", got, want)
	}
	// What Redis holds: fields as sent, the long values in frames.
	r := dialRaw(t, e.redis.Addr)
	for _, key := range []string{"s", "t"} {
		stored := r.do("XRANGE", key, "-", "+")
		if strings.Contains(d.do("XRANGE", key, "-", "+"), field) && !strings.Contains(stored, field) {
			t.Fatalf("XRANGE %s on Redis: the long field name is not stored as sent: %.200q", key, stored)
		}
		for _, line := range strings.Split(stored, "\r\n") {
			if line == v1 || line == v2 {
				t.Fatalf("XRANGE %s on Redis: a value was stored raw", key)
			}
		}
	}
}

// TestProxy_CompareConcurrent: SET ... IFEQ through the proxy is a
// compare-and-set, as on the server: clients that each read a compressed
// counter document and write it back incremented, only if it is unchanged,
// lose no increment and count none twice.
func TestProxy_CompareConcurrent(t *testing.T) {
	e := startEnv(t)
	if got := dialRaw(t, e.redis.Addr).do("SET", "probe", "v", "IFEQ", "v"); !strings.HasPrefix(got, "$-1") {
		t.Skipf("%s has no SET ... IFEQ (Valkey 8.1 and Redis 8.4 have): scripts/test-valkey9.sh runs this test", testutil.ServerPath())
	}
	doc := func(n int) string { return fmt.Sprintf("%d|%s", n, compressible(4000, 7)) }
	dialRaw(t, e.addr).do("SET", "ctr", doc(0))
	const clients, tries = 4, 60
	won := make([]int, clients)
	var wg sync.WaitGroup
	for i := range clients {
		c := dialRaw(t, e.addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range tries {
				got := c.do("GET", "ctr")
				_, v, _ := strings.Cut(strings.TrimSuffix(got, "\r\n"), "\r\n")
				num, _, _ := strings.Cut(v, "|")
				n, err := strconv.Atoi(num)
				if err != nil {
					t.Errorf("GET ctr: %.60q", got)
					return
				}
				switch r := c.do("SET", "ctr", doc(n+1), "IFEQ", v); r {
				case "+OK\r\n":
					won[i]++
				case "$-1\r\n":
				default:
					t.Errorf("SET IFEQ: %q", r)
					return
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range won {
		total += n
	}
	if got, want := dialRaw(t, e.addr).do("GET", "ctr"), bulk(doc(total)); got != want {
		t.Fatalf("after %d successful compare-and-sets the counter reads %.20q, want %.20q", total, got, want)
	}
	if total == 0 {
		t.Fatal("no compare-and-set succeeded")
	}
	t.Logf("%d of %d compare-and-sets succeeded (%v)", total, clients*tries, won)
}

// TestProxy_SlowlogWithFrames: SLOWLOG GET, which the proxy does not know,
// shows commands' arguments cut to 128 bytes; a cut frame in it is not a
// value and passes as it is, instead of failing the whole reply.
func TestProxy_SlowlogWithFrames(t *testing.T) {
	e := startEnv(t)
	direct := dialRaw(t, e.redis.Addr)
	if got := direct.do("CONFIG", "SET", "slowlog-log-slower-than", "0"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET: %q", got)
	}
	c := dialRaw(t, e.addr)
	c.do("SET", "k", compressible(5000, 3))
	got := c.do("SLOWLOG", "GET", "5")
	if !strings.HasPrefix(got, "*") || !strings.Contains(got, codec.Magic) || !strings.Contains(got, "more bytes)") {
		t.Fatalf("SLOWLOG GET through the proxy: %.200q", got)
	}
}

// TestProxy_MembersNeverDecoded: set members and keys are never values,
// even when they are valid frames (written by a client that read Redis
// directly): SMEMBERS and SCAN pass them as they are.
func TestProxy_MembersNeverDecoded(t *testing.T) {
	e := startEnv(t)
	frame := string(e.srv.Encoder.AppendEncode(nil, []byte(compressible(500, 1))))
	c := dialRaw(t, e.addr)
	c.do("SADD", "s", frame)
	c.do("SET", frame, "x")
	if got := c.do("SMEMBERS", "s"); got != "*1\r\n"+bulk(frame) {
		t.Fatalf("SMEMBERS: %.80q", got)
	}
	if got := c.do("SISMEMBER", "s", frame); got != ":1\r\n" {
		t.Fatalf("SISMEMBER: %q", got)
	}
	if got := c.do("KEYS", "*"); !strings.Contains(got, frame) {
		t.Fatalf("KEYS: %.80q", got)
	}
}

// TestProxy_SelectedDBInMulti: inside MULTI, a command that looks inside a
// value reads the frames of the database the client selected. Before, the
// proxy read them in the URL's database and answered "must look inside a
// compressed value" where Redis answers.
func TestProxy_SelectedDBInMulti(t *testing.T) {
	e := startEnv(t)
	big := compressible(6000, 9)
	w := dialRaw(t, e.addr)
	w.do("SELECT", "5")
	w.do("SET", "k", big)
	w.do("HSET", "h", "f", big)
	c := dialRaw(t, e.addr)
	if got := c.do("SELECT", "5"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	c.send([]string{"MULTI"}, []string{"STRLEN", "k"}, []string{"GETRANGE", "k", "0", "5"}, []string{"HSTRLEN", "h", "f"}, []string{"EXEC"})
	for i, want := range []string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "*3\r\n:6000\r\n" + bulk(big[:6]) + ":6000\r\n"} {
		if got := c.read(); got != want {
			t.Fatalf("reply %d: %.120q, want %.120q", i, got, want)
		}
	}
	// A SELECT that fails leaves the client where it was.
	if got := c.do("SELECT", "99"); !strings.HasPrefix(got, "-ERR") {
		t.Fatal(got)
	}
	c.send([]string{"MULTI"}, []string{"STRLEN", "k"}, []string{"EXEC"})
	for i, want := range []string{"+OK\r\n", "+QUEUED\r\n", "*1\r\n:6000\r\n"} {
		if got := c.read(); got != want {
			t.Fatalf("after SELECT 99, reply %d: %.120q, want %.120q", i, got, want)
		}
	}
	// A SELECT queued in the transaction: the commands after it, and the
	// client after EXEC, are in that database; DISCARD undoes it.
	c.do("SELECT", "0")
	for _, tt := range []struct {
		cmds [][]string
		want []string
	}{
		{[][]string{{"MULTI"}, {"SELECT", "5"}, {"STRLEN", "k"}, {"EXEC"}}, []string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "*2\r\n+OK\r\n:6000\r\n"}},
		{[][]string{{"MULTI"}, {"HSTRLEN", "h", "f"}, {"EXEC"}}, []string{"+OK\r\n", "+QUEUED\r\n", "*1\r\n:6000\r\n"}},
		{[][]string{{"MULTI"}, {"SELECT", "0"}, {"DISCARD"}}, []string{"+OK\r\n", "+QUEUED\r\n", "+OK\r\n"}},
		{[][]string{{"MULTI"}, {"STRLEN", "k"}, {"EXEC"}}, []string{"+OK\r\n", "+QUEUED\r\n", "*1\r\n:6000\r\n"}},
	} {
		c.send(tt.cmds...)
		for i, want := range tt.want {
			if got := c.read(); got != want {
				t.Fatalf("%q: reply %d: %.120q, want %.120q", tt.cmds, i, got, want)
			}
		}
	}
}

// TestProxy_HashFieldExpiry: Redis 8's HSETEX stores its values compressed,
// and HGETEX and HGETDEL return them decoded; every reply, errors included,
// equals a plain Redis's, in RESP2 and RESP3 and inside MULTI/EXEC, and
// fields keep their expiry when the proxy looks inside them. Skipped on servers without HSETEX (Redis 7, Valkey 8.0); CI runs it in
// the Redis 8 pass (scripts/test-redis8.sh).
func TestProxy_HashFieldExpiry(t *testing.T) {
	e := startEnv(t)
	if !testutil.HasCommand(t, e.redis.Addr, "HSETEX") {
		t.Skipf("%s has no HSETEX (Redis 8 has): scripts/test-redis8.sh runs this test", testutil.ServerPath())
	}
	plain := testutil.StartRedis(t)
	v1, v2 := compressible(5000, 1), compressible(20000, 2)
	script := [][]string{
		{"HSETEX", "h", "FIELDS", "2", "f1", v1, "g", "small"},
		{"HSETEX", "h", "FNX", "EX", "100", "FIELDS", "1", "f1", "x"},
		{"HSETEX", "h", "FXX", "PX", "100000", "FIELDS", "1", "f1", v2},
		{"HGET", "h", "f1"},
		{"HTTL", "h", "FIELDS", "2", "f1", "g"},
		{"HGETEX", "h", "PERSIST", "FIELDS", "3", "f1", "nofield", "g"},
		{"HGETEX", "h", "EX", "50", "FIELDS", "1", "f1"},
		{"HSTRLEN", "h", "f1"},
		{"HMGET", "h", "f1", "g"}, // not HGETALL: two servers order a hash's fields apart
		{"HGETDEL", "h", "FIELDS", "2", "f1", "g"},
		{"EXISTS", "h"},
		{"MULTI"},
		{"HSETEX", "hm", "KEEPTTL", "FIELDS", "1", "f", v1},
		{"HSTRLEN", "hm", "f"},
		{"HGETEX", "hm", "FIELDS", "1", "f"},
		{"EXEC"},
		{"HSETEX", "h", "FIELDS", "2", "f", v1},
		{"HSETEX", "h", "NX", "FIELDS", "1", "f", v1}, // Valkey 9's option; Redis 8's syntax error
		{"HSETEX", "h", "NOSUCH", "FIELDS", "1", "f", v1},
		{"HSETEX", "h", "EX", "0", "FIELDS", "1", "f", v1},
		{"HGETDEL", "h", "FIELDS", "0"},
		{"HSETEX", "s", "FIELDS", "1", "f", v1},
		{"SET", "str", "v"},
		{"HGETEX", "str", "FIELDS", "1", "f"},
		// HINCRBYFLOAT on a compressed field runs on the decoded value and
		// puts the frame back: the field keeps its expiry, as with Redis.
		{"HSET", "t", "f", v1, "n", "1.5"},
		{"HPEXPIREAT", "t", "4102444800000", "FIELDS", "2", "f", "n"},
		{"HINCRBYFLOAT", "t", "f", "1"},
		{"HINCRBYFLOAT", "t", "n", "1"},
		{"HPEXPIRETIME", "t", "FIELDS", "2", "f", "n"},
		{"HGET", "t", "f"},
	}
	for _, proto := range []string{"2", "3"} {
		p, d := dialRaw(t, e.addr), dialRaw(t, plain.Addr)
		for _, c := range []*rawConn{p, d} {
			c.do("FLUSHALL")
			if got := c.do("HELLO", proto); strings.HasPrefix(got, "-") {
				t.Fatalf("HELLO %s: %q", proto, got)
			}
		}
		for _, cmd := range script {
			got, want := p.do(cmd...), d.do(cmd...)
			if got != want {
				t.Fatalf("RESP%s %.60q: proxy %.80q, Redis %.80q", proto, cmd, got, want)
			}
		}
		for _, key := range []string{"hm", "s"} { // HSETEX in MULTI, and alone
			stored := dialRaw(t, e.redis.Addr).do("HGET", key, "f")
			head, v, _ := strings.Cut(strings.TrimSuffix(stored, "\r\n"), "\r\n")
			if !strings.HasPrefix(head, "$") || !codec.IsFramed([]byte(v)) {
				t.Fatalf("RESP%s: HSETEX stored %.40q in %s, not a frame", proto, stored, key)
			}
		}
	}
}
