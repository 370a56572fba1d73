package proxy

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/resp"
)

// A command that removes a value from Redis as it returns it (LPOP, RPOP,
// BLPOP, BRPOP, LMPOP, BLMPOP, GETDEL, GETSET, SET ... GET, HGETDEL) takes
// it out of Redis for good. When such a value does not decode, the client
// gets an error element in its place, and its stored bytes are kept under
// a quarantine key, so that nothing readable is lost and a person can
// recover the rest (redis-cli GET, or DUMP, on that key, directly on
// Redis):
//
//	squeeze:quarantine:<key>:<unix ms>-<n>
//
// with a TTL (Server.QuarantineTTL, 7 days by default), logged at warning
// level with the key and counted (squeeze_proxy_quarantined_total). The
// error element names the quarantine key. The writes go over a shared
// connection from a goroutine of their own, so the reader that found the
// value never waits; at most maxQuarantinePending wait, and a value past
// that is logged as lost (and counted) instead.

// DefaultQuarantineTTL is how long quarantined values are kept by default.
const DefaultQuarantineTTL = 7 * 24 * time.Hour

// maxQuarantinePending bounds the values waiting to be written.
const maxQuarantinePending = 256

// quarantinePrefix begins every quarantine key.
const quarantinePrefix = "squeeze:quarantine:"

type quarantined struct {
	key, qkey, frame []byte
	cmd              string
	err              error
}

// destructive reports whether cmd removes the values it returns.
func destructive(cmd string) bool {
	spec := rediscmd.LookupString(cmd)
	return spec != nil && spec.Has(rediscmd.Destructive)
}

var quarantineSeq atomic.Uint64

// quarantine queues frame, which cmd took out of Redis from key and which
// does not decode, to be kept under a quarantine key, and returns that
// key; "" when the queue is full (the value is logged as lost).
func (s *Server) quarantine(cmd string, key, frame []byte, err error) string {
	s.quarantineOnce.Do(func() {
		s.quarantineQ = make(chan quarantined, maxQuarantinePending)
		go s.quarantineLoop()
	})
	qkey := quarantinePrefix + string(key) + ":" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "-" + strconv.FormatUint(quarantineSeq.Add(1), 10)
	q := quarantined{key: append([]byte(nil), key...), qkey: []byte(qkey), frame: append([]byte(nil), frame...), cmd: cmd, err: err}
	select {
	case s.quarantineQ <- q:
		return qkey
	default:
		s.metrics.quarantined("lost")
		s.logger().Error("an undecodable value taken out of Redis could not be kept: the quarantine queue is full",
			"cmd", cmd, "key", string(key), "bytes", len(frame), "err", err)
		return ""
	}
}

// quarantineLoop writes queued values until the server is done.
func (s *Server) quarantineLoop() {
	ttl := s.QuarantineTTL
	if ttl <= 0 {
		ttl = DefaultQuarantineTTL
	}
	ms := strconv.FormatInt(ttl.Milliseconds(), 10)
	for {
		var q quarantined
		select {
		case q = <-s.quarantineQ:
		case <-s.done:
			return
		}
		outcome, werr := "kept", error(nil)
		up, err := s.pool.get(context.Background(), 0)
		if err == nil {
			r := roundtripOn(up, resp.AppendCommand(nil, []byte("SET"), q.qkey, q.frame, []byte("PX"), []byte(ms)))
			if r.err != nil {
				werr = r.err
			} else if string(r.reply) != "+OK\r\n" {
				werr = errorString(string(r.reply))
			}
			r.release()
		} else {
			werr = err
		}
		if werr != nil {
			outcome = "lost"
			s.logger().Error("an undecodable value taken out of Redis could not be kept", "cmd", q.cmd, "key", string(q.key),
				"quarantine_key", string(q.qkey), "bytes", len(q.frame), "decode_err", q.err, "err", werr)
		} else {
			s.logger().Warn("an undecodable value taken out of Redis is kept under a quarantine key", "cmd", q.cmd, "key", string(q.key),
				"quarantine_key", string(q.qkey), "bytes", len(q.frame), "ttl", ttl.String(), "err", q.err)
		}
		s.metrics.quarantined(outcome)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
