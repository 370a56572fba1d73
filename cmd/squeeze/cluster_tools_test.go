package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestCluster_ToolsRefuseNode: a command that walks keys or reads
// squeeze's own keys, given one node of a cluster without --cluster,
// refuses with an error naming the flag instead of walking a part of the
// keys; with --cluster, dict train samples and bench codecs --from-redis
// reads the keys of every master, and dict list finds what train
// published.
func TestCluster_ToolsRefuseNode(t *testing.T) {
	nodes := testutil.StartCluster(t, 2)
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr}})
	defer cc.Close()
	const keys = 60
	for i := range keys {
		if err := cc.Set(ctx, fmt.Sprintf("user:%d", i), bench.JSONDocument(uint64(i), 600), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		if size, _ := testutil.Do(n.Addr, "DBSIZE"); size == ":0" || size == ":"+fmt.Sprint(keys) {
			t.Fatalf("node %s holds %s of the %d keys", n.Addr, size, keys)
		}
	}
	url := nodes[0].URL()
	for _, args := range [][]string{
		{"advise", "--redis", url},
		{"compact", "--redis", url, "--min-idle", "0", "--include-raw"},
		{"dict", "train", "--redis", url, "--pattern", "user:*"},
		{"dict", "list", "--redis", url},
		{"dict", "show", "--redis", url, "1"},
		{"bench", "codecs", "--from-redis", url, "--codecs", "s2"},
	} {
		out, errs, code := runCLI(t, nil, args...)
		if code != 2 || !strings.Contains(errs, "is a node of a Redis Cluster") || !strings.Contains(errs, "add --cluster") {
			t.Errorf("%q on a cluster node: exit %d, stderr %q, stdout %.200q", args, code, errs, out)
		}
	}
	if v := mustDo(t, nodes[0].Addr, "GET", "user:0"); codec.IsFramed([]byte(v)) && !strings.HasPrefix(v, "-MOVED") {
		t.Fatal("a refused compact rewrote user:0")
	}

	// Before dict train publishes: squeeze's own keys would be sampled too.
	out, errs, code := runCLI(t, nil, "bench", "codecs", "--from-redis", url, "--cluster", "--sample", "1000",
		"--codecs", "s2", "--time", "1ms", "--json")
	var rows []struct {
		Samples int `json:"samples"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) == 0 || rows[0].Samples != keys {
		t.Fatalf("bench codecs --from-redis --cluster: exit %d, %v\n%s%s", code, rows, out, errs)
	}
	out, errs, code = runCLI(t, nil, "dict", "train", "--cluster", "--redis", url, "--pattern", "user:*", "--publish", "--json")
	var rep struct {
		ID          uint32 `json:"id"`
		KeysScanned int    `json:"keys_scanned"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.KeysScanned != keys {
		t.Fatalf("dict train --cluster: exit %d, %d of %d keys scanned\n%s%s", code, rep.KeysScanned, keys, out, errs)
	}
	out, errs, code = runCLI(t, nil, "dict", "list", "--cluster", "--redis", url)
	if code != 0 || !strings.Contains(out, fmt.Sprint(rep.ID)) {
		t.Fatalf("dict list --cluster: exit %d, no %d:\n%s%s", code, rep.ID, out, errs)
	}
	_, errs, code = runCLI(t, nil, "compact", "--cluster", "--redis", testutil.StartRedis(t).URL())
	if code != 2 || !strings.Contains(errs, "drop --cluster") {
		t.Fatalf("compact --cluster on a plain Redis: exit %d, %q", code, errs)
	}
}

// mustDo sends one command to addr and returns the raw reply.
func mustDo(t *testing.T, addr string, args ...string) string {
	t.Helper()
	r, err := testutil.Do(addr, args...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
