package proxy

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// clusterOwner returns the index of the node that owns key's slot, and
// the slot.
func clusterOwner(t *testing.T, nodes []*testutil.Redis, key string) (owner int, slot string) {
	t.Helper()
	slot, err := testutil.Do(nodes[0].Addr, "CLUSTER", "KEYSLOT", key)
	if err != nil {
		t.Fatal(err)
	}
	slot = strings.TrimPrefix(slot, ":")
	for i, n := range nodes {
		if r, _ := testutil.Do(n.Addr, "TYPE", key); !strings.HasPrefix(r, "-MOVED") {
			return i, slot
		}
	}
	t.Fatalf("no node owns slot %s", slot)
	return -1, ""
}

// migrateKeys starts moving slot from node from to node to and moves
// keys, as redis-cli --cluster reshard does, leaving the slot migrating.
func migrateKeys(t *testing.T, nodes []*testutil.Redis, slot string, from, to int, keys ...string) {
	t.Helper()
	fromID, _ := testutil.Do(nodes[from].Addr, "CLUSTER", "MYID")
	toID, _ := testutil.Do(nodes[to].Addr, "CLUSTER", "MYID")
	if r, err := testutil.Do(nodes[to].Addr, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID); r != "+OK" {
		t.Fatalf("IMPORTING: %q %v", r, err)
	}
	if r, err := testutil.Do(nodes[from].Addr, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID); r != "+OK" {
		t.Fatalf("MIGRATING: %q %v", r, err)
	}
	host, port, _ := net.SplitHostPort(nodes[to].Addr)
	args := append([]string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}, keys...)
	if r, err := testutil.Do(nodes[from].Addr, args...); r != "+OK" {
		t.Fatalf("MIGRATE: %q %v", r, err)
	}
}

// TestProxy_ClusterAskingInspect: with a slot migrating and a key already
// moved, the commands that look inside values (STRLEN, GETRANGE, HSTRLEN,
// APPEND, run by the proxy as scripts) and scripts carry the client's
// ASKING to the importing node, as GET does: they answer there, where
// before they answered -MOVED back to the source and the client bounced
// between ASK and MOVED.
func TestProxy_ClusterAskingInspect(t *testing.T) {
	nodes, proxies := startClusterProxies(t)
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{proxies[0].addr}})
	defer cc.Close()
	val := compressible(2000, 3)
	for _, k := range []string{"{b}moved", "{b}stay", "{b}moved2"} {
		if err := cc.Set(ctx, k, val, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cc.HSet(ctx, "{b}hmoved", "f", val).Err(); err != nil {
		t.Fatal(err)
	}
	owner, slot := clusterOwner(t, nodes, "{b}moved")
	other := (owner + 1) % len(nodes)
	migrateKeys(t, nodes, slot, owner, other, "{b}moved", "{b}hmoved", "{b}moved2")

	// The source's proxy sends the client to the importing node's proxy.
	src := dialRaw(t, proxies[owner].addr)
	ask := "-ASK " + slot + " " + proxies[other].addr + "\r\n"
	for _, cmd := range [][]string{
		{"GET", "{b}moved"}, {"STRLEN", "{b}moved"}, {"HSTRLEN", "{b}hmoved", "f"},
		{"EVAL", "return redis.call('GET', KEYS[1])", "1", "{b}moved"},
	} {
		if r := src.do(cmd...); r != ask {
			t.Errorf("%s on the source's proxy: %q, want %q", cmd, r, ask)
		}
	}

	// There, each command after ASKING runs on the importing node.
	dst := dialRaw(t, proxies[other].addr)
	for _, c := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"GET", "{b}moved"}, bulk(val)},
		{[]string{"STRLEN", "{b}moved"}, ":2000\r\n"},
		{[]string{"GETRANGE", "{b}moved", "0", "5"}, bulk(val[:6])},
		{[]string{"HSTRLEN", "{b}hmoved", "f"}, ":2000\r\n"},
		{[]string{"APPEND", "{b}moved2", "xyz"}, ":2003\r\n"},
		{[]string{"EVAL", "return redis.call('GET', KEYS[1])", "1", "{b}moved"}, bulk(val)},
		{[]string{"EVAL", "return redis.call('STRLEN', KEYS[1])", "1", "{b}moved2"}, ":2003\r\n"},
	} {
		dst.send([]string{"ASKING"}, c.cmd)
		if r := dst.read(); r != "+OK\r\n" {
			t.Fatalf("ASKING: %q", r)
		}
		if r := dst.read(); r != c.want {
			t.Errorf("ASKING, %s on the importing node's proxy: %.120q, want %.120q", c.cmd, r, c.want)
		}
	}
	// Without ASKING the importing node sends the client back, as Redis
	// does: ASKING lasts for one command only.
	moved := "-MOVED " + slot + " " + proxies[owner].addr + "\r\n"
	for _, cmd := range [][]string{{"GET", "{b}moved"}, {"STRLEN", "{b}moved"}} {
		if r := dst.do(cmd...); r != moved {
			t.Errorf("%s without ASKING: %q, want %q", cmd, r, moved)
		}
	}

	// A cluster client follows ASK to every one of them.
	if n, err := cc.StrLen(ctx, "{b}moved").Result(); err != nil || n != 2000 {
		t.Errorf("go-redis STRLEN during the migration: %d, %v", n, err)
	}
	if s, err := cc.GetRange(ctx, "{b}moved", 0, 5).Result(); err != nil || s != val[:6] {
		t.Errorf("go-redis GETRANGE during the migration: %q, %v", s, err)
	}
	if n, err := cc.HStrLen(ctx, "{b}hmoved", "f").Result(); err != nil || n != 2000 {
		t.Errorf("go-redis HSTRLEN during the migration: %d, %v", n, err)
	}
	if s, err := cc.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"{b}moved"}).Text(); err != nil || s != val {
		t.Errorf("go-redis EVAL during the migration: %.40q, %v", s, err)
	}
}

// TestProxy_ClusterScriptRedirect: a script whose key lives on another
// node gets Redis's own -MOVED, naming that node's proxy, which a cluster
// client follows; before, the proxy answered with an error naming the
// node, from its decoding of the script's keys.
func TestProxy_ClusterScriptRedirect(t *testing.T) {
	nodes, proxies := startClusterProxies(t)
	for i := range 6 {
		key := "zz:" + strconv.Itoa(i)
		owner, slot := clusterOwner(t, nodes, key)
		other := (owner + 1) % len(nodes)
		want := "-MOVED " + slot + " " + proxies[owner].addr + "\r\n"
		c := dialRaw(t, proxies[other].addr)
		for _, cmd := range [][]string{
			{"EVAL", "return 1", "1", key},
			{"EVAL_RO", "return redis.call('GET', KEYS[1])", "1", key},
			{"EVAL", "return redis.call('SET', KEYS[1], ARGV[1])", "1", key, "v"},
		} {
			if r := c.do(cmd...); r != want {
				t.Errorf("%s on a proxy of another node: %q, want %q", cmd, r, want)
			}
		}
	}
	// A cluster client runs scripts on keys of every node through any proxy.
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{proxies[0].addr}})
	defer cc.Close()
	for i := range 30 {
		key, val := "sc:"+strconv.Itoa(i), compressible(1500, i)
		if err := cc.Set(ctx, key, val, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if s, err := cc.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{key}).Text(); err != nil || s != val {
			t.Fatalf("EVAL GET %s: %.40q, %v", key, s, err)
		}
	}
}
