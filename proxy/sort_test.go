package proxy

import (
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/internal/testutil"
	"github.com/squeeze-kv/squeeze/resp"
)

// TestProxy_SortCompressed: SORT ALPHA over compressed elements or
// weights, and BY or GET patterns over compressed elements, are refused
// with an error that says why (in and out of MULTI; STORE stores nothing);
// every other SORT, and every call Redis refuses for its syntax, gives
// Redis's reply on the same values stored plain.
func TestProxy_SortCompressed(t *testing.T) {
	direct := testutil.StartRedis(t)
	e := startEnv(t)
	ref, c := dialRaw(t, direct.Addr), dialRaw(t, e.addr)
	// Value order z < a after compression is not the values' order.
	hi, lo := "zz"+compressible(400, 1), "aa"+compressible(400, 2)
	setup := [][]string{
		{"RPUSH", "docs", hi, lo},
		{"RPUSH", "small", "b", "a", "c"},
		{"SADD", "set", "b", "a"},
		{"SET", "w_" + hi, "2"}, {"SET", "w_" + lo, "1"},
		{"SET", "w_b", hi}, {"SET", "w_a", lo}, // compressed weights
		{"HSET", "h_b", "f", "2"}, {"HSET", "h_a", "f", "1"}, {"HSET", "h_c", "f", "3"},
	}
	for _, cmd := range setup {
		ref.do(cmd...)
		c.do(cmd...)
	}
	same := [][]string{
		{"SORT", "small", "ALPHA"},
		{"SORT", "small", "ALPHA", "DESC", "LIMIT", "0", "2"},
		{"SORT", "small", "BY", "h_*->f"},
		{"SORT", "set", "ALPHA"},
		{"SORT_RO", "small", "ALPHA"},
		{"SORT", "docs", "BY", "nosort"},
		{"SORT", "docs", "BY", "nosort", "GET", "#"},
		{"SORT", "nokey", "ALPHA"},
		{"SORT", "docs", "ALPHA", "LIMIT", "x"},
		{"SORT", "docs", "ALPHA", "LIMIT", "0"},
		{"SORT", "docs", "ALPHA", "BOGUS"},
		{"SORT_RO", "docs", "ALPHA", "STORE", "x"},
		{"SORT", "docs", "ALPHA", "GET"},
		{"SORT", "w_" + hi, "ALPHA"},
		{"SORT", "small", "ALPHA", "STORE", "sorted"},
		{"LRANGE", "sorted", "0", "-1"},
	}
	for i, cmd := range same {
		if want, got := ref.do(cmd...), c.do(cmd...); want != got {
			t.Fatalf("command %d %.40q: Redis replied %.200q, the proxy %.200q", i, cmd, want, got)
		}
	}
	refused := []struct {
		cmd []string
		why string
	}{
		{[]string{"SORT", "docs", "ALPHA"}, "SORT ALPHA would order compressed bytes"},
		{[]string{"sort_ro", "docs", "alpha", "desc"}, "SORT_RO ALPHA would order compressed bytes"},
		{[]string{"SORT", "small", "BY", "doc_*", "ALPHA"}, ""}, // missing weights: allowed
		{[]string{"SORT", "docs", "BY", "w_*"}, "SORT BY and GET patterns would name keys after compressed bytes"},
		{[]string{"SORT", "docs", "BY", "nosort", "GET", "x_*"}, "SORT BY and GET patterns would name keys after compressed bytes"},
		{[]string{"SORT", "small", "BY", "h_*->f", "GET", "#"}, ""},
		{[]string{"SORT", "small", "BY", "w_*", "ALPHA"}, "SORT ALPHA would order compressed bytes"},
		{[]string{"SORT", "small", "BY", "w_*"}, ""}, // numeric: Redis's own error on the values
		{[]string{"SORT", "docs", "ALPHA", "STORE", "out"}, "SORT ALPHA would order compressed bytes"},
	}
	for _, r := range refused {
		got := c.do(r.cmd...)
		if r.why == "" {
			if want := ref.do(r.cmd...); got != want {
				t.Fatalf("%q: Redis replied %q, the proxy %q", r.cmd, want, got)
			}
			continue
		}
		if !strings.HasPrefix(got, "-ERR squeeze: "+r.why) || !strings.Contains(got, "(key ") {
			t.Fatalf("%.40q: %q, want an error saying %q", r.cmd, got, r.why)
		}
	}
	if got := c.do("EXISTS", "out"); got != ":0\r\n" {
		t.Fatalf("a refused SORT ... STORE stored: EXISTS = %q", got)
	}
	c.send([]string{"MULTI"}, []string{"SORT", "docs", "ALPHA"}, []string{"SORT", "small", "ALPHA"}, []string{"EXEC"})
	for range 3 {
		c.read()
	}
	if got := c.read(); !strings.Contains(got, "ALPHA would order compressed bytes") || !strings.Contains(got, bulk("a")+bulk("b")+bulk("c")) {
		t.Fatalf("EXEC: %q", got)
	}
}

// TestProxy_SortLongNumbers: numbers long enough to compress well are
// stored raw (the write policy's number rule), so a numeric SORT of them,
// and a SORT BY weights that are long numbers, give Redis's own reply.
func TestProxy_SortLongNumbers(t *testing.T) {
	direct := testutil.StartRedis(t)
	e := startEnv(t)
	ref, c := dialRaw(t, direct.Addr), dialRaw(t, e.addr)
	long := strings.Repeat("1", 300)
	setup := [][]string{
		{"RPUSH", "nums", long, "2", "-" + long, "  " + strings.Repeat("7", 100) + ".5e-3"},
		{"RPUSH", "ids", "a", "b"},
		{"SET", "w_a", strings.Repeat("9", 200)}, {"SET", "w_b", "1"},
		{"HSET", "h_a", "f", "3"}, {"HSET", "h_b", "f", strings.Repeat("0", 150) + "2"},
	}
	for _, cmd := range setup {
		ref.do(cmd...)
		c.do(cmd...)
	}
	for i, cmd := range [][]string{
		{"SORT", "nums"},
		{"SORT", "nums", "DESC", "LIMIT", "1", "2"},
		{"SORT", "ids", "BY", "w_*"},
		{"SORT", "ids", "BY", "h_*->f", "GET", "#", "GET", "w_*"},
		{"LRANGE", "nums", "0", "-1"},
	} {
		if want, got := ref.do(cmd...), c.do(cmd...); want != got {
			t.Fatalf("command %d %.40q: Redis replied %.200q, the proxy %.200q", i, cmd, want, got)
		}
	}
	if got := dialRaw(t, e.redis.Addr).do("GET", "w_a"); got != bulk(strings.Repeat("9", 200)) {
		t.Fatalf("a long number is stored as %.60q, want it raw", got)
	}
}

// FuzzScriptCalls builds the list search and SORT scripts' calls from
// arbitrary arguments: no panic, the scope is a direction and a count of at
// least zero, and every call is one RESP array of the expected length.
func FuzzScriptCalls(f *testing.F) {
	s := newTestServer(f)
	for _, seed := range []string{
		"l\x00x", "l\x00x\x00RANK\x00-2\x00COUNT\x000\x00MAXLEN\x009",
		"l\x00-9223372036854775808\x00x", "l\x00BEFORE\x00p\x00e",
		"l\x00ALPHA\x00BY\x00w_*->f\x00GET\x00#\x00LIMIT\x000\x001\x00STORE\x00d",
		"l\x00RANK\x00", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		rest := strings.Split(in, "\x00")
		for _, name := range []string{"LREM", "LPOS", "LINSERT", "SORT", "SORT_RO"} {
			info := commandTable[strings.ToLower(name)]
			args := append([][]byte{[]byte(name)}, argv(rest...)...)
			c := &client{s: s}
			if listSearchArg(info, args) > 0 {
				dir, need, maxlen := searchScope(info, args)
				if (dir != 1 && dir != -1) || maxlen < 0 {
					t.Fatalf("%q: scope %d %d %d", args, dir, need, maxlen)
				}
				req := c.appendListSearch(nil, info, args, searchKeep, &listForms{same: []string{"a"}}, true)
				if v, left, err := resp.ReadValue(req); err != nil || len(left) != 0 || v.N != 3+1+11+1+len(args) {
					t.Fatalf("%q: list search call %q: %v", args, req, err)
				}
			}
			if by, alpha, patterns, ok := sortNeedsCheck(info, args); ok {
				req := appendSortCheck(nil, by, alpha, patterns, args)
				if v, left, err := resp.ReadValue(req); err != nil || len(left) != 0 || v.N != 7+len(args) {
					t.Fatalf("%q: SORT call %q: %v", args, req, err)
				}
			}
		}
	})
}
