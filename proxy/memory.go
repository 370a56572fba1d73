package proxy

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Memory bounds.
//
// Every byte the proxy holds for a client is counted against that client
// (client.held and client.expected) and against the process (Server.heldTotal,
// Server.expectedTotal): for each
// command from when it is read until its reply arrives, its request bytes
// or, if larger, the size its reply is expected to have (so that the
// bounds act before the replies come, not after); then the reply as Redis
// sent it, until it is written; and output of 64 KiB or more being
// written (decoded values included) while the socket takes it. The counts
// change once per batch, not once per command, because every goroutine
// shares them: a client's reservations when it sends a batch (flush), the
// replies of one read of a shared connection before any of them can be
// written (upConn.deliver), what the writer gave back once per write
// (settleHeld). So a bound acts at most one batch late. Three bounds act
// on those counts:
//
//   - Soft, per client (MaxReplyBytes, --client-buffer): past it the proxy
//     stops reading the client's commands, and so stops sending them to
//     Redis, until the client has read enough of its replies.
//   - Hard, per client (ClientBufferLimit, --client-buffer-limit): replies
//     to requests already sent cannot be refused, so a client that keeps
//     asking and does not read (300 pipelined GETs of 8 MiB on a socket it
//     never reads) goes past the soft bound anyway. Past the hard one the
//     proxy closes the connection, as Redis's client-output-buffer-limit
//     does, logs it and counts it (squeeze_proxy_clients_dropped_total);
//     the replies still on their way are let go, unkept and uncounted, as
//     they come (letGo). A single
//     reply is never cut: a client that holds nothing else (less than
//     minOtherHeld) may receive a value of any size up to --max-value.
//   - Process (MaxMemory, --max-memory): past half of it every client may
//     have only one command in flight (the pressure rule, which keeps
//     pipelines from filling memory while clients still make progress);
//     past all of it the client holding the most is closed, as above,
//     among those with more than one command in flight. So the bound
//     is MaxMemory plus at most one reply (or request) per client.
//     --max-memory also becomes the Go runtime's soft memory limit
//     (debug.SetMemoryLimit, set by the squeeze command), so garbage is
//     collected before RSS reaches the bound.
//
// Not counted: a client's read buffer and batch while it sends a command
// larger than an event loop handles, each at most a quarter larger than
// the command (internal/bufpool's size classes), and the free lists of
// buffers, which give their memory back a second after a burst. So RSS
// stays within MaxMemory plus about 2.5 times the command of each client
// sending a large one (docs/design/memory.md).

// Replies cannot be refused once their requests are sent, and on a shared
// connection they come in order: a client's 300 pipelined GETs of 8 MiB
// would put 2.4 GB in front of every other client's next reply. So each
// client also has a window of commands in flight sized by its replies
// (replyWindow): inFlightBudget (MaxReplyBytes, at most 16 MiB) divided by
// an estimate of its reply size (the largest recent one, halved by each
// reply after it), between 1 and MaxInFlight. A new client starts as if
// its replies were a quarter of the budget: 4 commands in flight, doubling
// with each round of small replies, as TCP's slow start does.

// minOtherHeld is what a client may hold besides one reply without the
// hard limit applying: small requests and replies in flight.
const minOtherHeld = 64 << 10

// hold counts n more (or, negative, fewer) bytes held for the client in
// fact: replies not written, large output being written.
func (c *client) hold(n int64) {
	c.mem.held.Add(n)
	c.s.heldTotal.Add(n)
}

// expect counts n more (or fewer) bytes expected: a command's reservation
// (its request's size, or its reply's expected size if larger) until its
// reply arrives. The hard bounds act on what is held in fact, the soft
// ones and the windows on what is held and expected.
func (c *client) expect(n int64) {
	c.mem.expected.Add(n)
	c.s.expectedTotal.Add(n)
}

// noteReply updates the client's reply size estimate with a reply of n
// bytes. Only the reader of the connection that carries the client's
// replies calls it.
func (c *client) noteReply(n int64) {
	// Stored only when it changes: replies of one size leave it as it is,
	// and the store is an atomic write the client's reader then misses in
	// its cache.
	if est := max(c.expectedReply()/2, n, 1); est != c.mem.replyEst.Load() {
		c.mem.replyEst.Store(est)
	}
}

// inFlightBudget is the reply bytes a client may have on their way.
func (s *Server) inFlightBudget() int64 { return min(s.maxReplyBytes(), 16<<20) }

// expectedReply is the size the client's next reply is expected to have.
func (c *client) expectedReply() int64 {
	if est := c.mem.replyEst.Load(); est > 0 {
		return est
	}
	return c.s.inFlightBudget() / 4
}

// replyWindow is how many commands the client may have in flight.
func (c *client) replyWindow() int {
	return int(min(max(c.s.inFlightBudget()/c.expectedReply(), 1), int64(c.s.maxInFlight())))
}

// clientBufferLimit is the hard per-client bound (see ClientBufferLimit).
func (s *Server) clientBufferLimit() int64 {
	if s.ClientBufferLimit > 0 {
		return s.ClientBufferLimit
	}
	return max(4*s.maxReplyBytes(), 256<<20)
}

// ClientBufferLimitInForce returns the hard per-client bound in force
// (ClientBufferLimit, or its default).
func (s *Server) ClientBufferLimitInForce() int64 { return s.clientBufferLimit() }

// pressure reports whether the process holds more than half of
// MaxMemory: clients then get one command in flight each.
func (s *Server) pressure() bool {
	return s.MaxMemory > 0 && s.heldTotal.Load()+s.expectedTotal.Load() > s.MaxMemory/2
}

// HeldBytes returns the bytes the proxy holds for its clients now:
// requests not answered, replies not written, output being written.
func (s *Server) HeldBytes() int64 { return s.heldTotal.Load() + s.expectedTotal.Load() }

// checkLimits runs when a reply of n bytes for o has arrived and been
// counted (own is what the call holds): it closes o if it is past its
// hard limit, and the client that holds the most if the process is past
// MaxMemory.
func (s *Server) checkLimits(o *client, own int64) {
	o.checkHardLimit(own)
	s.checkMemory()
}

// checkHardLimit closes c if it holds more than its hard limit; own is
// what the reply that just came holds.
func (c *client) checkHardLimit(own int64) {
	// The reply being written (a value decoded to its full size, say) is
	// the one that is never cut, as is the one that just came.
	if h := c.mem.held.Load(); h > c.s.clientBufferLimit() && h-own-c.mem.writing.Load() >= minOtherHeld {
		c.drop("client-buffer-limit", h)
	}
}

// letGo reports whether the reply that just came for cl is let go
// unkept and uncounted: its client was closed from the proxy's side (past
// a memory bound, or its socket failed), so none of it can be written,
// and nothing but the client needed it. Without this, the replies of the
// commands a client had in flight when it was closed would count against
// it, and the process, until its writer popped them. A destructive
// command's reply is kept (its value may be quarantined: quarantine.go),
// and so is EXEC's and a reply something else waits for (onFinish).
func letGo(cl *call) bool {
	o := cl.owner
	return o != nil && o.life.aborted.Load() && cl.onFinish == nil && cl.kind != shapeExec && !destructive(cl.cmd)
}

// checkMemory closes the client that holds the most if the process is
// past MaxMemory.
func (s *Server) checkMemory() {
	if s.MaxMemory > 0 && s.heldTotal.Load() > s.MaxMemory {
		s.shed()
	}
}

// shed closes the client that holds the most, once the process is past
// MaxMemory.
func (s *Server) shed() {
	if !s.shedding.CompareAndSwap(false, true) {
		return // another reader is at it
	}
	defer s.shedding.Store(false)
	var worst *client
	var most int64
	s.mu.Lock()
	for c := range s.clients {
		if h := c.mem.held.Load(); h > most && !c.life.aborted.Load() && c.queued() > 1 {
			worst, most = c, h
		}
	}
	s.mu.Unlock()
	if worst != nil {
		worst.drop("max-memory", most)
	}
}

// queued is the number of the client's commands whose replies are not
// written yet.
func (c *client) queued() int {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	return len(c.q.calls) - c.q.head
}

// drop closes a client that went past a memory bound: its connection ends
// (as Redis ends a client past client-output-buffer-limit) and the replies
// it holds are let go as its writer pops them.
func (c *client) drop(reason string, held int64) {
	if c.life.aborted.Swap(true) {
		return
	}
	c.s.metrics.clientDropped(reason)
	c.s.logger().Warn("client closed: it holds more unread replies than the proxy allows",
		"remote", c.nc.RemoteAddr().String(), "bound", reason, "held_bytes", held,
		"client_buffer_limit", c.s.clientBufferLimit(), "max_memory", c.s.MaxMemory)
	if !c.shutdownSocket(shutBoth) {
		c.nc.Close()
	}
}

// DefaultMaxMemory is the process bound the squeeze command uses when
// --max-memory is not given: a quarter of the memory this process may use
// (the cgroup's memory.max when set, else the machine's RAM), at least
// 256 MiB. Zero when neither can be read.
func DefaultMaxMemory() int64 {
	total := machineMemory()
	if total <= 0 {
		return 0
	}
	return max(total/4>>20<<20, 256<<20) // whole MiB, as flags print them
}

// machineMemory is the memory available to this process: the cgroup v2 or
// v1 limit, if lower than MemTotal from /proc/meminfo.
func machineMemory() int64 {
	var total int64
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				total = kb << 10
				break
			}
		}
		f.Close()
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
		if err == nil && n > 0 && (total == 0 || n < total) {
			total = n
		}
	}
	return total
}
