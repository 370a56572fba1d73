package proxy

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	prom "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

func TestParseUpstream_Sentinel(t *testing.T) {
	for _, tt := range []struct {
		in, err   string
		sentinels []string
		master    string
		db        int
		user, pw  string
		sentPW    string
	}{
		{in: "sentinel://10.0.0.1:26379,10.0.0.2/mymaster", sentinels: []string{"10.0.0.1:26379", "10.0.0.2:26379"}, master: "mymaster"},
		{in: "sentinel://app:pw@h:1/cache/3?sentinel_password=sp", sentinels: []string{"h:1"}, master: "cache", db: 3, user: "app", pw: "pw", sentPW: "sp"},
		{in: "sentinel://secret@h:1/m", sentinels: []string{"h:1"}, master: "m", pw: "secret"},
		{in: "sentinel://h:1", err: "no master name"},
		{in: "sentinel:///m", err: "no sentinel host"},
		{in: "sentinel://h:1/m/x", err: "not a number"},
	} {
		u, err := ParseUpstream(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || strings.Join(u.Sentinels, ",") != strings.Join(tt.sentinels, ",") || u.Master != tt.master || u.DB != tt.db ||
			u.Username != tt.user || u.Password != tt.pw || u.SentinelPassword != tt.sentPW {
			t.Errorf("%s: %+v, %v", tt.in, u, err)
		}
	}
}

// TestProxy_Sentinel: behind Sentinel the proxy finds the master through
// it, and follows a failover (SENTINEL FAILOVER with one replica): it hears
// +switch-master, and the next write reaches the new master, compressed.
func TestProxy_Sentinel(t *testing.T) {
	master := testutil.StartRedis(t)
	host, port, _ := net.SplitHostPort(master.Addr)
	replica := testutil.StartRedis(t, "--replicaof", host, port)
	sen := testutil.StartSentinel(t, "mymaster", master.Addr)
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	// One connection per command: the failover kills normal clients.
	do := func(addr string, args ...string) string {
		c := dialRaw(t, addr)
		defer c.nc.Close()
		return c.do(args...)
	}
	_, replicaPort, _ := net.SplitHostPort(replica.Addr)
	waitFor("the replica to sync", func() bool {
		return strings.Contains(do(replica.Addr, "INFO", "replication"), "master_link_status:up")
	})
	waitFor("the sentinel to know the replica", func() bool {
		return strings.Contains(do(sen.Addr, "SENTINEL", "REPLICAS", "mymaster"), replicaPort)
	})
	m := NewMetrics(prometheus.NewRegistry(), codec.DefaultAlgorithm)
	e := startProxy(t, "sentinel://"+sen.Addr+"/mymaster", master, func(s *Server) { s.Metrics = m })
	p := dialRaw(t, e.addr)
	big := compressible(20000, 11)
	if got := p.do("SET", "before", big); got != "+OK\r\n" {
		t.Fatalf("SET through the sentinel's master: %q", got)
	}
	if got := storedCodec(t, do(master.Addr, "GET", "before")); got == "raw" {
		t.Fatal("stored raw on the master")
	}
	if r := do(sen.Addr, "SENTINEL", "FAILOVER", "mymaster"); r != "+OK\r\n" {
		t.Fatalf("SENTINEL FAILOVER: %q", r)
	}
	// The proxy hears +switch-master and closes its connections: the next
	// write reaches the new master at once, although the old one is not
	// reconfigured yet.
	waitFor("the proxy to hear of the failover", func() bool { return prom.ToFloat64(m.failovers) == 1 })
	if got := p.do("SET", "after", big); got != "+OK\r\n" {
		t.Fatalf("SET after the failover: %q", got)
	}
	if got := storedCodec(t, do(replica.Addr, "GET", "after")); got == "raw" {
		t.Error("stored raw on the new master")
	}
	if got := p.do("GET", "after"); got != bulk(big) {
		t.Errorf("GET after the failover: %.60q", got)
	}
}

// TestProxy_SentinelReadonly: a connection to a master that became a
// replica without the connection being killed (REPLICAOF on it) answers
// -READONLY, which the client sees as Redis sent it; the proxy then closes
// that connection, so the next command asks the Sentinel again.
func TestProxy_SentinelReadonly(t *testing.T) {
	master, other := testutil.StartRedis(t), testutil.StartRedis(t)
	sen := testutil.StartSentinel(t, "m", master.Addr)
	e := startProxy(t, "sentinel://"+sen.Addr+"/m", master)
	p := dialRaw(t, e.addr)
	if got := p.do("SET", "a", "1"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	admin := dialRaw(t, master.Addr)
	proxyConns := func() []string { // ids of the proxy's connections that ran SET
		var ids []string
		for _, line := range strings.Split(admin.do("CLIENT", "LIST"), "\n") {
			if strings.Contains(line, "cmd=set") {
				ids = append(ids, strings.Fields(line)[0])
			}
		}
		return ids
	}
	before := proxyConns()
	for try := 0; len(before) != 1 && try < 5; try++ {
		// The proxy's own reads (the script prefixes, re-read every 10 s)
		// may have run on the connection since: write again and look.
		p.do("SET", "a", "1")
		before = proxyConns()
	}
	if len(before) != 1 {
		t.Fatalf("proxy connections that ran SET: %q", before)
	}
	host, port, _ := net.SplitHostPort(other.Addr)
	if got := admin.do("REPLICAOF", host, port); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := p.do("SET", "b", "2"); !strings.HasPrefix(got, "-READONLY") {
		t.Fatalf("SET on a replica through the proxy: %q, want Redis's -READONLY", got)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ids := strings.Join(proxyConns(), " ")
		if !strings.Contains(ids+" ", before[0]+" ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy kept its connection %s to the replica", before[0])
		}
	}
}

// TestProxy_SentinelPassword: behind Sentinels that require a password,
// the proxy with sentinel_password finds the master; with a wrong one,
// its watcher logs the Sentinel's own error, intact (it was once the
// next reply's text written over the end of it), and no log line shows
// either password.
func TestProxy_SentinelPassword(t *testing.T) {
	master := testutil.StartRedis(t)
	sen := testutil.StartSentinel(t, "m", master.Addr)
	if got := dialRaw(t, sen.Addr).do("ACL", "SETUSER", "default", "resetpass", ">sentpw9"); got != "+OK\r\n" {
		t.Fatalf("ACL SETUSER on the Sentinel: %q", got)
	}
	var mu sync.Mutex
	var good, bad strings.Builder
	e := startProxy(t, "sentinel://"+sen.Addr+"/m?sentinel_password=sentpw9", master,
		func(s *Server) { s.Logger = newTestLogger(&mu, &good) })
	if got := dialRaw(t, e.addr).do("SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET with the Sentinels' password: %q", got)
	}
	w := startProxy(t, "sentinel://"+sen.Addr+"/m?sentinel_password=wrong9", master,
		func(s *Server) { s.Logger = newTestLogger(&mu, &bad) })
	if got := dialRaw(t, w.addr).do("SET", "k", "v"); !strings.Contains(got, "WRONGPASS") {
		t.Errorf("SET with a wrong Sentinel password: %q, want the Sentinel's WRONGPASS", got)
	}
	want := `err="WRONGPASS invalid username-password pair or user is disabled."`
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		log := bad.String()
		mu.Unlock()
		if strings.Contains(log, "sentinel watch lost") {
			if !strings.Contains(log, want) {
				t.Errorf("the watcher logs %q, want %s", log, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watcher logged nothing in 10 s: %q", log)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, log := range []string{good.String(), bad.String()} {
		if strings.Contains(log, "sentpw9") || strings.Contains(log, "wrong9") {
			t.Errorf("a log line shows a password: %q", log)
		}
	}
}
