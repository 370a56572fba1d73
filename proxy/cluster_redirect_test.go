package proxy

import (
	"context"
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
