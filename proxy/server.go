// Package proxy is a transparent compressing RESP proxy: clients in any
// language talk to it as to Redis, and it compresses values on the way in and
// decompresses them on the way out, so that Redis stores compressed frames
// (docs/FORMAT.md) while every reply equals the one Redis would give for the
// uncompressed values.
//
// Per client connection a reader goroutine parses commands, rewrites them and
// sends them upstream in batches, and a writer goroutine writes the replies
// in order, flushing when nothing more is ready; the reader of a shared
// upstream connection writes replies itself to a client whose writer is
// idle, without blocking, to save a goroutine wake-up. Stateless commands share a
// few pipelined upstream connections; a client that needs connection state
// (MULTI, WATCH, blocking commands, pub/sub, MONITOR, CLIENT, SELECT, HELLO,
// AUTH ...) gets a private upstream connection pinned to it from then on.
// docs/ARCHITECTURE.md describes the data path, who owns what and the
// rules kept; docs/design/ holds each topic, exceptions.md among them.
package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/resp"
)

// Server is a compressing proxy in front of one Redis server. Set the fields,
// then call Serve. Zero fields have the documented defaults. A Server must
// not be copied or changed after Serve is called.
type Server struct {
	// Upstream is the Redis URL: redis://[user:pass@]host:port[/db],
	// rediss://... (TLS) or unix:///path.sock[?db=N]. Required.
	Upstream string
	// Encoder compresses values on writes, for keys that no Rule matches.
	// Nil: values are stored as they are, except a value that would read
	// as a frame, which is wrapped in a none frame (codec.IDNone), so that
	// it reads back as it was written. Replies are decoded either way.
	Encoder *codec.Encoder
	// Rules give the values of keys with given prefixes their own write
	// policy (see Rule).
	Rules []Rule
	// RequireAuth makes every client authenticate itself to Redis, as if it
	// were connected to Redis directly: each client gets a private
	// upstream connection, opened without the Upstream URL's credentials,
	// from its first command, so Redis answers -NOAUTH until the client's
	// own AUTH (or HELLO ... AUTH) succeeds, and then applies that user's
	// ACL rules. False: clients act with the URL's credentials, which suits
	// a proxy that only local processes can reach.
	RequireAuth bool
	// Decoder decodes values in replies; its MaxDecodedSize is --max-value.
	// Nil: codec.NewDecoder() with its defaults.
	Decoder *codec.Decoder
	// SharedConns is the number of pipelined upstream connections shared by
	// clients for stateless commands. Zero means 1: with more, commands of
	// clients on different connections can reach Redis in another order
	// than they reached the proxy (see proxy/order.go).
	SharedConns int
	// MaxInFlight bounds the commands of one client between being read and
	// having their reply written, which bounds the memory a slow client can
	// hold. Zero means 256.
	MaxInFlight int
	// QuarantineTTL is how long an undecodable value that a destructive
	// read took out of Redis is kept under a quarantine key (see
	// quarantine.go); 0 means DefaultQuarantineTTL.
	QuarantineTTL time.Duration
	// MaxReplyBytes bounds the bytes of replies (as Redis sent them, before
	// decoding) that one client's queue holds because the client does not
	// read them fast enough: past it, the proxy stops reading the client's
	// commands until it catches up. Zero means 64 MiB.
	MaxReplyBytes int64
	// ClientBufferLimit is the hard bound of the bytes one client holds
	// (requests in flight, replies not written, output being written):
	// past it, while it holds more than one reply, the proxy closes the
	// client's connection, as Redis's client-output-buffer-limit does
	// (see memory.go). Zero means 4 x MaxReplyBytes, at least 256 MiB.
	ClientBufferLimit int64
	// MaxMemory bounds the bytes the proxy holds for all clients together:
	// past half of it each client may have one command in flight; past
	// all of it the client that holds the most is closed (memory.go).
	// Zero: no process-wide bound (the squeeze command defaults to
	// DefaultMaxMemory).
	MaxMemory int64
	// MaxBulk is the longest bulk string a client may send (Redis's
	// proto-max-bulk-len). Zero means Redis's own: the proxy asks for it
	// (CONFIG GET proto-max-bulk-len) on each new shared connection, the
	// first of which Serve dials at once, and uses 512 MiB, Redis's
	// default, until one answers or when CONFIG is refused. Then a client gets Redis's error for a value Redis would
	// refuse, and a value Redis would refuse never reaches it (where Redis
	// would answer it with a protocol error and close a shared connection,
	// failing other clients' commands in flight on it).
	MaxBulk int64
	// RejectScripts makes EVAL, EVALSHA, FCALL and their _RO forms fail with
	// an error, for teams that prefer a refusal to the handling of scripts
	// described in scripts.go.
	RejectScripts bool
	// ScriptPrefixTTL is how long a key prefix stays uncompressed after
	// the last script that declared a key of it (scriptkeys.go): then its
	// values are compressed again. Zero means DefaultScriptPrefixTTL;
	// negative, for ever.
	ScriptPrefixTTL time.Duration
	// share: the connections through which the proxies agree on those
	// prefixes (scriptshare.go).
	share prefixShare
	// scriptSHAs and scriptKeys: what the proxy knows of the scripts it
	// forwards and of the keys they use (scripts.go, scriptkeys.go).
	scriptSHAs  scriptSHAs
	scriptsOnce sync.Once
	scriptKeys  scriptKeys
	// keyLocks runs the read-modify-writes the proxy computes one key at
	// a time (keylock.go).
	keyLocks keyLocks
	// StoredListSearch makes LREM, LPOS and LINSERT compare list elements
	// by their stored bytes, with Redis's own commands: faster, but an
	// element stored with other settings (codec, level, min size or gain,
	// dictionary, or raw before the proxy) is not found. By default the
	// proxy finds elements by value (see listsearch.go).
	StoredListSearch bool
	// Cluster, for a proxy in front of a Redis Cluster node, says where
	// the proxies in front of every node listen, so that -MOVED, -ASK and
	// CLUSTER SLOTS, SHARDS, NODES and REPLICAS name them instead of the
	// nodes (see cluster.go). Nil: those replies become errors that say to
	// set it, so cluster clients never bypass the proxy. SetClusterMap
	// replaces the map while the proxy serves (a node added to the
	// cluster); whether there is one takes a restart.
	Cluster *ClusterMap
	// TLSConfig is used for a rediss:// upstream, for example to trust a
	// private CA (RootCAs) or present a client certificate. Nil means the
	// system's roots. An empty ServerName is taken from the URL's host.
	TLSConfig *tls.Config
	// DialTimeout bounds connecting to Redis. Zero means 5s.
	DialTimeout time.Duration
	// Logger receives connection-level events. Nil means slog.Default().
	Logger *slog.Logger
	// Metrics records Prometheus metrics. Nil records nothing.
	Metrics *Metrics
	// Dictionaries decodes frames that name a zstd dictionary, loading
	// dictionaries it does not know yet (a frame written by another proxy
	// with a dictionary published after this one started), for example a
	// *dictstore.Resolver. Nil: such frames fail with an -ERR naming the
	// key and wrapping codec.ErrUnknownDictionary, unless Decoder was built
	// with the dictionary.
	Dictionaries Dictionaries
	// GoroutineReads reads every client from a goroutine of its own, as
	// on systems without epoll, instead of from the event loops that read
	// clients whose commands need no waiting. The replies are the same;
	// the event loops spend fewer system calls.
	GoroutineReads bool
	// EventLoops is the number of event loops that read clients. Zero
	// means 1: one loop reads the clients in the order their commands
	// arrive, as Redis's own thread does, so commands of different clients
	// reach Redis in that order (proxy/order.go). More loops read in
	// parallel, and commands that different loops read within the same
	// few microseconds may then reach Redis in either order.
	EventLoops int

	up       Upstream
	policies atomic.Pointer[policies] // the write policy in force
	// clusterSet is the ClusterMap SetClusterMap put in force; nil: Cluster.
	clusterSet atomic.Pointer[ClusterMap]
	dec        *codec.Decoder
	metrics    *Metrics
	pool       *pool
	pollers    []*poller

	mu        sync.Mutex
	ln        net.Listener
	clients   map[*client]struct{}
	closing   bool
	done      chan struct{}
	wg        sync.WaitGroup
	nextID    atomic.Uint64
	initOnce  sync.Once
	watchOnce sync.Once // the Sentinel watcher
	// sentinelMaster is the master's address as the Sentinels last named
	// it to a dial or a switch (a string; empty before the first).
	sentinelMaster atomic.Value
	doneOnce       sync.Once // closes done
	initErr        error

	// upstreamBulk is Redis's proto-max-bulk-len as the newest shared
	// connection read it, 0 before any did (see MaxBulk).
	upstreamBulk atomic.Int64
	// lacks: the commands the upstream server lacks of those the proxy
	// runs inside its inspect script (lacks* bits), as the newest shared
	// connection learned them (learnCaps); 0 before any did.
	lacks atomic.Uint32

	// heldTotal is the bytes held for all clients (see memory.go);
	// shedding: a reader is closing the client that holds the most.
	heldTotal     atomic.Int64
	expectedTotal atomic.Int64
	shedding      atomic.Bool

	// hostileLogged is when hostile input was last logged (UnixNano; see
	// noteHostile).
	hostileLogged atomic.Int64
}

// maxBulk is the bulk length limit in force for clients (see MaxBulk).
func (s *Server) maxBulk() int64 {
	if s.MaxBulk > 0 {
		return s.MaxBulk
	}
	if n := s.upstreamBulk.Load(); n > 0 {
		return n
	}
	return resp.DefaultMaxBulk
}

// MaxBulkInForce returns the bulk length limit clients are held to: MaxBulk,
// or with MaxBulk zero Redis's proto-max-bulk-len once a shared connection
// has read it, and whether it came from Redis.
func (s *Server) MaxBulkInForce() (n int64, fromRedis bool) {
	return s.maxBulk(), s.MaxBulk <= 0 && s.upstreamBulk.Load() > 0
}

func (s *Server) init() error {
	s.initOnce.Do(func() {
		u, err := ParseUpstream(s.Upstream)
		if err != nil {
			s.initErr = err
			return
		}
		if u.TLS != nil && s.TLSConfig != nil {
			c := s.TLSConfig.Clone()
			if c.ServerName == "" {
				c.ServerName = u.TLS.ServerName
			}
			u.TLS = c
		}
		s.up = u
		s.dec = s.Decoder
		if s.dec == nil {
			if s.dec, err = codec.NewDecoder(); err != nil {
				s.initErr = err
				return
			}
		}
		s.metrics = s.Metrics
		if err := s.initPolicies(); err != nil {
			s.initErr = err
			return
		}
		n := s.SharedConns
		if n <= 0 {
			n = 1
		}
		s.pool = &pool{srv: s, conns: make([]*upConn, n)}
		s.clients = map[*client]struct{}{}
		s.done = make(chan struct{})
	})
	return s.initErr
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

func (s *Server) decoder() *codec.Decoder { return s.dec }

func (s *Server) dialTimeout() time.Duration {
	if s.DialTimeout > 0 {
		return s.DialTimeout
	}
	return 5 * time.Second
}

func (s *Server) maxReplyBytes() int64 {
	if s.MaxReplyBytes > 0 {
		return s.MaxReplyBytes
	}
	return 64 << 20
}

func (s *Server) maxInFlight() int {
	if s.MaxInFlight > 0 {
		return s.MaxInFlight
	}
	return 256
}

// ErrServerClosed is returned by Serve after Close or Shutdown.
var ErrServerClosed = errors.New("proxy: server closed")

// Serve accepts client connections on ln until ctx is done or Close or
// Shutdown is called, and returns ErrServerClosed then. When ctx is done,
// Serve shuts down gracefully (see Shutdown) before returning. It returns
// other errors when the configuration is invalid or Accept fails.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := s.init(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.ln = ln
	if !s.GoroutineReads && s.pollers == nil {
		for range max(s.EventLoops, 1) {
			p, err := newPoller(s)
			if err != nil {
				if !errors.Is(err, errNoPoller) {
					s.logger().Warn("reading each client from its own goroutine", "err", err)
				}
				break
			}
			s.pollers = append(s.pollers, p)
		}
	}
	pollers := s.pollers
	s.mu.Unlock()
	defer func() {
		// The event loops outlive Serve until every client is gone.
		go func() {
			s.wg.Wait()
			for _, p := range pollers {
				p.close()
			}
		}()
	}()
	if len(s.up.Sentinels) > 0 {
		s.watchOnce.Do(func() { go s.watchSentinels() })
	}
	// Connect at once, so that Redis's proto-max-bulk-len (see
	// MaxBulk), and which newer commands it has (learnCaps), hold
	// from the first client's first command. An upstream that is down
	// is dialed again by the first command.
	go func() {
		dctx, cancel := context.WithTimeout(ctx, s.dialTimeout())
		defer cancel()
		s.pool.get(dctx, 0)
	}()
	if !s.RejectScripts {
		s.scriptsOnce.Do(func() { go s.shareScriptPrefixes() })
	}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(sctx)
	})
	defer stop()
	var tempDelay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				s.wg.Wait()
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if tempDelay == 0 {
					tempDelay = 5 * time.Millisecond
				} else if tempDelay *= 2; tempDelay > time.Second {
					tempDelay = time.Second
				}
				time.Sleep(tempDelay)
				continue
			}
			return err
		}
		tempDelay = 0
		c := s.newClient(nc, pollers)
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.clients[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.metrics.connOpened()
		go c.serve()
	}
}

func (s *Server) forget(c *client) {
	s.mu.Lock()
	delete(s.clients, c)
	s.mu.Unlock()
	s.metrics.connClosed()
	s.wg.Done()
}

// Ready reports whether the proxy can serve commands now: it is not
// shutting down, and Redis answers PING on a shared upstream connection
// before ctx ends. It backs a readiness probe (squeeze proxy's /readyz).
func (s *Server) Ready(ctx context.Context) error {
	if err := s.init(); err != nil {
		return err
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return ErrServerClosed
	}
	up, err := s.pool.get(ctx, 0)
	if err != nil {
		return err
	}
	cl := newCall()
	up.send(resp.AppendCommand(nil, []byte("PING")), []*call{cl})
	select {
	case <-cl.done:
	case <-ctx.Done():
		// cl completes later; it is left to the garbage collector.
		return fmt.Errorf("upstream did not answer PING: %w", ctx.Err())
	}
	defer cl.release()
	if cl.err != nil {
		return cl.err
	}
	if !bytes.HasPrefix(cl.reply, []byte("+PONG")) {
		return fmt.Errorf("upstream answered PING with %q", bytes.TrimSpace(cl.reply))
	}
	return nil
}

// Shutdown stops accepting connections, lets every client finish the
// commands it has sent (their replies are written), closes the client
// connections and then the upstream ones. If ctx ends first, it closes
// everything at once and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	if err := s.init(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	s.doneOnce.Do(func() { close(s.done) })
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.clients {
		c.drain()
	}
	s.mu.Unlock()
	idle := make(chan struct{})
	go func() { s.wg.Wait(); close(idle) }()
	var err error
	select {
	case <-idle:
	case <-ctx.Done():
		err = ctx.Err()
		s.mu.Lock()
		for c := range s.clients {
			c.forceClose()
		}
		s.mu.Unlock()
	}
	s.pool.closeAll()
	return err
}

// Close closes the listener, every client connection and every upstream
// connection at once, also while a Shutdown is draining.
func (s *Server) Close() error {
	if err := s.init(); err != nil {
		return err
	}
	s.mu.Lock()
	s.closing = true
	s.doneOnce.Do(func() { close(s.done) })
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.clients {
		c.forceClose()
	}
	s.mu.Unlock()
	s.pool.closeAll()
	return nil
}
