//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// addClusterNode starts a redis-server with cluster support, has the
// cluster's first node meet it, and waits until every node knows it.
func addClusterNode(t *testing.T, nodes []*testutil.Redis) *testutil.Redis {
	t.Helper()
	n, bus := startClusterNode(t)
	meetClusterNode(t, nodes, n, bus)
	return n
}

// startClusterNode starts a redis-server with cluster support that has
// met no other node, and returns it with its bus port.
func startClusterNode(t *testing.T) (*testutil.Redis, string) {
	t.Helper()
	bus := strconv.Itoa(testutil.FreePort(t))
	return testutil.StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-port", bus, "--cluster-node-timeout", "5000"), bus
}

// meetClusterNode has the cluster's first node meet n and waits until
// every node knows it.
func meetClusterNode(t *testing.T, nodes []*testutil.Redis, n *testutil.Redis, bus string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(n.Addr)
	if r, err := testutil.Do(nodes[0].Addr, "CLUSTER", "MEET", host, port, bus); r != "+OK" {
		t.Fatalf("CLUSTER MEET %s: %q %v", n.Addr, r, err)
	}
	all := append(append([]*testutil.Redis(nil), nodes...), n)
	deadline := time.Now().Add(30 * time.Second)
	for _, r := range all {
		for {
			info, _ := testutil.Do(r.Addr, "CLUSTER", "INFO")
			if strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(all))+"\r") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s does not know the new node %s: %q", r.Addr, n.Addr, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// moveEmptySlot gives the slot of key, which holds no keys, to node to,
// telling every node, as redis-cli --cluster reshard ends a migration.
func moveEmptySlot(t *testing.T, all []*testutil.Redis, to *testutil.Redis, key string) {
	t.Helper()
	slot, _ := testutil.Do(all[0].Addr, "CLUSTER", "KEYSLOT", key)
	slot = strings.TrimPrefix(slot, ":")
	id, _ := testutil.Do(to.Addr, "CLUSTER", "MYID")
	for _, n := range append([]*testutil.Redis{to}, all...) {
		if r, err := testutil.Do(n.Addr, "CLUSTER", "SETSLOT", slot, "NODE", id); r != "+OK" {
			t.Fatalf("CLUSTER SETSLOT %s NODE on %s: %q %v", slot, n.Addr, r, err)
		}
	}
	// The new owner's epoch must win over the old owner's; then every
	// node must see the cluster ok and the key on its new owner.
	if r, err := testutil.Do(to.Addr, "CLUSTER", "BUMPEPOCH"); err != nil || strings.HasPrefix(r, "-") {
		t.Fatalf("CLUSTER BUMPEPOCH: %q %v", r, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range append([]*testutil.Redis{to}, all...) {
		for {
			info, _ := testutil.Do(n.Addr, "CLUSTER", "INFO")
			r, _ := testutil.Do(n.Addr, "GET", key)
			_, toPort, _ := net.SplitHostPort(to.Addr)
			if strings.Contains(info, "cluster_state:ok") && (n == to && r == "$-1" || n != to && strings.HasSuffix(r, ":"+toPort)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s after the slot moved: GET %s = %q, %q", n.Addr, key, r, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestProxyCommand_ClusterMapReload: a node joins a cluster whose proxies
// run with --cluster-map; until the map names it, they refuse the
// topology and redirections to it, and SIGHUP after the config file
// gains it puts the new map in force on the running proxies: CLUSTER
// SLOTS and -MOVED name the new node's proxy, and a cluster client given
// an old proxy reaches keys of the new node, stored compressed there.
func TestProxyCommand_ClusterMapReload(t *testing.T) {
	nodes := testutil.StartCluster(t, 2)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var dones []chan int
	defer func() {
		cancel()
		for _, d := range dones {
			<-d
		}
	}()
	type proxyProc struct {
		addr, cfg string
		log       *syncBuffer
	}
	var pairs []string
	start := func(node *testutil.Redis, addr string) proxyProc {
		p := proxyProc{addr: addr, cfg: filepath.Join(dir, strconv.Itoa(len(dones))+".conf"), log: &syncBuffer{}}
		if err := os.WriteFile(p.cfg, []byte("cluster-map = "+strings.Join(pairs, ",")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan int, 1)
		dones = append(dones, done)
		go func() {
			done <- run(ctx, env{Stdout: io.Discard, Stderr: p.log}, []string{"proxy", "--config", p.cfg,
				"--listen", addr, "--upstream", node.URL(), "--min-size", "0", "--max-memory", "0", "--log-format", "json"})
		}()
		for i := 0; ; i++ { // the proxy may still be starting
			if r, err := testutil.Do(addr, "PING"); err == nil && r == "+PONG" {
				return p
			}
			if i > 250 {
				t.Fatalf("proxy %s did not start:\n%s", addr, p.log.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	addrs := make([]string, 3)
	for i := range addrs {
		addrs[i] = "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	}
	for i, n := range nodes {
		pairs = append(pairs, n.Addr+"="+addrs[i])
	}
	var procs []proxyProc
	for i, n := range nodes {
		procs = append(procs, start(n, addrs[i]))
	}

	// A node joins and takes the slot of key.
	added := addClusterNode(t, nodes)
	// Holding no slot yet, the node is in CLUSTER NODES and SHARDS already.
	for _, cmd := range [][]string{{"CLUSTER", "NODES"}, {"CLUSTER", "SHARDS"}} {
		if r, _ := testutil.Do(procs[0].addr, cmd...); !strings.Contains(r, "names cluster node "+added.Addr+", which has no proxy") {
			t.Fatalf("%s once the new node joined: %q", cmd, r)
		}
	}
	key := "scale-out:doc"
	moveEmptySlot(t, nodes, added, key)
	if r, _ := testutil.Do(procs[0].addr, "CLUSTER", "SLOTS"); !strings.Contains(r, "names cluster node "+added.Addr+", which has no proxy") {
		t.Fatalf("CLUSTER SLOTS before the map names the new node: %q", r)
	}
	pairs = append(pairs, added.Addr+"="+addrs[2])
	procs = append(procs, start(added, addrs[2]))

	// The old proxies' config files gain the node; SIGHUP reloads them.
	for _, p := range procs[:2] {
		if err := os.WriteFile(p.cfg, []byte("cluster-map = "+strings.Join(pairs, ",")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sendSIGHUP(t)
	for _, p := range procs[:2] {
		for i := 0; !strings.Contains(p.log.String(), "cluster map reloaded"); i++ {
			if i > 250 {
				t.Fatalf("proxy %s: no reload in the log:\n%s", p.addr, p.log.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, p := range procs[:2] {
		for _, cmd := range [][]string{{"CLUSTER", "SLOTS"}, {"CLUSTER", "SHARDS"}, {"CLUSTER", "NODES"}} {
			r, err := testutil.Do(p.addr, cmd...)
			if err != nil || strings.HasPrefix(r, "-") {
				t.Fatalf("%s through %s after SIGHUP: %q %v", cmd, p.addr, r, err)
			}
		}
		if r, _ := testutil.Do(p.addr, "GET", key); r != "-MOVED "+strings.TrimPrefix(mustDo(t, nodes[0].Addr, "CLUSTER", "KEYSLOT", key), ":")+" "+addrs[2] {
			t.Fatalf("GET %s through %s after SIGHUP: %q, want -MOVED to %s", key, p.addr, r, addrs[2])
		}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{procs[0].addr}})
	defer cc.Close()
	bg := context.Background()
	doc := strings.Repeat(`{"node":"added","tags":["a","b"]},`, 50)
	if err := cc.Set(bg, key, doc, 0).Err(); err != nil {
		t.Fatalf("SET through the proxies: %v", err)
	}
	if got, err := cc.Get(bg, key).Result(); err != nil || got != doc {
		t.Fatalf("GET through the proxies: %d bytes, %v", len(got), err)
	}
	if stored := mustDo(t, added.Addr, "GET", key); !codec.IsFramed([]byte(stored)) {
		t.Fatalf("the new node holds %.40q, not a frame", stored)
	}

	// A config without the cluster flags is refused: leaving the cluster
	// takes a restart, and the map in force stays.
	if err := os.WriteFile(procs[0].cfg, []byte("min-size = 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sendSIGHUP(t)
	for i := 0; !strings.Contains(procs[0].log.String(), "settings not reloaded"); i++ {
		if i > 250 {
			t.Fatalf("a config without the cluster flags was not refused:\n%s", procs[0].log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r, _ := testutil.Do(procs[0].addr, "CLUSTER", "SLOTS"); strings.HasPrefix(r, "-") {
		t.Fatalf("CLUSTER SLOTS after a refused reload: %q", r)
	}
}

// TestProxyCommand_ClusterPortOffsetScaleOut: with --cluster-port-offset,
// as the proxy guide says, a node added to the cluster needs only its own
// proxy with the same offset: the running proxies name it in CLUSTER
// NODES and redirect to it, and a cluster client given one of them reaches
// its keys, without a reload.
func TestProxyCommand_ClusterPortOffsetScaleOut(t *testing.T) {
	nodes := testutil.StartCluster(t, 2)
	if info, _ := testutil.Do(nodes[0].Addr, "INFO", "server"); strings.Contains(info, "valkey_version:9.") {
		// Valkey 9 kept answering MOVED to the slot's old owner for 30 s
		// after this test's SETSLOT NODE and BUMPEPOCH on the third
		// master (Redis 7 and 8, Valkey 8 take the new owner at once):
		// the test's way of moving a slot, not the proxy, is in question.
		t.Skip("moving an empty slot by SETSLOT NODE does not settle on Valkey 9 (see the comment)")
	}
	added, bus := startClusterNode(t)
	all := append(append([]*testutil.Redis(nil), nodes...), added)
	port := func(addr string) int {
		_, p, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(p)
		return n
	}
	// A free offset is checked, then taken by the proxies; another
	// process may bind one of its ports in between (the nodes' ports are
	// ephemeral, so their offsets are too): then the next offset is tried.
	var offset int
	var dones []chan int
	var stop context.CancelFunc = func() {}
	defer func() {
		stop()
		for _, d := range dones {
			<-d
		}
	}()
	proxyOf := func(n *testutil.Redis) string { return "127.0.0.1:" + strconv.Itoa(port(n.Addr)+offset) }
	start := func() error {
		ctx, cancel := context.WithCancel(context.Background())
		stop = cancel
		for _, n := range all {
			log := &syncBuffer{}
			done := make(chan int, 1)
			dones = append(dones, done)
			go func() {
				done <- run(ctx, env{Stdout: io.Discard, Stderr: log}, []string{"proxy", "--listen", proxyOf(n), "--upstream", n.URL(),
					"--cluster-port-offset", strconv.Itoa(offset), "--min-size", "0", "--max-memory", "0"})
			}()
			for i := 0; ; i++ {
				if r, err := testutil.Do(proxyOf(n), "PING"); err == nil && r == "+PONG" {
					break
				}
				if strings.Contains(log.String(), "address already in use") {
					return fmt.Errorf("proxy %s: %s", proxyOf(n), log.String())
				}
				if i > 250 {
					t.Fatalf("proxy %s did not start:\n%s", proxyOf(n), log.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		return nil
	}
	for try := 1; ; try++ {
		if try == 200 {
			t.Skip("no common free port offset for the three nodes")
		}
		offset = try * 7
		free := true
		for _, n := range all {
			ln, err := net.Listen("tcp", proxyOf(n))
			if err != nil {
				free = false
				break
			}
			ln.Close()
		}
		if !free {
			continue
		}
		err := start()
		if err == nil {
			break
		}
		t.Logf("offset %d taken meanwhile, trying the next: %v", offset, err)
		stop()
		for _, d := range dones {
			<-d
		}
		dones = nil
	}
	meetClusterNode(t, nodes, added, bus)
	key := "scale-out:offset"
	moveEmptySlot(t, nodes, added, key)
	if r, _ := testutil.Do(proxyOf(nodes[0]), "CLUSTER", "NODES"); !strings.Contains(r, " "+proxyOf(added)+"@") {
		t.Fatalf("CLUSTER NODES through a running proxy does not name the new node's proxy %s: %q", proxyOf(added), r)
	}
	slot := strings.TrimPrefix(mustDo(t, nodes[0].Addr, "CLUSTER", "KEYSLOT", key), ":")
	if r, _ := testutil.Do(proxyOf(nodes[0]), "GET", key); r != "-MOVED "+slot+" "+proxyOf(added) {
		t.Fatalf("GET %s through a running proxy: %q, want -MOVED to %s", key, r, proxyOf(added))
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{proxyOf(nodes[0])}})
	defer cc.Close()
	bg := context.Background()
	doc := strings.Repeat(`{"node":"added","offset":true},`, 50)
	if err := cc.Set(bg, key, doc, 0).Err(); err != nil {
		t.Fatalf("SET through the proxies: %v", err)
	}
	if got, err := cc.Get(bg, key).Result(); err != nil || got != doc {
		t.Fatalf("GET through the proxies: %d bytes, %v", len(got), err)
	}
	if stored := mustDo(t, added.Addr, "GET", key); !codec.IsFramed([]byte(stored)) {
		t.Fatalf("the new node holds %.40q, not a frame", stored)
	}
}
