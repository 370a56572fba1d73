package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/squeeze-kv/squeeze/internal/bufpool"
	"github.com/squeeze-kv/squeeze/resp"
)

// Upstream is where the proxy connects: parsed from a redis://, rediss://,
// unix:// or sentinel:// URL.
type Upstream struct {
	Network  string // "tcp" or "unix"
	Addr     string // host:port or socket path; empty with Sentinels
	TLS      *tls.Config
	Username string
	Password string
	DB       int
	// Sentinels, when set, are the Redis Sentinels that name the master
	// of Master: the proxy asks them for its address whenever it dials,
	// so it follows a failover.
	Sentinels        []string
	Master           string
	SentinelPassword string
}

// ParseUpstream parses an upstream URL:
//
//	redis://[user:password@]host[:port][/db]
//	rediss://[user:password@]host[:port][/db]   (TLS)
//	unix://[user:password@]/path/to/redis.sock[?db=N]
//	sentinel://[user:password@]host:port[,host:port...]/master[/db][?sentinel_password=P]
//
// A bare host:port is read as redis://host:port. In a sentinel:// URL the
// hosts are Sentinels (port 26379 by default), the credentials are the
// Redis master's, and sentinel_password is the Sentinels' own. Any other
// parameter is an error naming it, and errors name the URL redacted
// (RedactURL).
func ParseUpstream(s string) (Upstream, error) {
	var u Upstream
	if !strings.Contains(s, "://") {
		s = "redis://" + s
	}
	if rest, ok := strings.CutPrefix(s, "sentinel://"); ok {
		return parseSentinelURL(s, rest)
	}
	pu, err := url.Parse(s)
	if err != nil {
		return u, fmt.Errorf("upstream URL %q: %w", RedactURL(s), plainURLError(err))
	}
	if pu.User != nil {
		u.Username = pu.User.Username()
		u.Password, _ = pu.User.Password()
		if _, has := pu.User.Password(); !has && u.Username != "" {
			// redis://secret@host means a password without a user name.
			u.Password, u.Username = u.Username, ""
		}
	}
	dbText := pu.Query().Get("db")
	switch pu.Scheme {
	case "redis", "rediss":
		host := pu.Host
		if host == "" {
			return u, fmt.Errorf("upstream URL %q: missing host", RedactURL(s))
		}
		if pu.Port() == "" {
			host = net.JoinHostPort(pu.Hostname(), "6379")
		}
		u.Network, u.Addr = "tcp", host
		if p := strings.Trim(pu.Path, "/"); p != "" {
			dbText = p
		}
		if pu.Scheme == "rediss" {
			u.TLS = &tls.Config{ServerName: pu.Hostname(), MinVersion: tls.VersionTLS12}
		}
	case "unix":
		if pu.Path == "" {
			return u, fmt.Errorf("upstream URL %q: missing socket path", RedactURL(s))
		}
		u.Network, u.Addr = "unix", pu.Path
	default:
		return u, fmt.Errorf("upstream URL %q: scheme must be redis, rediss, unix or sentinel", RedactURL(s))
	}
	if err := checkParams(s, pu.Scheme, pu.RawQuery); err != nil {
		return u, err
	}
	if dbText != "" {
		db, err := strconv.Atoi(dbText)
		if err != nil || db < 0 {
			return u, fmt.Errorf("upstream URL %q: database %q is not a number", RedactURL(s), dbText)
		}
		u.DB = db
	}
	return u, nil
}

// parseSentinelURL parses the part of a sentinel:// URL after the scheme.
// net/url does not take a list of hosts, so the authority is split here.
func parseSentinelURL(s, rest string) (Upstream, error) {
	var u Upstream
	rest, query, _ := strings.Cut(rest, "?")
	authority, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		info, err := url.Parse("redis://" + authority[:at+1] + "h")
		if err != nil {
			return u, fmt.Errorf("upstream URL %q: %w", RedactURL(s), plainURLError(err))
		}
		u.Username = info.User.Username()
		u.Password, _ = info.User.Password()
		if _, has := info.User.Password(); !has && u.Username != "" {
			u.Password, u.Username = u.Username, ""
		}
		authority = authority[at+1:]
	}
	for _, h := range strings.Split(authority, ",") {
		if h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, "26379")
		}
		u.Sentinels = append(u.Sentinels, h)
	}
	if len(u.Sentinels) == 0 {
		return u, fmt.Errorf("upstream URL %q: no sentinel host", RedactURL(s))
	}
	master, db, _ := strings.Cut(path, "/")
	if u.Master = master; master == "" {
		return u, fmt.Errorf("upstream URL %q: no master name (sentinel://host:26379/mymaster)", RedactURL(s))
	}
	if db = strings.Trim(db, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			return u, fmt.Errorf("upstream URL %q: database %q is not a number", RedactURL(s), db)
		}
		u.DB = n
	}
	if err := checkParams(s, "sentinel", query); err != nil {
		return u, err
	}
	q, _ := url.ParseQuery(query) // checkParams parsed it
	u.SentinelPassword = q.Get("sentinel_password")
	u.Network = "tcp"
	return u, nil
}

// masterAddr asks the Sentinels, in order, for the address of the master.
func (s *Server) masterAddr(ctx context.Context) (string, error) {
	return ResolveMaster(ctx, s.up, s.dialTimeout())
}

// ResolveMaster asks u's Sentinels, in order, for the address of u.Master,
// waiting at most timeout for each.
func ResolveMaster(ctx context.Context, u Upstream, timeout time.Duration) (string, error) {
	var errs []error
	for _, addr := range u.Sentinels {
		a, err := askSentinel(ctx, addr, u.Master, u.SentinelPassword, timeout)
		if err == nil {
			return a, nil
		}
		errs = append(errs, fmt.Errorf("sentinel %s: %w", addr, err))
	}
	return "", fmt.Errorf("no sentinel named the master %q: %w", u.Master, errors.Join(errs...))
}

// askSentinel sends SENTINEL GET-MASTER-ADDR-BY-NAME to one Sentinel.
func askSentinel(ctx context.Context, addr, master, password string, timeout time.Duration) (string, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(timeout))
	var req []byte
	if password != "" {
		req = resp.AppendCommand(req, []byte("AUTH"), []byte(password))
	}
	req = resp.AppendCommand(req, []byte("SENTINEL"), []byte("GET-MASTER-ADDR-BY-NAME"), []byte(master))
	if _, err := nc.Write(req); err != nil {
		return "", err
	}
	var buf []byte
	tmp := make([]byte, 4096)
	for want := strings.Count(string(req), "*"); ; {
		v, rest, err := resp.ReadValue(buf)
		if errors.Is(err, resp.ErrIncomplete) {
			n, rerr := nc.Read(tmp)
			if rerr != nil {
				return "", rerr
			}
			buf = append(buf, tmp[:n]...)
			continue
		}
		if err != nil {
			return "", err
		}
		if v.Type == resp.Error {
			return "", errors.New(string(v.Str))
		}
		if want--; want > 0 { // the AUTH reply
			buf = rest
			continue
		}
		if v.Type != resp.Array || v.N != 2 {
			return "", fmt.Errorf("does not know the master %q", master)
		}
		it := v.Elements()
		host, _ := it.Next()
		port, _ := it.Next()
		return net.JoinHostPort(string(host.Str), string(port.Str)), nil
	}
}

// errFailover fails the calls in flight on a connection to a master that
// became a replica.
var errFailover = errors.New("the master became a replica (failover); retry")

// errUpstreamClosed is the error of calls on a connection the proxy closed.
var errUpstreamClosed = errors.New("upstream connection closed")

// handOverReply is the reply size from which the upstream reader hands its
// read buffer to the call rather than copying the reply out of it.
const handOverReply = 256 << 10

// upConn is one connection to Redis, pipelined: writers append requests and
// their calls under mu, and one reader goroutine matches replies to calls in
// order.
type upConn struct {
	nc net.Conn
	mu sync.Mutex
	// redisID is the connection's CLIENT ID (a shared connection's; 0:
	// unknown), delivered counts the replies its reader delivered: the
	// stall watcher's (stall.go).
	redisID   int64
	delivered atomic.Uint64
	// queuedTotal counts the calls ever queued to be sent (under mu), and
	// takenWait the goroutines waiting until delivered reaches a count
	// of it (awaitTaken): deliver wakes them.
	queuedTotal uint64
	takenWait   atomic.Int32
	// inflight holds the calls sent (or queued to be sent) whose replies the
	// reader has not taken yet, oldest first (guarded by mu). The reader
	// takes them all at once into taking, and hands them out from there
	// (takeCall), so that matching a reply to its call costs no lock.
	inflight []*call
	taking   []*call // reader only
	takeAt   int     // reader only: the next call in taking
	dead     bool
	err      error
	closed   chan struct{}
	// failOnce runs fail's work once.
	failOnce sync.Once
	// onPush receives RESP3 push messages and, in relay mode, every reply
	// (pub/sub, MONITOR). Nil on shared connections.
	// seq is the number of calls this connection has completed before the
	// message, so the client writes the message after those replies.
	onPush func(msg []byte, seq uint64)
	// completed counts the calls the reader has completed (reader only).
	completed uint64
	relay     atomic.Bool   // set when the reader passes a relay call
	relayEnds atomic.Uint64 // how many times relay mode ended
	// authed is false for a connection dialed without credentials that
	// Redis answered -NOAUTH (Server.RequireAuth).
	authed bool
	// Reader only: relay of MONITOR, and subscription counts.
	monitor     bool
	subs, ssubs int64
	srv         *Server
	// Guarded by mu: requests queued while another sender writes, a
	// spare buffer, and whether a sender is writing.
	wbuf, spare []byte
	writing     bool
	// queued counts the calls whose requests sit in wbuf (guarded by mu);
	// awaiting counts the calls sent or queued whose reply the reader has
	// not taken yet. awaiting > queued means a written request awaits its
	// reply, so the reader will come back to write wbuf.
	queued   int64
	awaiting atomic.Int64
	// Private connections: sent counts the calls sent (guarded by mu), and
	// deferPush is the number of the last one sent with deferPushes: push
	// messages that arrive before its reply count as after it.
	sent      uint64
	deferPush atomic.Uint64
	// Order barriers (proxy/order.go), guarded by mu: holdN counts the
	// barriers raised; while it is above zero, requests sent go to after
	// and their calls to afterCalls, and written is signalled whenever a
	// writer stops. writeWait counts the goroutines waiting for the
	// writer to write what was queued before their barrier
	// (writeBeforeBarrier): written is signalled for them too, although
	// their barrier may have ended meanwhile (wakeWriteWaiters).
	holdN      int
	writeWait  int
	segs       []afterSeg // one per barrier, oldest first
	after      []byte
	afterCalls []*call
	// afterKeys are the key hashes of the held batches that named theirs,
	// afterAny the count of those that did not (orderscope.go).
	afterKeys []uint64
	afterAny  int
	written   sync.Cond
	inWrite   bool     // a sender writes requests it took out of wbuf
	heldBy    *poller  // the event loop that holds the writes (holdWrites)
	rw        rewriter // the reader's, for replies it writes to clients
	// Reader only (passreply.go): the call of the reply being read, taken
	// from inflight before the reply is whole, and the buffer a reply
	// passed through goes by.
	taken   *call
	passBuf []byte
	pipe    *passPipe
}

// dialUp connects to Redis, authenticates and selects the database.
func (s *Server) dialUp(ctx context.Context, onPush func([]byte, uint64)) (*upConn, error) {
	return s.dialUpAs(ctx, onPush, true, s.up.DB)
}

// dialUpAs dials the upstream and selects database db. With withCreds
// false (a client that must authenticate itself, Server.RequireAuth) it
// sends no AUTH, and its SELECT may fail with -NOAUTH, which the
// connection's authed records.
func (s *Server) dialUpAs(ctx context.Context, onPush func([]byte, uint64), withCreds bool, db int) (*upConn, error) {
	u := s.up
	if len(u.Sentinels) > 0 {
		addr, err := s.masterAddr(ctx)
		if err != nil {
			s.metrics.upstreamError("dial")
			return nil, err
		}
		u.Addr = addr
		s.sentinelMaster.Store(addr)
	}
	d := net.Dialer{Timeout: s.dialTimeout(), KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, u.Network, u.Addr)
	if err != nil {
		s.metrics.upstreamError("dial")
		return nil, fmt.Errorf("dial upstream %s: %w", u.Addr, err)
	}
	if u.TLS != nil {
		tc := tls.Client(nc, u.TLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			s.metrics.upstreamError("tls")
			return nil, fmt.Errorf("tls handshake with upstream %s: %w", u.Addr, err)
		}
		nc = tc
	}
	if tcp, ok := nc.(*net.TCPConn); ok {
		tcp.SetNoDelay(true)
	}
	nc = newRawSock(nc)
	authed := true
	setup := s.connSetup(withCreds, db)
	askBulk := -1 // the index of CONFIG GET proto-max-bulk-len in setup
	if s.MaxBulk <= 0 && withCreds && onPush == nil {
		askBulk = len(setup)
		setup = append(setup, resp.AppendCommand(nil, []byte("CONFIG"), []byte("GET"), []byte("proto-max-bulk-len")))
	}
	askCaps := -1 // the index of COMMAND INFO, then COMMAND DOCS SET (see learnCaps)
	askID := -1   // the index of CLIENT ID, for the stall watcher (stall.go)
	if withCreds && onPush == nil {
		askCaps = len(setup)
		setup = append(setup, capsInfo, capsDocs)
		askID = len(setup)
		setup = append(setup, clientIDRequest)
	}
	var redisID int64
	var info resp.Value
	if len(setup) > 0 {
		nc.SetDeadline(time.Now().Add(s.dialTimeout()))
		if _, err := nc.Write(bytes.Join(setup, nil)); err != nil {
			nc.Close()
			return nil, fmt.Errorf("upstream %s: %w", u.Addr, err)
		}
		err := readReplies(nc, len(setup), func(got int, v resp.Value) error {
			switch {
			case got == askBulk:
				// Not part of the connection's state: a refusal (NOPERM,
				// CONFIG renamed away) leaves the limit as it was.
				s.learnBulkLimit(v)
			case got == askCaps:
				info, _, _ = resp.ReadValue(bytes.Clone(v.Raw)) // the buffer is reused
			case got == askCaps+1 && askCaps >= 0:
				s.learnCaps(info, v)
			case got == askID:
				if v.Type == resp.Integer {
					redisID, _ = strconv.ParseInt(string(v.Str), 10, 64)
				}
			case v.Type == resp.Error:
				if withCreds || !bytes.HasPrefix(v.Str, []byte("NOAUTH")) {
					return fmt.Errorf("refused AUTH/SELECT: %s", v.Str)
				}
				authed = false
			}
			return nil
		})
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("upstream %s: %w", u.Addr, err)
		}
		nc.SetDeadline(time.Time{})
	}
	c := &upConn{nc: nc, closed: make(chan struct{}), onPush: onPush, srv: s, authed: authed, redisID: redisID}
	c.written.L = &c.mu
	c.rw.s = s
	go c.readLoop()
	return c, nil
}

// readReplies reads n replies from nc, a new connection's answers to its
// setup, and gives each to f in turn, stopping at the first error.
func readReplies(nc net.Conn, n int, f func(i int, v resp.Value) error) error {
	buf := make([]byte, 0, 512)
	for got := 0; got < n; {
		v, rest, err := resp.ReadValue(buf)
		if errors.Is(err, resp.ErrIncomplete) {
			if len(buf) == cap(buf) {
				buf = append(buf, 0)[:len(buf)]
			}
			k, rerr := nc.Read(buf[len(buf):cap(buf)])
			if rerr != nil {
				return rerr
			}
			buf = buf[:len(buf)+k]
			continue
		}
		if err != nil {
			return err
		}
		if err := f(got, v); err != nil {
			return err
		}
		buf = append(buf[:0], rest...)
		got++
	}
	return nil
}

// Commands a newer server may have, asked on each new shared connection:
// the inspect script runs them on decoded values (see conditional), but
// where the server lacks one the proxy passes the command as it is, so that
// the client gets the server's own error, at queue time inside MULTI too.
var (
	capsInfo = resp.AppendCommand(nil, []byte("COMMAND"), []byte("INFO"), []byte("DELEX"), []byte("DIGEST"), []byte("DELIFEQ"))
	capsDocs = resp.AppendCommand(nil, []byte("COMMAND"), []byte("DOCS"), []byte("SET"))
)

// What the upstream server lacks (Server.lacks).
const (
	lacksSetIf   uint32 = 1 << iota // SET ... IFEQ (Valkey 8.1, Redis 8.4)
	lacksDelex                      // DELEX (Redis 8.4)
	lacksDigest                     // DIGEST (Redis 8.4)
	lacksDelifeq                    // DELIFEQ (Valkey 9)
)

// learnCaps takes what the server lacks from the replies to capsInfo (nil
// for an unknown command) and capsDocs (SET's arguments, which name IFEQ
// where SET has it). A refusal (ACL, a renamed COMMAND) or a reply of
// another form changes nothing: the commands are then taken as known.
func (s *Server) learnCaps(info, docs resp.Value) {
	if info.Type != resp.Array || info.N != 3 || docs.Type == resp.Error || docs.IsNull() || (docs.Type != resp.Array && docs.Type != resp.Map) {
		return
	}
	var lacks uint32
	it := info.Elements()
	for _, bit := range [...]uint32{lacksDelex, lacksDigest, lacksDelifeq} {
		if e, _ := it.Next(); e.IsNull() {
			lacks |= bit
		}
	}
	if !bytes.Contains(docs.Raw, []byte("IFEQ")) {
		lacks |= lacksSetIf
	}
	s.lacks.Store(lacks)
}

// served returns the form of info the proxy runs on this server: a
// command's inspect form, or where the server lacks the command (or SET
// its IFEQ) the command to pass as it is.
func (s *Server) served(info *cmdInfo) *cmdInfo {
	lacks := s.lacks.Load()
	switch {
	case lacks == 0:
		return info
	case info == setIf && lacks&lacksSetIf != 0:
		return setCmd
	case info == delexIf && lacks&lacksDelex != 0:
		return delexCmd
	case info == digestCmd && lacks&lacksDigest != 0,
		info == delifeqCmd && lacks&lacksDelifeq != 0:
		return unknownCmd
	}
	return info
}

// learnBulkLimit takes Redis's proto-max-bulk-len from the reply to CONFIG
// GET proto-max-bulk-len: a name and a value, as an array (RESP2) or a map
// (RESP3). Anything else is ignored.
func (s *Server) learnBulkLimit(v resp.Value) {
	if (v.Type != resp.Array && v.Type != resp.Map) || v.N != 2 {
		return
	}
	it := v.Elements()
	it.Next()
	val, _ := it.Next()
	if n, ok := resp.ParseInt(val.Str); ok && n > 0 {
		// Log a limit other than Redis's default, and any change.
		if old := s.upstreamBulk.Swap(n); old != n && (old != 0 || n != resp.DefaultMaxBulk) {
			s.logger().Info("clients held to Redis's proto-max-bulk-len", "bytes", n, "before", old)
		}
	}
}

// connSetup returns the commands that put a new upstream connection in
// the state the proxy stands for: AUTH with the URL's credentials (unless
// withCreds is false), and SELECT of database db (the URL's, unless a
// client selected another). Without credentials SELECT is sent even for
// database 0: its -NOAUTH says that the client must authenticate.
func (s *Server) connSetup(withCreds bool, db int) [][]byte {
	u := s.up
	var cmds [][]byte
	if u.Password != "" && withCreds {
		if u.Username != "" {
			cmds = append(cmds, resp.AppendCommand(nil, []byte("AUTH"), []byte(u.Username), []byte(u.Password)))
		} else {
			cmds = append(cmds, resp.AppendCommand(nil, []byte("AUTH"), []byte(u.Password)))
		}
	}
	if db != 0 || !withCreds {
		cmds = append(cmds, resp.AppendCommand(nil, []byte("SELECT"), []byte(strconv.Itoa(db))))
	}
	return cmds
}

// send queues one batch of requests whose calls are calls, atomically with
// respect to other senders, and writes it. If another sender is writing at
// that moment, it leaves the batch to that sender, which writes everything
// queued meanwhile with one more system call. On a shared connection whose
// earlier requests still await replies, the batch waits for the reader,
// which writes everything queued as soon as a read brings replies, before
// it parses them and writes them to their clients (so that Redis runs the
// batch meanwhile), and the batches of many clients reach it in one write. No
// timer is involved; an idle connection writes at once. On a dead
// connection the calls fail at once.
func (c *upConn) send(req []byte, calls []*call) { c.sendScoped(req, calls, nil) }

// sendScoped is send for a batch that touches scope (nil: anything): on a
// connection behind barriers, a batch whose keys none of them, nor any
// request they hold, touches passes them (orderscope.go).
func (c *upConn) sendScoped(req []byte, calls []*call, scope *reqScope) {
	c.mu.Lock()
	if c.dead {
		err := c.err
		c.mu.Unlock()
		for _, cl := range calls {
			cl.err, cl.connLost = err, c.srv.lossEndsClients()
			cl.finish()
		}
		return
	}
	if c.holdN > 0 && !c.srv.pool.order.held.passOrHold(scope) {
		// Behind an order barrier: written when it ends (endOrder).
		c.holdBatch(req, calls, scope)
		c.mu.Unlock()
		return
	}
	c.inflight = append(c.inflight, calls...)
	c.queuedTotal += uint64(len(calls))
	if c.onPush != nil {
		for _, cl := range calls {
			c.sent++
			if cl.deferPushes {
				c.deferPush.Store(c.sent)
			}
		}
	}
	if c.writing || (c.onPush == nil && c.awaiting.Load() > c.queued) {
		c.wbuf = appendBig(c.wbuf, req)
		c.queued += int64(len(calls))
		c.awaiting.Add(int64(len(calls)))
		c.mu.Unlock()
		return
	}
	c.awaiting.Add(int64(len(calls)))
	c.writing = true
	if len(c.wbuf) == 0 { // nothing queued: write req without copying it
		c.writeNow(req)
		return
	}
	c.wbuf = appendBig(c.wbuf, req)
	c.writeQueued()
}

// sendHeld is send for a large request (forwardAsIsMin and more) from
// the event loop by: if by holds the connection's writes (holdWrites), it
// writes what the loop queued and then req at once, rather than copying
// req into the queue to be written when the loop releases it. Otherwise
// it is send.
func (c *upConn) sendHeld(by *poller, req []byte, calls []*call, scope *reqScope) {
	c.mu.Lock()
	if by == nil || c.heldBy != by || c.dead || c.holdN > 0 || c.inWrite {
		c.mu.Unlock()
		c.sendScoped(req, calls, scope)
		return
	}
	c.inflight = append(c.inflight, calls...)
	c.queuedTotal += uint64(len(calls))
	c.awaiting.Add(int64(len(calls)))
	buf := c.wbuf
	c.wbuf = c.spare[:0]
	c.queued = 0
	c.inWrite = true
	c.mu.Unlock()
	var err error
	if len(buf) > 0 {
		_, err = c.nc.Write(buf)
	}
	if err == nil {
		_, err = c.nc.Write(req)
	}
	c.mu.Lock()
	c.inWrite = false
	if cap(buf) <= 1<<20 {
		c.spare = buf[:0]
	} else {
		bufpool.Put(buf)
		c.spare = nil // it became wbuf above: no longer spare
	}
	c.wakeWriteWaiters()
	c.mu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("write to upstream: %w", err))
	}
}

// writeNow writes req, then what was queued meanwhile, and unlocks mu. The
// caller holds mu, has set writing, and nothing was queued before req.
func (c *upConn) writeNow(req []byte) {
	c.inWrite = true
	c.mu.Unlock()
	_, err := c.nc.Write(req)
	c.mu.Lock()
	c.inWrite = false
	if err != nil {
		c.writing = false
		c.written.Broadcast()
		c.mu.Unlock()
		c.fail(fmt.Errorf("write to upstream: %w", err))
		return
	}
	c.writeQueued()
}

// writeQueued writes wbuf until it stays empty, then clears writing and
// unlocks mu. The caller holds mu and has set writing.
func (c *upConn) writeQueued() {
	for len(c.wbuf) > 0 {
		buf := c.wbuf
		c.wbuf = c.spare[:0]
		c.queued = 0
		c.inWrite = true
		c.mu.Unlock()
		_, err := c.nc.Write(buf)
		c.mu.Lock()
		c.inWrite = false
		if cap(buf) <= 1<<20 {
			c.spare = buf[:0]
		} else {
			bufpool.Put(buf) // written: nothing else points into it
			// The spare became wbuf above: it must not be handed out
			// as wbuf again while senders append to it.
			c.spare = nil
		}
		if err != nil {
			c.writing = false
			c.written.Broadcast()
			c.mu.Unlock()
			c.fail(fmt.Errorf("write to upstream: %w", err))
			return
		}
	}
	c.writing = false
	c.wakeWriteWaiters()
	c.mu.Unlock()
}

// flushQueued writes the requests that waited for earlier replies. The
// reader calls it after each read that brought replies, and before each
// read, for what came while it wrote replies to clients.
func (c *upConn) flushQueued() {
	c.mu.Lock()
	if c.writing || len(c.wbuf) == 0 {
		c.mu.Unlock()
		return
	}
	c.writing = true
	c.writeQueued()
}

// fail marks the connection dead and fails every call in flight: those
// still in inflight and those held behind an order barrier here; the reader
// fails the ones it took (failTaken) as it ends, which closing the socket
// makes it do.
func (c *upConn) fail(err error) {
	c.failOnce.Do(func() {
		c.nc.Close()
		c.mu.Lock()
		c.dead, c.err = true, err
		calls := c.inflight
		c.inflight = nil
		calls = append(calls, c.takeHeld()...)
		c.written.Broadcast()
		c.mu.Unlock()
		private := c.onPush != nil
		for _, cl := range calls {
			cl.err, cl.connLost = err, private || c.srv.lossEndsClients()
			cl.finish()
		}
		if !errors.Is(err, errUpstreamClosed) {
			c.srv.metrics.upstreamError("conn")
			c.srv.logger().Warn("upstream connection lost", "err", err)
		}
		close(c.closed)
	})
}

// takeCall returns the oldest call whose reply has not come, or nil if
// none is in flight. Reader only: it takes what senders queued in
// inflight in one go, and hands the calls out from there.
func (c *upConn) takeCall() *call {
	if c.takeAt == len(c.taking) {
		c.mu.Lock()
		c.taking, c.inflight = c.inflight, c.taking[:0]
		c.mu.Unlock()
		c.takeAt = 0
		if len(c.taking) == 0 {
			return nil
		}
	}
	cl := c.taking[c.takeAt]
	c.taking[c.takeAt] = nil
	c.takeAt++
	return cl
}

// callsInFlight reports whether any call awaits its reply. Reader only.
func (c *upConn) callsInFlight() bool {
	if c.takeAt < len(c.taking) {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inflight) > 0
}

func (c *upConn) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

func (c *upConn) close() { c.fail(errUpstreamClosed) }

// upReadSize is the size of an upstream connection's read buffer when no
// large reply has grown it.
const upReadSize = 32 << 10

// upReadMax is the most one read from Redis's socket takes, into a buffer
// grown for a large reply (replyBuf.readFrom) or a passed reply's chunk
// (passFill), and the most one splice of a passed reply moves
// (splicePass). Read up to 512 KiB at a time, a 1 MB GET cost Redis more
// CPU behind the proxy than behind twemproxy, which reads 16 KiB at a
// time: 250 against 216 us a request; with reads of 64 KiB, 190 (medians
// of 7 interleaved runs), for 10-20 us more of the proxy's own, still
// below twemproxy's. Redis's side of the socket seems to do better with a
// reader that keeps close behind its writes; the figures:
// docs/design/large-values.md.
const upReadMax = 64 << 10

// readLoop is the connection's one reader goroutine (dialUpAs starts it).
// It reads replies and hands each to the oldest call in flight; on a shared
// connection it writes the requests that waited for replies as soon as a
// read brings some, and on a private one it passes push messages and
// relayed traffic on. It ends when the connection fails, failing the calls
// it took whose replies never came.
func (c *upConn) readLoop() {
	in := replyBuf{buf: make([]byte, 0, upReadSize)}
	// The replies completed in this read, delivered before the next read
	// (shared connections).
	var batch replyBatch
	defer c.deliver(&batch)
	defer c.failTaken()
	defer c.closePipe()
	for {
		// Parsed here rather than in a method of in: the reply is nine
		// words, and the reader goes through hundreds in a read.
		v, _, err := resp.ReadValue(in.pending())
		if err == nil && v.Type == resp.Attribute {
			err = joinAttribute(&v, in.pending())
		}
		switch {
		case err == nil:
			in.start += len(v.Raw)
			err = c.takeReply(&v, &in, &batch)
		case errors.Is(err, resp.ErrIncomplete):
			err = c.readMore(&in, &batch)
		default:
			err = fmt.Errorf("bad reply from upstream: %w", err)
		}
		if err != nil {
			c.fail(err)
			return
		}
	}
}

// readMore is readLoop's step when what is pending in in is not a whole
// reply. On a shared connection it first delivers batch, writes the
// requests that waited for those replies, and passes a large raw value on
// to its client as it arrives (passReply); then it makes room in in and
// reads once. A non-nil error is the connection's failure. Reader only.
func (c *upConn) readMore(in *replyBuf, batch *replyBatch) error {
	shared := c.onPush == nil
	if shared {
		c.deliver(batch)
		c.flushQueued()
		// A large raw value goes to its client as it arrives.
		passed, err := c.passReply(in.pending())
		if err != nil {
			return err
		}
		if passed {
			in.reset()
			return nil
		}
	}
	in.makeRoom(!shared)
	n, err := in.readFrom(c.nc)
	if n > 0 && shared {
		// Replies came: Redis is done with what it read, so the
		// requests that waited for them go now, before their
		// replies are parsed and written to the clients, and
		// Redis runs them meanwhile instead of sitting idle.
		c.flushQueued()
	}
	if err != nil && n == 0 { // else the bytes go first; the next read fails again
		if err == io.EOF {
			err = errors.New("upstream closed the connection")
		}
		return err
	}
	return nil
}

// takeReply is readLoop's step for v, a whole reply it just took from in.
// On a private connection a push message or relayed traffic goes to onPush
// (pushed); anything else is the reply of the next call (nextCall), which
// gets it, is counted (countReply) and completes (complete: on a shared
// connection into batch). A non-nil error is the connection's failure: a
// reply nobody asked for, or a failover. Reader only.
func (c *upConn) takeReply(v *resp.Value, in *replyBuf, batch *replyBatch) error {
	if c.onPush != nil && c.pushed(v) {
		return nil
	}
	cl := c.nextCall()
	if cl == nil {
		if c.onPush != nil {
			c.onPush(v.Raw, c.pushSeq())
			return nil
		}
		return errors.New("upstream sent a reply nobody asked for")
	}
	shared := c.onPush == nil
	if shared {
		batch.replied++ // awaiting falls in deliver
	} else {
		c.awaiting.Add(-1)
	}
	if letGo(cl) {
		cl.reply, cl.local = cl.reply[:0], true // bookkeeping only
	} else {
		cl.reply = in.claim(cl.reply, len(v.Raw))
	}
	// Behind Sentinels, -READONLY says the master this connection
	// reached is a replica now (a failover): after this reply, close
	// it, so that the next dial asks the Sentinels again.
	failover := v.Type == resp.Error && len(c.srv.up.Sentinels) > 0 && bytes.HasPrefix(v.Str, []byte("READONLY"))
	if cl.owner != nil {
		c.countReply(cl, batch)
	}
	if cl.kind == shapeRelay {
		c.monitor = cl.cmd == "MONITOR"
		c.relay.Store(true)
		c.trackRelay(*v)
		if cl.owner != nil {
			// The first confirmation of a SUBSCRIBE entering the relay:
			// it counts the client's subscriptions too.
			cl.owner.pinned.confirms.track(confirmationOf(v.Raw))
		}
	}
	if !shared {
		c.completed++
		cl.pinSeq = c.completed
	}
	c.complete(cl, batch)
	if failover {
		c.srv.logger().Warn("upstream is a replica now (failover): reconnecting through the sentinels")
		return errFailover
	}
	if in.start == len(in.buf) {
		in.reset()
	}
	return nil
}

// pushed hands v to onPush and reports true when v answers no call: a
// RESP3 push message, or in relay mode anything but the reply of a call
// still pending (answersPending), relay counts followed. Reader only
// (takeReply), on a private connection (onPush set).
func (c *upConn) pushed(v *resp.Value) bool {
	if !(v.Type == resp.Push || c.relayMode() && !c.answersPending(*v)) {
		return false
	}
	if c.relayMode() {
		c.trackRelay(*v)
	}
	c.onPush(v.Raw, c.pushSeq())
	return true
}

// nextCall returns the call the next reply answers: the one passReply took
// while that reply arrived, else the oldest in flight (takeCall); nil if
// none is. Reader only (takeReply, failTaken).
func (c *upConn) nextCall() *call {
	cl := c.taken
	c.taken = nil
	if cl == nil {
		cl = c.takeCall()
	}
	return cl
}

// countReply makes cl's reply, just stored, count against its owner
// instead of the request (memory.go). On a shared connection the process's
// totals change once per read, through batch in deliver, before any of its
// replies is written. Reader only (takeReply), for a call with an owner.
func (c *upConn) countReply(cl *call, batch *replyBatch) {
	o := cl.owner
	shared := c.onPush == nil
	n := int64(len(cl.reply))
	if shared {
		o.mem.expected.Add(-cl.reserved)
		o.mem.held.Add(n)
		batch.expected -= cl.reserved
		batch.held += n
	} else {
		o.expect(-cl.reserved)
		o.hold(n)
	}
	cl.held, cl.reserved = n, 0
	o.noteReply(n)
	o.checkHardLimit(n)
	if !shared {
		o.s.checkMemory()
	}
}

// complete completes cl, whose reply is stored and counted. A queued call
// on a shared connection joins batch, and its client is woken in deliver,
// once per read, after every reply in the read is ready, so that the
// client's replies go out with one write; a script's onFinish runs now.
// Any other call finishes at once. Reader only (takeReply).
func (c *upConn) complete(cl *call, batch *replyBatch) {
	o := cl.owner
	if o == nil || c.onPush != nil {
		cl.finish()
		return
	}
	if f := cl.onFinish; f != nil { // a script's (noteFastScript)
		cl.onFinish = nil
		f()
	}
	cl.taken()
	batch.calls = append(batch.calls, cl)
	if len(batch.woken) == 0 || batch.woken[len(batch.woken)-1] != o {
		batch.woken = append(batch.woken, o)
	}
}

// closePipe closes the pipe the reader's passes go through
// (passsplice_linux.go), if it made one. Reader only, as it ends.
func (c *upConn) closePipe() {
	if c.pipe != nil {
		c.pipe.close()
	}
}

// replyBuf is the upstream reader's read buffer: buf holds what it read
// from Redis, and the replies not taken yet begin at start. Reader only
// (readLoop and its steps).
type replyBuf struct {
	buf   []byte
	start int
}

// joinAttribute reads the value after v, an attribute that begins b, and
// makes v that value with a Raw that spans both: an attribute travels with
// the value after it. On an error v is left as it was. Reader only
// (readLoop).
func joinAttribute(v *resp.Value, b []byte) error {
	v2, _, err := resp.ReadValue(b[len(v.Raw):])
	if err == nil {
		v.Raw = b[:len(v.Raw)+len(v2.Raw)]
		v.Type = v2.Type
	}
	return err
}

// pending returns what was read and not taken: the beginning of a reply
// that is not whole yet.
func (in *replyBuf) pending() []byte { return in.buf[in.start:] }

// claim returns the n bytes before start, the reply readLoop just took,
// for a call whose reply buffer is dst: copied into dst, or, for a large
// reply (handOverReply), the read buffer they lie in instead of a copy;
// the buffer then goes on anew with whatever followed the reply.
func (in *replyBuf) claim(dst []byte, n int) []byte {
	if n < handOverReply {
		return append(dst[:0], in.buf[in.start-n:in.start]...)
	}
	// The reply keeps the buffer's room after it (the rest is copied out
	// below), so the buffer returns to its own size class when the reply
	// is written (internal/bufpool).
	reply := in.buf[in.start-n : in.start : cap(in.buf)]
	rest := in.buf[in.start:]
	in.buf = append(make([]byte, 0, max(upReadSize, len(rest))), rest...)
	in.start = 0
	return reply
}

// reset empties the buffer, all of it taken, and gives it back to the
// pool for one of the usual size when a large reply grew it past 1 MiB.
func (in *replyBuf) reset() {
	in.buf, in.start = in.buf[:0], 0
	if cap(in.buf) > 1<<20 { // do not keep a huge buffer after a big reply
		bufpool.Put(in.buf)
		in.buf = make([]byte, 0, upReadSize)
	}
}

// makeRoom readies the buffer for a read: it moves what is pending to the
// front and grows a full buffer. The buffer of a private connection
// (private) with nothing pending goes back to the usual size.
func (in *replyBuf) makeRoom(private bool) {
	if in.start > 0 {
		n := copy(in.buf, in.buf[in.start:])
		in.buf = in.buf[:n]
		in.start = 0
	}
	if len(in.buf) == 0 && cap(in.buf) > upReadSize && private {
		// A private connection with nothing pending: back to the
		// usual size before a read that may wait for hours. (The
		// few shared ones keep theirs, for the next burst.)
		bufpool.Put(in.buf)
		in.buf = make([]byte, 0, upReadSize)
	}
	if len(in.buf) == cap(in.buf) {
		// Double, or jump to the end of a large bulk reply
		// (upstreamGrowth).
		nb := bufpool.Get(upstreamGrowth(len(in.buf), resp.PendingValueEnd(in.buf)))[:len(in.buf)]
		copy(nb, in.buf)
		bufpool.Put(in.buf)
		in.buf = nb
	}
}

// readFrom reads once from nc into the room after what the buffer holds
// (makeRoom leaves some), at most upReadMax.
func (in *replyBuf) readFrom(nc net.Conn) (int, error) {
	n, err := nc.Read(in.buf[len(in.buf):min(cap(in.buf), len(in.buf)+upReadMax)])
	in.buf = in.buf[:len(in.buf)+n]
	return n, err
}

// pushSeq is the number of calls a push message that arrives now comes
// after: those completed, or the call sent with deferPushes if that one is
// still in flight. Reader only.
func (c *upConn) pushSeq() uint64 {
	// Deferred only while the deferring call is the next to complete: a
	// push read before the replies of the calls sent ahead of it (the PING
	// roundtripScript sends first) was sent by Redis before the script ran.
	if d := c.deferPush.Load(); d == c.completed+1 {
		return d
	}
	return c.completed
}

// noteDelivered counts n replies Redis gave, and wakes the goroutines
// waiting for them (awaitTaken). Without mu.
func (c *upConn) noteDelivered(n uint64) {
	c.delivered.Add(n)
	if c.takenWait.Load() > 0 {
		c.mu.Lock()
		c.written.Broadcast()
		c.mu.Unlock()
	}
}

// replyBatch is what the reader of a shared connection completed in one
// read. Its bookkeeping is shared with other goroutines (the process's
// memory totals, the count of calls awaiting replies, each call's ready
// flag), so it is published once per read rather than once per reply: at
// -P 16 a read holds hundreds of replies.
type replyBatch struct {
	calls          []*call   // completed, to be marked ready
	woken          []*client // their clients, each once, in order
	replied        int64     // replies taken: awaiting falls by as much
	held, expected int64     // change to the process's totals (memory.go)
}

// deliver publishes b and writes its clients' replies, or wakes their
// writers to, and empties b. Reader only.
func (c *upConn) deliver(b *replyBatch) {
	if b.replied != 0 {
		c.awaiting.Add(-b.replied)
		c.noteDelivered(uint64(b.replied))
		b.replied = 0
	}
	if b.held != 0 || b.expected != 0 {
		c.srv.expectedTotal.Add(b.expected)
		c.srv.heldTotal.Add(b.held)
		b.held, b.expected = 0, 0
		c.srv.checkMemory()
	}
	for i, cl := range b.calls {
		cl.ready.Store(true)
		b.calls[i] = nil
	}
	b.calls = b.calls[:0]
	for i, cl := range b.woken {
		if !cl.writeDirect(&c.rw) {
			cl.wake()
		}
		b.woken[i] = nil
	}
	b.woken = b.woken[:0]
}

func (c *upConn) relayMode() bool { return c.relay.Load() }

// answersPending reports whether v, read while relaying a RESP2
// subscriber's traffic, is the reply to a call still waiting: a call is
// pending (its client sent it before it saw the subscribed state begin)
// and v is not a published message. Redis answers commands in order, so
// that reply is the call's; relayed, it would leave the call waiting for
// good, and the order barrier it holds with it (every client's commands
// would wait behind it). Reader only.
func (c *upConn) answersPending(v resp.Value) bool {
	if c.monitor || !c.callsInFlight() {
		return false
	}
	if v.Type == resp.Array && v.N >= 3 {
		it := v.Elements()
		kind, _ := it.Next()
		switch string(kind.Str) {
		case "message", "pmessage", "smessage":
			return false
		}
	}
	return true
}

// trackRelay follows a RESP2 subscriber's subscription counts in relayed
// replies and ends relay mode when Redis leaves the subscribed state: when
// an unsubscribe reply counts no channels, patterns or shard channels left,
// or on RESET. A MONITOR relay ends only with RESET. Reader only.
func (c *upConn) trackRelay(v resp.Value) {
	if v.Type == resp.SimpleString && string(v.Str) == "RESET" {
		c.endRelay()
		return
	}
	if c.monitor || v.Type != resp.Array || v.N != 3 {
		return
	}
	it := v.Elements()
	kind, _ := it.Next()
	it.Next()
	count, _ := it.Next()
	if kind.Type != resp.BulkString || count.Type != resp.Integer {
		return
	}
	n, _ := resp.ParseInt(count.Str)
	switch string(kind.Str) {
	case "subscribe", "psubscribe":
		c.subs = n
	case "ssubscribe":
		c.ssubs = n
	case "unsubscribe", "punsubscribe":
		c.subs = n
		if c.subs == 0 && c.ssubs == 0 {
			c.endRelay()
		}
	case "sunsubscribe":
		c.ssubs = n
		if c.subs == 0 && c.ssubs == 0 {
			c.endRelay()
		}
	}
}

func (c *upConn) endRelay() {
	c.relay.Store(false)
	c.monitor, c.subs, c.ssubs = false, 0, 0
	c.relayEnds.Add(1)
}
