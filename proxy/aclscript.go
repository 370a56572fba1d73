package proxy

import (
	"context"
	"strconv"

	"github.com/squeeze-kv/squeeze/resp"
)

// With --client-auth require, Redis's ACLs decide what each client may do,
// and the proxy runs some commands as scripts (STRLEN, GETRANGE, APPEND,
// LPOS ... as EVALSHA; see inspect.go, grow.go, listsearch.go). A user
// allowed +strlen but not +evalsha would be refused through the proxy and
// allowed directly. So, in that mode, before such a command the proxy asks
// Redis (ACL DRYRUN, over a shared connection with the upstream URL's
// credentials) whether the client's user may run the command it sent, and
// whether it may run the script:
//
//   - the script too: it runs on the client's own connection, as always;
//   - the command but not the script: the script runs on a shared
//     connection of the client's database, with the URL's rights, which the
//     command's own check (its keys included) has just granted;
//   - not the command: the command goes to Redis as it was sent, on the
//     client's connection, so Redis's own NOPERM is the reply.
//
// When DRYRUN itself cannot answer (the URL's user may not run it, an old
// server), the script runs on the client's connection as before.

// aclPlan is what scriptRoute decided.
type aclPlan int

const (
	aclOwn    aclPlan = iota // the script on the client's connection
	aclShared                // the script on a shared connection
	aclDirect                // the command as sent, for Redis's refusal
)

// scriptRoute decides where a command that runs as a script runs (see
// above): sha names the script, keys are the keys it declares. For
// aclShared it returns the shared connection to run it on.
func (c *client) scriptRoute(args [][]byte, sha string, keys [][]byte) (aclPlan, *upConn) {
	if !c.s.RequireAuth || c.pinned.conn == nil {
		return aclOwn, nil
	}
	user := c.aclUser()
	if user == nil {
		return aclOwn, nil
	}
	up, err := c.s.pool.getDB(context.Background(), c.sess.db, int(c.id))
	if err != nil {
		return aclOwn, nil
	}
	dry := func(cmd [][]byte) (ok, known bool) {
		req := resp.AppendCommand(nil, append([][]byte{[]byte("ACL"), []byte("DRYRUN"), user}, cmd...)...)
		r := c.roundtripShared(up, req)
		defer r.release()
		if r.err != nil || len(r.reply) == 0 || r.reply[0] == '-' {
			return false, false
		}
		return string(r.reply) == "+OK\r\n", true
	}
	if ok, known := dry(args); !known {
		return aclOwn, nil
	} else if !ok {
		return aclDirect, nil
	}
	script := append([][]byte{[]byte("EVALSHA"), []byte(sha), strconv.AppendInt(nil, int64(len(keys)), 10)}, keys...)
	if ok, known := dry(script); ok || !known {
		return aclOwn, nil
	}
	return aclShared, up
}

// aclUser returns the ACL user the client logged in as, nil before a
// login the proxy saw succeed.
func (c *client) aclUser() []byte {
	if u := c.sess.user.Load(); u != nil {
		return *u
	}
	return nil
}

// sendAsSent sends the command as the client sent it on its own
// connection and returns a finished call with Redis's reply.
func (c *client) sendAsSent(name string, args [][]byte) *call {
	r := c.roundtrip(resp.AppendCommand(nil, args...))
	if r.err != nil {
		err, lost := r.err, r.connLost
		r.release()
		if lost {
			return c.lostCall(name)
		}
		return c.localCall(name, resp.AppendError(nil, "ERR squeeze: "+name+": upstream: "+err.Error()))
	}
	r.cmd, r.local = name, true
	r.notify = c.q.ready
	r.finish()
	return r
}
