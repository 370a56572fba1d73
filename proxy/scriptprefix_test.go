package proxy

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// withLog sends the proxy's log to buf.
func withLog(buf *lockedBuffer) envOpt {
	return func(s *Server) { s.Logger = slog.New(slog.NewTextHandler(buf, nil)) }
}

// withPrefixTTL sets the time a prefix no script uses stays plain.
func withPrefixTTL(d time.Duration) envOpt {
	return func(s *Server) { s.ScriptPrefixTTL = d }
}

// waitFor waits, at most d, until ok holds.
func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
	}
}

// prefixSeries returns the value of squeeze_proxy_script_prefix_last_use_seconds
// for prefix, and whether reg has that series.
func prefixSeries(t *testing.T, reg *prometheus.Registry, prefix string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "squeeze_proxy_script_prefix_last_use_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == prefix {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// TestScriptPrefixes_Visible: the first script that uses a prefix is
// logged, once, with the prefix, the key and the TTL, and the prefix gets
// a metric series with its last use.
func TestScriptPrefixes_Visible(t *testing.T) {
	var log lockedBuffer
	reg := prometheus.NewRegistry()
	e := startEnv(t, withLog(&log), func(s *Server) { s.Metrics = NewMetrics(reg, codec.DefaultAlgorithm) })
	p := dialRaw(t, e.addr)
	p.do("SET", "session:5", compressible(300, 1))
	for range 3 {
		if got := p.do("EVAL", "return 1", "1", "session:5"); got != ":1\r\n" {
			t.Fatalf("EVAL = %q", got)
		}
	}
	out := log.String()
	if n := strings.Count(out, "prefix=session:"); n != 1 {
		t.Fatalf("the log names prefix session: %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "uncompressed from now on") || !strings.Contains(out, "key=session:5") || !strings.Contains(out, "ttl=") {
		t.Fatalf("log line lacks what or why:\n%s", out)
	}
	v, ok := prefixSeries(t, reg, "session:")
	if !ok || v < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Fatalf("metric for session: = %v, %v; want its last use, now", v, ok)
	}
}

// TestScriptPrefixes_MissingKeyLearnsNothing: a script that only reads a
// missing key leaves no key in Redis and no prefix behind: values of that
// prefix are still compressed.
func TestScriptPrefixes_MissingKeyLearnsNothing(t *testing.T) {
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	if got := p.do("EVAL", "return redis.call('GET', KEYS[1])", "1", "cart:17"); got != "$-1\r\n" {
		t.Fatalf("EVAL = %q", got)
	}
	time.Sleep(200 * time.Millisecond) // the old code saved in the background
	if got := direct.do("KEYS", "*"); got != "*0\r\n" {
		t.Fatalf("keys in Redis after a script read a missing key: %q", got)
	}
	if got := e.srv.ScriptPrefixes(); len(got) != 0 {
		t.Fatalf("prefixes learned: %q", got)
	}
	p.do("SET", "cart:18", compressible(300, 2))
	if !storedFramed(t, direct, "cart:18") {
		t.Fatal("cart:18 stored uncompressed although no script used a value of cart:")
	}
	// A script that writes the key learns the prefix: its value is there.
	p.do("EVAL", "return redis.call('SET', KEYS[1], ARGV[1])", "1", "cart:19", "x")
	if !contains(e.srv.ScriptPrefixes(), "cart:") {
		t.Fatalf("prefixes after a script wrote cart:19: %q", e.srv.ScriptPrefixes())
	}
}

// TestScriptPrefixes_NotRunLearnsNothing: a script Redis refused before
// running it (an unknown SHA-1, a compile error) marks no prefix.
func TestScriptPrefixes_NotRunLearnsNothing(t *testing.T) {
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	p.do("SET", "job:1", compressible(300, 3))
	if got := p.do("EVALSHA", strings.Repeat("ab", 20), "1", "job:1"); !strings.HasPrefix(got, "-NOSCRIPT") {
		t.Fatalf("EVALSHA = %q", got)
	}
	if got := p.do("EVAL", "return (", "1", "job:1"); !strings.HasPrefix(got, "-ERR") {
		t.Fatalf("EVAL = %q", got)
	}
	if got := e.srv.ScriptPrefixes(); len(got) != 0 {
		t.Fatalf("prefixes learned from scripts that never ran: %q", got)
	}
	p.do("SET", "job:2", compressible(300, 4))
	if !storedFramed(t, direct, "job:2") {
		t.Fatal("job:2 stored uncompressed")
	}
}

// TestScriptPrefixes_Expire: a prefix no script used for the TTL is
// forgotten, here and in Redis, and its values are compressed again; one
// that scripts keep using stays.
func TestScriptPrefixes_Expire(t *testing.T) {
	var log lockedBuffer
	reg := prometheus.NewRegistry()
	ttl := 1500 * time.Millisecond
	e := startEnv(t, withPrefixTTL(ttl), withLog(&log), func(s *Server) { s.Metrics = NewMetrics(reg, codec.DefaultAlgorithm) })
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	v := compressible(300, 5)
	p.do("SET", "lock:a", v)
	p.do("SET", "rate:a", v)
	p.do("EVAL", "return redis.call('GET', KEYS[1]) == ARGV[1] and 1 or 0", "1", "lock:a", v)
	p.do("EVAL", "return redis.call('GET', KEYS[1]) == ARGV[1] and 1 or 0", "1", "rate:a", v)
	waitMember(t, direct, ScriptPrefixesKey, "lock:")
	p.do("SET", "lock:b", v)
	if storedFramed(t, direct, "lock:b") {
		t.Fatal("lock:b compressed while scripts use lock:")
	}
	// rate: keeps being used, lock: does not.
	start := time.Now()
	for time.Since(start) < 3*ttl {
		if got := p.do("EVAL", "return redis.call('GET', KEYS[1]) == ARGV[1] and 1 or 0", "1", "rate:a", v); got != ":1\r\n" {
			t.Fatalf("EVAL rate:a = %q", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := e.srv.ScriptPrefixes(); contains(got, "lock:") || !contains(got, "rate:") {
		t.Fatalf("prefixes after 3 TTLs = %q, want rate: only", got)
	}
	if direct.do("SISMEMBER", ScriptPrefixesKey, "lock:") != ":0\r\n" || direct.do("HEXISTS", ScriptPrefixesUsedKey, "lock:") != ":0\r\n" {
		t.Fatal("lock: still in Redis")
	}
	p.do("SET", "lock:c", v)
	p.do("SET", "rate:c", v)
	if !storedFramed(t, direct, "lock:c") || storedFramed(t, direct, "rate:c") {
		t.Fatal("want lock:c compressed again, rate:c plain")
	}
	if !strings.Contains(log.String(), "compressed again") {
		t.Fatalf("no log line for the forgotten prefix:\n%s", log.String())
	}
	if _, ok := prefixSeries(t, reg, "lock:"); ok {
		t.Fatal("the forgotten prefix keeps its metric series")
	}
	// A script that uses lock: again learns it again.
	if got := p.do("EVAL", "return redis.call('GET', KEYS[1]) == ARGV[1] and 1 or 0", "1", "lock:c", v); got != ":1\r\n" {
		t.Fatalf("EVAL lock:c = %q", got)
	}
	if !contains(e.srv.ScriptPrefixes(), "lock:") {
		t.Fatal("lock: not learned again")
	}
}

// TestScriptPrefixes_FlushAll: after FLUSHALL the proxy saves the prefixes
// its scripts still use again.
func TestScriptPrefixes_FlushAll(t *testing.T) {
	e := startEnv(t, withPrefixTTL(2*time.Second))
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	p.do("EVAL", "return redis.call('SET', KEYS[1], ARGV[1])", "1", "rate:u1", "1")
	waitMember(t, direct, ScriptPrefixesKey, "rate:")
	if got := direct.do("FLUSHALL"); got != "+OK\r\n" {
		t.Fatalf("FLUSHALL = %q", got)
	}
	waitMember(t, direct, ScriptPrefixesKey, "rate:")
	if direct.do("HEXISTS", ScriptPrefixesUsedKey, "rate:") != ":1\r\n" {
		t.Fatal("the prefix's last use is not saved again")
	}
}

// TestScriptPrefixes_TwoProxies: a prefix one proxy learns is kept plain by
// another proxy in front of the same Redis before the script's client gets
// its reply, so a lock acquired through the other proxy and released
// through the first (with a script, on the fast path) is released.
func TestScriptPrefixes_TwoProxies(t *testing.T) {
	r := testutil.StartRedis(t)
	a, b := startProxy(t, r.URL(), r), startProxy(t, r.URL(), r)
	pa, pb, direct := dialRaw(t, a.addr), dialRaw(t, b.addr), dialRaw(t, r.Addr)
	// Both proxies have read the (empty) set: the old code read it again
	// only 10 s later.
	waitFor(t, 5*time.Second, "the proxies did not start", func() bool { return pa.do("PING") == "+PONG\r\n" && pb.do("PING") == "+PONG\r\n" })
	// Both listen for the other's prefixes (a busy machine starts the
	// listeners late).
	waitFor(t, 10*time.Second, "the proxies do not listen for prefixes", func() bool {
		return strings.HasSuffix(direct.do("PUBSUB", "NUMSUB", ScriptPrefixesKey), ":2\r\n")
	})
	token := compressible(300, 6)
	for i := range 20 {
		// Acquire and release through A: A learns lock: and knows
		// lock:orders clean.
		if got := pa.do("SET", "lock:orders", token, "NX", "PX", "10000"); got != "+OK\r\n" {
			t.Fatalf("round %d: SET through A = %q", i, got)
		}
		if got := evalsha(t, pa, lockReleaseScript, "1", "lock:orders", token); got != ":1\r\n" {
			t.Fatalf("round %d: release through A = %q", i, got)
		}
		// Acquire through B, release through A.
		if got := pb.do("SET", "lock:orders", token, "NX", "PX", "10000"); got != "+OK\r\n" {
			t.Fatalf("round %d: SET through B = %q", i, got)
		}
		if storedFramed(t, direct, "lock:orders") {
			t.Fatalf("round %d: B stored the lock compressed after A learned lock:", i)
		}
		if got := evalsha(t, pa, lockReleaseScript, "1", "lock:orders", token); got != ":1\r\n" {
			t.Fatalf("round %d: release through A of the lock taken through B = %q", i, got)
		}
	}
	if !contains(b.srv.ScriptPrefixes(), "lock:") {
		t.Fatalf("B's prefixes = %q", b.srv.ScriptPrefixes())
	}
}

// TestScriptPrefixes_Cluster: with one proxy per node of a Redis Cluster,
// a prefix learned through one proxy is kept plain by all of them at
// once, saved in the one set of the cluster without a warning, and a
// script that got -MOVED (never ran) marks nothing.
func TestScriptPrefixes_Cluster(t *testing.T) {
	nodes := testutil.StartCluster(t, 3)
	logs := make([]*lockedBuffer, len(nodes))
	proxies := proxiesFor(t, nodes, func(i int) envOpt { logs[i] = &lockedBuffer{}; return withLog(logs[i]) })
	ctx := context.Background()
	// Each proxy listens for the others' prefixes on its own node: wait
	// until all three listen (a busy machine starts them late), so that
	// what is checked below is the announcement, not the periodic read.
	for i, n := range nodes {
		waitFor(t, 10*time.Second, "proxy "+strconv.Itoa(i)+" listens for prefixes", func() bool {
			r, _ := testutil.Do(n.Addr, "PUBSUB", "NUMSUB", ScriptPrefixesKey)
			return !strings.HasSuffix(r, ":0\r\n")
		})
	}
	// A script sent to a proxy whose node does not own the key: -MOVED,
	// and no prefix anywhere.
	ownerOf := func(key string) int {
		for i, n := range nodes {
			if r, _ := testutil.Do(n.Addr, "EXISTS", key); !strings.HasPrefix(r, "-MOVED") {
				return i
			}
		}
		t.Fatalf("no node owns %s", key)
		return -1
	}
	// A key of another node than the set's: its proxy must reach the set
	// through the cluster.
	setOwner, key, owner := ownerOf(ScriptPrefixesKey), "", -1
	for i := 0; owner < 0 || owner == setOwner; i++ {
		key = "queue:jobs" + strconv.Itoa(i)
		owner = ownerOf(key)
	}
	other := (owner + 1) % len(nodes)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{proxies[0].addr}})
	defer cc.Close()
	v := compressible(300, 7)
	if err := cc.Set(ctx, key, v, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := dialRaw(t, proxies[other].addr).do("EVAL", "return redis.call('GET', KEYS[1])", "1", key); !strings.HasPrefix(got, "-MOVED") {
		t.Fatalf("EVAL on a proxy of another node = %q", got)
	}
	for i, pr := range proxies {
		if got := pr.srv.ScriptPrefixes(); len(got) != 0 {
			t.Fatalf("proxy %d learned %q from a script that got -MOVED", i, got)
		}
	}
	// Through the owner's proxy the script runs: every proxy keeps
	// queue: plain, told by the announcement that crosses the cluster's
	// bus (on a machine busy with other clusters it came later than 5 s
	// in one run of three on Valkey: then the periodic read, every 10 s,
	// tells them; TestScriptPrefixes_TwoProxies holds the announcement to
	// "at once" where no bus is in between).
	if got := dialRaw(t, proxies[owner].addr).do("EVAL", "return redis.call('GET', KEYS[1]) == ARGV[1] and 1 or 0", "1", key, v); got != ":1\r\n" {
		t.Fatalf("EVAL on the owner's proxy = %q", got)
	}
	for i, pr := range proxies {
		waitFor(t, 15*time.Second, "a proxy does not keep queue: plain", func() bool { return contains(pr.srv.ScriptPrefixes(), "queue:") })
		_ = i
	}
	for i := range 30 {
		k := "queue:" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if err := cc.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if got, _ := testutil.Do(n.Addr, "GETRANGE", k, "0", "2"); got == string(magic) {
				t.Fatalf("%s stored compressed", k)
			}
		}
	}
	// One set for the cluster, holding the prefix.
	if got, err := cc.SMembers(ctx, ScriptPrefixesKey).Result(); err != nil || len(got) != 1 || got[0] != "queue:" {
		t.Fatalf("SMEMBERS %s through the cluster = %q, %v", ScriptPrefixesKey, got, err)
	}
	for i := range proxies {
		if strings.Contains(logs[i].String(), "level=WARN") {
			t.Fatalf("proxy %d warned:\n%s", i, logs[i].String())
		}
	}
}

// TestScriptRan: which replies say the script ran (and may have read
// values) and which say Redis, or the proxy, refused it first.
func TestScriptRan(t *testing.T) {
	for reply, want := range map[string]bool{
		":1\r\n": true, "$-1\r\n": true, "*0\r\n": true, "+OK\r\n": true,
		"-ERR user_script:1: Script attempted to access nonexistent global variable 'x'\r\n": true,
		"-LOCKED held by someone else\r\n":                                                   true, // redis.error_reply from the script
		"-ERR squeeze: script read a compressed value at k, which it does not declare\r\n":   true,
		"-MOVED 3999 127.0.0.1:6381\r\n":                                                     false, "-ASK 3999 127.0.0.1:6381\r\n": false,
		"-NOSCRIPT No matching script.\r\n": false, "-CROSSSLOT Keys in request don't hash to the same slot\r\n": false,
		"-NOPERM this user has no permissions\r\n": false, "-ERR Error compiling script (new function): x\r\n": false,
		"-ERR squeeze: decoding the script's keys: -LOADING\r\n": false, "-TRYAGAIN\r\n": false,
		"-ERR Number of keys can't be greater than number of args\r\n": false, "": false,
	} {
		if got := scriptRan([]byte(reply)); got != want {
			t.Errorf("scriptRan(%q) = %v, want %v", reply, got, want)
		}
	}
}

// TestScriptPrefixes_MultiAndSelect: a script queued in MULTI learns its
// prefix when queued; one in another database finds its key there.
func TestScriptPrefixes_MultiAndSelect(t *testing.T) {
	e := startEnv(t)
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	v := compressible(300, 9)
	p.do("SET", "tx:1", v)
	p.do("MULTI")
	if got := p.do("EVAL", "return redis.call('GET', KEYS[1]) == ARGV[1] and 1 or 0", "1", "tx:1", v); got != "+QUEUED\r\n" {
		t.Fatalf("EVAL in MULTI = %q", got)
	}
	if got := p.do("EXEC"); got != "*1\r\n:1\r\n" {
		t.Fatalf("EXEC = %q", got)
	}
	if !contains(e.srv.ScriptPrefixes(), "tx:") {
		t.Fatalf("prefixes after MULTI = %q", e.srv.ScriptPrefixes())
	}
	p.do("SELECT", "3")
	p.do("SET", "db3:1", v)
	// In database 0 there is no db3:1: the check must look in the client's.
	if got := p.do("EVAL", "return redis.call('GET', KEYS[1]) == ARGV[1] and 1 or 0", "1", "db3:1", v); got != ":1\r\n" {
		t.Fatalf("EVAL in db 3 = %q", got)
	}
	if !contains(e.srv.ScriptPrefixes(), "db3:") {
		t.Fatalf("prefixes after a script in db 3 = %q", e.srv.ScriptPrefixes())
	}
	waitMember(t, direct, ScriptPrefixesKey, "db3:")
}

// TestScriptPrefixes_RestartKeepsLastUse: a proxy that starts reads each
// prefix's last use from Redis: one unused for longer than its TTL is not
// kept plain, and is removed from Redis; one used lately is.
func TestScriptPrefixes_RestartKeepsLastUse(t *testing.T) {
	r := testutil.StartRedis(t)
	direct := dialRaw(t, r.Addr)
	old := strconv.FormatInt(time.Now().Add(-2*time.Hour).UnixMilli(), 10)
	recent := strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)
	direct.do("SADD", ScriptPrefixesKey, "stale:", "fresh:")
	direct.do("HSET", ScriptPrefixesUsedKey, "stale:", old, "fresh:", recent)
	e := startProxy(t, r.URL(), r, withPrefixTTL(time.Hour))
	waitFor(t, 5*time.Second, "the proxy did not load fresh:", func() bool { return contains(e.srv.ScriptPrefixes(), "fresh:") })
	waitFor(t, 5*time.Second, "stale: is still in Redis", func() bool { return direct.do("SISMEMBER", ScriptPrefixesKey, "stale:") == ":0\r\n" })
	if got := e.srv.ScriptPrefixes(); contains(got, "stale:") {
		t.Fatalf("prefixes = %q: stale: was unused for longer than the TTL", got)
	}
	uses := e.srv.ScriptPrefixUses()
	if len(uses) != 1 || strconv.FormatInt(uses[0].LastUsed.UnixMilli(), 10) != recent {
		t.Fatalf("uses = %+v, want fresh: last used at %s", uses, recent)
	}
	p := dialRaw(t, e.addr)
	p.do("SET", "stale:1", compressible(300, 10))
	p.do("SET", "fresh:1", compressible(300, 10))
	if !storedFramed(t, direct, "stale:1") || storedFramed(t, direct, "fresh:1") {
		t.Fatal("want stale:1 compressed, fresh:1 plain")
	}
}

// TestScriptPrefixes_ClusterReplicas: with a proxy in front of every node,
// replicas too (the documented deployment), the proxies of the replicas
// learn a prefix at once as well, and read and save the cluster's one set
// through its master without a warning; after FLUSHALL on every master the
// set is saved again.
func TestScriptPrefixes_ClusterReplicas(t *testing.T) {
	cl := testutil.StartClusterWith(t, testutil.ClusterOptions{Masters: 3, Replicas: 1})
	nodes := cl.Nodes()
	logs := make([]*lockedBuffer, len(nodes))
	proxies := proxiesFor(t, nodes, func(i int) envOpt { logs[i] = &lockedBuffer{}; return withLog(logs[i]) },
		func(int) envOpt { return withPrefixTTL(2 * time.Second) }) // reads the set every 500 ms
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{proxies[0].addr}})
	defer cc.Close()
	v := compressible(300, 11)
	key := "cart:17"
	if err := cc.Set(ctx, key, v, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := cc.Eval(ctx, "return redis.call('GET', KEYS[1]) == ARGV[1] and 1 or 0", []string{key}, v).Int(); err != nil || got != 1 {
		t.Fatalf("EVAL = %d, %v", got, err)
	}
	for i, pr := range proxies {
		waitFor(t, time.Second, "proxy "+strconv.Itoa(i)+" does not keep cart: plain", func() bool { return contains(pr.srv.ScriptPrefixes(), "cart:") })
	}
	for _, m := range cl.Masters {
		testutil.Do(m.Addr, "FLUSHALL")
	}
	waitFor(t, 5*time.Second, "the set was not saved again after FLUSHALL", func() bool {
		got, _ := cc.SMembers(ctx, ScriptPrefixesKey).Result()
		return len(got) == 1 && got[0] == "cart:"
	})
	for i := range proxies {
		if strings.Contains(logs[i].String(), "level=WARN") {
			t.Fatalf("proxy %d warned:\n%s", i, logs[i].String())
		}
	}
}

// TestScriptPrefixes_ConnectionsClosed: the proxy's own connections for
// the shared prefixes closed by Redis (CLIENT KILL, an idle timeout) are
// dialed again: the next prefix is announced and saved without a warning.
func TestScriptPrefixes_ConnectionsClosed(t *testing.T) {
	var log lockedBuffer
	e := startEnv(t, withLog(&log))
	p, direct := dialRaw(t, e.addr), dialRaw(t, e.redis.Addr)
	v := compressible(300, 12)
	p.do("SET", "k1:a", v)
	p.do("EVAL", "return redis.call('GET', KEYS[1]) == ARGV[1] and 1 or 0", "1", "k1:a", v)
	waitMember(t, direct, ScriptPrefixesKey, "k1:")
	if got := direct.do("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"); !strings.HasPrefix(got, ":") || got == ":0\r\n" {
		t.Fatalf("CLIENT KILL = %q", got)
	}
	p = dialRaw(t, e.addr)
	pingThrough(t, p)
	// The check that a key holds a value runs on a new connection too: a
	// missing key still teaches nothing.
	if got := p.do("EVAL", "return redis.call('GET', KEYS[1])", "1", "k3:a"); got != "$-1\r\n" {
		t.Fatalf("EVAL of a missing key = %q", got)
	}
	if contains(e.srv.ScriptPrefixes(), "k3:") {
		t.Fatal("k3: learned from a missing key")
	}
	direct.do("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
	p = dialRaw(t, e.addr)
	pingThrough(t, p)
	p.do("SET", "k2:a", v)
	if got := p.do("EVAL", "return redis.call('GET', KEYS[1]) == ARGV[1] and 1 or 0", "1", "k2:a", v); got != ":1\r\n" {
		t.Fatalf("EVAL after CLIENT KILL = %q", got)
	}
	if direct.do("SISMEMBER", ScriptPrefixesKey, "k2:") != ":1\r\n" {
		t.Fatal("k2: not saved before the script's reply")
	}
	if out := log.String(); strings.Contains(out, "not saved") || strings.Contains(out, "not announced") {
		t.Fatalf("warned:\n%s", out)
	}
}

// pingThrough sends PING through the proxy until it answers PONG: the
// first commands after the proxy's shared connections were killed get an
// upstream error (they may have run), then it dials again.
func pingThrough(t *testing.T, p *rawConn) {
	t.Helper()
	waitFor(t, 5*time.Second, "the proxy does not answer PING", func() bool { return p.do("PING") == "+PONG\r\n" })
}
