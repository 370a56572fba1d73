package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/squeeze-kv/squeeze/resp"
)

// How the proxies in front of one Redis, or of the nodes of one Redis
// Cluster, agree on the prefixes scripts use (scriptkeys.go):
//
//   - A proxy that learns a prefix PUBLISHes it on the channel
//     ScriptPrefixesKey, then adds it to the set ScriptPrefixesKey and its
//     time to the hash ScriptPrefixesUsedKey, before the script's client
//     gets its reply. Every proxy SUBSCRIBEs to the channel and keeps the
//     prefix plain as the message arrives. Redis Cluster passes a PUBLISH
//     on any node to the subscribers of every node, so one proxy per node
//     agrees too.
//   - In a cluster the set and the hash live in one slot each: a proxy in
//     front of another node follows Redis's -MOVED (or -ASK) to the node
//     that owns it, so there is one set for the whole cluster, which
//     `squeeze advise` and `squeeze compact` read.
//   - Every scriptPrefixRefresh (or a quarter of the TTL, when shorter)
//     each proxy reads the set and the hash again: it takes the prefixes it
//     missed (a message lost while it reconnected), saves the last uses its
//     scripts made, saves again the prefixes the set lost while scripts
//     still use them (after FLUSHALL), and forgets, here and in Redis, the
//     prefixes that no script used for the TTL: their values are
//     compressed again.
//
// These connections are the proxy's own (sideConn), apart from the pool the
// clients' commands go through.

// sideConn is a plain, blocking connection to a Redis node, authenticated
// and in the upstream's database as the pool's are.
type sideConn struct {
	nc      net.Conn
	buf     []byte
	timeout time.Duration
}

// dialSide connects to addr, or to the upstream when addr is empty.
func (s *Server) dialSide(ctx context.Context, addr string) (*sideConn, error) {
	u := s.up
	network, host := u.Network, ""
	if addr == "" {
		addr = u.Addr
		if len(u.Sentinels) > 0 {
			a, err := s.masterAddr(ctx)
			if err != nil {
				return nil, err
			}
			addr = a
		}
	} else {
		network = "tcp"
		host, _, _ = net.SplitHostPort(addr)
	}
	d := net.Dialer{Timeout: s.dialTimeout(), KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if u.TLS != nil {
		cfg := u.TLS
		if uh, _, _ := net.SplitHostPort(u.Addr); host != "" && cfg.ServerName == uh {
			cfg = cfg.Clone()
			cfg.ServerName = host // another node of the cluster
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	c := &sideConn{nc: nc, timeout: s.dialTimeout()}
	for _, cmd := range s.connSetup(true, u.DB) {
		v, err := c.roundtrip(cmd)
		if err == nil && v.Type == resp.Error {
			err = errors.New(string(v.Str))
		}
		if err != nil {
			nc.Close()
			return nil, err
		}
	}
	return c, nil
}

// roundtrip writes req (one or more commands) and reads one reply.
func (c *sideConn) roundtrip(req []byte) (resp.Value, error) {
	c.nc.SetDeadline(time.Now().Add(c.timeout))
	defer c.nc.SetDeadline(time.Time{})
	if _, err := c.nc.Write(req); err != nil {
		return resp.Value{}, err
	}
	return c.read()
}

// read reads one reply; the Value holds memory of its own.
func (c *sideConn) read() (resp.Value, error) {
	for {
		_, rest, err := resp.ReadValue(c.buf)
		if err == nil {
			raw := bytes.Clone(c.buf[:len(c.buf)-len(rest)])
			c.buf = append(c.buf[:0], rest...)
			v, _, err := resp.ReadValue(raw)
			return v, err
		}
		if !errors.Is(err, resp.ErrIncomplete) {
			return resp.Value{}, err
		}
		if len(c.buf) == cap(c.buf) {
			c.buf = append(c.buf, make([]byte, 4096)...)[:len(c.buf)]
		}
		n, err := c.nc.Read(c.buf[len(c.buf):cap(c.buf)])
		if err != nil {
			return resp.Value{}, err
		}
		c.buf = c.buf[:len(c.buf)+n]
	}
}

func (c *sideConn) close() { c.nc.Close() }

// prefixShare holds the proxy's connections for the shared state: to its
// upstream, and to the other cluster nodes a -MOVED named.
type prefixShare struct {
	syncMu sync.Mutex // one syncScriptPrefixes at a time
	mu     sync.Mutex // the connections, one command at a time
	own    *sideConn
	nodes  map[string]*sideConn
}

// conn returns the connection to addr ("" the upstream), dialing it.
func (s *Server) shareConn(addr string) (*sideConn, error) {
	sh := &s.share
	if addr == "" && sh.own != nil {
		return sh.own, nil
	}
	if c := sh.nodes[addr]; addr != "" && c != nil {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.dialTimeout())
	defer cancel()
	c, err := s.dialSide(ctx, addr)
	if err != nil {
		return nil, err
	}
	if addr == "" {
		sh.own = c
	} else {
		if sh.nodes == nil {
			sh.nodes = map[string]*sideConn{}
		}
		sh.nodes[addr] = c
	}
	return c, nil
}

// dropShareConn closes a connection that failed.
func (s *Server) dropShareConn(addr string, c *sideConn) {
	c.close()
	if addr == "" {
		s.share.own = nil
	} else {
		delete(s.share.nodes, addr)
	}
}

// shareDo runs one command on the upstream, following -MOVED and -ASK to
// the node they name when follow is set (a key of the shared state in a
// cluster), and returns its reply.
func (s *Server) shareDo(follow bool, args ...[]byte) (resp.Value, error) {
	s.share.mu.Lock()
	defer s.share.mu.Unlock()
	req := resp.AppendCommand(nil, args...)
	addr := ""
	retried := false
	for hop := 0; ; hop++ {
		c, err := s.shareConn(addr)
		if err != nil {
			return resp.Value{}, err
		}
		v, err := c.roundtrip(req)
		if err != nil {
			s.dropShareConn(addr, c)
			if !retried {
				// A connection idle for long may have been closed
				// (Redis's timeout): once more on a new one.
				retried = true
				hop--
				continue
			}
			return resp.Value{}, err
		}
		if v.Type == resp.Error && addr == "" && hop == 0 && bytes.HasPrefix(v.Str, []byte("READONLY")) {
			// A Sentinel failover made the node a replica: dial the
			// master again.
			s.dropShareConn(addr, c)
			continue
		}
		if !follow || v.Type != resp.Error || hop == 3 {
			return v, nil
		}
		f := bytes.Fields(v.Str)
		if len(f) != 3 || (string(f[0]) != "MOVED" && string(f[0]) != "ASK") {
			return v, nil
		}
		addr = string(f[2])
		if string(f[0]) == "ASK" {
			c, err := s.shareConn(addr)
			if err != nil {
				return resp.Value{}, err
			}
			if _, err := c.roundtrip(resp.AppendCommand(nil, []byte("ASKING"))); err != nil {
				s.dropShareConn(addr, c)
				return resp.Value{}, err
			}
		}
	}
}

// existsIn counts the keys that exist in database db, on the upstream.
func (s *Server) existsIn(db int, keys [][]byte) (n int64, err error) {
	for range 2 { // once more on a new connection, as shareDo
		if n, err = s.existsOnce(db, keys); !errors.Is(err, errSideConn) {
			return n, err
		}
	}
	return n, err
}

// errSideConn wraps a failure of the connection itself.
var errSideConn = errors.New("connection failed")

func (s *Server) existsOnce(db int, keys [][]byte) (int64, error) {
	s.share.mu.Lock()
	defer s.share.mu.Unlock()
	c, err := s.shareConn("")
	if err != nil {
		return 0, err
	}
	req := resp.AppendCommand(nil, append([][]byte{[]byte("EXISTS")}, keys...)...)
	if db != s.up.DB {
		req = append(resp.AppendCommand(nil, []byte("SELECT"), []byte(strconv.Itoa(db))), req...)
		req = resp.AppendCommand(req, []byte("SELECT"), []byte(strconv.Itoa(s.up.DB)))
	}
	v, err := c.roundtrip(req)
	var n resp.Value
	if err == nil && db != s.up.DB {
		if n, err = c.read(); err == nil {
			_, err = c.read()
		}
		v = n
	}
	if err != nil {
		s.dropShareConn("", c)
		return 0, fmt.Errorf("%w: %w", errSideConn, err)
	}
	if err := shareErr(v, nil); err != nil {
		return 0, err
	}
	i, ok := resp.ParseInt(v.Str)
	if !ok {
		return 0, errors.New("EXISTS: " + string(v.Raw))
	}
	return i, nil
}

// shareErr is err, or the error reply v, or nil.
func shareErr(v resp.Value, err error) error {
	if err == nil && v.Type == resp.Error {
		err = errors.New(string(v.Str))
	}
	return err
}

// shareLearned announces prefixes this proxy learned to the other proxies
// and saves them in Redis, with their use at now.
func (s *Server) shareLearned(prefixes []string, now int64) {
	if len(prefixes) == 0 {
		return
	}
	for _, p := range prefixes {
		if err := shareErr(s.shareDo(false, []byte("PUBLISH"), []byte(ScriptPrefixesKey), []byte(p))); err != nil {
			s.logger().Warn("script key prefix not announced to other proxies", "prefix", p, "channel", ScriptPrefixesKey, "err", err)
		}
	}
	sadd := [][]byte{[]byte("SADD"), []byte(ScriptPrefixesKey)}
	hset := [][]byte{[]byte("HSET"), []byte(ScriptPrefixesUsedKey)}
	ms := []byte(strconv.FormatInt(now, 10))
	for _, p := range prefixes {
		sadd = append(sadd, []byte(p))
		hset = append(hset, []byte(p), ms)
	}
	err := shareErr(s.shareDo(true, sadd...))
	if err == nil {
		err = shareErr(s.shareDo(true, hset...))
	}
	if err != nil {
		s.logger().Warn("script key prefixes not saved in Redis", "key", ScriptPrefixesKey, "prefixes", prefixes, "err", err)
		return
	}
	s.scriptKeys.saved(prefixes, now)
}

// shareScriptPrefixes reads the shared state now and every
// scriptPrefixEvery, and listens for the prefixes other proxies learn,
// until the server is done.
func (s *Server) shareScriptPrefixes() {
	go s.listenScriptPrefixes()
	for {
		s.syncScriptPrefixes()
		select {
		case <-s.done:
			s.share.mu.Lock()
			if s.share.own != nil {
				s.share.own.close()
			}
			for _, c := range s.share.nodes {
				c.close()
			}
			s.share.own, s.share.nodes = nil, nil
			s.share.mu.Unlock()
			return
		case <-time.After(s.scriptPrefixEvery()):
		}
	}
}

// scriptPrefixEvery is how often the proxy reads the shared state.
func (s *Server) scriptPrefixEvery() time.Duration {
	every := scriptPrefixRefresh
	if ttl := s.scriptPrefixTTL(); ttl > 0 && ttl/4 < every {
		every = max(ttl/4, 50*time.Millisecond)
	}
	return every
}

// listenScriptPrefixes subscribes to the channel ScriptPrefixesKey and
// keeps the prefixes announced there plain, reconnecting after a pause
// (a second, doubled after each failure to subscribe, up to 30 s) when the
// connection fails, until the server is done.
func (s *Server) listenScriptPrefixes() {
	pause := time.Second
	for {
		ctx, cancel := context.WithTimeout(context.Background(), s.dialTimeout())
		c, err := s.dialSide(ctx, "")
		cancel()
		if err == nil {
			stop := make(chan struct{})
			go func() {
				select {
				case <-s.done:
					c.close()
				case <-stop:
				}
			}()
			var v resp.Value
			if v, err = c.roundtrip(resp.AppendCommand(nil, []byte("SUBSCRIBE"), []byte(ScriptPrefixesKey))); err == nil {
				if err = shareErr(v, nil); err == nil {
					pause = time.Second
					s.syncScriptPrefixes() // what was announced before
					err = s.readAnnounced(c)
				}
			}
			close(stop)
			c.close()
		}
		select {
		case <-s.done:
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second) // a refusal (ACL) is not retried every second
		s.logger().Debug("listening for script key prefixes: reconnecting", "channel", ScriptPrefixesKey, "err", err)
	}
}

// readAnnounced reads the messages of the channel until c fails.
func (s *Server) readAnnounced(c *sideConn) error {
	for {
		v, err := c.read()
		if err != nil {
			return err
		}
		if v.Type != resp.Array && v.Type != resp.Push {
			continue
		}
		it := v.Elements()
		kind, _ := it.Next()
		_, _ = it.Next()
		payload, ok := it.Next()
		if !ok || string(kind.Str) != "message" {
			continue
		}
		now := time.Now().UnixMilli()
		for _, p := range s.scriptKeys.add([]string{string(payload.Str)}, nil, now) {
			s.logger().Info("script key prefix: values stored uncompressed from now on, so that scripts read them as written",
				"prefix", p, "source", "another proxy", "ttl", s.scriptPrefixTTLText())
			s.metrics.scriptPrefixLearned(p, now)
		}
	}
}

// syncScriptPrefixes reads the set and the hash of the shared state once
// and acts on them (see the comment at the top).
func (s *Server) syncScriptPrefixes() {
	s.share.syncMu.Lock()
	defer s.share.syncMu.Unlock()
	mv, err := s.shareDo(true, []byte("SMEMBERS"), []byte(ScriptPrefixesKey))
	if err = shareErr(mv, err); err != nil || (mv.Type != resp.Array && mv.Type != resp.Set) {
		s.logger().Debug("script key prefixes not read", "key", ScriptPrefixesKey, "err", err)
		return
	}
	uv, err := s.shareDo(true, []byte("HGETALL"), []byte(ScriptPrefixesUsedKey))
	if err = shareErr(uv, err); err != nil {
		s.logger().Debug("script key prefixes not read", "key", ScriptPrefixesUsedKey, "err", err)
		return
	}
	members := map[string]bool{}
	it := mv.Elements()
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		members[string(e.Str)] = true
	}
	used := map[string]int64{}
	it = uv.Elements()
	for {
		f, ok := it.Next()
		if !ok {
			break
		}
		val, _ := it.Next()
		if n, ok := resp.ParseInt(val.Str); ok {
			used[string(f.Str)] = n
		}
	}
	now := time.Now().UnixMilli()
	r := s.scriptKeys.review(members, used, now, s.scriptPrefixTTL().Milliseconds())
	for _, p := range r.added {
		s.logger().Info("script key prefix: values stored uncompressed from now on, so that scripts read them as written",
			"prefix", p, "source", ScriptPrefixesKey, "ttl", s.scriptPrefixTTLText())
	}
	for _, p := range r.forgot {
		s.logger().Info("script key prefix: no script used it for the TTL; values are compressed again",
			"prefix", p, "ttl", s.scriptPrefixTTLText())
		s.metrics.scriptPrefixForgotten(p)
	}
	for _, u := range s.scriptKeys.list() {
		s.metrics.scriptPrefixLearned(u.Prefix, u.LastUsed.UnixMilli())
	}
	if len(r.expired) > 0 {
		srem := [][]byte{[]byte("SREM"), []byte(ScriptPrefixesKey)}
		hdel := [][]byte{[]byte("HDEL"), []byte(ScriptPrefixesUsedKey)}
		for _, p := range r.expired {
			srem, hdel = append(srem, []byte(p)), append(hdel, []byte(p))
		}
		if err := shareErr(s.shareDo(true, srem...)); err != nil {
			s.logger().Warn("expired script key prefixes not removed from Redis", "key", ScriptPrefixesKey, "err", err)
		}
		if err := shareErr(s.shareDo(true, hdel...)); err != nil {
			s.logger().Warn("expired script key prefixes not removed from Redis", "key", ScriptPrefixesUsedKey, "err", err)
		}
	}
	if len(r.resave) > 0 {
		s.logger().Info("script key prefixes missing from Redis (FLUSHALL?): saved again", "key", ScriptPrefixesKey, "prefixes", r.resave)
		for _, p := range r.resave {
			s.shareLearned([]string{p}, r.save[p])
		}
	}
	if len(r.save) > len(r.resave) {
		hset := [][]byte{[]byte("HSET"), []byte(ScriptPrefixesUsedKey)}
		for p, ms := range r.save {
			hset = append(hset, []byte(p), []byte(strconv.FormatInt(ms, 10)))
		}
		if err := shareErr(s.shareDo(true, hset...)); err != nil {
			s.logger().Debug("script key prefix uses not saved", "key", ScriptPrefixesUsedKey, "err", err)
			return
		}
		for p, ms := range r.save {
			s.scriptKeys.saved([]string{p}, ms)
		}
	}
}

// prefixReview is what one read of the shared state calls for.
type prefixReview struct {
	added   []string         // new here, from the set
	forgot  []string         // forgotten here: unused for the TTL
	expired []string         // to remove from the set and the hash
	resave  []string         // known here, missing from the set, still used
	save    map[string]int64 // uses to write to the hash
}

// review compares the prefixes known here with the set's members and the
// hash's uses (Unix ms), at now, with ttl in ms (0: for ever).
func (k *scriptKeys) review(members map[string]bool, used map[string]int64, now, ttl int64) (r prefixReview) {
	r.save = map[string]int64{}
	stale := func(ms int64) bool { return ttl > 0 && ms < now-ttl }
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.prefixes == nil {
		k.prefixes = map[string]*prefixEntry{}
	}
	for m := range members {
		shared := used[m]
		e := k.prefixes[m]
		if e == nil {
			if shared != 0 && stale(shared) {
				r.expired = append(r.expired, m)
				continue
			}
			if len(k.prefixes) >= maxScriptPrefixes {
				continue
			}
			e = &prefixEntry{}
			k.prefixes[m] = e
		}
		if e.used.Load() < shared {
			e.used.Store(shared)
		}
		if e.saved < shared {
			e.saved = shared
		}
		if !e.known {
			e.known = true
			if e.used.Load() == 0 {
				e.used.Store(now)
			}
			r.added = append(r.added, m)
		}
	}
	dropped := false
	for p, e := range k.prefixes {
		if !e.known {
			continue
		}
		u := e.used.Load()
		switch {
		case stale(u) && e.pending == 0:
			delete(k.prefixes, p)
			r.forgot = append(r.forgot, p)
			dropped = true
			if members[p] {
				r.expired = append(r.expired, p)
			}
		case !members[p]:
			r.resave = append(r.resave, p)
			r.save[p] = u
		case u > e.saved:
			r.save[p] = u
		}
	}
	if dropped {
		k.clean = nil
	}
	k.any.Store(len(k.prefixes) > 0)
	return r
}

// saved notes that the hash holds the use ms of prefixes.
func (k *scriptKeys) saved(prefixes []string, ms int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range prefixes {
		if e, ok := k.prefixes[p]; ok && e.saved < ms {
			e.saved = ms
		}
	}
}
