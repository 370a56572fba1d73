package proxy

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/resp"
)

// bulkValue returns the string of a raw bulk reply.
func bulkValue(t *testing.T, reply string) []byte {
	t.Helper()
	v, _, err := resp.ReadValue([]byte(reply))
	if err != nil || v.Type != resp.BulkString || v.N < 0 {
		t.Fatalf("want a bulk string, got %.80q (%v)", reply, err)
	}
	return v.Str
}

// storedDecoded reads key directly from Redis, checks that it is stored as
// a frame, and returns the value the frame holds.
func storedDecoded(t *testing.T, e *env, key string) []byte {
	t.Helper()
	stored := bulkValue(t, dialRaw(t, e.redis.Addr).do("GET", key))
	if !codec.IsFramed(stored) {
		t.Fatalf("%s is stored raw (%d bytes, %.20q), want a frame", key, len(stored), stored)
	}
	dec, err := codec.NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	v, err := dec.AppendDecode(nil, stored)
	if err != nil {
		t.Fatalf("%s: the stored frame does not decode: %v", key, err)
	}
	return v
}

// TestProxy_MultiWritesKeepCompression: APPEND, SETRANGE and the bit writes
// queued in MULTI on a compressed value reply inside EXEC as Redis does,
// and afterwards the key holds a frame of the value Redis holds directly,
// TTL kept.
func TestProxy_MultiWritesKeepCompression(t *testing.T) {
	doc := compressible(20000, 3)
	tests := []struct {
		name  string
		steps [][]string
		keys  []string // checked after the steps; each has a GET step at the end
	}{
		{"APPEND and SETRANGE", [][]string{
			{"MULTI"},
			{"SET", "doc", doc, "EX", "1000"},
			{"APPEND", "doc", "x"},
			{"SETRANGE", "doc", "5", "y"},
			{"EXEC"},
		}, []string{"doc"}},
		{"on a value set before MULTI", [][]string{
			{"SET", "doc", doc, "EX", "1000"},
			{"MULTI"},
			{"APPEND", "doc", strings.Repeat(`{"log":"line"},`, 10)},
			{"SETRANGE", "doc", "20400", "tail"}, // past the end: zero padding
			{"STRLEN", "doc"},
			{"EXEC"},
		}, []string{"doc"}},
		{"SETBIT", [][]string{
			{"SET", "doc", doc, "EX", "1000"},
			{"MULTI"},
			{"SETBIT", "doc", "7", "1"},
			{"SETBIT", "doc", "170000", "1"},
			{"EXEC"},
		}, []string{"doc"}},
		{"BITFIELD SET and INCRBY", [][]string{
			{"SET", "doc", doc, "EX", "1000"},
			{"MULTI"},
			{"BITFIELD", "doc", "SET", "u8", "0", "65", "INCRBY", "i64", "64", "9007199254740993"},
			{"BITFIELD", "doc", "INCRBY", "u16", "800", "7", "GET", "u8", "0"},
			{"EXEC"},
		}, []string{"doc"}},
		{"BITOP", [][]string{
			{"SET", "a", doc, "EX", "1000"},
			{"SET", "b", compressible(20000, 4)},
			{"MULTI"},
			{"BITOP", "XOR", "c", "a", "b"},
			{"BITOP", "OR", "a", "a", "b"},
			{"EXEC"},
		}, []string{"a", "b", "c"}},
		{"a short value grown past --min-size", [][]string{
			{"MULTI"},
			{"APPEND", "doc", "abc"},
			{"APPEND", "doc", strings.Repeat("abcdefgh", 20)},
			{"EXEC"},
		}, []string{"doc"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := startEnv(t, withMinSize(64))
			steps := tc.steps
			for _, k := range tc.keys {
				steps = append(steps, []string{"GET", k})
			}
			steps = append(steps, []string{"TTL", tc.keys[0]})
			got := directAndProxy(t, e, steps)
			if ttl := got[1][len(got[1])-1]; ttl != got[0][len(got[0])-1] {
				t.Errorf("TTL %q through the proxy, %q directly", ttl, got[0][len(got[0])-1])
			}
			for i, k := range tc.keys {
				want := bulkValue(t, got[0][len(tc.steps)+i])
				if v := storedDecoded(t, e, k); string(v) != string(want) {
					t.Errorf("%s decodes to %d bytes that differ from Redis's %d", k, len(v), len(want))
				}
			}
		})
	}
}

// scriptCalls returns how many scripts Redis at addr has run (EVAL and
// EVALSHA, INFO commandstats).
func scriptCalls(t *testing.T, addr string) int {
	t.Helper()
	info := dialRaw(t, addr).do("INFO", "commandstats")
	n := 0
	for _, m := range regexp.MustCompile(`cmdstat_(?:eval|evalsha):calls=(\d+)`).FindAllStringSubmatch(info, -1) {
		c, _ := strconv.Atoi(m[1])
		n += c
	}
	return n
}

// TestProxy_MultiNoRecompressWhenNotRun: a transaction that did not run
// (its WATCH failed) or whose write failed leaves a raw value alone: no
// script runs after EXEC and the key keeps its bytes, although a
// successful APPEND there would have compressed it.
func TestProxy_MultiNoRecompressWhenNotRun(t *testing.T) {
	raw := compressible(20000, 5)
	tests := []struct {
		name  string
		watch bool
		write []string
		exec  string // EXEC's reply, as Redis gives it
		// scripts: how many run from EXEC on: the queued command's own
		// (the inspect script), if the transaction runs, and no other.
		scripts int
	}{
		{"WATCH failed", true, []string{"APPEND", "doc", "x"}, "*-1\r\n", 0},
		{"the write failed", false, []string{"SETBIT", "doc", "1", "2"}, "*1\r\n-ERR bit is not an integer or out of range\r\n", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := startEnv(t, withMinSize(64))
			direct := dialRaw(t, e.redis.Addr)
			direct.do("SET", "doc", raw) // raw: stored without the proxy
			c := dialRaw(t, e.addr)
			if tc.watch {
				c.do("WATCH", "doc")
				direct.do("SET", "doc", raw+"!") // another client's write
			}
			want := bulkValue(t, direct.do("GET", "doc"))
			c.do("MULTI")
			if r := c.do(tc.write...); r != "+QUEUED\r\n" {
				t.Fatalf("%q = %q", tc.write, r)
			}
			before := scriptCalls(t, e.redis.Addr)
			if r := c.do("EXEC"); r != tc.exec {
				t.Fatalf("EXEC = %q, want %q", r, tc.exec)
			}
			c.do("PING") // runs after whatever EXEC set off
			if n := scriptCalls(t, e.redis.Addr) - before; n != tc.scripts {
				t.Errorf("%d scripts ran from EXEC on, want %d", n, tc.scripts)
			}
			if got := bulkValue(t, direct.do("GET", "doc")); string(got) != string(want) {
				t.Errorf("doc holds %d bytes (%.10q), want its %d raw bytes", len(got), got, len(want))
			}
		})
	}
}

// TestProxy_MultiAppendHeavy: 1,000 APPENDs of 200 bytes to a 20 kB JSON
// value, in transactions of 100, keep the value compressed: Redis holds
// less than half the bytes it holds directly, and the value reads back as
// appended. It logs both figures.
func TestProxy_MultiAppendHeavy(t *testing.T) {
	e := startEnv(t, withMinSize(64))
	blocks, each := 10, 100
	if testing.Short() {
		blocks = 2
	}
	var usage [2]int
	var want strings.Builder
	for i, addr := range []string{e.redis.Addr, e.addr} {
		c := dialRaw(t, addr)
		want.Reset()
		want.WriteString(compressible(20000, 1))
		c.do("SET", "events", want.String())
		for b := range blocks {
			c.do("MULTI")
			var lens []string
			for j := range each {
				n := b*each + j // the records of TestProxy_AppendHeavy
				rec := fmt.Sprintf(`{"seq":%06d,"kind":"page_view","path":"/docs/guide/proxy.md","agent":"squeeze-test","ms":%03d,"ok":true},`, n, n%997)
				rec = (rec + strings.Repeat(" ", 200))[:200]
				want.WriteString(rec)
				lens = append(lens, ":"+strconv.Itoa(want.Len())+"\r\n")
				c.send([]string{"APPEND", "events", rec})
			}
			for j := range each {
				if r := c.read(); r != "+QUEUED\r\n" {
					t.Fatalf("APPEND %d queued: %q", j, r)
				}
			}
			if r, w := c.do("EXEC"), fmt.Sprintf("*%d\r\n%s", each, strings.Join(lens, "")); r != w {
				t.Fatalf("EXEC of block %d = %.80q, want %.80q", b, r, w)
			}
		}
		if r := c.do("GET", "events"); r != bulk(want.String()) {
			t.Fatalf("GET after the APPENDs: %d bytes differ from what was appended", len(r))
		}
		u := dialRaw(t, e.redis.Addr).do("MEMORY", "USAGE", "events")
		usage[i], _ = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(u, ":")))
	}
	if v := storedDecoded(t, e, "events"); string(v) != want.String() {
		t.Fatalf("the stored frame decodes to %d bytes, want the %d appended", len(v), want.Len())
	}
	t.Logf("after %d APPENDs of 200 bytes to 20 kB in MULTI blocks of %d: Redis holds %d bytes directly, %d through the proxy (%.1f%% saved)",
		blocks*each, each, usage[0], usage[1], 100*(1-float64(usage[1])/float64(usage[0])))
	if usage[1] <= 0 || usage[1]*2 > usage[0] {
		t.Fatalf("MEMORY USAGE through the proxy %d, direct %d: want under half", usage[1], usage[0])
	}
}

// TestProxy_MultiAppendConcurrent: transactions that append to a key while
// other clients append to it outside MULTI lose no append: the store after
// EXEC is a compare-and-set on the bytes read. A queued APPEND that finds
// at EXEC a frame the proxy could not foresee gets the documented error
// and appends nothing.
func TestProxy_MultiAppendConcurrent(t *testing.T) {
	e := startEnv(t)
	dialRaw(t, e.addr).do("SET", "log", compressible(5000, 2))
	const clients, each = 4, 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	var refused []string // records whose queued APPEND got the error
	inMulti := 0         // queued APPENDs that ran
	errs := make(chan string, clients*each)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc := dialRaw(t, e.addr)
			for j := range each {
				rec := fmt.Sprintf("<%d:%03d>", i, j)
				if i%2 == 1 { // outside MULTI
					if r := cc.do("APPEND", "log", rec); !strings.HasPrefix(r, ":") {
						errs <- r
					}
					continue
				}
				cc.send([]string{"MULTI"}, []string{"APPEND", "log", rec}, []string{"EXEC"})
				for _, w := range []string{"+OK", "+QUEUED"} {
					if r := cc.read(); !strings.HasPrefix(r, w) {
						errs <- r
					}
				}
				r := cc.read()
				mu.Lock()
				switch {
				case strings.HasPrefix(r, "*1\r\n:"):
					inMulti++
				case strings.HasPrefix(r, "*1\r\n-ERR squeeze: a command queued in MULTI must look inside"):
					refused = append(refused, rec)
				default:
					errs <- r
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for r := range errs {
		t.Fatalf("unexpected reply %q", r)
	}
	if inMulti == 0 {
		t.Fatalf("no APPEND in MULTI ran (%d refused)", len(refused))
	}
	t.Logf("%d APPENDs in MULTI ran, %d were refused", inMulti, len(refused))
	v := dialRaw(t, e.addr).do("GET", "log")
	for i := range clients {
		for j := range each {
			rec := fmt.Sprintf("<%d:%03d>", i, j)
			if strings.Contains(v, rec) == slices.Contains(refused, rec) {
				t.Fatalf("append %s: in the value %v, refused %v", rec, strings.Contains(v, rec), slices.Contains(refused, rec))
			}
		}
	}
}

// TestProxy_MultiRecompressResp3Tracking: the same in RESP3 with
// client-side caching on: EXEC's reply, the invalidation that follows it
// and the replies after are Redis's, in Redis's order (the recompression
// after EXEC adds no push: the client no longer tracks the key).
func TestProxy_MultiRecompressResp3Tracking(t *testing.T) {
	e := startEnv(t, withMinSize(64))
	doc := compressible(20000, 6)
	const readOnly = "<read a reply>"
	steps := [][]string{
		{"CLIENT", "TRACKING", "ON"},
		{"SET", "doc", doc, "EX", "1000"},
		{"GET", "doc"},
		{"MULTI"},
		{"APPEND", "doc", "x"},
		{"SETRANGE", "doc", "5", "y"},
		{"EXEC"},
		{readOnly}, // the invalidation push
		{"PING"},
		{"GET", "doc"},
		{"TTL", "doc"},
	}
	var got [2][]string
	for i, addr := range []string{e.redis.Addr, e.addr} {
		c := dialRaw(t, addr)
		c.do("FLUSHALL")
		if r := c.do("HELLO", "3"); !strings.HasPrefix(r, "%") {
			t.Fatalf("HELLO 3 = %.80q", r)
		}
		for _, s := range steps {
			if s[0] == readOnly {
				got[i] = append(got[i], c.read())
				continue
			}
			got[i] = append(got[i], c.do(s...))
		}
	}
	for j := range got[0] {
		if got[0][j] != got[1][j] {
			t.Errorf("%.40q: direct %.80q, proxy %.80q", steps[j], got[0][j], got[1][j])
		}
	}
	if !strings.HasPrefix(got[0][7], ">2\r\n$10\r\ninvalidate\r\n") {
		t.Fatalf("Redis sent no invalidation after EXEC (%.80q): the test shows nothing", got[0][7])
	}
	want := bulkValue(t, got[0][9])
	if v := storedDecoded(t, e, "doc"); string(v) != string(want) {
		t.Errorf("doc decodes to %d bytes that differ from Redis's %d", len(v), len(want))
	}
}

// BenchmarkMultiAppend measures one transaction of 10 APPENDs of 200 bytes
// to a compressed 20 kB JSON value (SET again before each, so the value
// does not grow with b.N), through the proxy against a real redis-server:
// the queued scripts, EXEC and the recompression after it. Compare runs
// side by side (benchstat).
//
//	go test ./proxy -run '^$' -bench MultiAppend -count 6
func BenchmarkMultiAppend(b *testing.B) {
	e := startEnv(b, withMinSize(64))
	c := dialRaw(b, e.addr)
	doc := compressible(20000, 1)
	rec := strings.Repeat(`{"kind":"page_view","ok":true},`, 7)[:200]
	cmds := [][]string{{"SET", "doc", doc}, {"MULTI"}}
	for range 10 {
		cmds = append(cmds, []string{"APPEND", "doc", rec})
	}
	cmds = append(cmds, []string{"EXEC"})
	b.ResetTimer()
	for range b.N {
		c.send(cmds...)
		var last string
		for range cmds {
			last = c.read()
		}
		if !strings.HasPrefix(last, "*10\r\n:20200\r\n") {
			b.Fatalf("EXEC = %.60q", last)
		}
	}
}
