package proxy

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestServer_SetClusterMap: a new map takes effect on a connection open
// before it (topology replies and -MOVED name the proxy it adds), later
// changes to the caller's map do not leak in, and whether the proxy is in
// front of a cluster at all cannot change.
func TestServer_SetClusterMap(t *testing.T) {
	nodes := testutil.StartCluster(t, 2)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &ClusterMap{Nodes: map[string]string{nodes[0].Addr: ln.Addr().String()}}
	s := &Server{Upstream: nodes[0].URL(), Logger: quietLogger(), Cluster: m}
	c := dialRaw(t, serveOn(t, s, ln, nodes[0]).addr)
	if r := c.do("CLUSTER", "SLOTS"); !strings.Contains(r, "names cluster node "+nodes[1].Addr) {
		t.Fatalf("CLUSTER SLOTS with node 1 unmapped: %q", r)
	}
	var movedKey string
	for i := 0; movedKey == ""; i++ {
		if r, _ := testutil.Do(nodes[0].Addr, "GET", "k"+strconv.Itoa(i)); strings.HasPrefix(r, "-MOVED") {
			movedKey = "k" + strconv.Itoa(i)
		}
	}
	next := &ClusterMap{Nodes: map[string]string{nodes[0].Addr: ln.Addr().String(), nodes[1].Addr: "127.0.0.1:7"}}
	if err := s.SetClusterMap(next); err != nil {
		t.Fatal(err)
	}
	next.Nodes[nodes[1].Addr] = "127.0.0.1:8" // the caller's map is not the one in force
	if r := c.do("CLUSTER", "SLOTS"); strings.HasPrefix(r, "-") || !strings.Contains(r, ":7\r\n") {
		t.Fatalf("CLUSTER SLOTS after SetClusterMap: %q", r)
	}
	if r := c.do("GET", movedKey); !strings.HasPrefix(r, "-MOVED ") || !strings.HasSuffix(r, " 127.0.0.1:7\r\n") {
		t.Fatalf("GET %s after SetClusterMap: %q", movedKey, r)
	}
	if err := s.SetClusterMap(nil); err == nil {
		t.Fatal("SetClusterMap(nil) on a proxy started with a map: no error")
	}
	bare := &Server{Upstream: nodes[0].URL(), Logger: quietLogger()}
	if err := bare.SetClusterMap(next); err == nil {
		t.Fatal("SetClusterMap on a proxy started without a map: no error")
	}
	if err := bare.SetClusterMap(nil); err != nil {
		t.Fatalf("SetClusterMap(nil) on a proxy without a map: %v", err)
	}
}
