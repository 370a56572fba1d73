package proxy

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/resp"
)

// TestProxy_AppendKeepsCompression: APPEND and SETRANGE on a compressed
// value reply as Redis does on the plain value, keep its TTL, and leave the
// result compressed under the write policy; a short value that an APPEND
// takes past --min-size is compressed too; one the policy left raw stays
// raw. Every reply is compared with Redis's on the same commands.
func TestProxy_AppendKeepsCompression(t *testing.T) {
	e := startEnv(t, withMinSize(64))
	doc := compressible(20000, 3)
	steps := [][]string{
		{"SET", "doc", doc, "EX", "1000"},
		{"APPEND", "doc", strings.Repeat(`{"log":"line"},`, 10)},
		{"STRLEN", "doc"},
		{"SETRANGE", "doc", "5", "XYZ"},
		{"SETRANGE", "doc", "20400", "tail"}, // past the end: zero padding
		{"GETRANGE", "doc", "0", "20"},
		{"GETRANGE", "doc", "20190", "-1"},
		{"TTL", "doc"},
		{"APPEND", "short", "abc"},
		{"APPEND", "short", strings.Repeat("abcdefgh", 20)}, // past min-size
		{"GET", "short"},
		{"SETRANGE", "fresh", "10", strings.Repeat("xy", 100)},
		{"GET", "fresh"},
		{"SETRANGE", "doc", "0", ""},
		{"SETRANGE", "doc", "-1", "x"},
		{"SETRANGE", "doc", "+1", "x"},
		{"APPEND", "num", "12345678901234567890123456789012345678901234567890"},
		{"APPEND", "num", "12345678901234567890123456789012345678901234567890"},
		{"GET", "num"},
		{"HSET", "h", "f", "v"},
		{"APPEND", "h", "x"},
		{"SETRANGE", "h", "0", "x"},
		{"GET", "doc"},
	}
	got := directAndProxy(t, e, steps)
	if got[1][7] == ":-1\r\n" {
		t.Errorf("TTL lost: %q", got[1][7])
	}
	// What Redis stores: frames for the document and the grown short value,
	// the number raw.
	raw := dialRaw(t, e.redis.Addr)
	for _, k := range []string{"doc", "short", "fresh"} {
		stored := raw.do("GETRANGE", k, "0", "2")
		if stored != bulk("\xC1SQ") {
			t.Errorf("%s is stored raw (%q) after APPEND/SETRANGE, want a frame", k, stored)
		}
	}
	if stored := raw.do("GETRANGE", "num", "0", "2"); stored != bulk("123") {
		t.Errorf("num stored as %q, want raw digits", stored)
	}
}

// TestProxy_AppendHeavy: a growing document (1,000 APPENDs of 200 bytes to
// a 20 kB JSON value, as a log or an event list grows) keeps its savings:
// the stored frame stays a fraction of the value, and the value reads back
// exactly. It prints the memory Redis uses for the key directly and
// through the proxy.
func TestProxy_AppendHeavy(t *testing.T) {
	e := startEnv(t, withMinSize(64))
	n := 1000
	if testing.Short() {
		n = 200
	}
	var usage [2]int
	var want strings.Builder
	for i, addr := range []string{e.redis.Addr, e.addr} {
		c := dialRaw(t, addr)
		want.Reset()
		want.WriteString(compressible(20000, 1))
		c.do("SET", "events", want.String())
		for j := range n {
			rec := fmt.Sprintf(`{"seq":%06d,"kind":"page_view","path":"/docs/guide/proxy.md","agent":"squeeze-test","ms":%03d,"ok":true},`, j, j%997)
			rec = (rec + strings.Repeat(" ", 200))[:200]
			want.WriteString(rec)
			if r := c.do("APPEND", "events", rec); r != ":"+strconv.Itoa(want.Len())+"\r\n" {
				t.Fatalf("APPEND %d = %q, want length %d", j, r, want.Len())
			}
		}
		if r := c.do("GET", "events"); r != bulk(want.String()) {
			t.Fatalf("GET after the APPENDs: %d bytes differ from what was appended", len(r))
		}
		u := dialRaw(t, e.redis.Addr).do("MEMORY", "USAGE", "events")
		usage[i], _ = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(u, ":")))
	}
	t.Logf("after %d APPENDs of 200 bytes to 20 kB: Redis holds %d bytes directly, %d through the proxy (%.1f%% saved)",
		n, usage[0], usage[1], 100*(1-float64(usage[1])/float64(usage[0])))
	if usage[1] <= 0 || usage[1]*2 > usage[0] {
		t.Fatalf("MEMORY USAGE through the proxy %d, direct %d: want under half", usage[1], usage[0])
	}
}

// TestProxy_AppendConcurrent: clients appending to the same compressed key
// at once lose no append (the proxy's store is a compare-and-set) and get
// no error: with eight of them, some lost every round before the key lock
// (keylock.go) made them take turns after a miss.
func TestProxy_AppendConcurrent(t *testing.T) {
	e := startEnv(t)
	c := dialRaw(t, e.addr)
	c.do("SET", "log", compressible(5000, 2))
	const clients, each = 8, 50
	var wg sync.WaitGroup
	errs := make(chan string, clients*each)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc := dialRaw(t, e.addr)
			for j := range each {
				if r := cc.do("APPEND", "log", fmt.Sprintf("<%d:%03d>", i, j)); !strings.HasPrefix(r, ":") {
					errs <- r
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for r := range errs {
		t.Fatalf("APPEND = %q", r)
	}
	v := c.do("GET", "log")
	for i := range clients {
		for j := range each {
			if !strings.Contains(v, fmt.Sprintf("<%d:%03d>", i, j)) {
				t.Fatalf("append <%d:%03d> lost", i, j)
			}
		}
	}
	if stored := dialRaw(t, e.redis.Addr).do("GETRANGE", "log", "0", "2"); stored != bulk(codec.Magic) {
		t.Fatalf("log stored as %q, want a frame", stored)
	}
}

// TestProxy_BitWritesKeepCompression: SETBIT, BITFIELD (narrow and wide
// fields) and BITOP on compressed values reply as Redis does and leave the
// result compressed under the write policy, TTL kept; outside MULTI.
func TestProxy_BitWritesKeepCompression(t *testing.T) {
	e := startEnv(t, withMinSize(64))
	doc := compressible(8000, 4)
	steps := [][]string{
		{"SET", "a", doc, "EX", "1000"},
		{"SET", "b", doc},
		{"SETBIT", "a", "7", "1"},
		{"SETBIT", "a", "100000", "1"}, // past the end: zero padding
		{"BITFIELD", "b", "SET", "u8", "0", "65", "INCRBY", "i64", "64", "9007199254740993"},
		{"BITOP", "XOR", "c", "a", "b"},
		{"GET", "a"}, {"GET", "b"}, {"GET", "c"},
		{"TTL", "a"},
		{"BITCOUNT", "c"},
	}
	directAndProxy(t, e, steps)
	raw := dialRaw(t, e.redis.Addr)
	for _, k := range []string{"a", "b", "c"} {
		if stored := raw.do("GETRANGE", k, "0", "2"); stored != bulk(codec.Magic) {
			t.Errorf("%s is stored raw (%q) after a bit write, want a frame", k, stored)
		}
	}
}

// directAndProxy sends steps, on a flushed server, to Redis directly and
// through the proxy, reports every reply that differs, and returns the
// replies: [0] direct, [1] through the proxy.
func directAndProxy(t *testing.T, e *env, steps [][]string) [2][]string {
	t.Helper()
	var got [2][]string
	for i, addr := range []string{e.redis.Addr, e.addr} {
		c := dialRaw(t, addr)
		c.do("FLUSHALL")
		for _, s := range steps {
			got[i] = append(got[i], c.do(s...))
		}
	}
	for j := range got[0] {
		if got[0][j] != got[1][j] {
			t.Errorf("%.40q: direct %.80q, proxy %.80q", steps[j], got[0][j], got[1][j])
		}
	}
	return got
}

// TestProxy_GrowIntoMagic: APPEND and SETRANGE whose result begins with
// the frame magic store it wrapped, whatever the value's size (Redis's own
// command would store raw bytes a reader takes for a frame), and read back
// as written. Found by TestDifferential, seed 1796197994930935507.
func TestProxy_GrowIntoMagic(t *testing.T) {
	e := startEnv(t, withMinSize(1<<20))
	c := dialRaw(t, e.addr)
	magic := string(codec.Magic)
	steps := []struct {
		cmd  []string
		want string // the value after it
	}{
		{[]string{"APPEND", "a", magic + "Z tail"}, magic + "Z tail"},
		{[]string{"APPEND", "b", magic[:1]}, magic[:1]},
		{[]string{"APPEND", "b", magic[1:] + "Zx"}, magic + "Zx"},
		{[]string{"SET", "c", "plain value"}, "plain value"},
		{[]string{"SETRANGE", "c", "0", magic}, magic + "in value"},
		{[]string{"SETRANGE", "d", "1", magic[1:]}, "\x00" + magic[1:]},
		{[]string{"APPEND", "c", "more"}, magic + "in valuemore"},
	}
	for _, s := range steps {
		c.do(s.cmd...)
		key := s.cmd[1]
		if got := c.do("GET", key); got != bulk(s.want) {
			t.Fatalf("%q: GET %s = %q, want %q", s.cmd, key, got, s.want)
		}
		if got := c.do("STRLEN", key); got != fmt.Sprintf(":%d\r\n", len(s.want)) {
			t.Fatalf("%q: STRLEN %s = %q", s.cmd, key, got)
		}
	}
}

// TestProxy_GrowIntoMagicInMulti is TestProxy_GrowIntoMagic inside one
// transaction: each result that begins with the frame magic must read back
// as written, although the proxy queues the commands before any has run.
func TestProxy_GrowIntoMagicInMulti(t *testing.T) {
	e := startEnv(t, withMinSize(64))
	c := dialRaw(t, e.addr)
	magic := string(codec.Magic)
	long := strings.Repeat("compressible text ", 20)
	c.do("SET", "big", long) // compressed: the script decodes it first
	cmds := [][]string{
		{"APPEND", "a", magic + "Z tail"},
		{"APPEND", "b", magic[:1]},
		{"APPEND", "b", magic[1:] + "Zx"},
		{"SET", "c", "plain value"},
		{"SETRANGE", "c", "0", magic},
		{"SETRANGE", "d", "1", magic[1:]},
		{"APPEND", "c", "more"},
		{"SETRANGE", "big", "0", magic},
		{"APPEND", "big", magic},
		// 0xC1 0x53 0x51 bit by bit: 11000001 01010011 01010001.
		{"SETBIT", "e", "0", "1"}, {"SETBIT", "e", "1", "1"}, {"SETBIT", "e", "7", "1"},
		{"SETBIT", "e", "9", "1"}, {"SETBIT", "e", "11", "1"}, {"SETBIT", "e", "14", "1"},
		{"SETBIT", "e", "15", "1"}, {"SETBIT", "e", "17", "1"}, {"SETBIT", "e", "19", "1"},
		{"SETBIT", "e", "23", "1"},
		{"BITOP", "OR", "f", "e", "a"},
	}
	want := map[string]string{
		"a":   magic + "Z tail",
		"b":   magic + "Zx",
		"c":   magic + "in valuemore",
		"d":   "\x00" + magic[1:],
		"big": magic + long[3:] + magic,
		"e":   magic,
	}
	or := []byte(magic + "Z tail")
	for i := range 3 {
		or[i] |= magic[i]
	}
	want["f"] = string(or)
	c.do("MULTI")
	for _, cmd := range cmds {
		if r := c.do(cmd...); r != "+QUEUED\r\n" {
			t.Fatalf("%q: %q", cmd, r)
		}
	}
	if r := c.do("EXEC"); strings.Contains(r, "-") && !strings.HasPrefix(r, "*") {
		t.Fatalf("EXEC: %q", r)
	}
	for key, w := range want {
		if got := c.do("GET", key); got != bulk(w) {
			t.Fatalf("GET %s = %q, want %q", key, got, w)
		}
		if got := c.do("STRLEN", key); got != fmt.Sprintf(":%d\r\n", len(w)) {
			t.Fatalf("STRLEN %s = %q", key, got)
		}
	}
	// The compressible result is stored compressed again after EXEC, as
	// the same APPEND outside MULTI would be; the short ones stay wrapped.
	if stored := dialRaw(t, e.redis.Addr).do("GETRANGE", "big", "0", "4"); len(stored) < 11 || stored[4:7] != magic || stored[8] == byte(codec.IDNone) {
		t.Fatalf("big is stored as %q after EXEC, want a compressed frame", stored)
	}
}

// TestGrow_Grown: the value APPEND and SETRANGE leave, computed by the
// proxy, is Redis's (zeros fill a gap), in a new array.
func TestGrow_Grown(t *testing.T) {
	for _, tt := range []struct {
		args []string
		old  string
		want string
	}{
		{[]string{"APPEND", "k", "def"}, "abc", "abcdef"},
		{[]string{"APPEND", "k", "x"}, "", "x"},
		{[]string{"SETRANGE", "k", "1", "XY"}, "abcd", "aXYd"},
		{[]string{"SETRANGE", "k", "3", "XY"}, "abcd", "abcXY"},
		{[]string{"SETRANGE", "k", "2", "X"}, "", "\x00\x00X"},
	} {
		args := argv(tt.args...)
		kind, off, x, ok := growArgs(commandTable[strings.ToLower(tt.args[0])], args)
		if !ok {
			t.Fatalf("%q: not on the grow path", tt.args)
		}
		old := make([]byte, len(tt.old), len(tt.old)+16) // room an append must not use
		copy(old, tt.old)
		if got := string(grown(kind, old, off, x, args)); got != tt.want {
			t.Errorf("%q on %q: %q, want %q", tt.args, tt.old, got, tt.want)
		}
		if string(old) != tt.old || string(old[:cap(old)][len(old):len(old)+1]) != "\x00" {
			t.Errorf("%q: changed the old value: %q", tt.args, old[:cap(old)])
		}
	}
}

// TestGrow_MarkedValue: growScript's marked reply holds the stored bytes,
// copied out of the reply, or nothing for a missing key.
func TestGrow_MarkedValue(t *testing.T) {
	reply := resp.AppendArray(nil, 2)
	reply = resp.AppendBulk(reply, magic)
	reply = resp.AppendBulkString(reply, "stored")
	v, _, err := resp.ReadValue(reply)
	if err != nil || !isMarkerHead(v) {
		t.Fatalf("%q: %v", reply, err)
	}
	stored, missing := markedValue(v)
	if missing || string(stored) != "stored" {
		t.Fatalf("stored %q, missing %v", stored, missing)
	}
	copy(reply[len(reply)-8:], "XXXXXX")
	if string(stored) != "stored" {
		t.Fatalf("the stored bytes alias the reply: %q", stored)
	}
	v, _, err = resp.ReadValue(resp.AppendBulk(resp.AppendArray(nil, 1), magic))
	if err != nil || !isMarkerHead(v) {
		t.Fatal(err)
	}
	if stored, missing := markedValue(v); !missing || stored != nil {
		t.Fatalf("missing key: stored %q, missing %v", stored, missing)
	}
}
