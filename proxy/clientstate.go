package proxy

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// client is one client connection: a reader (the client's goroutine, or a
// poller's event loop for one step at a time) and a writer goroutine,
// joined by the queue of calls in order. Its state is grouped by who may
// touch it; each group says so.
type client struct {
	s   *Server
	nc  net.Conn
	id  uint64
	raw syscall.RawConn // the socket's descriptor, for raw reads and writes; nil without one

	q      replyQueue // the calls in order, from the reader to the output owner: under q.mu
	in     reader     // the command reader's only
	sess   session    // what Redis knows of the client's connection: the reader's, but for two atomics
	pinned pinning    // the private upstream connection and the order barrier
	out    output     // the output owner's only, but for its atomics
	mem    memAccount // the bytes of replies held for the client: atomics, anyone
	life   lifecycle  // ending the connection: atomics and channels, anyone
}

// replyQueue holds the calls in order, from the reader to the writer. The
// reader appends; the output owner takes the head once it is ready. Every
// field but the channels is guarded by mu.
type replyQueue struct {
	mu     sync.Mutex
	calls  []*call
	head   int
	closed bool
	// ready wakes the writer (a call completed or was queued complete);
	// space wakes a reader waiting for room.
	ready chan struct{}
	space chan struct{}
	// owned: the writer goroutine or, for a client on a shared connection
	// only, that connection's reader is taking calls off the queue and
	// writing their replies, one at a time.
	owned bool
}

// reader is the state of reading and sending a client's commands: its
// goroutine's, or the poller's while it runs the client's loop step.
type reader struct {
	// rbuf holds the client's unparsed input: an event loop's read buffer
	// during a loop step (loopStep), else a buffer of the client's own,
	// which a client keeps only while part of a command waits in it.
	rbuf   []byte
	readAt time.Time // when the commands in rbuf were read (with metrics on)
	args   [][]byte
	// lastName and lastInfo: the name of the last command read, as sent,
	// and its entry in the command table, for pipelines that repeat one
	// command (lookupCommand).
	lastName []byte
	lastInfo *cmdInfo
	req      []byte
	// rawCmd is the command handle is handling as the client sent it (a
	// slice of rbuf); reqRaw: req is rawCmd itself, forwarded without a
	// copy, and reqOwn the client's own buffer meanwhile (flush).
	rawCmd []byte
	reqRaw bool
	reqOwn []byte
	batch  []*call
	// batchExpected is what the calls in batch reserved, counted (expect)
	// once per batch, before it is sent (flush); roomLocked counts it
	// meanwhile.
	batchExpected int64
	// roomCredit is how many more calls the reply queue takes, by its
	// count under q.mu (hasRoom).
	roomCredit int
	one        [1]*call
	rw         rewriter
	// rd carries the arguments and results of the non-blocking reads
	// through a function made once per client: a closure made per call
	// would escape to the heap through syscall.RawConn.
	rd sockIO
	// seq numbers calls; the writer publishes the last one it wrote
	// (out.writtenSeq), so the reader can wait for earlier commands to
	// have run. multiSeq is the call of the last MULTI.
	seq      uint64
	multiSeq uint64
	// readFull: the poller's last read filled the buffer (loopStep).
	readFull bool
	// looping: an event loop is running process for this client.
	looping bool
	// inputEnds: the event loop saw the end of input announced (EPOLLRDHUP)
	// and reads again each round until the client sees it (poller.step).
	inputEnds bool
	// The poller that reads this client while its commands need no
	// waiting (nil: always its own goroutine), and the channel on which
	// the poller gives it back. noLoop: never the poller again; handOff:
	// the poller stopped before a command that must wait.
	poller   *poller
	handback chan readEnd
	noLoop   bool
	handOff  bool
	// keepsPlace: the command handed off gives the client a private
	// connection (the poller keeps the client in its set from then on),
	// or is an inspect command, the last whole one read (kept in the set
	// until its goroutine is done with it): what the client sends
	// meanwhile gets its barrier when it comes (passState.pinning).
	keepsPlace bool
	// coversRest: the barrier raised for the command handed off covers
	// the whole commands read behind it, and ends once the last of them
	// is sent (client.mustHandOff).
	coversRest bool
	// pass is the hand-over of the client between the poller, which
	// keeps it in its set, and its goroutine (passState); drainAgain: the
	// goroutine's last read filled its buffer (readWaiting).
	pass       passState
	drainAgain bool
	// lastFlush: process sends the last batch of what it read.
	lastFlush bool
	// scriptUp, when set, is the shared connection the scripts of the
	// command being handled run on (see aclscript.go).
	scriptUp *upConn
	// steps: the command being handled runs as scripts that depend on
	// each other (an inspect command: APPEND probes, then writes; a
	// retry after NOSCRIPT or after another writer changed the key): its
	// order barrier lasts until it is done, whatever it holds
	// (roundtripScript).
	steps bool
	// tail is how Redis will show that it took the batch's last command
	// (sendPrivate).
	tail batchTail
	// scope is what the batch touches, for the order barriers
	// (orderscope.go).
	scope reqScope
	// stepInfo and stepArgs are the command being handled in round trips
	// of the proxy's own (an inspect command, a script, SELECT): each
	// round trip's scope is that command's keys (client.noteStep).
	stepInfo *cmdInfo
	stepArgs [][]byte
	// sharedUp is the shared connection the last batch went to
	// (client.sharedConn).
	sharedUp *upConn
	// asking: the command being handled came after the client's ASKING
	// and the proxy runs it itself: each round trip it makes for it
	// sends ASKING first (plan.asking, askingFirst).
	asking bool
}

// session is what Redis knows of the client's connection, as the proxy
// follows it: protocol, transaction, pub/sub, CLIENT REPLY, database,
// login. The reader's, but for helloProto and user, which the writer sets
// from replies.
type session struct {
	proto    int
	inMulti  bool
	tx       []shape     // shapes of the commands queued in MULTI
	txNames  []string    // and their names
	txSets   []candidate // values SET in the open transaction
	txCopies [][2][]byte // {destination, source} of COPY and RENAME queued in it
	relay    bool        // RESP2 pub/sub or MONITOR: replies are relayed as they come
	relayGen uint64      // the pinned connection's relayEnds when relay began
	replyOff bool        // CLIENT REPLY OFF
	skip     int         // CLIENT REPLY SKIP: commands whose reply Redis skips
	// asking: the last command was ASKING, which Redis Cluster's next
	// command runs with (plan.setsAsking).
	asking bool
	// txRaw: the writes of the open transaction that may leave values raw,
	// recompressed after EXEC (recompress.go).
	txRaw txRecompress
	// authed: the private connection is authenticated (Server.RequireAuth;
	// until then commands are held to Redis's limits for unauthenticated
	// clients).
	authed bool
	// db is the database the client's commands run in: the URL's, or the
	// one its last successful SELECT chose. The proxy's own reads for the
	// client (the frames a queued STRLEN will look inside) go there too.
	// dbQueued: a SELECT is queued in the open transaction (db is then the
	// database it selects); txDB is db when MULTI began.
	db       int
	dbQueued bool
	txDB     int
	// helloProto is the protocol from the last HELLO reply, 0 if it failed
	// (set by the writer).
	helloProto atomic.Int64
	// user is the ACL user the client is logged in as, set by the writer
	// when an AUTH or HELLO ... AUTH succeeds (with RequireAuth), nil
	// before and after RESET.
	user atomic.Pointer[[]byte]
}

// inPlainFlow reports whether the client's next command gets its reply in
// the ordinary way, so the proxy may run it itself (inspect, scripts,
// list search, SELECT) and answer in its place: not queued in a
// transaction, not relayed, and with replies on.
func (s *session) inPlainFlow() bool {
	return !s.inMulti && !s.relay && !s.replyOff && s.skip == 0
}

// pinning is the client's private upstream connection, which commands
// that hold connection state need (pin), and the order barrier a command
// that had to wait raises.
type pinning struct {
	mu   sync.Mutex // guards conn for forceClose
	conn *upConn
	// held is the order barrier raised when a command that must wait was
	// read (pin, mustHandOff): the command is sent behind it, and on a
	// private connection under it (sendPrivate); else it is lowered once
	// the command is written (endPinOrder). The reader's.
	held *orderHold
	// heldPart: held carries on to more batches (sendPrivate), and the
	// reader holds a part of it until the last (orderHold.parts). The
	// reader's.
	heldPart bool
	// blockers counts the blocking commands sent on the private
	// connection whose replies have not come (call.blocker): Redis runs
	// what the client sends after them only once they return.
	blockers atomic.Int32
	// heldBack counts the client's calls held behind order barriers on
	// the shared connections (upConn.holdBatch, releaseHeld): while it is
	// above zero its later requests hold too (orderscope.go).
	heldBack atomic.Int32
	// confirms: the confirmations the client's subscription commands
	// that get no reply still owe (order.go).
	confirms confirmations
	// id is the private connection's CLIENT ID (0: unknown).
	id int64
	// done is the highest pinSeq whose reply has been consumed, by the
	// writer or by the reader's own round trips; rtDone the highest a
	// round trip consumed while replies before it were still to be
	// written (noteRoundtripPin).
	done   atomic.Uint64
	rtDone atomic.Uint64
	// push carries RESP3 push messages and relayed pub/sub or MONITOR
	// traffic from the pinned connection to the writer. It is made when
	// the client pins (pin), before the connection that sends on it:
	// only pinned clients get pushes, and the channel's buffer of 128
	// messages was a third of an idle client's memory.
	push atomic.Pointer[chan pushMsg]
}

// output is the writing of replies to the client: the output owner's (the
// writer goroutine, or a shared connection's reader writing directly).
type output struct {
	rw rewriter
	// direct is writeDirect's list of the replies it takes.
	direct []*call
	// obs gathers the metrics of the replies being emitted (emit,
	// settleHeld).
	obs pendingObs
	// unheld is what replies written since the last settleHeld gave back,
	// still to come off the process's total.
	unheld int64
	// buf is the replies not written yet; broken: the socket failed.
	buf    []byte
	broken bool
	// wr carries the arguments and results of the non-blocking writes
	// through a function made once per client (see reader.rd).
	wr sockIO
	// noDirect is set when the client pins a connection, or its socket
	// has no raw descriptor, or the system no non-blocking raw write
	// (directWrites): from then on only the writer goroutine writes.
	noDirect atomic.Bool
	// passOff is the time (Unix nanoseconds) until which large replies go
	// the stored way: the client read a passed one too slowly (passreply.go).
	passOff atomic.Int64
	// writtenSeq is the last call whose reply was written; writtenWaiters
	// counts readers waiting in waitWritten, which the writer wakes
	// through writtenC (guarded by writtenMu) only when there are some.
	writtenMu      sync.Mutex
	writtenC       *sync.Cond
	writtenSeq     atomic.Uint64
	writtenWaiters atomic.Int32
}

// memAccount is the bytes of replies held for the client (memory.go).
type memAccount struct {
	// held is the bytes of replies that arrived for queued calls and are
	// not written yet, and of large output being written.
	held atomic.Int64
	// replyEst estimates the size of the client's replies, for its window
	// of commands in flight; 0 before the first reply.
	replyEst atomic.Int64
	// writing is the bytes of output the writer is writing now; expected
	// the part of held that commands in flight reserved.
	writing  atomic.Int64
	expected atomic.Int64
}

// lifecycle is how the connection ends.
type lifecycle struct {
	// aborted is set when the connection is ended from the proxy's side (a
	// write failed: the client is gone; or the server closes): the reader
	// then runs no more of the commands it has already read.
	aborted    atomic.Bool
	drainOnce  sync.Once
	draining   chan struct{}
	writerDone chan struct{} // closed when writeLoop returns
}
