package proxy

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
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
// with a TTL (Server.QuarantineTTL, 7 days by default), in the database
// the command ran in, logged at warning level with the key and counted
// (squeeze_proxy_quarantined_total). <key> is the key the value came
// from: the command's first key, or the one its reply names (LMPOP,
// BLMPOP, BLPOP, BRPOP: rediscmd.ReplyKeyValue and ReplyKeyValues). The
// error element names the quarantine key, which exists by the time the
// client reads it: the client's writer goroutine writes the value (on a
// shared connection of that database) before it writes the reply, and the
// reader of a shared connection leaves such replies to it (mayRoundTrip).
// If the write fails, the value is logged as lost (and counted), and the
// error names no quarantine key.
//
// A command that moves an element from one list to another (LMOVE,
// BLMOVE, RPOPLPUSH, BRPOPLPUSH: rediscmd.Moves) leaves it in Redis, but
// the client that gets an error for it would retry, and move a second
// element: so the move is undone first. A script moves the element back
// to the end of the source list it came from if it is still at the end of
// the destination it went to, and the error says that it was; if it is
// not there any more (another client took it meanwhile), or the script
// cannot run, the error says where the move put it. A move inside a
// transaction stands (EXEC ran it with the others, as one): its error
// says that it was moved.

// DefaultQuarantineTTL is how long quarantined values are kept by default.
const DefaultQuarantineTTL = 7 * 24 * time.Hour

// quarantinePrefix begins every quarantine key.
const quarantinePrefix = "squeeze:quarantine:"

// destructive reports whether cmd removes the values it returns.
func destructive(cmd string) bool {
	spec := rediscmd.LookupString(cmd)
	return spec != nil && spec.Has(rediscmd.Destructive)
}

// mayRoundTrip reports whether writing cl's reply may take a round trip
// to Redis (a value to quarantine, a move to undo), which the reader of a
// shared connection must leave to the client's writer goroutine: EXEC, or
// a destructive command or a move, whose reply holds a frame.
func mayRoundTrip(cl *call) bool {
	if cl.local || cl.kind == shapeNone || cl.kind == shapeSniff {
		return false
	}
	if cl.kind != shapeExec && cl.takes == 0 {
		return false
	}
	return bytes.Contains(cl.reply, magic)
}

// takesOf returns the flags Destructive and Moves of the command of info
// (call.takes): none for the entry of commands the proxy does not know
// by name (unknownCmd, and the table's Other commands, counted as it).
func takesOf(info *cmdInfo) rediscmd.Flag {
	if info.id == 0 {
		return 0
	}
	return info.flags & (rediscmd.Destructive | rediscmd.Moves)
}

var quarantineSeq atomic.Uint64

// quarantine keeps frame, which cmd took out of database db from key and
// which does not decode, under a quarantine key, and returns that key; ""
// when it could not be written (the value is logged as lost). It waits for
// Redis: the client's writer goroutine only.
func (s *Server) quarantine(db int, cmd string, key, frame []byte, derr error) string {
	ttl := s.QuarantineTTL
	if ttl <= 0 {
		ttl = DefaultQuarantineTTL
	}
	qkey := quarantinePrefix + string(key) + ":" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "-" + strconv.FormatUint(quarantineSeq.Add(1), 10)
	_, err := s.roundtripDB(db, resp.AppendCommand(nil, []byte("SET"), []byte(qkey), frame,
		[]byte("PX"), []byte(strconv.FormatInt(ttl.Milliseconds(), 10))), "+OK\r\n")
	if err != nil {
		s.metrics.quarantined("lost")
		s.logger().Error("an undecodable value taken out of Redis could not be kept", "cmd", cmd, "key", string(key), "db", db,
			"quarantine_key", qkey, "bytes", len(frame), "decode_err", derr, "err", err)
		return ""
	}
	s.metrics.quarantined("kept")
	s.logger().Warn("an undecodable value taken out of Redis is kept under a quarantine key", "cmd", cmd, "key", string(key), "db", db,
		"quarantine_key", qkey, "bytes", len(frame), "ttl", ttl.String(), "err", derr)
	return qkey
}

// moveBackScript moves the element ARGV[3] back from the ARGV[1] end of
// list KEYS[1] to the ARGV[2] end of list KEYS[2], if it is still there;
// it returns 1 if it did, 0 if not. Sent whole (EVAL) each time: it runs
// only for a corrupt element.
const moveBackScript = `local e = redis.call('LINDEX', KEYS[1], string.upper(ARGV[1]) == 'LEFT' and 0 or -1)
if e ~= ARGV[3] then return 0 end
redis.call('LMOVE', KEYS[1], KEYS[2], ARGV[1], ARGV[2])
return 1`

// undoMove undoes the move of cl (a Moves command, in database db) whose
// element, frame, does not decode, and returns what the client's error
// says of it. It waits for Redis: the client's writer goroutine only.
func (s *Server) undoMove(db int, cl *call, frame []byte) string {
	src, dst := cl.arg(1), cl.arg(2)
	args := make([][]byte, 0, 5)
	for i := range len(cl.argv) {
		args = append(args, cl.arg(i))
	}
	from, to, ok := rediscmd.LookupString(cl.cmd).MoveEnds(args)
	if !ok {
		return "it was moved"
	}
	where := fmt.Sprintf("it was moved to the %s end of %q", strings.ToUpper(string(to)), dst)
	reply, err := s.roundtripDB(db, resp.AppendCommand(nil, []byte("EVAL"), []byte(moveBackScript), []byte("2"),
		dst, src, to, from, frame), ":1\r\n")
	if err != nil {
		if !strings.HasPrefix(reply, ":0") {
			s.logger().Error("the move of an undecodable list element could not be undone", "cmd", cl.cmd, "source", string(src),
				"destination", string(dst), "db", db, "err", err)
		}
		return where
	}
	s.logger().Warn("the move of an undecodable list element was undone", "cmd", cl.cmd, "source", string(src),
		"destination", string(dst), "db", db)
	return fmt.Sprintf("the move was undone: it is back at the %s end of %q", strings.ToUpper(string(from)), src)
}

// roundtripDB sends req on a shared connection of database db and
// returns its reply, with an error unless the reply is want.
func (s *Server) roundtripDB(db int, req []byte, want string) (string, error) {
	up, err := s.pool.getDB(context.Background(), db, 0)
	if err != nil {
		return "", err
	}
	r := roundtripOn(up, req)
	defer r.release()
	if r.err != nil {
		return "", r.err
	}
	if reply := string(r.reply); reply != want {
		return reply, errorString(strings.TrimSpace(reply))
	}
	return want, nil
}

type errorString string

func (e errorString) Error() string { return string(e) }
