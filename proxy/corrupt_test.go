package proxy

import (
	"cmp"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/codec"
)

// corruptFrames returns a good frame of value and the same frame with its
// checksum broken.
func corruptFrames(t *testing.T, value string) (good, bad string) {
	t.Helper()
	enc, _ := codec.NewEncoder(codec.DefaultAlgorithm, codec.WithMinSize(0))
	frame := enc.AppendEncode(nil, []byte(value))
	b := append([]byte(nil), frame...)
	h, err := codec.ParseHeader(b)
	if err != nil || !h.HasChecksum {
		t.Fatalf("frame header: %+v %v", h, err)
	}
	b[h.Len-1] ^= 0xFF
	return string(frame), string(b)
}

var keptRe = regexp.MustCompile(`kept under "(squeeze:quarantine:[^"]*)"`)

// TestProxy_CorruptValueKeepsNeighbours: one value that does not decode
// becomes an error element in its place, and every other value of the
// reply reaches the client: MGET, HMGET, HGETALL, HVALS, LRANGE, LPOP with
// a count, and EXEC, whose array carries each queued command's own result
// (a client that retried the failed EXEC would apply its writes twice).
// A destructive read keeps the undecodable bytes under a quarantine key
// with a TTL, which its error names.
func TestProxy_CorruptValueKeepsNeighbours(t *testing.T) {
	e := startEnv(t)
	v1, v2 := compressible(3000, 1), compressible(3000, 2)
	good1, bad := corruptFrames(t, v1)
	good2, _ := corruptFrames(t, v2)
	d := dialRaw(t, e.redis.Addr)
	for _, c := range [][]string{
		{"SET", "a", good1}, {"SET", "broken", bad}, {"SET", "b", good2},
		{"HSET", "h", "f1", good1, "f2", bad, "f3", good2},
		{"RPUSH", "lst", good1, bad, good2},
		{"RPUSH", "lst2", good1, bad, good2},
	} {
		if r := d.do(c...); strings.HasPrefix(r, "-") {
			t.Fatalf("%q: %q", c[:2], r)
		}
	}
	p := dialRaw(t, e.addr)
	errElem := func(cmd, key string) string {
		return "-ERR squeeze: " + cmd + `: stored value of key "` + key + `" cannot be decoded: codec: corrupt frame: checksum mismatch`
	}
	for _, tt := range []struct {
		args  []string
		elems []string // each element: a bulk value, or the prefix of an error
	}{
		{[]string{"MGET", "a", "broken", "b"}, []string{bulk(v1), errElem("MGET", "broken"), bulk(v2)}},
		{[]string{"HMGET", "h", "f1", "f2", "f3"}, []string{bulk(v1), errElem("HMGET", "h"), bulk(v2)}},
		{[]string{"LRANGE", "lst", "0", "-1"}, []string{bulk(v1), errElem("LRANGE", "lst"), bulk(v2)}},
		{[]string{"LPOP", "lst", "3"}, []string{bulk(v1), errElem("LPOP", "lst"), bulk(v2)}},
	} {
		got := p.do(tt.args...)
		rest := strings.TrimPrefix(got, "*"+strconv.Itoa(len(tt.elems))+"\r\n")
		if rest == got {
			t.Errorf("%q: %.100q, want %d elements", tt.args, got, len(tt.elems))
			continue
		}
		for i, want := range tt.elems {
			if !strings.HasPrefix(rest, want) {
				t.Errorf("%q element %d: %.120q, want %.120q", tt.args, i, rest, want)
				break
			}
			if strings.HasPrefix(want, "-") {
				rest = rest[strings.Index(rest, "\r\n")+2:]
			} else {
				rest = rest[len(want):]
			}
		}
	}
	// A hash of large values has no order: each value in some place.
	for _, args := range [][]string{{"HVALS", "h"}, {"HGETALL", "h"}} {
		got := p.do(args...)
		if !strings.Contains(got, "\r\n"+bulk(v1)) || !strings.Contains(got, "\r\n"+bulk(v2)) || !strings.Contains(got, "\r\n"+errElem(args[0], "h")) {
			t.Errorf("%q: %.200q, want both good values and an error element", args, got)
		}
	}
	// LPOP took the three out of Redis: the bad one's bytes are kept, under
	// the key its error names, with a TTL.
	if r := d.do("LLEN", "lst"); r != ":0\r\n" {
		t.Fatalf("LLEN after LPOP 3 = %q", r)
	}
	checkKept := func(reply string) {
		t.Helper()
		m := keptRe.FindStringSubmatch(reply)
		if m == nil {
			t.Fatalf("the error names no quarantine key: %.300q", reply)
		}
		var got string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if got = d.do("GET", m[1]); got == bulk(bad) {
				break
			}
		}
		if got != bulk(bad) {
			t.Fatalf("quarantine key %s holds %.80q, want the stored bytes", m[1], got)
		}
		if ttl := d.do("TTL", m[1]); !strings.HasPrefix(ttl, ":") || ttl == ":-1\r\n" || ttl == ":-2\r\n" {
			t.Fatalf("TTL of %s = %q, want one", m[1], ttl)
		}
	}
	p.send([]string{"LPOP", "lst2", "3"})
	checkKept(p.read())
	checkKept(p.do("GETDEL", "broken"))
	if r := d.do("EXISTS", "broken"); r != ":0\r\n" {
		t.Fatalf("GETDEL left the key: %q", r)
	}
	// EXEC: each command's own result; the INCR ran once.
	d.do("SET", "broken2", bad)
	p.send([]string{"MULTI"}, []string{"INCR", "cnt"}, []string{"GET", "broken2"}, []string{"GET", "a"}, []string{"EXEC"})
	for range 4 {
		p.read()
	}
	exec := p.read()
	if !strings.HasPrefix(exec, "*3\r\n:1\r\n-ERR squeeze: GET: stored value cannot be decoded") || !strings.HasSuffix(exec, bulk(v1)) {
		t.Fatalf("EXEC = %.200q, want [1, an error for GET broken2, a's value]", exec)
	}
	if r := d.do("GET", "cnt"); r != bulk("1") {
		t.Fatalf("cnt = %q", r)
	}
}

// TestProxy_CorruptValueTakenOut: a value that does not decode, taken out
// of Redis by a destructive read, is kept under a quarantine key named
// after the key it came from, in the client's database, and that key
// exists by the time the client reads the error (it did not, in 3 of 50
// runs of LPOP, when a goroutine of its own wrote it). Before, LMPOP named
// its numkeys argument as the key, and a client after SELECT 3 had the
// value kept in database 0. A move of such an element (LMOVE, BLMOVE,
// RPOPLPUSH) is undone, so that a retry finds the lists as they were;
// before, the element stayed moved and a retry moved a second one.
func TestProxy_CorruptValueTakenOut(t *testing.T) {
	e := startEnv(t)
	v := compressible(3000, 7)
	good, bad := corruptFrames(t, v)
	subst := func(args []string) []string {
		out := make([]string, len(args))
		for i, a := range args {
			switch a {
			case "GOOD":
				out[i] = good
			case "BAD":
				out[i] = bad
			default:
				out[i] = a
			}
		}
		return out
	}
	tests := []struct {
		name   string
		db     int        // the database the client selects
		setup  [][]string // sent to Redis directly, in db
		before [][]string // sent through the proxy before cmd (MULTI ...)
		cmd    []string
		repeat int    // runs of setup and cmd (1 if 0)
		key    string // the key the error names ("": none)
		elem   string // the command the error names (cmd[0] if "")
		moved  string // what the error says of a move; "" for a destructive read
		lists  map[string][]string
	}{
		{name: "LMPOP names the key after numkeys",
			setup: [][]string{{"RPUSH", "lst", "BAD", "GOOD"}}, cmd: []string{"LMPOP", "1", "lst", "LEFT", "COUNT", "2"}, key: "lst"},
		{name: "LMPOP names the key it popped from",
			setup: [][]string{{"RPUSH", "lst", "GOOD", "BAD"}}, cmd: []string{"LMPOP", "2", "none", "lst", "RIGHT"}, key: "lst"},
		{name: "BLMPOP",
			setup: [][]string{{"RPUSH", "lst", "BAD"}}, cmd: []string{"BLMPOP", "0", "2", "none", "lst", "LEFT"}, key: "lst"},
		{name: "BLPOP names the key it popped from",
			setup: [][]string{{"RPUSH", "lst", "BAD"}}, cmd: []string{"BLPOP", "none", "lst", "0"}, key: "lst"},
		{name: "LPOP: the quarantine key exists when the error arrives", repeat: 30,
			setup: [][]string{{"RPUSH", "lst", "GOOD", "BAD", "GOOD"}}, cmd: []string{"LPOP", "lst", "3"}, key: "lst"},
		{name: "GETDEL after SELECT 3: kept in database 3", db: 3,
			setup: [][]string{{"SET", "k", "BAD"}}, cmd: []string{"GETDEL", "k"}, key: "k"},
		{name: "LMOVE is undone",
			setup: [][]string{{"RPUSH", "src", "BAD", "GOOD"}, {"RPUSH", "dst", "x"}}, cmd: []string{"LMOVE", "src", "dst", "LEFT", "RIGHT"}, key: "src",
			moved: `the move was undone: it is back at the LEFT end of "src"`,
			lists: map[string][]string{"src": {"BAD", "GOOD"}, "dst": {"x"}}},
		{name: "LMOVE within one list is undone",
			setup: [][]string{{"RPUSH", "src", "GOOD", "y", "BAD"}}, cmd: []string{"LMOVE", "src", "src", "RIGHT", "LEFT"}, key: "src",
			lists: map[string][]string{"src": {"GOOD", "y", "BAD"}}},
		{name: "RPOPLPUSH is undone",
			setup: [][]string{{"RPUSH", "src", "GOOD", "BAD"}}, cmd: []string{"RPOPLPUSH", "src", "dst"}, key: "src",
			moved: `the move was undone: it is back at the RIGHT end of "src"`,
			lists: map[string][]string{"src": {"GOOD", "BAD"}, "dst": {}}},
		{name: "LMPOP inside EXEC names the key",
			setup:  [][]string{{"RPUSH", "lst", "BAD"}},
			before: [][]string{{"MULTI"}, {"LMPOP", "1", "lst", "LEFT"}}, cmd: []string{"EXEC"}, elem: "LMPOP", key: "lst"},
		{name: "LMOVE inside EXEC stands",
			setup:  [][]string{{"RPUSH", "src", "BAD"}},
			before: [][]string{{"MULTI"}, {"LMOVE", "src", "dst", "LEFT", "LEFT"}}, cmd: []string{"EXEC"}, elem: "LMOVE",
			moved: "it was moved: the transaction ran as a whole",
			lists: map[string][]string{"src": {}, "dst": {"BAD"}}},
		{name: "BLMOVE after SELECT 3 is undone in database 3", db: 3,
			setup: [][]string{{"RPUSH", "src", "BAD"}}, cmd: []string{"BLMOVE", "src", "dst", "RIGHT", "LEFT", "0"}, key: "src",
			moved: `the move was undone: it is back at the RIGHT end of "src"`,
			lists: map[string][]string{"src": {"BAD"}, "dst": {}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := dialRaw(t, e.redis.Addr)
			if r := d.do("SELECT", strconv.Itoa(tt.db)); r != "+OK\r\n" {
				t.Fatal(r)
			}
			p := dialRaw(t, e.addr)
			if tt.db != 0 {
				if r := p.do("SELECT", strconv.Itoa(tt.db)); r != "+OK\r\n" {
					t.Fatal(r)
				}
			}
			for range max(tt.repeat, 1) {
				d.do("FLUSHALL")
				for _, c := range tt.setup {
					if r := d.do(subst(c)...); strings.HasPrefix(r, "-") {
						t.Fatalf("%q: %q", c[:2], r)
					}
				}
				for _, c := range tt.before {
					if r := p.do(c...); strings.HasPrefix(r, "-") {
						t.Fatalf("%q: %q", c, r)
					}
				}
				got := p.do(tt.cmd...)
				elem := cmp.Or(tt.elem, strings.ToUpper(tt.cmd[0]))
				want := `-ERR squeeze: ` + elem + `: stored value of key "` + tt.key + `" cannot be decoded`
				if tt.key == "" {
					want = `-ERR squeeze: ` + elem + `: stored value cannot be decoded`
				}
				if !strings.Contains(got, want) {
					t.Fatalf("%q: %.300q, want an error element %q", tt.cmd, got, want)
				}
				if tt.lists != nil { // a move
					if tt.moved != "" && !strings.Contains(got, tt.moved) {
						t.Errorf("%q: %.300q, want it to say %q", tt.cmd, got, tt.moved)
					}
					for key, elems := range tt.lists {
						want := "*" + strconv.Itoa(len(elems)) + "\r\n"
						for _, el := range subst(elems) {
							want += bulk(el)
						}
						if r := d.do("LRANGE", key, "0", "-1"); r != want {
							t.Errorf("%q: %s holds %.200q after it, want %.200q", tt.cmd, key, r, want)
						}
					}
					continue
				}
				m := keptRe.FindStringSubmatch(got)
				if m == nil {
					t.Fatalf("%q: the error names no quarantine key: %.300q", tt.cmd, got)
				}
				if prefix := quarantinePrefix + tt.key + ":"; !strings.HasPrefix(m[1], prefix) {
					t.Errorf("%q: quarantine key %q, want one under %q", tt.cmd, m[1], prefix)
				}
				// Read once, at once: it must be there already, in the
				// client's database.
				if r := d.do("GET", m[1]); r != bulk(bad) {
					t.Fatalf("%q: quarantine key %s in database %d holds %.80q when the error arrived, want the stored bytes", tt.cmd, m[1], tt.db, r)
				}
			}
		})
	}
}
