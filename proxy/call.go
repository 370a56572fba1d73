package proxy

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
)

// call is one command in flight to Redis. The client reader creates it, the
// upstream reader fills reply and signals done, the client writer turns the
// reply into what the client sees and releases it.
type call struct {
	reply []byte // whole reply, owned by the call
	err   error  // upstream failure; reply is then empty
	done  chan struct{}

	kind shape   // how to rewrite the reply
	tx   []shape // for EXEC: the shapes of the queued commands
	// txNames: for EXEC, the names of the queued commands (for decode
	// errors, and quarantine of destructive reads).
	txNames []string
	args    []byte // copy of the arguments the reply rewrite may name in errors
	argv    []int  // end offsets of each argument in args
	cmd     string // command name for metrics and errors (static string)
	cmdID   int32  // the command's cmdInfo.id when known, for metrics; else 0
	local   bool   // reply prepared by the proxy; nothing was sent
	close   bool   // close the client after writing this reply
	start   time.Time
	seq     uint64 // order among the client's calls with replies
	// takes holds the command's flags Destructive and Moves (it takes the
	// values it returns out of Redis, or moves them) for a call made
	// with the command's entry (client.newCall); 0 for local calls. Read
	// for every reply (mayRoundTrip), where a lookup of cmd by name cost
	// 2% of a pipelined GET's CPU.
	takes rediscmd.Flag
	// notify is the client writer's wake-up channel for queued calls (nil
	// for round trips, which use done); ready is set when the call is
	// complete.
	notify chan struct{}
	owner  *client // the client of a queued call
	ready  atomic.Bool
	pinSeq uint64 // completion order on a pinned connection, 0 elsewhere
	// onFinish, when set, runs once when the call completes: it ends the
	// order barrier held until Redis ran the command (proxy/order.go).
	onFinish func()
	// endsOrder is the order barrier this call's reply ends: Redis has
	// taken the command, and the batch it ends (client.sendPrivate).
	// blocker: the call is a blocking command on a private connection,
	// counted in its owner's pinning.blockers until it completes.
	endsOrder *orderHold
	blocker   bool
	// deferPushes: push messages that arrive on the private connection
	// while this call is in flight are written after its reply (a script
	// that ran the client's command: see roundtripScript).
	deferPushes bool
	// connLost: the call failed because its client's private connection
	// ended, or because Redis could not be reached in front of a cluster
	// node (Server.lossEndsClients). Redis would have closed the client's
	// connection without a reply, so the proxy writes none and closes it
	// (see client.emit).
	connLost bool
	// authUser: the ACL user an AUTH or HELLO ... AUTH logs in as, for the
	// writer to note when it succeeds (see client.user).
	authUser []byte
	// held is the bytes of the reply counted against the owner, given back
	// when it is written; reserved the reservation made when the call was
	// queued, until its reply arrives (memory.go).
	held, reserved int64
	// db is the database the command ran in, where a value it took out
	// of Redis is kept, or a move it made is undone (quarantine.go).
	db int
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// newCall returns an empty call, from callPool (see release).
func newCall() *call {
	c := callPool.Get().(*call)
	return c
}

// maxPooledReply caps the reply buffer kept by a released call, so a single
// huge reply does not stay in memory forever.
const maxPooledReply = 256 << 10

// release puts c back in callPool for newCall, every field zero but the
// buffers a call reuses: done, and reply, args, argv, tx and txNames
// emptied (reply and args let go above maxPooledReply).
func (c *call) release() {
	if cap(c.reply) > maxPooledReply {
		c.reply = nil
	}
	if cap(c.args) > maxPooledReply {
		c.args = nil
	}
	// Field by field: assigning a new struct whole cost a 296-byte copy
	// with write barriers, 8 ns more per command. TestCall_ReleaseResetsEveryField
	// fails on a field added to call and not reset here.
	c.reply, c.err, c.kind, c.tx, c.txNames = c.reply[:0], nil, 0, c.tx[:0], c.txNames[:0]
	c.args, c.argv, c.cmd, c.cmdID, c.takes, c.local, c.close = c.args[:0], c.argv[:0], "", 0, 0, false, false
	c.start, c.seq, c.notify, c.owner, c.pinSeq = time.Time{}, 0, nil, nil, 0
	c.onFinish, c.deferPushes, c.connLost, c.authUser, c.held, c.reserved, c.db = nil, false, false, nil, 0, 0, 0
	c.endsOrder, c.blocker = nil, false
	c.ready.Store(false)
	callPool.Put(c)
}

// finish marks the call complete: a queued call sets its ready flag and
// nudges its client's writer; a round-trip call signals done.
func (c *call) finish() {
	if f := c.onFinish; f != nil {
		c.onFinish = nil
		f()
	}
	c.taken()
	if n := c.notify; n != nil {
		c.ready.Store(true)
		select {
		case n <- struct{}{}:
		default:
		}
		return
	}
	c.done <- struct{}{}
}

// taken notes that Redis has taken the call's command: it ends the order
// barrier the call ends, and no longer counts it among its client's
// blocked commands.
func (c *call) taken() {
	if c.blocker {
		c.blocker = false
		c.owner.pinned.blockers.Add(-1)
		c.owner.s.pool.order.blocked.Add(-1)
	}
	if h := c.endsOrder; h != nil {
		c.endsOrder = nil
		h.endPart()
	}
}

// arg returns the i-th saved argument.
func (c *call) arg(i int) []byte {
	if i < 0 || i >= len(c.argv) {
		return nil
	}
	start := 0
	if i > 0 {
		start = c.argv[i-1]
	}
	return c.args[start:c.argv[i]]
}

func (c *call) saveArgs(args [][]byte) {
	for _, a := range args {
		c.args = append(c.args, a...)
		c.argv = append(c.argv, len(c.args))
	}
}
