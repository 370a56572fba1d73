package proxy

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
	"github.com/squeeze-kv/squeeze/resp"
)

// startClusterProxies starts a 3-master Redis Cluster and a proxy in front
// of each node, every proxy with the map of all of them.
func startClusterProxies(t *testing.T) (nodes []*testutil.Redis, proxies []*env) {
	nodes = testutil.StartCluster(t, 3)
	return nodes, proxiesFor(t, nodes)
}

// proxiesFor starts a proxy in front of each of a cluster's nodes, every
// proxy with the map of all of them, and opts applied to the i-th by
// opts(i).
func proxiesFor(t *testing.T, nodes []*testutil.Redis, opts ...func(i int) envOpt) (proxies []*env) {
	m := &ClusterMap{Nodes: map[string]string{}}
	lns := make([]net.Listener, len(nodes))
	for i, n := range nodes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		m.Nodes[n.Addr] = ln.Addr().String()
	}
	for i, n := range nodes {
		s := &Server{Upstream: n.URL(), Logger: quietLogger(), Cluster: m}
		withMinSize(0)(s)
		for _, o := range opts {
			o(i)(s)
		}
		proxies = append(proxies, serveOn(t, s, lns[i], n))
	}
	return proxies
}

// TestProxy_Cluster: a cluster client (go-redis) given one proxy's address
// learns the topology through it, reaches every node through its proxy,
// and reads back what it wrote, while the nodes hold compressed frames.
// Redirections and CLUSTER SLOTS, SHARDS and NODES name only proxies, in
// RESP2 and RESP3.
func TestProxy_Cluster(t *testing.T) {
	nodes, proxies := startClusterProxies(t)
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{proxies[0].addr}})
	defer cc.Close()
	for i := range 60 {
		k := "doc:" + strconv.Itoa(i)
		if err := cc.Set(ctx, k, compressible(2000, i), 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		if err := cc.HSet(ctx, "h:"+strconv.Itoa(i), "f", compressible(500, i)).Err(); err != nil {
			t.Fatalf("HSET: %v", err)
		}
	}
	for i := range 60 {
		k := "doc:" + strconv.Itoa(i)
		if got, err := cc.Get(ctx, k).Result(); err != nil || got != compressible(2000, i) {
			t.Fatalf("GET %s: %d bytes, %v", k, len(got), err)
		}
		if got, err := cc.HGet(ctx, "h:"+strconv.Itoa(i), "f").Result(); err != nil || got != compressible(500, i) {
			t.Fatalf("HGET: %d bytes, %v", len(got), err)
		}
		if n, err := cc.StrLen(ctx, k).Result(); err != nil || n != 2000 {
			t.Fatalf("STRLEN %s = %d, %v", k, n, err)
		}
	}
	for _, n := range nodes {
		size, err := testutil.Do(n.Addr, "DBSIZE")
		if err != nil || size == ":0" {
			t.Fatalf("node %s holds no keys (%q, %v): the client did not reach it", n.Addr, size, err)
		}
	}
	// Every node stores frames: read doc:* directly from its owner.
	framed := 0
	for _, n := range nodes {
		for i := range 60 {
			v, err := testutil.Do(n.Addr, "GET", "doc:"+strconv.Itoa(i))
			if err == nil && !strings.HasPrefix(v, "-MOVED") && v != "$-1" {
				if !codec.IsFramed([]byte(v)) {
					t.Fatalf("doc:%d on %s is stored raw", i, n.Addr)
				}
				framed++
			}
		}
	}
	if framed != 60 {
		t.Fatalf("found %d of 60 keys on their nodes", framed)
	}

	proxyAddr := map[string]bool{}
	for _, p := range proxies {
		proxyAddr[p.addr] = true
	}
	// -MOVED names the proxy in front of the key's node.
	c := dialRaw(t, proxies[0].addr)
	moved := 0
	for i := range 60 {
		reply := c.do("GET", "doc:"+strconv.Itoa(i))
		if !strings.HasPrefix(reply, "-MOVED ") {
			continue
		}
		moved++
		f := strings.Fields(strings.TrimSpace(reply))
		if len(f) != 3 || !proxyAddr[f[2]] || f[2] == proxies[0].addr {
			t.Fatalf("GET through proxy 0: %q, want -MOVED to another proxy", reply)
		}
	}
	if moved == 0 {
		t.Fatal("no key of 60 lives on another node")
	}
	// redis-cli -c follows the rewritten -MOVED from proxy to proxy.
	if cli, err := exec.LookPath("redis-cli"); err == nil {
		host, port, _ := net.SplitHostPort(proxies[0].addr)
		for i := range 10 {
			out, err := exec.Command(cli, "-c", "-h", host, "-p", port, "GET", "doc:"+strconv.Itoa(i)).Output()
			if err != nil || strings.TrimSuffix(string(out), "\n") != compressible(2000, i) {
				t.Fatalf("redis-cli -c GET doc:%d: %.80q %v", i, out, err)
			}
		}
	}
	// Topology replies name proxies, never nodes.
	for _, proto := range []string{"2", "3"} {
		c := dialRaw(t, proxies[1].addr)
		c.do("HELLO", proto)
		for _, cmd := range [][]string{{"CLUSTER", "SLOTS"}, {"CLUSTER", "SHARDS"}, {"CLUSTER", "NODES"}} {
			reply := c.do(cmd...)
			if strings.HasPrefix(reply, "-") {
				t.Fatalf("RESP%s %s: %q", proto, cmd, reply)
			}
			for i, n := range nodes {
				_, nport, _ := net.SplitHostPort(n.Addr)
				_, pport, _ := net.SplitHostPort(proxies[i].addr)
				if strings.Contains(reply, ":"+nport+"\r\n") || strings.Contains(reply, "127.0.0.1:"+nport+"@") {
					t.Fatalf("RESP%s %s names node port %s: %q", proto, cmd, nport, reply)
				}
				if !strings.Contains(reply, ":"+pport+"\r\n") && !strings.Contains(reply, "127.0.0.1:"+pport+"@") {
					t.Fatalf("RESP%s %s does not name proxy port %s: %q", proto, cmd, pport, reply)
				}
			}
		}
		// In MULTI the topology reply is rewritten inside EXEC.
		c.send([]string{"MULTI"}, []string{"CLUSTER", "SLOTS"}, []string{"EXEC"})
		c.read()
		c.read()
		if exec := c.read(); strings.Contains(exec, nodes[2].Addr[len("127.0.0.1:"):]+"\r\n") {
			t.Fatalf("RESP%s EXEC names a node: %q", proto, exec)
		}
	}
}

// TestProxy_ClusterAsk: during a slot migration, -ASK names the proxy in
// front of the importing node, where ASKING then lets the command run.
func TestProxy_ClusterAsk(t *testing.T) {
	nodes, proxies := startClusterProxies(t)
	key := "ask-me"
	owner, other := -1, -1
	for i, n := range nodes {
		if r, _ := testutil.Do(n.Addr, "GET", key); !strings.HasPrefix(r, "-MOVED") {
			owner = i
		} else if other < 0 {
			other = i
		}
	}
	slot, _ := testutil.Do(nodes[owner].Addr, "CLUSTER", "KEYSLOT", key)
	slot = strings.TrimPrefix(slot, ":")
	ownerID, _ := testutil.Do(nodes[owner].Addr, "CLUSTER", "MYID")
	otherID, _ := testutil.Do(nodes[other].Addr, "CLUSTER", "MYID")
	if r, err := testutil.Do(nodes[other].Addr, "CLUSTER", "SETSLOT", slot, "IMPORTING", ownerID); r != "+OK" {
		t.Fatalf("IMPORTING: %q %v", r, err)
	}
	if r, err := testutil.Do(nodes[owner].Addr, "CLUSTER", "SETSLOT", slot, "MIGRATING", otherID); r != "+OK" {
		t.Fatalf("MIGRATING: %q %v", r, err)
	}
	reply := dialRaw(t, proxies[owner].addr).do("GET", key) // missing here: ask the importer
	if want := "-ASK " + slot + " " + proxies[other].addr + "\r\n"; reply != want {
		t.Fatalf("GET during migration: %q, want %q", reply, want)
	}
	c := dialRaw(t, proxies[other].addr)
	if r := c.do("ASKING"); r != "+OK\r\n" {
		t.Fatalf("ASKING: %q", r)
	}
	if r := c.do("SET", key, compressible(300, 1)); r != "+OK\r\n" {
		t.Fatalf("SET after ASKING: %q", r)
	}
}

// TestProxy_ClusterUnmapped: a proxy without a cluster map refuses the
// topology replies and redirections with an error that says what to set;
// a map that misses a node refuses with an error naming it.
func TestProxy_ClusterUnmapped(t *testing.T) {
	nodes := testutil.StartCluster(t, 2)
	bare := startProxy(t, nodes[0].URL(), nodes[0])
	c := dialRaw(t, bare.addr)
	for _, cmd := range [][]string{{"CLUSTER", "SLOTS"}, {"CLUSTER", "SHARDS"}, {"CLUSTER", "NODES"}} {
		if r := c.do(cmd...); !strings.HasPrefix(r, "-ERR squeeze: "+strings.Join(cmd, " ")+" would send the client past the proxy") || !strings.Contains(r, "--cluster-map") {
			t.Fatalf("%s without a map: %q", cmd, r)
		}
	}
	if r := c.do("CLUSTER", "KEYSLOT", "x"); !strings.HasPrefix(r, ":") {
		t.Fatalf("CLUSTER KEYSLOT: %q", r)
	}
	var movedKey string
	for i := 0; movedKey == ""; i++ {
		if r, _ := testutil.Do(nodes[0].Addr, "GET", "k"+strconv.Itoa(i)); strings.HasPrefix(r, "-MOVED") {
			movedKey = "k" + strconv.Itoa(i)
		}
	}
	if r := c.do("GET", movedKey); !strings.HasPrefix(r, "-ERR squeeze: -MOVED ") || !strings.Contains(r, nodes[1].Addr) {
		t.Fatalf("GET of another node's key without a map: %q", r)
	}

	half := &Server{Upstream: nodes[0].URL(), Logger: quietLogger(), Cluster: &ClusterMap{Nodes: map[string]string{nodes[0].Addr: bare.addr}}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c = dialRaw(t, serveOn(t, half, ln, nodes[0]).addr)
	if r := c.do("CLUSTER", "SLOTS"); !strings.Contains(r, "names cluster node "+nodes[1].Addr+", which has no proxy") {
		t.Fatalf("CLUSTER SLOTS with a node missing from the map: %q", r)
	}
	if r := c.do("GET", movedKey); !strings.Contains(r, "-MOVED names cluster node "+nodes[1].Addr) {
		t.Fatalf("GET with a node missing from the map: %q", r)
	}
}

// TestClusterMap: parsing --cluster-map, and addresses by map and by port
// offset.
func TestClusterMap(t *testing.T) {
	m, err := ParseClusterNodes(" 10.0.0.1:6379=10.0.0.1:6380, [::1]:7000=proxy:7100 ")
	if err != nil || m["10.0.0.1:6379"] != "10.0.0.1:6380" || m["::1:7000"] != "proxy:7100" {
		t.Fatalf("%v %v", m, err)
	}
	for _, bad := range []string{"", "a:1", "a:1=b", "a:1=b:0", "a:x=b:1", "a:1=b:2,a:1=c:3", "a:1=:2"} {
		if _, err := ParseClusterNodes(bad); err == nil {
			t.Errorf("ParseClusterNodes(%q) accepted", bad)
		}
	}
	cm := &ClusterMap{Nodes: m, PortOffset: 1000}
	for _, c := range []struct {
		host string
		port int64
		want string
	}{
		{"10.0.0.1", 6379, "10.0.0.1:6380"},
		{"::1", 7000, "proxy:7100"},
		{"10.0.0.2", 6379, "10.0.0.2:7379"},
		{"", 6379, ":7379"},
		{"10.0.0.2", 65000, ""},
	} {
		h, p, ok := cm.proxyFor(c.host, c.port)
		got := ""
		if ok {
			got = joinAddr(h, p)
		}
		if got != c.want {
			t.Errorf("proxyFor(%q, %d) = %q, want %q", c.host, c.port, got, c.want)
		}
	}
}

// FuzzClusterRewrite rewrites arbitrary replies as topology replies and
// redirections: no panic, and the result is one well-formed RESP value.
func FuzzClusterRewrite(f *testing.F) {
	for _, seed := range []string{
		"-MOVED 3999 127.0.0.1:6381\r\n", "-ASK 1 ::1:7000\r\n", "-MOVED 1 :6380\r\n",
		"*1\r\n*3\r\n:0\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:6379\r\n$2\r\nid\r\n%0\r\n",
		"*1\r\n%2\r\n$5\r\nslots\r\n*2\r\n:0\r\n:1\r\n$5\r\nnodes\r\n*1\r\n%3\r\n$4\r\nport\r\n:6379\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n",
		"$60\r\nid 127.0.0.1:6379@16379,host myself,master - 0 0 1 connected 0-1\n\r\n",
		"=20\r\ntxt:id :0@0 noaddr\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	s := newTestServer(f)
	s.Cluster = &ClusterMap{Nodes: map[string]string{"127.0.0.1:6379": "127.0.0.1:7000"}, PortOffset: 1}
	f.Fuzz(func(t *testing.T, in []byte) {
		if out, ok := s.redirect(nil, in); ok {
			if _, rest, err := resp.ReadValue(out); err != nil || len(rest) != 0 {
				t.Fatalf("redirect(%q) = %q: %v", in, out, err)
			}
		}
		v, _, err := resp.ReadValue(in)
		if err != nil {
			return
		}
		r := &rewriter{s: s}
		for _, sh := range []shape{shapeClusterSlots, shapeClusterShards, shapeClusterNodes} {
			out := r.clusterReply(nil, v, sh)
			if _, rest, err := resp.ReadValue(out); err != nil || len(rest) != 0 {
				t.Fatalf("shape %d of %q = %q: %v", sh, in, out, err)
			}
		}
	})
}

// TestProxy_ClusterPortOffset: with --cluster-port-offset, each proxy
// listens at its node's port plus the offset, and a cluster client given
// one proxy reaches every node through the proxies.
func TestProxy_ClusterPortOffset(t *testing.T) {
	nodes := testutil.StartCluster(t, 3)
	var lns []net.Listener
	offset := 0
	for try := 1; try < 200 && lns == nil; try++ {
		var got []net.Listener
		for _, n := range nodes {
			_, p, _ := net.SplitHostPort(n.Addr)
			port, _ := strconv.Atoi(p)
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+try*7)))
			if err != nil {
				break
			}
			got = append(got, ln)
		}
		if len(got) == len(nodes) {
			lns, offset = got, try*7
		} else {
			for _, ln := range got {
				ln.Close()
			}
		}
	}
	if lns == nil {
		t.Skip("no common free port offset for the three nodes")
	}
	for i, n := range nodes {
		s := &Server{Upstream: n.URL(), Logger: quietLogger(), Cluster: &ClusterMap{PortOffset: offset}}
		withMinSize(0)(s)
		serveOn(t, s, lns[i], n)
	}
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{lns[0].Addr().String()}})
	defer cc.Close()
	for i := range 30 {
		k, v := "k"+strconv.Itoa(i), compressible(1000, i)
		if err := cc.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		if got, err := cc.Get(ctx, k).Result(); err != nil || got != v {
			t.Fatalf("GET %s: %v", k, err)
		}
	}
	slots := dialRaw(t, lns[1].Addr().String()).do("CLUSTER", "SLOTS")
	for i, n := range nodes {
		_, nport, _ := net.SplitHostPort(n.Addr)
		_, pport, _ := net.SplitHostPort(lns[i].Addr().String())
		if strings.Contains(slots, ":"+nport+"\r\n") || !strings.Contains(slots, ":"+pport+"\r\n") {
			t.Fatalf("CLUSTER SLOTS with offset %d: %q", offset, slots)
		}
	}
}
