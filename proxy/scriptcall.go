package proxy

import (
	"bytes"

	"github.com/squeeze-kv/squeeze/resp"
)

// scriptCall runs one of the proxy's own Lua scripts (inspect, grow, list
// search, plain, cas, probe) for the client's command cmd, with rt as the
// round trip: roundtripScript on the client's connection, or roundtripOn
// a shared one. req builds the call: with byName true EVALSHA and the
// script's SHA-1, else EVAL and its body (see appendScript). It
// guarantees:
//
//   - While *byName, the script goes by its SHA-1 first. On a NOSCRIPT
//     reply (a new or restarted Redis, SCRIPT FLUSH) the same call is sent
//     once more with the body, and *byName is false from then on, so that
//     the caller's later rounds send the body at once. A reply by name is
//     never resent otherwise.
//   - Any other reply, an error of the script or of the command it runs
//     included, is returned as Redis gave it, with ok true; the caller
//     releases r.
//   - If the round trip fails, ok is false and r is cmd's reply, finished,
//     for the caller to return (or release): if the client's private
//     connection ended while the script was in flight (call.connLost), no
//     reply, and the client's connection closes (lostCall), as Redis ends
//     a client's connection; otherwise the error
//     "ERR squeeze: <cmd>: upstream: <cause>".
//
// In both cases r.pinSeq is the latest place among the private
// connection's replies of the round trips made (see roundtripScript).
func (c *client) scriptCall(cmd string, rt func([]byte) *call, byName *bool, req func(byName bool) []byte) (r *call, ok bool) {
	r = rt(req(*byName))
	if r.err == nil && *byName && bytes.HasPrefix(r.reply, []byte("-NOSCRIPT")) {
		pinSeq := r.pinSeq
		r.release()
		*byName = false
		r = rt(req(false))
		r.pinSeq = max(r.pinSeq, pinSeq)
	}
	if r.err == nil {
		return r, true
	}
	err, lost, pinSeq := r.err, r.connLost, r.pinSeq
	r.release()
	if lost {
		r = c.lostCall(cmd)
	} else {
		r = c.localCall(cmd, resp.AppendError(nil, "ERR squeeze: "+cmd+": upstream: "+err.Error()))
	}
	r.pinSeq = pinSeq
	return r, false
}
