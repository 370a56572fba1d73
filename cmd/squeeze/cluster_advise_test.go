package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// argv splits a printed command line into its words (shellWords).
func argv(t *testing.T, line string) []string {
	t.Helper()
	w, err := shellWords(line)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// printedCommands returns the commands "to apply it" of advise's output
// that start with prefix, each joined with its continuation lines.
func printedCommands(out, prefix string) []string {
	_, tail, _ := strings.Cut(out, "to apply it:\n")
	var cmds []string
	lines := strings.Split(tail, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, "\\") + strings.TrimSpace(lines[i])
		}
		cmds = append(cmds, line)
	}
	return cmds
}

// TestCluster_AdviseApply: advise --cluster prints commands that work on
// the cluster as printed: a proxy beside every node, masters and
// replicas, with the cluster's port offset (a cluster client through
// them reads every key back), and compact and dict train with --cluster
// (compact rewrites the keys of every master).
func TestCluster_AdviseApply(t *testing.T) {
	c := testutil.StartClusterWith(t, testutil.ClusterOptions{Masters: 2, Replicas: 1})
	nodes := c.Nodes()
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr}})
	defer cc.Close()
	s2, _ := codec.NewEncoder(codec.MustParseAlgorithm("s2"))
	const keys = 40
	for i := range keys {
		if err := cc.Set(ctx, fmt.Sprintf("page:%d", i), s2.AppendEncode(nil, bench.JSONDocument(uint64(i), 8000)), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	out, errs, code := runCLI(t, nil, "advise", "--cluster", "--redis", nodes[0].URL(), "--no-dict")
	if code != 0 {
		t.Fatalf("advise --cluster: exit %d: %s", code, errs)
	}
	proxies := printedCommands(out, "squeeze proxy ")
	if len(proxies) != len(nodes) {
		t.Fatalf("advise --cluster prints %d proxy commands for %d nodes:\n%s", len(proxies), len(nodes), out)
	}
	for _, n := range nodes {
		found := false
		for _, p := range proxies {
			found = found || strings.Contains(p, "--upstream "+n.URL()+" ") && strings.Contains(p, "--cluster-port-offset ")
		}
		if !found {
			t.Fatalf("no proxy command with --upstream %s and --cluster-port-offset:\n%s", n.URL(), out)
		}
	}
	compacts := printedCommands(out, "squeeze compact ")
	if len(compacts) != 1 || !strings.HasPrefix(compacts[0], "squeeze compact --cluster ") {
		t.Fatalf("advise --cluster: compact commands %q:\n%s", compacts, out)
	}

	// The compact command as printed (keys written just now are hot:
	// --min-idle 0) rewrites the keys of every master.
	args := append(argv(t, compacts[0])[1:], "--min-idle", "0", "--json")
	out, errs, code = runCLI(t, nil, args...)
	var st struct {
		Rewritten int `json:"keys_rewritten"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Rewritten != keys {
		t.Fatalf("%q: exit %d, %d of %d keys rewritten\n%s%s", args, code, st.Rewritten, keys, out, errs)
	}

	// The proxy commands as printed: a cluster client given one of them
	// reads every key back through the proxies.
	pctx, cancel := context.WithCancel(ctx)
	var dones []chan int
	defer func() {
		cancel()
		for _, d := range dones {
			<-d
		}
	}()
	var logs []*syncBuffer
	listens := make([]string, len(proxies))
	for i, p := range proxies {
		words := argv(t, p)[1:]
		for j, w := range words {
			if w == "--listen" {
				listens[i] = words[j+1]
			}
		}
		log := &syncBuffer{}
		logs = append(logs, log)
		done := make(chan int, 1)
		dones = append(dones, done)
		go func() { done <- run(pctx, env{Stdout: io.Discard, Stderr: log}, append(words, "--max-memory", "0")) }()
	}
	for i, addr := range listens {
		for j := 0; ; j++ {
			if r, err := testutil.Do(addr, "PING"); err == nil && r == "+PONG" {
				break
			}
			if strings.Contains(logs[i].String(), "address already in use") {
				t.Skipf("port %s of the printed proxy command is taken on this machine", addr)
			}
			if j > 250 {
				t.Fatalf("proxy %q did not start:\n%s", proxies[i], logs[i].String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	pc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{listens[0]}})
	defer pc.Close()
	for i := range keys {
		k := fmt.Sprintf("page:%d", i)
		if got, err := pc.Get(ctx, k).Result(); err != nil || got != string(bench.JSONDocument(uint64(i), 8000)) {
			t.Fatalf("GET %s through the printed proxies: %d bytes, %v", k, len(got), err)
		}
	}
}

// TestParseClusterNodes: the nodes advise --cluster prints a proxy for
// (failed and address-less nodes left out; IPv6 hosts and announced
// hostnames), the URLs and listen addresses it prints for them, and an
// offset clear of every node's ports.
func TestParseClusterNodes(t *testing.T) {
	nodes := parseClusterNodes("a1 10.0.0.6:7000@17000,redis-b master - 0 0 2 connected 5461-10922\n" +
		"a0 10.0.0.5:7000@17000 myself,master - 0 0 1 connected 0-5460\n" +
		"a2 ::1:7001@17001 slave a0 0 0 1 connected\n" +
		"a3 10.0.0.7:7000@17000 master,fail - 0 0 3 disconnected\n" +
		"a4 :0@0 master,noaddr - 0 0 0 disconnected\n" +
		"a5 10.0.0.8:8000@9000 master - 0 0 4 connected 10923-16383\n")
	var got []string
	for _, n := range nodes {
		got = append(got, fmt.Sprintf("%s@%d", n.addr, n.bus))
	}
	if want := "10.0.0.5:7000@17000 10.0.0.6:7000@17000 10.0.0.8:8000@9000 ::1:7001@17001"; strings.Join(got, " ") != want {
		t.Fatalf("parseClusterNodes = %q, want %q", strings.Join(got, " "), want)
	}
	if u := nodeURL("redis://user:***@10.0.0.5:7000", nodes[3]); u != "redis://user:***@[::1]:7001" {
		t.Errorf("nodeURL = %q", u)
	}
	if u := nodeURL("10.0.0.6:7000", nodes[0]); u != "redis://10.0.0.5:7000" {
		t.Errorf("nodeURL of a bare address = %q", u)
	}
	// 1000 puts a proxy on 10.0.0.8's port (8000), 2000 on its bus port.
	if off := clusterPortOffset(nodes); off != 3000 {
		t.Errorf("clusterPortOffset = %d, want 3000", off)
	}
	if u := nodeURL("rediss://:***@10.0.0.5:7000/0?protocol=3", nodes[1]); u != "rediss://:***@10.0.0.6:7000/0?protocol=3" {
		t.Errorf("nodeURL with a path and query = %q", u)
	}
}
