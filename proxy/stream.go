package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/bufpool"
	"github.com/squeeze-kv/squeeze/resp"
)

// Large values that the write policy stores as they are (compression off
// for the key, a value under --min-size, a prefix scripts use) pass through
// as they arrive: the proxy does not hold a 10 MB SET whole before its
// first byte goes to Redis, but passes it in pieces of streamPiece bytes.
//
// The value goes over a connection of its own, taken from a small set of
// idle ones (pool.takeStream), never over the shared one: while it is on
// its way, other clients' commands go on, as they would with Redis, which
// runs a command only once the whole of it has arrived. So the SET counts
// as arriving when its last byte does: the proxy passes everything but the
// last streamTail bytes of the value as they come, then reads the rest of
// the command (the value's tail and the options after it: EX, NX, GET...)
// and, under an order barrier (order.go), once this client's earlier
// commands have run (a PING sent behind them on the shared connection when
// the SET began has its reply), writes that rest. The barrier lasts until
// Redis replies, so every command that reached the proxy after the SET, this
// client's next one included, runs after it.
//
// Only SET key value [options] of a client on the shared connection
// streams: not inside MULTI, on a private connection (its state, its
// order), with replies off, behind --client-auth require, or in front of a
// cluster node. A SET with IFEQ, IFNE, IFDEQ or IFDNE compares the stored
// value, which may be a frame, so it must run as an inspect command; its
// options come after the value, so the proxy learns of them too late:
// such a command gets an error (streamIfErr) and the partial command is
// dropped with its connection.

// streamMinValue is the smallest value that streams.
const streamMinValue = 1 << 20

// streamTail is how much of the value's end the proxy holds back, to write
// with the options after it once the command is whole.
const streamTail = 64 << 10

// maxIdleStreams bounds the idle connections kept for streams.
const maxIdleStreams = 4

// streamIfErr is the error for a streamed SET that turns out to compare.
const streamIfErr = "ERR squeeze: SET with IFEQ, IFNE, IFDEQ or IFDNE and a value of 1 MiB or more is not supported through the proxy when the value is stored as it is; send it under --min-size or to a compressed key"

// streamable reports whether b, the unread part of the client's input that
// holds an incomplete command, begins a SET whose value streams, and
// returns the key (a slice of b), the command's argument count, where the
// value's data begins in b and its size.
func (c *client) streamable(b []byte) (key []byte, count int64, at int, size int64, ok bool) {
	if c.pinned.conn != nil || c.sess.inMulti || c.sess.relay || c.sess.replyOff || c.sess.skip > 0 || c.s.Cluster != nil || c.s.RequireAuth || len(b) < 32 || !startsSet(b) {
		return nil, 0, 0, 0, false
	}
	args, count, at, size, ok := resp.ReadCommandHead(c.in.args, b, c.s.maxBulk())
	c.in.args = args[:0]
	if !ok || len(args) != 2 || count < 3 || count > 16 || size < streamMinValue || !is(args[0], "SET") {
		return nil, 0, 0, 0, false
	}
	if len(b)-at < len(codec.Magic) || codec.IsFramed(b[at:]) {
		return nil, 0, 0, 0, false // undecided yet, or a value to wrap in a none frame
	}
	if enc := c.s.policyFor(args[1]).enc; enc.Algorithm().ID != codec.IDNone && size >= int64(enc.MinSize()) {
		return nil, 0, 0, 0, false // the value may be compressed: it must arrive whole
	}
	return args[1], count, at, size, true
}

// streamSet passes on the SET that begins c.rbuf (see streamable) as its
// value arrives, and removes it from c.rbuf. streamed is false when it
// could not begin (no connection for it): c.rbuf is as it was, and the
// command goes the usual way. alive is false when the client's connection
// must end. The client's goroutine only, from process.
func (c *client) streamSet(key []byte, count int64, at int, size int64) (streamed, alive bool) {
	up, err := c.s.pool.takeStream()
	if err != nil {
		return false, true
	}
	if err := up.streamBegin(); err != nil {
		return false, true
	}
	st := streamedSet{c: c, up: up, key: bytes.Clone(key)}
	c.flush()
	st.sendPing()
	if !st.passValue(at, size) {
		st.abort()
		return true, false
	}
	opts, whole, ok := st.readRest(count)
	if !ok {
		return true, false
	}
	// The command as handle would see it, without its value.
	shapeArgs := make([][]byte, 0, 3+len(opts))
	shapeArgs = append(shapeArgs, []byte("SET"), st.key, nil)
	shapeArgs = append(shapeArgs, opts...)
	if conditional(setCmd, shapeArgs) != setCmd {
		st.abort()
		c.consumeInput(whole)
		c.enqueue(c.localCall(setCmd.name, resp.AppendError(nil, streamIfErr)))
		return true, true
	}
	st.finish(shapeArgs, whole)
	return true, true
}

// streamedSet is one SET whose value streams (streamSet): the connection
// it goes on, its key, and the PING sent behind the client's earlier
// commands. The client's goroutine's, while it streams the SET.
type streamedSet struct {
	c    *client
	up   *upConn
	key  []byte // a copy: rbuf changes as the value passes
	ping *call  // nil once its reply came, or without a shared connection
}

// sendPing sends a PING behind the client's earlier commands on its
// shared connection: they must have run before the SET does, so its reply
// is awaited before the last write (waitPing).
func (st *streamedSet) sendPing() {
	c := st.c
	if shared, err := c.conn(); err == nil {
		st.ping = newCall()
		c.in.one[0] = st.ping
		shared.send(pingRequest, c.in.one[:])
		c.in.one[0] = nil
	}
}

// waitPing waits for the PING's reply, if it was sent and not yet awaited.
func (st *streamedSet) waitPing() {
	if st.ping != nil {
		<-st.ping.done
		st.ping.release()
		st.ping = nil
	}
}

// abort drops the SET: Redis drops the partial command with its
// connection.
func (st *streamedSet) abort() {
	st.up.close()
	st.waitPing()
}

// passValue writes the command up to its value's last streamTail bytes on
// the stream's connection: what rbuf holds of it, then the rest from the
// client's socket, in pieces (passPieces). What it wrote leaves rbuf. It
// returns false if the client left, or Redis did.
func (st *streamedSet) passValue(at int, size int64) bool {
	c := st.c
	cut := int64(at) + size - streamTail
	first := min(int64(len(c.in.rbuf)), cut)
	if !st.passPieces(c.in.rbuf[:first], cut-first) {
		return false // the client left, or Redis did: either ends it
	}
	c.s.metrics.streamed(size)
	c.consumeInput(int(first))
	return true
}

// streamPiece is how much of a streamed value the proxy gathers from the
// client before it writes it to Redis (passPieces): as much as a client's
// buffer may hold for a large command anyway (memory.go), which Redis
// reads in a few reads.
const streamPiece = 2 << 20

// passPieces writes head, then passes n bytes of the value from the
// client's socket, to Redis's, in pieces of streamPiece bytes (head in
// the first). Passed as they arrived (splice(2), in the client's pieces
// of 64 KiB or so), 4.2 MB SETs cost Redis a third more CPU than behind
// a proxy that sends the SET whole; gathered, about as much
// (docs/design/large-values.md). The copy costs the proxy CPU that the
// splice did not, less than such a proxy spends.
func (st *streamedSet) passPieces(head []byte, n int64) bool {
	size := max(len(head), int(min(int64(len(head))+n, streamPiece)))
	buf := bufpool.Get(size)
	defer bufpool.Put(buf)
	piece := append(buf[:0], head...)
	for {
		add := min(n, int64(size-len(piece)))
		if add > 0 {
			if _, err := io.ReadFull(st.c.nc, piece[len(piece):len(piece)+int(add)]); err != nil {
				return false
			}
			piece = piece[:len(piece)+int(add)]
			n -= add
		}
		if st.up.streamWrite(piece) != nil {
			return false
		}
		if n == 0 {
			return true
		}
		piece = buf[:0]
	}
}

// readRest reads the rest of the command, of count arguments, into rbuf:
// the value's tail, its CRLF, the options. It returns the options (slices
// of rbuf) and the length of what remains of the command in rbuf. ok is
// false, the SET dropped, when the client left, or sent malformed input:
// answered with an error, as Redis does, and the connection closes.
func (st *streamedSet) readRest(count int64) (opts [][]byte, whole int, ok bool) {
	c := st.c
	need := streamTail + 2
	for {
		if len(c.in.rbuf) >= need {
			args, m, err := resp.ReadBulks(c.in.args, c.in.rbuf[need:], count-3, c.s.maxBulk())
			c.in.args = args[:0]
			if err == nil {
				return args, need + m, true
			}
			if !errors.Is(err, resp.ErrIncomplete) {
				// Redis answers malformed input with an error and closes.
				st.abort()
				c.refuseInput(err)
				return nil, 0, false
			}
		}
		c.growRead()
		n, err := c.nc.Read(c.in.rbuf[len(c.in.rbuf):cap(c.in.rbuf)])
		c.in.rbuf = c.in.rbuf[:len(c.in.rbuf)+n]
		if err != nil && n == 0 {
			st.abort()
			return nil, 0, false
		}
	}
}

// finish queues the SET's call, then writes the rest of the command (the
// first whole bytes of rbuf, which leave it) once the client's earlier
// commands have run, under an order barrier that lasts until Redis
// replies: every command on its key that reached the proxy after the SET
// runs after it. The connection goes back to the idle ones with the reply.
func (st *streamedSet) finish(shapeArgs [][]byte, whole int) {
	c, up := st.c, st.up
	cl := newCall()
	cl.notify, cl.owner = c.q.ready, c
	cl.cmd, cl.cmdID, cl.kind, cl.start = setCmd.name, setCmd.id, replyShape(setCmd, shapeArgs), c.in.readAt
	cl.takes = takesOf(setCmd)
	cl.saveArgs(shapeArgs[:2])
	c.in.seq++
	cl.seq = c.in.seq
	cl.reserved = c.expectedReply()
	c.enqueue(cl) // may wait for room: before the barrier, which must not
	c.expect(cl.reserved)

	// The barrier holds the requests on the SET's key, which it writes;
	// others pass it (orderscope.go).
	h := c.s.pool.raiseOrderFor(&reqScope{keys: []uint64{hashKey(st.key) | keyWrite}, noted: true})
	c.s.pool.awaitOrder(h)
	st.waitPing()
	p := c.s.pool
	cl.onFinish = func() {
		p.endOrder(h)
		go p.putStream(up) // not on the reader: putStream may take the pool's lock
	}
	time.AfterFunc(maxBlockedWait, func() { p.endOrder(h) })
	up.streamFinish(cl, c.in.rbuf[:whole]) // a failure fails cl, which ends the barrier
	c.consumeInput(whole)
}

// takeStream returns an idle connection for a stream, or dials one.
func (p *pool) takeStream() (*upConn, error) {
	p.mu.Lock()
	for len(p.streams) > 0 {
		u := p.streams[len(p.streams)-1]
		p.streams = p.streams[:len(p.streams)-1]
		if !u.isDead() {
			p.mu.Unlock()
			return u, nil
		}
	}
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, ErrServerClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.srv.dialTimeout())
	defer cancel()
	u, err := p.srv.dialUp(ctx, nil)
	if err == nil {
		limitSendBuffer(u.nc, streamSendBuffer)
	}
	return u, err
}

// streamSendBuffer is the send buffer asked for on a stream's connection
// (SO_SNDBUF; Linux doubles it and stops tuning it). With the kernel's own,
// which grows to megabytes, each piece of 2 MiB waited in the socket
// until Redis's reads opened the window, and went out from there in
// Redis's time: 4.2 MB SETs cost Redis 850 us a request against 767
// behind twemproxy, the proxy 1217 us, 449 a second. With 256 KiB the
// proxy's write waits for room and sends as it gets it: Redis 717 us, the
// proxy 900, 585 a second (medians of 7 interleaved runs; 128 KiB and 512
// KiB about the same, 64 KiB and 1 MiB less; docs/design/large-values.md).
// Only streams: on the shared connections it slowed 100 kB SETs of ten
// clients by 7%.
const streamSendBuffer = 256 << 10

// limitSendBuffer asks for a send buffer of n bytes on the socket under nc
// (a rawSock's, or TLS's); if the system refuses, the socket keeps its own.
func limitSendBuffer(nc net.Conn, n int) {
	nc = baseConn(nc)
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if sc, ok := nc.(interface{ SetWriteBuffer(int) error }); ok {
		sc.SetWriteBuffer(n)
	}
}

// putStream keeps u for the next stream, or closes it.
func (p *pool) putStream(u *upConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || u.isDead() || len(p.streams) >= maxIdleStreams {
		u.close()
		return
	}
	p.streams = append(p.streams, u)
}

// streamBegin makes the caller the only writer of u (a connection taken
// for a stream), once what was queued on it is written.
func (u *upConn) streamBegin() error {
	for {
		u.mu.Lock()
		switch {
		case u.dead:
			err := u.err
			u.mu.Unlock()
			return err
		case !u.writing && len(u.wbuf) == 0:
			u.writing = true
			u.mu.Unlock()
			return nil
		case !u.writing:
			u.writing = true
			u.writeQueued() // unlocks
			continue
		}
		u.mu.Unlock()
		time.Sleep(50 * time.Microsecond) // a new connection's setup is on its way
	}
}

// streamWrite writes b on a connection whose writer the caller is.
func (u *upConn) streamWrite(b []byte) error {
	if _, err := u.nc.Write(b); err != nil {
		u.fail(fmt.Errorf("write to upstream: %w", err))
		return err
	}
	return nil
}

// streamFinish writes the last part of a streamed command with its call,
// then what others queued meanwhile, and gives up the writer's place.
func (u *upConn) streamFinish(cl *call, b []byte) {
	u.mu.Lock()
	if u.dead {
		err := u.err
		u.mu.Unlock()
		cl.err = err
		cl.finish()
		return
	}
	u.inflight = append(u.inflight, cl)
	u.awaiting.Add(1)
	u.mu.Unlock()
	_, err := u.nc.Write(b)
	u.mu.Lock()
	if err != nil {
		u.writing = false
		u.mu.Unlock()
		u.fail(fmt.Errorf("write to upstream: %w", err))
		return
	}
	u.writeQueued() // unlocks
}

// startsSet reports, cheaply, whether b begins "*N\r\n$3\r\nSET\r\n" (any
// case, N of one digit): pipelines cut at a read boundary ask on every read.
func startsSet(b []byte) bool {
	return len(b) >= 13 && b[0] == '*' && b[2] == '\r' && string(b[3:8]) == "\n$3\r\n" &&
		b[8]|0x20 == 's' && b[9]|0x20 == 'e' && b[10]|0x20 == 't' && b[11] == '\r'
}
