package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/compact"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

func withCodec(name string) envOpt {
	return func(s *Server) {
		a, err := codec.ParseAlgorithm(name)
		if err != nil {
			panic(err)
		}
		enc, err := codec.NewEncoder(a, codec.WithMinSize(0))
		if err != nil {
			panic(err)
		}
		s.Encoder = enc
	}
}

// mixedSetup starts a reference Redis, and another Redis with a zstd:1
// proxy and an s2 proxy in front of it, and connects to all four.
func mixedSetup(t *testing.T) (ref, bare, old, cur *rawConn) {
	t.Helper()
	direct := testutil.StartRedis(t)
	r := testutil.StartRedis(t)
	oldEnv := startProxy(t, r.URL(), r, withCodec("zstd:1"))
	curEnv := startProxy(t, r.URL(), r, withCodec("s2"))
	return dialRaw(t, direct.Addr), dialRaw(t, r.Addr), dialRaw(t, oldEnv.addr), dialRaw(t, curEnv.addr)
}

// mixedList fills key l of the Redis behind old and cur with the values of
// want, written in several forms: through a proxy with zstd:1, stored raw
// before any proxy (bare), and through a proxy with s2. The reference gets
// the same values raw.
func mixedList(t *testing.T, ref, bare, old, cur *rawConn, key string, want []string) {
	t.Helper()
	writers := []*rawConn{old, bare, cur}
	for i, v := range want {
		if r := ref.do("RPUSH", key, v); !strings.HasPrefix(r, ":") {
			t.Fatalf("RPUSH direct: %q", r)
		}
		if r := writers[i%len(writers)].do("RPUSH", key, v); !strings.HasPrefix(r, ":") {
			t.Fatalf("RPUSH: %q", r)
		}
	}
}

// TestProxy_ListSearchAcrossSettings: LPOS, LREM and LINSERT find list
// elements by value, whatever settings stored them, with the replies Redis
// gives on the same values stored plain, in and out of MULTI and in RESP3.
func TestProxy_ListSearchAcrossSettings(t *testing.T) {
	ref, bare, old, cur := mixedSetup(t)

	v1, v2, v3, v4 := compressible(300, 1), compressible(300, 2), compressible(400, 3), compressible(500, 4)
	mixedList(t, ref, bare, old, cur, "l", []string{v1, v2, v1, v3, v1, "x", v2, v1})
	// The stored forms differ: Redis's own LPOS misses v1 stored by zstd:1.
	if got := bare.do("LPOS", "l", v1); got != "$-1\r\n" && got == ref.do("LPOS", "l", v1) {
		t.Fatalf("test setup: raw LPOS found the zstd:1 form (%q)", got)
	}

	cmds := [][]string{
		{"LPOS", "l", v1},
		{"LPOS", "l", v1, "RANK", "2"},
		{"LPOS", "l", v1, "RANK", "-1"},
		{"LPOS", "l", v1, "COUNT", "0"},
		{"LPOS", "l", v1, "COUNT", "2", "MAXLEN", "3"},
		{"LPOS", "l", v2, "RANK", "0"},
		{"LPOS", "l", v1, "RANK", "-2", "COUNT", "0", "MAXLEN", "5"},
		{"LPOS", "l", v1, "rank", "2", "count", "2"},
		{"LPOS", "l", v1, "COUNT", "-1"},
		{"LPOS", "l", v1, "MAXLEN", "1"},
		{"LPOS", "l", v1, "RANK"},
		{"LPOS", "l", v1, "BOGUS", "1"},
		{"LPOS", "l", "not there"},
		{"LPOS", "nokey", v1},
		{"LPOS", "l", "x"},
		{"LRANGE", "l", "0", "-1"}, // LPOS changed nothing
		{"LINSERT", "l", "BEFORE", v3, v4},
		{"LINSERT", "l", "AFTER", v2, v1},
		{"LINSERT", "l", "BEFORE", "not there", v1},
		{"LPOS", "l", v1, "RANK", "2", "COUNT", "9223372036854775807"},
		{"LPOS", "l", v1, "RANK", "-4611686018427387904"},
		{"LREM", "l", "1", v1},
		{"LREM", "l", "2", v1},
		{"LREM", "l", "-9223372036854775808", v2},
		{"LRANGE", "l", "0", "-1"},
		{"MULTI"}, {"LPOS", "l", v1, "COUNT", "0"}, {"LREM", "l", "0", v1}, {"LPOS", "l", v1}, {"LRANGE", "l", "0", "-1"}, {"EXEC"},
		{"SET", "s", "string"},
		{"LPOS", "s", v1},
		{"LREM", "s", "0", v1},
		{"LINSERT", "s", "BEFORE", v1, v2},
		{"LREM", "l", "notanumber", v1},
		{"LPOS", "l"},
		{"LREM", "l", "1"},
		{"HELLO", "3"},
		{"LPOS", "l", "not there"},
		{"LPOS", "l", v2, "COUNT", "0"},
		{"LPOS", "l", v3},
		{"MULTI"}, {"LPOS", "l", "not there"}, {"LPOS", "l", v4}, {"EXEC"},
	}
	for i, c := range cmds {
		want, got := ref.do(c...), cur.do(c...)
		want, got = clientID.ReplaceAllString(want, "id:N"), clientID.ReplaceAllString(got, "id:N")
		if want != got {
			t.Fatalf("command %d %.40q: Redis replied %.200q, the proxy %.200q", i, c, want, got)
		}
	}
}

// TestProxy_ListSearchLong: a list longer than the script's LRANGE chunks,
// searched from both ends.
func TestProxy_ListSearchLong(t *testing.T) {
	ref, bare, old, cur := mixedSetup(t)
	vals := make([]string, 1300)
	for i := range vals {
		vals[i] = compressible(200+i%7, i%5) // five values, some repeated lengths
	}
	mixedList(t, ref, bare, old, cur, "big", vals)
	v := vals[3]
	cmds := [][]string{
		{"LPOS", "big", v, "COUNT", "0"},
		{"LPOS", "big", v, "RANK", "-3"},
		{"LPOS", "big", v, "RANK", "100", "COUNT", "5"},
		{"LPOS", "big", v, "RANK", "-200", "COUNT", "3", "MAXLEN", "1100"},
		{"LREM", "big", "-600", v},
		{"LINSERT", "big", "AFTER", v, "marker"},
		{"LREM", "big", "0", v},
		{"LLEN", "big"},
		{"LRANGE", "big", "0", "-1"},
	}
	for i, c := range cmds {
		if want, got := ref.do(c...), cur.do(c...); want != got {
			t.Fatalf("command %d %.60q: Redis replied %.200q, the proxy %.200q", i, c, want, got)
		}
	}
}

// TestProxy_StoredListSearch: with StoredListSearch the proxy sends Redis's
// commands as they are, and a value stored in another form is not found.
func TestProxy_StoredListSearch(t *testing.T) {
	r := testutil.StartRedis(t)
	oldEnv := startProxy(t, r.URL(), r, withCodec("zstd:1"))
	curEnv := startProxy(t, r.URL(), r, withCodec("s2"), func(s *Server) { s.StoredListSearch = true })
	exactEnv := startProxy(t, r.URL(), r, withCodec("s2"))
	old, cur, exact := dialRaw(t, oldEnv.addr), dialRaw(t, curEnv.addr), dialRaw(t, exactEnv.addr)
	v := compressible(300, 5)
	old.do("RPUSH", "l", v)
	if got := cur.do("LPOS", "l", v); got != "$-1\r\n" {
		t.Fatalf("stored search: LPOS = %q, want a miss", got)
	}
	if got := exact.do("LPOS", "l", v); got != ":0\r\n" {
		t.Fatalf("exact search: LPOS = %q, want :0", got)
	}
}

// TestProxy_ListSearchCorrupt: a frame that may hold the searched value but
// does not decode gives an error naming the key, and the list is left as
// it was.
func TestProxy_ListSearchCorrupt(t *testing.T) {
	r := testutil.StartRedis(t)
	e := startProxy(t, r.URL(), r, withCodec("s2"))
	bare, c := dialRaw(t, r.Addr), dialRaw(t, e.addr)
	v := compressible(300, 6)
	a, err := codec.ParseAlgorithm("zstd:1")
	if err != nil {
		t.Fatal(err)
	}
	enc, err := codec.NewEncoder(a, codec.WithMinSize(0))
	if err != nil {
		t.Fatal(err)
	}
	frame := enc.AppendEncode(nil, []byte(v))
	h, err := codec.ParseHeader(frame)
	if err != nil || !h.HasChecksum {
		t.Fatalf("header %+v, %v", h, err)
	}
	frame[len(frame)-3] ^= 0xff // header intact: same length and checksum
	bare.do("RPUSH", "lc", "first", string(frame))
	before := bare.do("LRANGE", "lc", "0", "-1")
	for _, cmd := range [][]string{{"LPOS", "lc", v}, {"LREM", "lc", "0", v}, {"LINSERT", "lc", "AFTER", v, "x"}} {
		got := c.do(cmd...)
		if !strings.HasPrefix(got, "-ERR squeeze: "+cmd[0]+`: stored value of key "lc" cannot be decoded`) {
			t.Errorf("%s: %q, want an error naming the key", cmd[0], got)
		}
	}
	if after := bare.do("LRANGE", "lc", "0", "-1"); after != before {
		t.Fatalf("the list changed: %q", after)
	}
}

// TestProxy_ScriptsByName: the proxy's scripts run by EVALSHA, and by their
// text again when Redis has none cached (a new or restarted Redis, SCRIPT
// FLUSH).
func TestProxy_ScriptsByName(t *testing.T) {
	e := startEnv(t)
	c, bare := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	v := compressible(300, 7)
	c.do("SET", "s", v)
	c.do("RPUSH", "l", "a", v)
	for round := 0; round < 3; round++ {
		if got := c.do("STRLEN", "s"); got != ":300\r\n" {
			t.Fatalf("round %d: STRLEN = %q", round, got)
		}
		if got := c.do("GETRANGE", "s", "0", "5"); got != bulk(v[:6]) {
			t.Fatalf("round %d: GETRANGE = %q", round, got)
		}
		if got := c.do("LPOS", "l", v); got != ":1\r\n" {
			t.Fatalf("round %d: LPOS = %q", round, got)
		}
		if got := bare.do("SCRIPT", "EXISTS", inspectSHA, listSearchSHA); got != "*2\r\n:1\r\n:1\r\n" {
			t.Fatalf("round %d: SCRIPT EXISTS = %q, want both cached", round, got)
		}
		if round == 1 {
			bare.do("SCRIPT", "FLUSH")
		}
	}
}

// TestProxy_ListSearchAfterCompact: list elements written through the proxy
// and then recompressed by squeeze compact are still found by value.
func TestProxy_ListSearchAfterCompact(t *testing.T) {
	direct := testutil.StartRedis(t)
	e := startEnv(t, withCodec("s2"))
	ref, c := dialRaw(t, direct.Addr), dialRaw(t, e.addr)
	vals := make([]string, 40)
	for i := range vals {
		vals[i] = compressible(1000+i%4, i%4)
		ref.do("RPUSH", "l", vals[i])
		c.do("RPUSH", "l", vals[i])
	}
	rdb := redis.NewClient(&redis.Options{Addr: e.redis.Addr})
	defer rdb.Close()
	a, err := codec.ParseAlgorithm("zstd:9")
	if err != nil {
		t.Fatal(err)
	}
	enc, err := codec.NewEncoder(a)
	if err != nil {
		t.Fatal(err)
	}
	st, err := compact.Run(context.Background(), rdb, compact.Options{Encoder: enc})
	if err != nil || st.Rewritten != 1 {
		t.Fatalf("compact: %+v, %v", st, err)
	}
	for i, cmd := range [][]string{
		{"LPOS", "l", vals[2], "COUNT", "0"},
		{"LPOS", "l", vals[3], "RANK", "-2"},
		{"LINSERT", "l", "BEFORE", vals[1], "new"},
		{"LREM", "l", "3", vals[0]},
		{"LRANGE", "l", "0", "-1"},
	} {
		if want, got := ref.do(cmd...), c.do(cmd...); want != got {
			t.Fatalf("command %d %.30q: Redis replied %.200q, the proxy %.200q", i, cmd, want, got)
		}
	}
}
