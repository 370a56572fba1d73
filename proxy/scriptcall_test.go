package proxy

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/internal/testutil"
	"github.com/squeeze-kv/squeeze/resp"
)

// scriptCallEnv is a Redis, a Server set up for it (not serving) and a
// client of it, for calling scriptCall directly.
type scriptCallEnv struct {
	redis *testutil.Redis
	srv   *Server
	c     *client
	admin *rawConn // a connection of its own to Redis
}

func startScriptCallEnv(t *testing.T) *scriptCallEnv {
	t.Helper()
	r := testutil.StartRedis(t)
	s := &Server{Upstream: r.URL(), Logger: quietLogger()}
	if err := s.init(); err != nil {
		t.Fatal(err)
	}
	return &scriptCallEnv{redis: r, srv: s, c: &client{s: s, q: replyQueue{ready: make(chan struct{}, 1)}}, admin: dialRaw(t, r.Addr)}
}

// dial opens an upstream connection: a client's private one (which
// receives pushes) or one like the shared ones.
func (e *scriptCallEnv) dial(t *testing.T, private bool) *upConn {
	t.Helper()
	var onPush func([]byte, uint64)
	if private {
		onPush = func([]byte, uint64) {}
	}
	up, err := e.srv.dialUpAs(context.Background(), onPush, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.close)
	return up
}

// scriptReq returns a request builder for script with args, as the
// proxy's scripts build theirs.
func scriptReq(script string, args ...string) func(byName bool) []byte {
	return func(byName bool) []byte {
		dst := resp.AppendArray(nil, 2+len(args))
		dst = appendScript(dst, script, scriptSHA(script), byName)
		for _, a := range args {
			dst = resp.AppendBulkString(dst, a)
		}
		return dst
	}
}

// recordSent wraps rt, noting the first word (EVALSHA or EVAL) of each
// request it sends in *sent.
func recordSent(rt func([]byte) *call, sent *[]string) func([]byte) *call {
	return func(req []byte) *call {
		v, _, err := resp.ReadValue(req)
		if err != nil || v.Type != resp.Array {
			panic("not a command: " + string(req))
		}
		it := v.Elements()
		e, _ := it.Next()
		*sent = append(*sent, string(e.Str))
		return rt(req)
	}
}

// TestScriptCall_ResentAfterFlush: a script goes by its SHA-1 while Redis
// has it cached; on NOSCRIPT (never loaded, or SCRIPT FLUSH between calls)
// the same call is sent once more with the body and succeeds, and the
// caller's later rounds send the body at once.
func TestScriptCall_ResentAfterFlush(t *testing.T) {
	e := startScriptCallEnv(t)
	const script = "-- scriptcall test\nreturn ARGV[1]"
	for _, private := range []bool{false, true} {
		up := e.dial(t, private)
		rt := func(req []byte) *call { return roundtripOn(up, req) }
		e.admin.do("SCRIPT", "FLUSH")
		byName := true
		for i, step := range []struct {
			before     []string // an admin command first
			byName     bool     // the caller's state going in
			want       []string // what was sent
			wantByName bool     // the state coming out
		}{
			{nil, true, []string{"EVALSHA", "EVAL"}, false},                       // never loaded
			{nil, false, []string{"EVAL"}, false},                                 // a later round
			{[]string{"SCRIPT", "LOAD", script}, true, []string{"EVALSHA"}, true}, // cached: by name only
			{[]string{"SCRIPT", "FLUSH"}, true, []string{"EVALSHA", "EVAL"}, false},
			{[]string{"SCRIPT", "FLUSH"}, false, []string{"EVAL"}, false},
		} {
			if step.before != nil {
				e.admin.do(step.before...)
			}
			byName = step.byName
			var sent []string
			arg := "value " + strings.Repeat("x", i)
			r, ok := e.c.scriptCall("GETRANGE", recordSent(rt, &sent), &byName, scriptReq(script, "0", arg))
			if !ok || string(r.reply) != bulk(arg) {
				t.Fatalf("private %v, step %d: ok %v, reply %q, want %q", private, i, ok, r.reply, bulk(arg))
			}
			r.release()
			if !slices.Equal(sent, step.want) || byName != step.wantByName {
				t.Fatalf("private %v, step %d: sent %q, byName %v after; want %q, %v", private, i, sent, byName, step.want, step.wantByName)
			}
			// Whichever way it went, Redis has the script cached now.
			if got := e.admin.do("SCRIPT", "EXISTS", scriptSHA(script)); got != "*1\r\n:1\r\n" {
				t.Fatalf("private %v, step %d: SCRIPT EXISTS = %q", private, i, got)
			}
		}
	}
}

// TestScriptCall_ScriptErrorIsTheReply: an error reply of the script (its
// own, or of a command it runs) is the reply, as Redis gave it, and is not
// resent: only NOSCRIPT is.
func TestScriptCall_ScriptErrorIsTheReply(t *testing.T) {
	e := startScriptCallEnv(t)
	up := e.dial(t, true)
	rt := func(req []byte) *call { return roundtripOn(up, req) }
	e.admin.do("SET", "scriptcall:s", "not a number")
	for _, tt := range []struct {
		name, script string
		want         *regexp.Regexp
	}{
		{"error_reply", "return redis.error_reply('ERR scriptcall boom')", regexp.MustCompile(`^-ERR scriptcall boom\r\n$`)},
		{"command error", "return redis.call('INCR', ARGV[1])", regexp.MustCompile(`^-ERR .*not an integer.*\r\n$`)},
		{"runtime error", "return nil + 1", regexp.MustCompile(`^-ERR .*\r\n$`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for round, want := range [][]string{{"EVALSHA", "EVAL"}, {"EVALSHA"}} {
				byName := true
				var sent []string
				r, ok := e.c.scriptCall("INCR", recordSent(rt, &sent), &byName, scriptReq(tt.script, "0", "scriptcall:s"))
				if !ok || !tt.want.Match(r.reply) || r.close {
					t.Fatalf("round %d: ok %v, close %v, reply %q, want %v", round, ok, r.close, r.reply, tt.want)
				}
				r.release()
				if !slices.Equal(sent, want) {
					t.Fatalf("round %d: sent %q, want %q", round, sent, want)
				}
			}
		})
	}
	if got := e.admin.do("GET", "scriptcall:s"); got != bulk("not a number") {
		t.Fatalf("the key changed: %q", got)
	}
}

// TestScriptCall_ConnectionKilled: the connection is killed (CLIENT KILL)
// while the script is in flight, behind a blocked BLPOP. On a client's
// private connection the command gets no reply and the client's connection
// closes, as Redis ends its client's connection; on a shared connection it
// gets the error "ERR squeeze: <cmd>: upstream: <cause>". Nothing is
// resent.
func TestScriptCall_ConnectionKilled(t *testing.T) {
	e := startScriptCallEnv(t)
	const script = "-- scriptcall kill test\nreturn 1"
	// The cause is the upstream reader's, for a connection that ended.
	const errText = "-ERR squeeze: SETRANGE: upstream: upstream closed the connection\r\n"
	for _, private := range []bool{true, false} {
		up := e.dial(t, private)
		idc := roundtripOn(up, resp.AppendCommand(nil, []byte("CLIENT"), []byte("ID")))
		id := strings.TrimSuffix(strings.TrimPrefix(string(idc.reply), ":"), "\r\n")
		idc.release()
		killed := func(req []byte) *call {
			block, cl := newCall(), newCall()
			up.send(resp.AppendCommand(nil, []byte("BLPOP"), []byte("scriptcall:none"), []byte("0")), []*call{block})
			up.send(req, []*call{cl})
			waitBlocked(t, e.redis.Addr, 1)
			if got := e.admin.do("CLIENT", "KILL", "ID", id); got != ":1\r\n" {
				t.Fatalf("private %v: CLIENT KILL ID %s = %q", private, id, got)
			}
			<-block.done
			block.release()
			<-cl.done
			return cl
		}
		for _, byName := range []bool{true, false} {
			if byName {
				e.admin.do("SCRIPT", "FLUSH") // a NOSCRIPT would come if the call got through
			}
			var sent []string
			nameIn := byName
			r, ok := e.c.scriptCall("SETRANGE", recordSent(killed, &sent), &byName, scriptReq(script, "0"))
			if ok {
				t.Fatalf("private %v: ok after the kill, reply %q", private, r.reply)
			}
			if r.cmd != "SETRANGE" || !r.local {
				t.Fatalf("private %v: the call is %q, local %v", private, r.cmd, r.local)
			}
			if private {
				if !r.close || len(r.reply) != 0 {
					t.Fatalf("private: close %v, reply %q; want the connection closed without a reply", r.close, r.reply)
				}
			} else if r.close || string(r.reply) != errText {
				t.Fatalf("shared: close %v, reply %q; want %q", r.close, r.reply, errText)
			}
			r.release()
			if len(sent) != 1 || byName != nameIn {
				t.Fatalf("private %v: sent %q, byName %v -> %v; want one request, the state kept", private, sent, nameIn, byName)
			}
			// The next connection for the following round.
			up = e.dial(t, private)
			idc = roundtripOn(up, resp.AppendCommand(nil, []byte("CLIENT"), []byte("ID")))
			id = strings.TrimSuffix(strings.TrimPrefix(string(idc.reply), ":"), "\r\n")
			idc.release()
		}
	}
}
