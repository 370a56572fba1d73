package proxy

import (
	"fmt"
	"slices"
	"time"

	"github.com/squeeze-kv/squeeze/internal/bufpool"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/resp"
)

// handle processes one command: route decides, handle carries the plan
// out. It returns false when the connection must end (QUIT, a lost private
// connection).
func (c *client) handle(info *cmdInfo, args [][]byte) bool {
	start := c.in.readAt
	if c.sess.relay && c.pinned.conn != nil && info.flags&(rediscmd.Subscribe|rediscmd.Unsubscribe|rediscmd.Quit) == 0 &&
		info.name != "PING" {
		// Whether Redis still holds the client subscribed when it runs
		// this command is known once the subscription commands before it
		// are confirmed (an UNSUBSCRIBE of every channel ends it): HELLO 3
		// routed as relayed traffic switched Redis to RESP3 unseen, and
		// the client's next SUBSCRIBE waited for a reply RESP3 does not
		// send, taking the reply of a later command (order scenes, seed
		// 115). PING and QUIT are the same either way; subscription
		// commands keep the relay's pace.
		c.flush()
		c.pinned.confirms.awaitOwed(c.pinned.conn.closed)
	}
	if c.sess.relay && c.pinned.conn != nil && c.pinned.conn.relayEnds.Load() > c.sess.relayGen {
		c.sess.relay = false // Redis left the subscribed state
	}
	var in routeIn
	c.routeIn(&in, info, args)
	var p plan
	route(&p, &in, info, args)
	c.sess.asking, c.in.asking = p.setsAsking, p.asking
	if p.pin {
		if err := c.pin(); err != nil {
			if c.s.lossEndsClients() {
				c.enqueue(c.lostCall(info.name))
				return false
			}
			c.enqueue(c.localCall(info.name, resp.AppendError(nil, "ERR squeeze: cannot open a private upstream connection for "+info.name+": "+err.Error())))
			return true
		}
		if c.pollable() && !c.in.pass.isKept() {
			c.in.poller.keepAway(c) // its next commands in their place
		}
	}
	switch p.path {
	case pathSelect, pathInspect, pathScript, pathListSearch:
		// Its round trips touch its keys (noteStep).
		c.in.stepInfo, c.in.stepArgs = info, args
		ok := c.handleSteps(p.path, p.info, info, args, start)
		c.in.stepInfo, c.in.stepArgs = nil, nil
		return ok
	}
	switch p.path {
	case pathLost:
		// End the client's connection as a failed Redis would, without a
		// reply, so that the client's library reconnects (an error reply
		// reads as a failed command).
		c.enqueue(c.lostCall(info.name))
		return false
	case pathQuit:
		cl := c.localCall(info.name, []byte("+OK\r\n"))
		cl.close = true
		c.enqueue(cl)
		return false
	case pathRefuseScript:
		c.enqueue(c.localCall(info.name, resp.AppendError(nil, "ERR squeeze: "+info.name+" is disabled by --scripts=reject: scripts would see compressed values")))
	default:
		c.forward(&p, args, start)
	}
	return true
}

// handleSteps handles a command the proxy runs in round trips of its own
// (handle).
func (c *client) handleSteps(path path, routed, info *cmdInfo, args [][]byte, start time.Time) bool {
	switch path {
	case pathSelect:
		return c.selectNow(info, args, start)
	case pathInspect:
		c.in.steps = true
		c.answer(c.inspect(routed, args), start)
		c.in.steps = false
	case pathScript:
		c.answer(c.runScript(info, args), start)
	case pathListSearch:
		c.answer(c.listSearch(info, args), start)
	}
	return true
}

// routeIn gathers in in what route reads besides the command. (in and
// the plan live on handle's stack: filled in place, they cost no copy and
// no write barrier.)
func (c *client) routeIn(in *routeIn, info *cmdInfo, args [][]byte) {
	in.sess = &c.sess
	in.pinned = c.pinned.conn != nil
	in.pinDead = in.pinned && c.pinned.conn.isDead()
	in.rejectScripts, in.requireAuth = c.s.RejectScripts, c.s.RequireAuth
	if info.flags&rediscmd.Patterns != 0 {
		_, _, _, in.sortCheck = sortNeedsCheck(info, args)
	}
	if info.flags&routedFlags == 0 {
		return // none of the rest applies
	}
	in.listSearch = c.exactListSearch(info, args)
	in.script = !c.s.RejectScripts && (info.flags&rediscmd.Script != 0 || info.flags&rediscmd.LoadsScripts != 0 && isScriptAdmin(args))
	if in.script {
		in.scriptFast = c.s.scriptFast(info, args)
	}
}

// answer queues cl, a reply the proxy made in the command's place.
func (c *client) answer(cl *call, start time.Time) {
	cl.start = start
	c.enqueue(cl)
}

// selectNow runs SELECT on the client's private connection at once, to
// know the database the client is in.
func (c *client) selectNow(info *cmdInfo, args [][]byte, start time.Time) bool {
	cl := c.roundtrip(resp.AppendCommand(nil, args...))
	if cl.err != nil && cl.connLost {
		cl.release()
		c.enqueue(c.lostCall(info.name))
		return false
	}
	reply := resp.AppendError(nil, "ERR squeeze: upstream: "+fmt.Sprint(cl.err))
	if cl.err == nil {
		reply = append(reply[:0], cl.reply...)
		if n, ok := resp.ParseInt(args[1]); ok && string(cl.reply) == "+OK\r\n" {
			c.sess.db = int(n)
		}
	}
	// The reply goes after the push messages that came before it (a
	// RESP3 client's subscription confirmations), as Redis sent them.
	out := c.localCall(info.name, reply)
	out.pinSeq = cl.pinSeq
	cl.release()
	c.answer(out, start)
	return true
}

// forward sends a command to Redis as p says: its session bookkeeping, its
// call, its request, and what the reader must learn from its reply.
func (c *client) forward(p *plan, args [][]byte, start time.Time) {
	info := p.info
	if p.selectQueued {
		if n, ok := resp.ParseInt(args[1]); ok && n >= 0 {
			c.sess.db, c.sess.dbQueued = int(n), true
		}
	}
	if p.prepQueuedScript {
		c.flush()
		c.waitWritten(c.in.multiSeq)
	}
	// An FCALL of a function whose library has no prologue is not sent,
	// here either (checkQueuedFunction); a fast one is known guarded.
	var refusal []byte
	if p.scriptArgs && isFCall(info) && !p.fastScript {
		args, refusal = c.checkQueuedFunction(args)
	}
	if p.prepQueuedScript && refusal == nil {
		// An error here leaves the frames, which the prologue then
		// reports at EXEC: the command is queued all the same.
		c.queueScriptPrep(info, args)
	}
	// A FUNCTION command that may change the libraries, or the EXEC of a
	// transaction holding one: what the proxy read of them is dropped.
	functions := changesFunctions(args) ||
		info.flags&rediscmd.Exec != 0 && c.sess.inMulti && slices.Contains(c.sess.txNames, "FUNCTION")
	var fastScriptKeys [][]byte
	if p.fastScript {
		fastScriptKeys, _ = scriptKeysOf(args)
	}
	if p.scriptArgs {
		args, _ = c.s.scriptArgs(info, args)
	}
	c.sess.replyOff, c.sess.skip = p.replyOff, p.skip
	kind := p.kind
	if p.queued {
		c.noteTxWrites(info, args)
		c.sess.txRaw.note(c.s, len(c.sess.tx), info, args)
		c.sess.tx, c.sess.txNames = append(c.sess.tx, kind), append(c.sess.txNames, info.name)
		kind = shapeNone // the reply now is +QUEUED
	}
	var cl *call
	if p.expect {
		cl = c.newCall(info, args, kind, start)
	}
	c.advanceSession(p, cl)
	var owed *execRecompress // recompression after EXEC (recompress.go)
	if info.flags&rediscmd.Exec != 0 && cl != nil && len(cl.tx) > 0 {
		owed = c.sess.txRaw.arm(cl, len(cl.tx), c.sess.dbQueued)
	}
	reqMark := c.appendRequest(p, args)
	c.noteTail(p, cl) // after: appendRequest may send the batch before it
	if o := &c.s.pool.order; o.up.Load() > 0 {
		c.in.scope.note(info, args, true, o.mayWake())
	} else {
		c.in.scope.any = true // as note with no barrier up
	}
	if cl != nil && p.fastScript {
		c.s.noteFastScript(cl, fastScriptKeys)
	}
	if cl != nil && refusal != nil {
		replyInstead(cl, refusal)
	}
	if functions {
		c.s.forgetFunctionsAfter(cl)
	}
	if cl != nil {
		held := max(int64(len(c.in.req)-reqMark), c.expectedReply())
		cl.reserved = held
		c.in.batch = append(c.in.batch, cl)
		c.enqueue(cl)              // the writer owns cl from here on
		c.in.batchExpected += held // counted in flush, before it is sent
	}
	if c.in.reqRaw {
		c.flush() // req is rbuf's: sent now, alone
	}
	c.learn(p.after)
	if owed != nil {
		c.recompressAfterExec(owed)
	}
}

// newCall returns the call for a forwarded command whose reply the client
// reads, numbered in the client's order.
func (c *client) newCall(info *cmdInfo, args [][]byte, kind shape, start time.Time) *call {
	cl := newCall()
	cl.notify, cl.owner = c.q.ready, c
	cl.cmd, cl.cmdID, cl.kind, cl.start = info.name, info.id, kind, start
	cl.takes = takesOf(info)
	if c.s.RequireAuth && authenticates(info, args) {
		// Until its reply says it succeeded, the client is nobody the
		// proxy knows (aclscript.go), never the user before.
		c.sess.user.Store(nil)
		cl.authUser = authUser(info, args)
	}
	c.in.seq++
	cl.seq = c.in.seq
	if info.flags&rediscmd.Multi != 0 {
		c.in.multiSeq = c.in.seq
	}
	if kind != shapeNone && kind != shapeSniff {
		// The keys, for decode errors that name them (keyOf): every
		// argument of MGET and of a move (its lists and ends, to undo
		// it), the first of the others. Never a value: copying a 10 MB
		// SET ... GET value here was 2% of the proxy's CPU on large
		// documents.
		if info.name == "MGET" || info.flags&rediscmd.Moves != 0 {
			cl.saveArgs(args)
		} else {
			cl.saveArgs(args[:min(len(args), 2)])
		}
		cl.db = c.sess.db
	}
	return cl
}

// advanceSession follows the session through the command: transactions,
// HELLO, RESET, and entering the relay. cl is the command's call, nil
// when no reply comes.
func (c *client) advanceSession(p *plan, cl *call) {
	s, info := &c.sess, p.info
	switch {
	case info.flags&rediscmd.Multi != 0:
		if !s.inMulti {
			s.txDB = s.db
		}
		s.inMulti, s.tx, s.txNames, s.txSets, s.txCopies = true, s.tx[:0], s.txNames[:0], nil, nil
		s.txRaw.reset()
	case info.flags&rediscmd.Exec != 0:
		if cl != nil && s.inMulti {
			cl.tx = append(cl.tx[:0], s.tx...)
			cl.txNames = append(cl.txNames[:0], s.txNames...)
		}
		// The values noted for the commands queued are needed no more:
		// a client whose last transaction wrote a 300 kB value kept it
		// twice, plain and framed, until its next MULTI.
		s.inMulti, s.txSets, s.txCopies = false, nil, nil
	case info.flags&rediscmd.Discard != 0:
		if s.inMulti && s.dbQueued {
			s.db, s.dbQueued = s.txDB, false
		}
		s.inMulti, s.txSets, s.txCopies = false, nil, nil
	case info.flags&rediscmd.Hello != 0:
		s.helloProto.Store(0)
	case info.flags&rediscmd.Reset != 0:
		s.proto, s.inMulti, s.replyOff, s.skip = 2, false, false, 0
		s.txSets, s.txCopies = nil, nil
	case p.relayEnter:
		if cl != nil {
			cl.kind = shapeRelay
		}
		if !s.relay {
			s.relay, s.relayGen = true, c.pinned.conn.relayEnds.Load()
		}
	}
}

// appendRequest appends the request for a forwarded command to the
// batch, as p.build says, and returns where it begins.
func (c *client) appendRequest(p *plan, args [][]byte) (reqMark int) {
	info := p.info
	reqMark = len(c.in.req)
	switch p.build {
	case buildInspect:
		// Commands before MULTI must have run before probing the keys.
		c.flush()
		c.waitWritten(c.in.multiSeq)
		c.in.req = c.appendQueuedInspect(c.in.req, info, args)
	case buildListSearch:
		c.flush()
		c.waitWritten(c.in.multiSeq)
		c.in.req = c.appendQueuedListSearch(c.in.req, info, args)
	case buildSortCheck:
		by, alpha, patterns, _ := sortNeedsCheck(info, args)
		c.in.req = appendSortCheck(c.in.req, by, alpha, patterns, args)
	default:
		if raw := c.in.rawCmd; len(raw) >= forwardAsIsMin && c.in.rw.forwardsAsIs(info, args, raw) {
			// A large command that goes to Redis as it came: sent from
			// the read buffer, after the batch before it, rather than
			// copied into the batch (flush sends it before rbuf changes).
			c.flush()
			c.in.reqOwn, c.in.req, c.in.reqRaw = c.in.req, raw, true
			return 0
		}
		if len(c.in.rawCmd) >= maxLoopCommand && info.vals != rediscmd.ValuesNone {
			defer takeBigEncode()() // one of a few at a time (policy.go)
		}
		if m := len(c.in.rbuf); m >= bufpool.MinSize && cap(c.in.req)-len(c.in.req) < m {
			// A large command: room for it from the reused buffers.
			c.in.req = append(bufpool.Get(len(c.in.req)+m), c.in.req...)
		}
		c.in.req = c.in.rw.appendRequest(c.in.req, info, args)
	}
	return reqMark
}

// learn waits for the reply of the command just sent where the reader
// must know its outcome before it reads on (afterStep).
func (c *client) learn(a afterStep) {
	if a == 0 {
		return
	}
	c.flush()
	c.waitWritten(c.in.seq)
	if a&afterHello != 0 {
		// The protocol changes only if HELLO succeeds (HELLO 3 AUTH with
		// a wrong password does not): the writer read it from the reply.
		if p := c.sess.helloProto.Load(); p == 2 || p == 3 {
			c.sess.proto = int(p)
		}
	}
	switch {
	case a&afterLogin != 0:
		// Another login: the commands after it run as whoever it logs in
		// as, which its reply tells (see session.user).
	case a&afterFirstLogin != 0:
		// The connection was dialed without credentials, so its SELECT of
		// the URL's database failed: select it once the client's own AUTH
		// has run. Its reply says whether that AUTH succeeded.
		c.restoreSetup(c.s.connSetup(false, c.s.up.DB))
	case a&afterExecSelect != 0:
		// A SELECT ran in the transaction, or did not (an error, WATCH):
		// ask Redis which database the client is in now.
		c.sess.dbQueued = false
		r := c.roundtrip(resp.AppendCommand(nil, []byte("CLIENT"), []byte("INFO")))
		if db, ok := clientInfoDB(r.reply); r.err == nil && ok {
			c.sess.db = db
		}
		r.release()
	case a&afterReset != 0:
		// RESET selects database 0 and, where Redis requires a password,
		// logs the connection out: put it back in the state the proxy
		// stands for (the URL's credentials unless RequireAuth, and its
		// database).
		c.sess.authed, c.sess.db = false, c.s.up.DB
		c.sess.user.Store(nil)
		c.restoreSetup(c.s.connSetup(!c.s.RequireAuth, c.s.up.DB))
	}
}
