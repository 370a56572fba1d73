package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/squeeze-kv/squeeze/resp"
)

// Redis Cluster: one squeeze proxy runs in front of each node, as a
// sidecar, and each connects to its own node only. A cluster client learns
// the topology from CLUSTER SLOTS, SHARDS or NODES and follows -MOVED and
// -ASK redirections; if those named the Redis nodes themselves, the client
// would leave the proxies and read compressed bytes. So the proxy rewrites
// every node address in those replies to the address of the proxy in front
// of that node, as a ClusterMap says. Without a ClusterMap, the topology
// replies and redirections become errors that say what to configure: a
// client never gets an address that bypasses squeeze.

// ClusterMap tells a proxy in front of a Redis Cluster node where the
// proxies in front of every node listen.
type ClusterMap struct {
	// Nodes maps a node's address as the cluster announces it
	// ("10.0.0.5:6379", the endpoint and port of CLUSTER SLOTS and -MOVED)
	// to the address clients use for the proxy in front of it.
	Nodes map[string]string
	// PortOffset, when not 0, serves the nodes that are not in Nodes: the
	// proxy in front of host:port listens at host:port+PortOffset.
	PortOffset int
}

// ParseClusterNodes parses the --cluster-map list
// "node=proxy,node=proxy", each side a host:port.
func ParseClusterNodes(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		node, px, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("cluster map: %q is not node=proxy (host:port=host:port)", pair)
		}
		var norm [2]string
		for i, a := range []string{node, px} {
			h, p, ok := splitAddr(strings.TrimSpace(a))
			if !ok || p == 0 || (i == 1 && h == "") {
				return nil, fmt.Errorf("cluster map: %q in %q is not host:port", a, pair)
			}
			norm[i] = joinAddr(h, p)
		}
		if _, dup := m[norm[0]]; dup {
			return nil, fmt.Errorf("cluster map: node %s is mapped twice", norm[0])
		}
		m[norm[0]] = norm[1]
	}
	if len(m) == 0 {
		return nil, errors.New("cluster map: no node=proxy pair")
	}
	return m, nil
}

// splitAddr splits host:port at the last colon, as Redis writes node
// addresses (an IPv6 host without brackets); brackets are accepted too.
func splitAddr(a string) (host string, port int64, ok bool) {
	i := strings.LastIndexByte(a, ':')
	if i < 0 {
		return "", 0, false
	}
	p, err := strconv.ParseInt(a[i+1:], 10, 64)
	if err != nil || p < 0 || p > 65535 {
		return "", 0, false
	}
	return strings.TrimSuffix(strings.TrimPrefix(a[:i], "["), "]"), p, true
}

// joinAddr writes host:port as Redis does, without brackets.
func joinAddr(host string, port int64) string { return host + ":" + strconv.FormatInt(port, 10) }

// proxyFor returns the address of the proxy in front of the node host:port.
func (m *ClusterMap) proxyFor(host string, port int64) (phost string, pport int64, ok bool) {
	if m == nil {
		return "", 0, false
	}
	if px, found := m.Nodes[joinAddr(host, port)]; found {
		return splitAddr(px)
	}
	if m.PortOffset != 0 && port > 0 && port+int64(m.PortOffset) > 0 && port+int64(m.PortOffset) < 65536 {
		return host, port + int64(m.PortOffset), true
	}
	return "", 0, false
}

// clusterMap returns the ClusterMap in force: the last SetClusterMap
// gave, else Cluster.
func (s *Server) clusterMap() *ClusterMap {
	if m := s.clusterSet.Load(); m != nil {
		return m
	}
	return s.Cluster
}

// SetClusterMap puts m in force in place of the ClusterMap the proxy
// started with (Cluster), for example on a configuration reload (squeeze
// proxy on SIGHUP) after a node joined the cluster: topology replies and
// redirections from then on name the proxies m names, on connections
// open before too. A proxy started without a ClusterMap cannot take one,
// nor one started with a ClusterMap drop it (nil): being in front of a
// cluster node or not takes a restart. On an error nothing changes.
func (s *Server) SetClusterMap(m *ClusterMap) error {
	switch {
	case s.Cluster == nil && m != nil:
		return errors.New("proxy: started without a cluster map; one takes a restart")
	case s.Cluster != nil && m == nil:
		return errors.New("proxy: started with a cluster map; going without one takes a restart")
	case m == nil:
		return nil
	}
	c := &ClusterMap{PortOffset: m.PortOffset, Nodes: make(map[string]string, len(m.Nodes))}
	for node, px := range m.Nodes {
		c.Nodes[node] = px
	}
	s.clusterSet.Store(c)
	return nil
}

// errNoClusterMap is the refusal of a topology reply or redirection when
// the proxy has no ClusterMap.
const errNoClusterMap = "ERR squeeze: %s would send the client past the proxy, straight to a Redis Cluster node that stores compressed values; start every proxy with --cluster-port-offset or --cluster-map so that cluster clients are sent to the proxies"

// unmapped is the refusal when the map does not name a node.
func unmapped(what, node string) string {
	return fmt.Sprintf("ERR squeeze: %s names cluster node %s, which has no proxy in --cluster-map (and --cluster-port-offset is not set); add it", what, node)
}

// redirect rewrites a -MOVED or -ASK error reply to name the proxy in
// front of the target node. It reports false for any other reply.
func (s *Server) redirect(dst, reply []byte) ([]byte, bool) {
	kind := ""
	switch {
	case bytes.HasPrefix(reply, []byte("-MOVED ")):
		kind = "MOVED"
	case bytes.HasPrefix(reply, []byte("-ASK ")):
		kind = "ASK"
	default:
		return dst, false
	}
	line := string(bytes.TrimRight(reply[1:], "\r\n"))
	f := strings.Fields(line)
	if len(f) != 3 {
		return dst, false
	}
	host, n, ok := splitAddr(f[2])
	if !ok {
		return dst, false
	}
	m := s.clusterMap()
	if m == nil {
		s.metrics.clusterRedirect(false)
		return resp.AppendError(dst, fmt.Sprintf(errNoClusterMap, "-"+kind+" "+f[1]+" "+f[2])), true
	}
	h, p, ok := m.proxyFor(host, n)
	s.metrics.clusterRedirect(ok)
	if !ok {
		return resp.AppendError(dst, unmapped("-"+kind, f[2])), true
	}
	return resp.AppendError(dst, kind+" "+f[1]+" "+joinAddr(h, p)), true
}

// lossEndsClients reports whether a client whose command cannot reach
// Redis (the dial fails, the connection ends) sees its connection end
// without a reply, as it would in front of a dead Redis, rather than an
// error reply: in front of a cluster node. Cluster clients take an error
// reply for the command's own and keep sending to the node, where a
// connection that ends marks the node failed, and they retry, then
// reload the topology and find the replica that took over. (A client on
// a private connection sees its connection end in any case: see
// call.connLost.)
func (s *Server) lossEndsClients() bool { return s.Cluster != nil }

// refusedForKeys reports whether reply is an error by which Redis Cluster
// refuses a command for where its keys live, before running it: a
// redirection (-MOVED, -ASK), keys in several slots or a slot being
// moved (-CROSSSLOT, -TRYAGAIN), or a cluster that cannot serve the slot
// (-CLUSTERDOWN). A cluster client acts on each (follows, retries,
// reloads the topology), so where a script the proxy runs before the
// client's own command gets one, the client gets it as it came: its
// command would have been refused alike.
func refusedForKeys(reply []byte) bool {
	for _, p := range []string{"-MOVED ", "-ASK ", "-CROSSSLOT ", "-TRYAGAIN ", "-CLUSTERDOWN "} {
		if bytes.HasPrefix(reply, []byte(p)) {
			return true
		}
	}
	return false
}

// clusterShape returns the reply shape of a CLUSTER subcommand whose reply
// names nodes, or shapeNone.
func clusterShape(args [][]byte) shape {
	if len(args) < 2 {
		return shapeNone
	}
	switch {
	case is(args[1], "SLOTS"):
		return shapeClusterSlots
	case is(args[1], "SHARDS"):
		return shapeClusterShards
	case is(args[1], "NODES"), is(args[1], "REPLICAS"), is(args[1], "SLAVES"):
		return shapeClusterNodes
	}
	return shapeNone
}

// errUnmapped carries an unmapped node out of a topology rewrite.
type errUnmapped struct{ node string }

func (e *errUnmapped) Error() string { return e.node }

// clusterReply appends a topology reply with every node address replaced
// by its proxy's, or an error reply if that cannot be done.
func (r *rewriter) clusterReply(dst []byte, v resp.Value, sh shape) []byte {
	if v.Type == resp.Error || v.Type == resp.BulkError || v.IsNull() {
		return append(dst, v.Raw...)
	}
	what := map[shape]string{shapeClusterSlots: "CLUSTER SLOTS", shapeClusterShards: "CLUSTER SHARDS", shapeClusterNodes: "CLUSTER NODES"}[sh]
	m := r.s.clusterMap()
	if m == nil {
		r.s.metrics.clusterRedirect(false)
		return resp.AppendError(dst, fmt.Sprintf(errNoClusterMap, what))
	}
	mark := len(dst)
	var err error
	switch sh {
	case shapeClusterSlots:
		dst, err = m.rewriteSlots(dst, v)
	case shapeClusterShards:
		dst, err = m.rewriteShards(dst, v)
	default:
		dst, err = m.rewriteNodes(dst, v)
	}
	if err != nil {
		var um *errUnmapped
		if errors.As(err, &um) {
			r.s.metrics.clusterRedirect(false)
			return resp.AppendError(dst[:mark], unmapped(what, um.node))
		}
		// A shape this proxy does not know: refuse rather than pass
		// addresses that bypass it.
		r.s.metrics.clusterRedirect(false)
		return resp.AppendError(dst[:mark], "ERR squeeze: "+what+" reply has a shape the proxy cannot rewrite; cluster clients would bypass the proxy")
	}
	r.s.metrics.clusterRedirect(true)
	return dst
}

var errShape = errors.New("unexpected reply shape")

// forEach calls fn with each element of the aggregate v.
func forEach(v resp.Value, fn func(e resp.Value) error) error {
	it := v.Elements()
	for {
		e, ok := it.Next()
		if !ok {
			return nil
		}
		if err := fn(e); err != nil {
			return err
		}
	}
}

// forPairs calls fn with each key and value of v, a map or (in RESP2) a
// flat array of pairs.
func forPairs(v resp.Value, fn func(k, val resp.Value) error) error {
	if v.Type != resp.Map && v.Type != resp.Array {
		return errShape
	}
	it := v.Elements()
	for {
		k, ok := it.Next()
		if !ok {
			return nil
		}
		val, ok := it.Next()
		if !ok {
			return errShape
		}
		if err := fn(k, val); err != nil {
			return err
		}
	}
}

// rewriteSlots rewrites CLUSTER SLOTS: each range is [start, end, node,
// node ...] and each node [endpoint, port, id, metadata].
func (m *ClusterMap) rewriteSlots(dst []byte, v resp.Value) ([]byte, error) {
	if v.Type != resp.Array {
		return dst, errShape
	}
	dst = append(dst, v.Header()...)
	err := forEach(v, func(rg resp.Value) error {
		if rg.Type != resp.Array {
			return errShape
		}
		dst = append(dst, rg.Header()...)
		i := 0
		return forEach(rg, func(e resp.Value) error {
			if i++; i <= 2 || e.Type != resp.Array || e.N < 2 {
				dst = append(dst, e.Raw...) // start, end, or no address
				return nil
			}
			node := e.Elements()
			host, _ := node.Next()
			port, _ := node.Next()
			n, isInt := resp.ParseInt(port.Str)
			if host.Type != resp.BulkString || port.Type != resp.Integer || !isInt {
				return errShape
			}
			h, p, ok := m.proxyFor(string(host.Str), n)
			if !ok {
				return &errUnmapped{joinAddr(string(host.Str), n)}
			}
			dst = append(dst, e.Header()...)
			dst = resp.AppendBulkString(dst, h)
			dst = resp.AppendInt(dst, p)
			for rest, ok := node.Next(); ok; rest, ok = node.Next() {
				dst = append(dst, rest.Raw...)
			}
			return nil
		})
	})
	return dst, err
}

// rewriteShards rewrites CLUSTER SHARDS: a list of shards, each a map (a
// flat array in RESP2) with "nodes", a list of node maps whose "port",
// "tls-port", "ip" and "endpoint" name the node.
func (m *ClusterMap) rewriteShards(dst []byte, v resp.Value) ([]byte, error) {
	if v.Type != resp.Array {
		return dst, errShape
	}
	dst = append(dst, v.Header()...)
	err := forEach(v, func(shard resp.Value) error {
		if shard.Type != resp.Map && shard.Type != resp.Array {
			return errShape
		}
		dst = append(dst, shard.Header()...)
		return forPairs(shard, func(k, val resp.Value) error {
			dst = append(dst, k.Raw...)
			if string(k.Str) != "nodes" || val.Type != resp.Array {
				dst = append(dst, val.Raw...)
				return nil
			}
			dst = append(dst, val.Header()...)
			return forEach(val, func(node resp.Value) (err error) {
				dst, err = m.rewriteShardNode(dst, node)
				return err
			})
		})
	})
	return dst, err
}

// rewriteShardNode rewrites one node map of CLUSTER SHARDS.
func (m *ClusterMap) rewriteShardNode(dst []byte, node resp.Value) ([]byte, error) {
	var endpoint, ip string
	var port, tlsPort int64
	err := forPairs(node, func(k, val resp.Value) error {
		switch string(k.Str) {
		case "endpoint":
			endpoint = string(val.Str)
		case "ip":
			ip = string(val.Str)
		case "port":
			port, _ = resp.ParseInt(val.Str)
		case "tls-port":
			tlsPort, _ = resp.ParseInt(val.Str)
		}
		return nil
	})
	if err != nil {
		return dst, err
	}
	host := endpoint
	if host == "" || host == "?" {
		host = ip
	}
	if port == 0 {
		port = tlsPort
	}
	h, p, ok := m.proxyFor(host, port)
	if !ok {
		return dst, &errUnmapped{joinAddr(host, port)}
	}
	dst = append(dst, node.Header()...)
	err = forPairs(node, func(k, val resp.Value) error {
		dst = append(dst, k.Raw...)
		switch string(k.Str) {
		case "port", "tls-port":
			dst = resp.AppendInt(dst, p)
		case "endpoint", "ip":
			if h != host {
				dst = resp.AppendBulkString(dst, h)
				return nil
			}
			dst = append(dst, val.Raw...)
		default:
			dst = append(dst, val.Raw...)
		}
		return nil
	})
	return dst, err
}

// rewriteNodes rewrites CLUSTER NODES (one string of lines) and CLUSTER
// REPLICAS (an array of such lines): the second field of each line is
// host:port@cport[,hostname].
func (m *ClusterMap) rewriteNodes(dst []byte, v resp.Value) ([]byte, error) {
	switch v.Type {
	case resp.Array:
		dst = append(dst, v.Header()...)
		err := forEach(v, func(e resp.Value) (err error) {
			dst, err = m.rewriteNodes(dst, e)
			return err
		})
		return dst, err
	case resp.BulkString, resp.Verbatim:
		body := v.Str
		prefix := ""
		if v.Type == resp.Verbatim && len(body) >= 4 && body[3] == ':' {
			prefix, body = string(body[:4]), body[4:]
		}
		out, err := m.rewriteNodeLines(string(body))
		if err != nil {
			return dst, err
		}
		out = prefix + out
		if v.Type == resp.Verbatim {
			dst = resp.AppendHeader(dst, resp.Verbatim, len(out))
			dst = append(dst, out...)
			return append(dst, '\r', '\n'), nil
		}
		return resp.AppendBulkString(dst, out), nil
	}
	return dst, errShape
}

func (m *ClusterMap) rewriteNodeLines(text string) (string, error) {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) < 3 {
			b.WriteString(line)
			continue
		}
		addr, rest, hasAt := strings.Cut(f[1], "@")
		host, n, ok := splitAddr(addr)
		if !ok {
			return "", errShape
		}
		if n == 0 { // a node without an address yet (handshake, noaddr)
			b.WriteString(line)
			continue
		}
		h, p, ok := m.proxyFor(host, n)
		if !ok {
			return "", &errUnmapped{addr}
		}
		b.WriteString(f[0] + " " + joinAddr(h, p))
		if hasAt {
			b.WriteString("@" + rest)
		}
		b.WriteString(" " + f[2])
	}
	return b.String(), nil
}
