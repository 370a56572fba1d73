package valuescript

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

func words(s string) [][]byte {
	var out [][]byte
	for _, f := range strings.Fields(s) {
		out = append(out, []byte(f))
	}
	return out
}

// TestScripts_Load: every script compiles on the server, which names it by
// the SHA-1 the callers send with EVALSHA.
func TestScripts_Load(t *testing.T) {
	r := testutil.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer c.Close()
	ctx := context.Background()
	for name, s := range map[string]struct{ body, sha string }{
		"Inspect": {Inspect, InspectSHA}, "Grow": {Grow, GrowSHA}, "ListSearch": {ListSearch, ListSearchSHA},
		"SortCheck": {SortCheck, SHA(SortCheck)}, "CAS": {CAS, CASSHA},
	} {
		if got, err := c.ScriptLoad(ctx, s.body).Result(); err != nil || got != s.sha {
			t.Errorf("%s: SCRIPT LOAD = %s, %v; want %s", name, got, err, s.sha)
		}
	}
	// The markers, as the scripts spell them in Lua.
	got, err := c.Eval(ctx, "return {'"+luaMagic+"', '"+luaMagic+"B', '"+luaMagic+"W'}", nil).StringSlice()
	if err != nil || fmt.Sprint(got) != fmt.Sprint([]string{Marker, BitfieldMarker, RecompressMarker}) {
		t.Fatalf("markers in Lua = %q, %v", got, err)
	}
}

func TestInspectMode(t *testing.T) {
	for _, tt := range []struct {
		readOnly, compare, exact bool
		want                     string
	}{
		{false, false, false, InspectRun},
		{true, false, false, InspectRestore},
		{false, true, false, InspectCompare},
		{false, false, true, InspectExact},
		{true, false, true, InspectExactRestore},
	} {
		if got := InspectMode(tt.readOnly, tt.compare, tt.exact); got != tt.want {
			t.Errorf("InspectMode(%v, %v, %v) = %s, want %s", tt.readOnly, tt.compare, tt.exact, got, tt.want)
		}
	}
}

func TestInspectKeys_WrittenKey(t *testing.T) {
	for _, tt := range []struct {
		cmd           string
		first, end    int
		written       string
		readOnly, cmp bool
	}{
		{"GETBIT k 1", 1, 2, "", true, false},
		{"SETBIT k 1 1", 1, 2, "k", false, false},
		{"LCS a b", 1, 3, "", true, false},
		{"BITOP AND d a b", 3, 5, "d", false, false},
		{"HSTRLEN h f", 1, 2, "", true, false},
		{"DELIFEQ k v", 1, 2, "", false, true},
	} {
		args := words(tt.cmd)
		spec := rediscmd.Lookup(args[0])
		first, end := InspectKeys(spec.Keys, len(args))
		w := WrittenKey(tt.readOnly, tt.cmp, spec.Keys, args)
		if first != tt.first || end != tt.end || string(w) != tt.written {
			t.Errorf("%s: keys [%d, %d), written %q; want [%d, %d), %q", tt.cmd, first, end, w, tt.first, tt.end, tt.written)
		}
	}
}

// TestInspectCall_Words: the arguments sit where the script reads them.
func TestInspectCall_Words(t *testing.T) {
	c := InspectCall{Mode: InspectRun, Keys: words("d a"), Written: []byte("d"), RecompressMin: 64,
		Candidates: []Candidate{{Key: []byte("a"), Frame: []byte("F"), Dec: []byte("D")}}, Command: words("BITOP NOT d a")}
	got := string(bytes.Join(c.Words(nil, true), []byte(" ")))
	want := "EVALSHA " + InspectSHA + " 2 d a 0  d 0 1 64 a F D BITOP NOT d a"
	if got != want {
		t.Errorf("Words = %q\nwant    %q", got, want)
	}
	if w := c.Words(nil, false); string(w[0]) != "EVAL" || string(w[1]) != Inspect {
		t.Error("Words without byName does not send the body")
	}
}

func TestGrowArgs(t *testing.T) {
	for _, tt := range []struct {
		cmd    string
		kind   byte
		off, x int64
		ok     bool
	}{
		{"APPEND k abc", 'A', 0, 3, true},
		{"append k abc", 'A', 0, 3, true},
		{"SETRANGE k 5 abc", 'R', 5, 8, true},
		{"SETRANGE k 5", 0, 0, 0, false},
		{"SETRANGE k -1 abc", 0, 0, 0, false},
		{"SETRANGE k 05 abc", 0, 0, 0, false},
		{"GETBIT k 1", 0, 0, 0, false},
	} {
		kind, off, x, ok := GrowArgs(words(tt.cmd))
		if kind != tt.kind || off != tt.off || x != tt.x || ok != tt.ok {
			t.Errorf("%s: %c %d %d %v; want %c %d %d %v", tt.cmd, kind, off, x, ok, tt.kind, tt.off, tt.x, tt.ok)
		}
	}
	empty := [][]byte{[]byte("SETRANGE"), []byte("k"), []byte("4"), {}}
	if kind, off, x, ok := GrowArgs(empty); kind != 'E' || off != 4 || x != 4 || !ok {
		t.Errorf("SETRANGE of nothing: %c %d %d %v", kind, off, x, ok)
	}
}

func TestGrown_MayStartFramed(t *testing.T) {
	if got := Grown('R', []byte("hello"), 7, 9, words("SETRANGE k 7 xy")); string(got) != "hello\x00\x00xy" {
		t.Errorf("SETRANGE past the end = %q", got)
	}
	old := []byte("ab")
	if got := Grown('A', old, 0, 1, words("APPEND k c")); string(got) != "abc" || string(old) != "ab" {
		t.Errorf("APPEND = %q, old %q", got, old)
	}
	m := codec.Magic
	for _, tt := range []struct {
		kind byte
		off  int64
		args [][]byte
		want bool
	}{
		{'A', 0, [][]byte{nil, nil, []byte(m + "x")}, true},
		{'A', 0, [][]byte{nil, nil, []byte(m[1:])}, true}, // after one stored byte
		{'A', 0, [][]byte{nil, nil, []byte("plain")}, false},
		{'R', 0, [][]byte{nil, nil, nil, []byte(m[:2])}, true},
		{'R', 1, [][]byte{nil, nil, nil, []byte(m[1:])}, true},
		{'R', 1, [][]byte{nil, nil, nil, []byte("xy")}, false},
		{'R', 3, [][]byte{nil, nil, nil, []byte(m)}, false},
	} {
		if got := MayStartFramed(tt.kind, tt.off, tt.args); got != tt.want {
			t.Errorf("MayStartFramed(%c, %d, %q) = %v", tt.kind, tt.off, tt.args, got)
		}
	}
}

func TestSearchArg_Scope(t *testing.T) {
	for _, tt := range []struct {
		cmd          string
		arg          int
		dir          int
		need, maxlen int64
	}{
		{"LREM l 0 v", 3, 1, 0, 0},
		{"LREM l -2 v", 3, -1, 2, 0},
		{"LREM l 2", 0, 1, 2, 0},
		{"LPOS l v", 2, 1, 1, 0},
		{"LPOS l v RANK -2 COUNT 3 MAXLEN 10", 2, -1, 4, 10},
		{"LPOS l v COUNT 0", 2, 1, 0, 0},
		{"LPOS l v RANK 0", 2, 1, 0, 0},
		{"LINSERT l BEFORE p v", 3, 1, 1, 0},
		{"LINSERT l BEFORE p", 0, 1, 1, 0},
	} {
		args := words(tt.cmd)
		dir, need, maxlen := SearchScope(args)
		if got := SearchArg(args); got != tt.arg || dir != tt.dir || need != tt.need || maxlen != tt.maxlen {
			t.Errorf("%s: arg %d, scope %d %d %d; want %d, %d %d %d", tt.cmd, got, dir, need, maxlen, tt.arg, tt.dir, tt.need, tt.maxlen)
		}
	}
	if SearchMode([]byte("lpos")) != SearchRestore || SearchMode([]byte("LREM")) != SearchKeep {
		t.Error("SearchMode: LPOS restores, the others keep")
	}
}

func TestHeaderPattern(t *testing.T) {
	if got := string(HeaderPattern([]byte{0, 'a', 0x80, '%'})); got != "^\xC1SQ\x01.[%z\x01-\x03]%za%\x80%%" {
		t.Errorf("HeaderPattern = %q", got)
	}
}

func TestSortNeedsCheck(t *testing.T) {
	for _, tt := range []struct {
		cmd             string
		by              string
		alpha, patterns bool
		ok              bool
	}{
		{"SORT l", "", false, false, false},
		{"SORT l DESC LIMIT 0 5", "", false, false, false},
		{"SORT l ALPHA", "", true, false, true},
		{"SORT l BY w_*", "w_*", false, true, true},
		{"SORT l BY nosort GET #", "", false, false, false},
		{"SORT l GET d_* STORE dst", "", false, true, true},
		{"SORT_RO l STORE dst ALPHA", "", false, false, false}, // Redis's syntax error
		{"SORT l LIMIT x 5 ALPHA", "", false, false, false},
		{"GET l", "", false, false, false},
	} {
		by, alpha, patterns, ok := SortNeedsCheck(words(tt.cmd))
		if string(by) != tt.by || alpha != tt.alpha || patterns != tt.patterns || ok != tt.ok {
			t.Errorf("%s: %q %v %v %v; want %q %v %v %v", tt.cmd, by, alpha, patterns, ok, tt.by, tt.alpha, tt.patterns, tt.ok)
		}
	}
}

func TestExactBitfield(t *testing.T) {
	for _, tt := range []struct {
		cmd  string
		want string // the exact form's words, or "" where it runs as it is
	}{
		{"BITFIELD k GET u8 0", ""},
		{"BITFIELD k GET i64 0", "BITFIELD k GET i64 0  WRAP 0"},
		{"BITFIELD k OVERFLOW SAT INCRBY u63 #1 5 GET u8 0", "BITFIELD k INCRBY u63 #1 5 SAT 63 GET u8 0  SAT 0"},
		{"BITFIELD_RO k GET i64 8", "BITFIELD_RO k GET i64 8  WRAP 8"},
		{"BITFIELD_RO k SET i64 8 1", ""},
		{"BITFIELD k GET u64 0", ""},
		{"BITFIELD k SET i64 0 x", ""},
		{"BITFIELD k OVERFLOW NONE GET i64 0", ""},
	} {
		sargs, ok := ExactBitfield(words(tt.cmd))
		got := ""
		if ok {
			got = string(bytes.Join(sargs, []byte(" ")))
		}
		if got != tt.want {
			t.Errorf("%s: %q, want %q", tt.cmd, got, tt.want)
		}
	}
}

func TestBitfieldValue(t *testing.T) {
	for _, tt := range []struct {
		hi, lo int64
		typ    string
		want   int64
	}{
		{0x80000000, 0, "i64", -1 << 63},
		{0x80000000, 0, "u63", 1 << 62},
		{0x00200000, 1, "i64", 1<<53 + 1},
		{0xFF000000, 0, "u8", 255},
		{0xFF000000, 0, "i8", -1},
	} {
		if got, ok := BitfieldValue(tt.hi, tt.lo, []byte(tt.typ)); !ok || got != tt.want {
			t.Errorf("BitfieldValue(%#x, %#x, %s) = %d, %v; want %d", tt.hi, tt.lo, tt.typ, got, ok, tt.want)
		}
	}
	if _, ok := BitfieldValue(0, 0, []byte("u64")); ok {
		t.Error("u64 accepted")
	}
}
