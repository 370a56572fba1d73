package proxy

import (
	"time"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/resp"
)

// The door: commands the proxy answers in Redis's place before route sees
// them, because sending them on would hurt the connection they go on, and
// with a shared connection every other client of it.
//
//   - An HTTP request's first lines (POST, Host:; rediscmd.Hostile): Redis
//     takes them for a cross-protocol attack and closes the connection
//     they came on, which for the proxy's shared connection fails the
//     commands of every client in flight. The proxy closes the sender
//     instead, as Redis would, without a reply.
//   - SYNC and PSYNC (rediscmd.Refused) would make the connection a
//     replica's: Redis forks, sends the database and then every write,
//     which is no reply a connection of the proxy can read. The proxy
//     refuses them; inside MULTI they pass on, since Redis refuses them
//     there itself (and so aborts the transaction, as a client expects).
//   - Before the client has logged in (Server.RequireAuth, where Redis
//     requires a password), a command the proxy would not send as it came
//     (an inspect or list search script, a script with its prologue, SORT
//     in its checking script) gets Redis's -NOAUTH from the proxy: its own
//     requests would exceed the limits Redis holds unauthenticated clients
//     to, and Redis would answer them with a protocol error and close.

// noAuthReply is Redis's answer to a command before the login it requires.
var noAuthReply = []byte("-NOAUTH Authentication required.\r\n")

// hostileLogEvery is how often at most the proxy logs hostile input, as
// Redis does, so that a flood of it does not flood the log too.
const hostileLogEvery = time.Minute

// atDoor answers the command now if the door says so (see above), and
// reports whether it did and what process does next: cmdEnd when the
// connection must close. Command reader only, from processNext, for a
// command with a fact the door looks at or from a client not logged in.
func (c *client) atDoor(info *cmdInfo, args [][]byte) (cmdStep, bool) {
	switch {
	case info.flags&rediscmd.Hostile != 0:
		c.s.noteHostile(c)
		c.enqueue(c.lostCall(info.name))
		c.flush() // what came before still goes upstream, and is answered
		c.endPinOrder()
		return cmdEnd, true
	case c.beforeLogin(info, args):
		c.answerAtDoor(info, args, noAuthReply)
		return cmdNext, true
	case info.flags&rediscmd.Refused != 0 && !c.sess.inMulti:
		c.answerAtDoor(info, args, resp.AppendError(nil, "ERR squeeze: "+info.spec.Name+
			" is refused: replication does not pass through the proxy; connect replicas to Redis itself"))
		return cmdNext, true
	}
	return cmdNext, false
}

// answerAtDoor queues reply as the command's, unless the client turned
// replies off (CLIENT REPLY OFF or SKIP), as Redis would. A CLIENT REPLY
// SKIP that the command uses up is Redis's too, which would skip the
// reply of the next command it runs: a PING goes in the command's place,
// whose reply Redis skips and nobody waits for.
func (c *client) answerAtDoor(info *cmdInfo, args [][]byte, reply []byte) {
	expect, off, skip := replies(&c.sess, info, args)
	skipped := skip < c.sess.skip
	c.sess.replyOff, c.sess.skip = off, skip
	switch {
	case expect || c.sess.relay:
		c.answer(c.localCall(info.name, reply), c.in.readAt)
	case skipped:
		c.in.req = append(c.in.req, pingRequest...)
	}
}

// beforeLogin reports whether the command comes from a client that must
// log in and has not (Server.RequireAuth, where Redis requires a
// password: its private connection's setup was refused with -NOAUTH),
// and the proxy would not send it as it came, or refuses it: Redis
// answers -NOAUTH to every such command, after its checks of the name
// and the argument count, which a command route sends on as it came
// (an inspect command of the wrong arity) leaves to Redis.
func (c *client) beforeLogin(info *cmdInfo, args [][]byte) bool {
	if !c.s.RequireAuth || c.sess.authed || c.pinned.conn == nil {
		return false
	}
	if info.flags&rediscmd.Refused != 0 {
		return true
	}
	var in routeIn
	c.routeIn(&in, info, args)
	var p plan
	route(&p, &in, info, args)
	switch p.path {
	case pathInspect, pathScript, pathListSearch, pathRefuseScript:
		return true
	case pathForward:
		return p.build != buildCommand || p.scriptArgs
	}
	return false
}

// noteHostile logs hostile input from c, at most once per hostileLogEvery
// (Redis's warning, with the client's address).
func (s *Server) noteHostile(c *client) {
	now := time.Now().UnixNano()
	last := s.hostileLogged.Load()
	if last != 0 && now-last < int64(hostileLogEvery) || !s.hostileLogged.CompareAndSwap(last, now) {
		return
	}
	s.logger().Warn("possible security attack: a client sent an HTTP request's POST or Host: line "+
		"(cross-protocol scripting); its connection is closed, as Redis closes it",
		"remote", c.nc.RemoteAddr().String())
}

// doorFlags are the table's facts the door looks at.
const doorFlags = rediscmd.Refused | rediscmd.Hostile
