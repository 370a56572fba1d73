package testutil

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartCluster starts a Redis Cluster of n masters (no replicas), each a
// throwaway redis-server on loopback, with the 16384 slots split evenly in
// node order, and waits until every node sees the cluster as ok. The
// servers are stopped in t.Cleanup.
func StartCluster(t testing.TB, n int) []*Redis {
	t.Helper()
	return StartClusterWith(t, ClusterOptions{Masters: n}).Masters
}

// ClusterOptions says what StartClusterWith starts.
type ClusterOptions struct {
	Masters  int
	Replicas int // replicas of each master
	// NodeTimeout is the cluster's cluster-node-timeout (5 s when 0): a
	// master unreachable for that long is failed over to a replica.
	NodeTimeout time.Duration
}

// Cluster is a Redis Cluster StartClusterWith started.
type Cluster struct {
	Masters []*Redis
	// Replicas are the replicas, those of Masters[0] first.
	Replicas []*Redis
}

// Nodes returns every node, masters first.
func (c *Cluster) Nodes() []*Redis { return append(append([]*Redis(nil), c.Masters...), c.Replicas...) }

// StartClusterWith starts a Redis Cluster as StartCluster does, with o's
// replicas of each master, and waits until every node sees the cluster as
// ok and every replica is in sync with its master.
func StartClusterWith(t testing.TB, o ClusterOptions) *Cluster {
	t.Helper()
	timeout := o.NodeTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	n, total := o.Masters, o.Masters*(1+o.Replicas)
	nodes := make([]*Redis, total)
	bus := make([]string, total) // cluster bus ports, chosen free (not port+10000)
	for i := range nodes {
		bus[i] = strconv.Itoa(FreePort(t))
		nodes[i] = StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", bus[i], "--cluster-node-timeout", strconv.FormatInt(timeout.Milliseconds(), 10))
	}
	for i, r := range nodes[:n] {
		lo, hi := i*16384/n, (i+1)*16384/n-1
		if reply, err := Do(r.Addr, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil || reply != "+OK" {
			t.Fatalf("CLUSTER ADDSLOTSRANGE on %s: %q %v", r.Addr, reply, err)
		}
	}
	for i, r := range nodes[1:] {
		host, port, _ := net.SplitHostPort(r.Addr)
		if reply, err := Do(nodes[0].Addr, "CLUSTER", "MEET", host, port, bus[i+1]); err != nil || reply != "+OK" {
			t.Fatalf("CLUSTER MEET %s: %q %v", r.Addr, reply, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	waitFor := func(r *Redis, what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("cluster node %s: %s not reached after 30s", r.Addr, what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	c := &Cluster{Masters: nodes[:n], Replicas: nodes[n:]}
	for i, r := range c.Replicas {
		master := c.Masters[i/max(o.Replicas, 1)]
		id, err := Do(master.Addr, "CLUSTER", "MYID")
		if err != nil {
			t.Fatal(err)
		}
		// A replica can follow a master it has heard of only.
		waitFor(r, "knowing its master", func() bool {
			reply, _ := Do(r.Addr, "CLUSTER", "REPLICATE", id)
			return reply == "+OK"
		})
	}
	for _, r := range nodes {
		waitFor(r, "cluster_state:ok with every node known", func() bool {
			info, err := Do(r.Addr, "CLUSTER", "INFO")
			return err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(total)+"\r")
		})
	}
	for _, r := range c.Replicas {
		waitFor(r, "replica in sync", func() bool {
			info, err := Do(r.Addr, "INFO", "replication")
			return err == nil && strings.Contains(info, "master_link_status:up")
		})
	}
	return c
}

// Do sends one command to the Redis at addr on a new connection and
// returns its reply: a simple string or error with its type byte ("+OK",
// "-ERR ..."), an integer as ":N", a bulk string's contents, or for an
// array "*N" (the elements are not read).
func Do(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if !strings.HasPrefix(line, "$") && !strings.HasPrefix(line, "=") {
		return line, nil
	}
	size, err := strconv.Atoi(line[1:])
	if err != nil || size < 0 {
		return line, err
	}
	body := make([]byte, size+2)
	if _, err := io.ReadFull(br, body); err != nil {
		return "", err
	}
	return string(body[:size]), nil
}

// HasCommand reports whether the server at addr knows the command name
// (newer servers have commands older ones lack, such as Redis 8's HSETEX):
// it sends the name alone and looks for "unknown command" in the reply.
func HasCommand(t testing.TB, addr, name string) bool {
	t.Helper()
	reply, err := Do(addr, name)
	if err != nil {
		t.Fatalf("asking the server for %s: %v", name, err)
	}
	return !strings.Contains(reply, "unknown command")
}

// HasSetIf reports whether the server at addr takes SET's IFEQ condition
// (Valkey 8.1, Redis 8.4): a SET ... IFEQ of a key that does not exist
// sets nothing where it does, and is a syntax error where it does not.
func HasSetIf(t testing.TB, addr string) bool {
	t.Helper()
	return probe(t, addr, "SET ... IFEQ", "SET", "squeeze:probe:no-such-key", "v", "IFEQ", "v")
}

// HasXaddRef reports whether the server at addr takes XADD's KEEPREF,
// DELREF and ACKED (Redis 8.2). NOMKSTREAM keeps the probe from writing.
func HasXaddRef(t testing.TB, addr string) bool {
	t.Helper()
	return probe(t, addr, "XADD ... KEEPREF", "XADD", "squeeze:probe:no-such-stream", "NOMKSTREAM", "KEEPREF", "*", "f", "v")
}

// probe sends a command that writes nothing and reports whether the
// server took it (no error reply).
func probe(t testing.TB, addr, what string, args ...string) bool {
	t.Helper()
	reply, err := Do(addr, args...)
	if err != nil {
		t.Fatalf("asking the server for %s: %v", what, err)
	}
	return !strings.HasPrefix(reply, "-")
}
