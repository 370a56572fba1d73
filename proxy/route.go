package proxy

import "github.com/squeeze-kv/squeeze/internal/rediscmd"

// route decides what happens to one command a client sent: a pure
// function of the command, the client's session as it stands and the
// server's options, so that each of Redis's rules the proxy follows is
// one case here, tested without Redis (route_test.go). route fills in p,
// which must be zero on entry; client.handle carries the plan out.
//
// Most commands go to Redis (pathForward), on the shared connection or the
// client's private one. The proxy answers some itself, where Redis would
// see compressed bytes or where it must learn the outcome: commands that
// look inside values, scripts that need their keys made plain, list
// searches, SELECT; those run so only in the plain flow of replies
// (session.inPlainFlow): inside MULTI, while relaying or with replies off,
// they go to Redis in a checking form instead.
func route(p *plan, in *routeIn, info *cmdInfo, args [][]byte) {
	s := in.sess
	p.info = info
	switch {
	case in.pinned && in.pinDead:
		// The private connection's state (transaction, subscriptions,
		// database, protocol) is gone.
		p.path = pathLost
		return
	case info.flags&rediscmd.Quit != 0:
		p.path = pathQuit
		return
	case info.flags&rediscmd.Script != 0 && in.rejectScripts:
		p.path = pathRefuseScript
		return
	}
	if info.flags&routedFlags == 0 && s.inPlainFlow() {
		// The common case, a command with none of the facts below in the
		// plain flow of replies: to Redis, a reply of its table's shape.
		p.pin = !in.pinned && in.requireAuth
		p.expect, p.kind = true, info.reply
		if in.sortCheck {
			p.build = buildSortCheck
		}
		return
	}
	p.pin = !in.pinned && (needsPin(info, args) || in.requireAuth)
	pinned := in.pinned || p.pin
	// ASKING holds for the client's next command only, in Redis as here.
	p.setsAsking = info.flags&rediscmd.Asking != 0 && !s.inMulti && !s.relay
	defer p.carryAsking(s)
	if info.flags&rediscmd.SelectDB != 0 && len(args) == 2 {
		switch {
		case s.inMulti:
			// Queued: the commands after it in the transaction run in
			// that database, if EXEC runs it; EXEC then asks Redis.
			p.selectQueued = true
		case pinned && s.inPlainFlow():
			// Run now, to know the database the client is in.
			p.path = pathSelect
			return
		}
	}
	if info.flags&rediscmd.Inspect != 0 && !arityOK(info.arity, len(args)) {
		info = unknownCmd // Redis will reply with its arity error
		p.info = info
	}
	if info.flags&rediscmd.Inspect != 0 && s.inPlainFlow() {
		p.path = pathInspect
		return
	}
	if in.script {
		// Scripts: see scripts.go.
		p.fastScript = in.scriptFast && !s.inMulti
		if !in.scriptFast && s.inPlainFlow() {
			p.path = pathScript
			return
		}
		p.prepQueuedScript = s.inMulti && !s.relay
		p.scriptArgs = true
	}
	p.listSearch = in.listSearch && !s.relay // subscribed: Redis refuses it by name
	if p.listSearch && s.inPlainFlow() {
		p.path = pathListSearch
		return
	}
	p.forward(in, args, pinned)
}

// carryAsking makes a command the proxy runs itself, after the client's
// ASKING, carry it: Redis Cluster runs only the next command on a slot the
// node is importing, and the proxy's scripts for the client's command are
// each a command of their own. A command that goes to Redis as it is
// follows the ASKING on the client's connection, which is all it needs.
func (p *plan) carryAsking(s *session) {
	p.asking = s.asking && p.path != pathForward
}

// forward completes p for a command that goes to Redis.
func (p *plan) forward(in *routeIn, args [][]byte, pinned bool) {
	s, info := in.sess, p.info
	p.expect, p.replyOff, p.skip = replies(s, info, args)
	p.kind = replyShape(info, args)
	switch {
	case info.flags&rediscmd.Inspect != 0, p.listSearch:
		// Inside MULTI or with replies off, run the check script: it
		// executes the command on uncompressed values and refuses, with a
		// marker, on compressed ones.
		p.kind, p.build = shapeInspect, buildInspect
		if p.listSearch {
			p.build = buildListSearch
		}
		if s.proto == 3 {
			p.kind = shapeInspect3
		}
	case in.sortCheck:
		p.build = buildSortCheck
	}
	p.queued = s.inMulti && info.flags&rediscmd.NotQueued == 0
	p.relayEnter = info.flags&(rediscmd.Subscribe|rediscmd.Monitor) != 0 && (s.proto == 2 || info.flags&rediscmd.Monitor != 0)
	p.blocking = isBlocking(info, args)
	if info.flags&(rediscmd.Subscribe|rediscmd.Unsubscribe) != 0 && pinned && !p.expect &&
		(s.relay || s.proto == 3) && !p.replyOff && s.skip == 0 {
		// Confirmed by Redis's messages, one per channel, not a reply:
		// the first shows it ran (order.go).
		p.confirms = max(1, len(args)-1)
		// Without names, an unsubscription is confirmed once per
		// subscription the client has when Redis runs it.
		p.confirmsEach = len(args) == 1 && info.flags&rediscmd.Unsubscribe != 0
	}
	if p.confirms == 0 && s.relay && pinned && !p.expect && !p.replyOff && s.skip == 0 && p.skip == 0 {
		// Not CLIENT REPLY SKIP, which gets no reply either.
		p.relayReply = true
	}
	if p.relayEnter && p.expect && info.flags&rediscmd.Subscribe != 0 {
		// Entering the relay, the reply is the first channel's
		// confirmation; the others come as relayed messages, which
		// count as confirmations (order.go): owed too, else they count
		// for the commands after it and end their barriers early.
		p.confirmsAfter = len(args) - 2
	}
	p.after = afterOf(in, info, args, p.expect)
}

// replies says whether the command's reply comes for the client to read,
// and the CLIENT REPLY state after it.
func replies(s *session, info *cmdInfo, args [][]byte) (expect, replyOff bool, skip int) {
	expect, replyOff, skip = true, s.replyOff, s.skip
	switch {
	case s.relay, replyOff:
		expect = false
	case skip > 0:
		skip--
		expect = false
	}
	if info.flags&rediscmd.Client != 0 && len(args) > 2 && is(args[1], "REPLY") {
		switch {
		case is(args[2], "OFF"):
			replyOff, expect = true, false
		case is(args[2], "SKIP"):
			if !replyOff {
				skip, expect = 1, false
			}
		case is(args[2], "ON"):
			replyOff, expect = false, true
		}
	}
	if s.proto == 3 && info.flags&(rediscmd.Subscribe|rediscmd.Unsubscribe) != 0 {
		expect = false // RESP3 confirms with push messages
	}
	return expect, replyOff, skip
}

// afterOf says what the reader must learn from the command's reply before
// it reads on.
func afterOf(in *routeIn, info *cmdInfo, args [][]byte, expect bool) afterStep {
	s := in.sess
	inMulti := s.inMulti // as it will be once the command is queued
	switch {
	case info.flags&rediscmd.Multi != 0:
		inMulti = true
	case info.flags&(rediscmd.Exec|rediscmd.Discard|rediscmd.Reset) != 0:
		inMulti = false
	}
	hello := info.flags&rediscmd.Hello != 0 && expect
	var a afterStep
	switch {
	case !expect || inMulti:
	case in.requireAuth && s.authed && authenticates(info, args):
		a = afterLogin
	case in.requireAuth && !s.authed && authenticates(info, args):
		a = afterFirstLogin
	case info.flags&rediscmd.Exec != 0 && s.dbQueued:
		a = afterExecSelect
	case info.flags&rediscmd.Reset != 0:
		a = afterReset
	}
	if hello {
		a |= afterHello
	}
	return a
}

// routedFlags are the table's facts that take a command off route's common
// path: every fact route, forward, replies and afterOf look at.
const routedFlags = rediscmd.Pin | rediscmd.Blocking | rediscmd.BlockOption |
	rediscmd.Subscribe | rediscmd.Unsubscribe | rediscmd.Monitor |
	rediscmd.Multi | rediscmd.Exec | rediscmd.Discard | rediscmd.NotQueued |
	rediscmd.Quit | rediscmd.Hello | rediscmd.Reset | rediscmd.Client | rediscmd.SelectDB |
	rediscmd.Script | rediscmd.LoadsScripts | rediscmd.Inspect | rediscmd.ListSearch |
	rediscmd.Topology | rediscmd.ReplyOptions | rediscmd.Asking

// routeIn is what route reads besides the command: the session, the
// server's options, and what the caller looked up for the command.
type routeIn struct {
	sess          *session
	pinned        bool // the client has a private connection
	pinDead       bool // and it has ended
	rejectScripts bool // Server.RejectScripts
	requireAuth   bool // Server.RequireAuth
	// script: a script or script admin command the proxy serves (not
	// refused); scriptFast: one the fast path serves (Server.scriptFast).
	script, scriptFast bool
	listSearch         bool // an exact list search (client.exactListSearch)
	sortCheck          bool // SORT with BY or GET patterns (sortNeedsCheck)
}

// plan is route's decision for one command.
type plan struct {
	path path
	info *cmdInfo // the entry to serve it by: unknownCmd for a bad arity
	pin  bool     // open the client's private connection first
	// selectQueued: a SELECT queued in a transaction (session.dbQueued).
	selectQueued bool
	// fastScript: a script the fast path serves, whose keys are noted;
	// prepQueuedScript: a script queued in MULTI, whose keys are made
	// plain now; scriptArgs: the script's arguments are rewritten
	// (Server.scriptArgs).
	fastScript, prepQueuedScript, scriptArgs bool
	listSearch                               bool // an exact list search, in its checking form
	// setsAsking: the command is ASKING, which the next one runs with
	// (session.asking); asking: the command comes after the client's
	// ASKING and the proxy runs it, so each of its round trips carries
	// ASKING (reader.asking).
	setsAsking, asking bool
	// expect: a reply comes that the client reads; replyOff and skip are
	// the CLIENT REPLY state after the command.
	expect   bool
	replyOff bool
	skip     int
	kind     shape     // where values sit in the reply (before queuing)
	build    buildForm // how the request to Redis is written
	queued   bool      // queued in MULTI: the reply now is +QUEUED
	// relayEnter: the command enters the RESP2 pub/sub or MONITOR relay;
	// blocking: it may block.
	relayEnter, blocking bool
	// confirms: the confirmations a subscription command that gets no
	// reply owes (in the RESP2 relay, or in RESP3).
	confirms int
	// confirmsAfter: those that come after the reply of a subscription
	// command entering the relay (one per channel past the first);
	// confirmsEach: one per subscription the client has (an
	// unsubscription without names), confirms then says 1.
	confirmsAfter int
	confirmsEach  bool
	// relayReply: another command in the RESP2 relay, whose reply Redis
	// sends there too (a PUBLISH after UNSUBSCRIBE, PING, an error): it
	// shows Redis took the command (order.go's confirmations).
	relayReply bool
	after      afterStep
}

// path is where a command goes.
type path uint8

const (
	pathForward      path = iota // to Redis
	pathLost                     // the private connection ended: close without a reply
	pathQuit                     // +OK, then close
	pathRefuseScript             // refused: --scripts=reject
	pathSelect                   // SELECT run at once on the private connection
	pathInspect                  // answered by the inspect script (inspect.go)
	pathScript                   // the script run with its keys made plain (scriptrun.go)
	pathListSearch               // answered by the list search script (listsearch.go)
)

// buildForm is how the request for a forwarded command is written.
type buildForm uint8

const (
	buildCommand    buildForm = iota // the command, values compressed (rewriter.appendRequest)
	buildInspect                     // the queued inspect script (appendQueuedInspect)
	buildListSearch                  // the queued list search script (appendQueuedListSearch)
	buildSortCheck                   // SORT inside the check script (appendSortCheck)
)

// afterStep is what the reader must learn from a reply before reading on.
type afterStep uint8

const (
	afterHello      afterStep = 1 << iota // the protocol HELLO chose
	afterLogin                            // who the client is logged in as now (RequireAuth)
	afterFirstLogin                       // the first login: then select the URL's database
	afterExecSelect                       // the database after a transaction that selected one
	afterReset                            // RESET: the connection's setup again
)
