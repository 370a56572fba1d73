package proxy

import (
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
)

// TestRoute: what happens to one command, by the session it arrives in
// and the server's options: a table of Redis's rules as the proxy follows
// them, run without Redis.
func TestRoute(t *testing.T) {
	// sessionOf is the part of a session route reads.
	type sessionOf struct {
		proto                                              int
		inMulti, relay, replyOff, dbQueued, authed, asking bool
		skip                                               int
	}
	plainFlow := sessionOf{proto: 2}
	inMulti := sessionOf{proto: 2, inMulti: true}
	relaying := sessionOf{proto: 2, relay: true}
	resp3 := sessionOf{proto: 3}
	repliesOff := sessionOf{proto: 2, replyOff: true}
	skipOne := sessionOf{proto: 2, skip: 1}
	txSelected := sessionOf{proto: 2, inMulti: true, dbQueued: true}
	loggedIn := sessionOf{proto: 2, authed: true}
	afterAsking := sessionOf{proto: 2, asking: true}
	type opts struct {
		pinned, pinDead, rejectScripts, requireAuth bool
		scriptFast, listSearch, sortCheck           bool
	}
	for _, tt := range []struct {
		name string
		cmd  string
		sess sessionOf
		opts opts
		want plan // info is checked by name through wantInfo
		// wantInfo is the entry's name, when it is not the command's
		wantInfo string
	}{
		{name: "GET goes to Redis and its value is decoded", cmd: "GET k", sess: plainFlow,
			want: plan{expect: true, kind: shapeValue}},
		{name: "SET ... GET too", cmd: "SET k v GET", sess: plainFlow,
			want: plan{expect: true, kind: shapeValue}},
		{name: "an unknown command passes, its reply searched for frames", cmd: "NOSUCH a b", sess: plainFlow,
			want: plan{expect: true, kind: shapeSniff}, wantInfo: "OTHER"},
		{name: "a command the table classifies as Other behaves the same", cmd: "DEL k", sess: plainFlow,
			want: plan{expect: true, kind: shapeSniff}, wantInfo: "OTHER"},
		{name: "QUIT", cmd: "QUIT", sess: plainFlow, want: plan{path: pathQuit}},
		{name: "a dead private connection ends the client first", cmd: "QUIT", sess: plainFlow,
			opts: opts{pinned: true, pinDead: true}, want: plan{path: pathLost}},
		{name: "a script refused by --scripts=reject", cmd: "EVAL return 0", sess: plainFlow,
			opts: opts{rejectScripts: true}, want: plan{path: pathRefuseScript}},
		{name: "a script whose keys must be made plain runs through the proxy", cmd: "EVAL s 1 k", sess: plainFlow,
			want: plan{path: pathScript}},
		{name: "a script the fast path serves goes to Redis, rewritten", cmd: "EVAL s 1 k", sess: plainFlow,
			opts: opts{scriptFast: true}, want: plan{fastScript: true, scriptArgs: true, expect: true, kind: shapeAny}},
		{name: "a script queued in MULTI has its keys made plain now", cmd: "EVALSHA 0123 1 k", sess: inMulti,
			want: plan{prepQueuedScript: true, scriptArgs: true, expect: true, kind: shapeAny, queued: true}},
		{name: "SELECT pins and runs at once, to learn the database", cmd: "SELECT 1", sess: plainFlow,
			want: plan{path: pathSelect, pin: true}},
		{name: "SELECT queued in MULTI notes the database", cmd: "SELECT 1", sess: inMulti, opts: opts{pinned: true},
			want: plan{selectQueued: true, expect: true, queued: true}},
		{name: "SELECT while relaying goes to Redis, which refuses it", cmd: "SELECT 1", sess: relaying, opts: opts{pinned: true},
			want: plan{relayReply: true}},
		{name: "STRLEN is answered by the inspect script", cmd: "STRLEN k", sess: plainFlow,
			want: plan{path: pathInspect}},
		{name: "STRLEN with a wrong count gets Redis's arity error", cmd: "STRLEN k extra", sess: plainFlow,
			want: plan{expect: true, kind: shapeSniff}, wantInfo: "OTHER"},
		{name: "STRLEN in MULTI is queued in its checking form", cmd: "STRLEN k", sess: inMulti, opts: opts{pinned: true},
			want: plan{expect: true, kind: shapeInspect, build: buildInspect, queued: true}},
		{name: "STRLEN with replies off, RESP3", cmd: "STRLEN k", sess: sessionOf{proto: 3, replyOff: true}, opts: opts{pinned: true},
			want: plan{replyOff: true, kind: shapeInspect3, build: buildInspect}},
		{name: "LPOS is answered by the list search script", cmd: "LPOS l e", sess: plainFlow,
			opts: opts{listSearch: true}, want: plan{path: pathListSearch, listSearch: true}},
		{name: "LPOS in MULTI is queued in its checking form", cmd: "LPOS l e", sess: inMulti,
			opts: opts{pinned: true, listSearch: true},
			want: plan{listSearch: true, expect: true, kind: shapeInspect, build: buildListSearch, queued: true}},
		{name: "LPOS while subscribed goes as it is: Redis refuses it by name", cmd: "LPOS l e", sess: relaying,
			opts: opts{pinned: true, listSearch: true}, want: plan{kind: shapeNone, relayReply: true}},
		{name: "PUBLISH in the relay: its reply, relayed, shows Redis took it", cmd: "PUBLISH ch m", sess: relaying,
			opts: opts{pinned: true}, want: plan{kind: shapeSniff, relayReply: true}},
		{name: "CLIENT REPLY SKIP in the relay: no reply comes", cmd: "CLIENT REPLY SKIP", sess: relaying,
			opts: opts{pinned: true}, want: plan{skip: 1}},
		{name: "PUBLISH in the relay with replies off: nothing comes", cmd: "PUBLISH ch m", sess: sessionOf{proto: 2, relay: true, replyOff: true},
			opts: opts{pinned: true}, want: plan{kind: shapeSniff, replyOff: true}},
		{name: "SORT with BY is checked", cmd: "SORT l BY w_*", sess: plainFlow, opts: opts{sortCheck: true},
			want: plan{expect: true, kind: shapeAny, build: buildSortCheck}},
		{name: "CLIENT REPLY OFF: no reply from then on", cmd: "CLIENT REPLY OFF", sess: plainFlow,
			want: plan{pin: true, replyOff: true}},
		{name: "with replies off, no reply", cmd: "GET k", sess: repliesOff, opts: opts{pinned: true},
			want: plan{replyOff: true, kind: shapeValue}},
		{name: "CLIENT REPLY ON: this reply and the next", cmd: "CLIENT REPLY ON", sess: repliesOff, opts: opts{pinned: true},
			want: plan{expect: true}},
		{name: "CLIENT REPLY SKIP skips the next reply", cmd: "CLIENT REPLY SKIP", sess: plainFlow, opts: opts{pinned: true},
			want: plan{skip: 1}},
		{name: "the skipped command", cmd: "GET k", sess: skipOne, opts: opts{pinned: true},
			want: plan{kind: shapeValue}},
		{name: "SUBSCRIBE in RESP2 pins and enters the relay", cmd: "SUBSCRIBE ch", sess: plainFlow,
			want: plan{pin: true, expect: true, relayEnter: true}},
		{name: "SUBSCRIBE of three channels entering the relay: a reply, then two confirmations", cmd: "SUBSCRIBE a b c", sess: plainFlow,
			want: plan{pin: true, expect: true, relayEnter: true, confirmsAfter: 2}},
		{name: "SUBSCRIBE in the relay: a confirmation per channel", cmd: "SUBSCRIBE a b c", sess: relaying, opts: opts{pinned: true},
			want: plan{relayEnter: true, confirms: 3}},
		{name: "SUBSCRIBE in RESP3 is confirmed by a push, which shows it ran", cmd: "SUBSCRIBE ch", sess: resp3,
			want: plan{pin: true, confirms: 1}},
		{name: "UNSUBSCRIBE in the relay is confirmed once per channel", cmd: "UNSUBSCRIBE a b", sess: relaying, opts: opts{pinned: true},
			want: plan{confirms: 2}},
		{name: "UNSUBSCRIBE of every channel owes one confirmation per subscription the client has", cmd: "PUNSUBSCRIBE", sess: relaying, opts: opts{pinned: true},
			want: plan{confirms: 1, confirmsEach: true}},
		{name: "MONITOR relays in RESP3 too", cmd: "MONITOR", sess: resp3,
			want: plan{pin: true, expect: true, relayEnter: true}},
		{name: "BLPOP blocks", cmd: "BLPOP l 0", sess: plainFlow, opts: opts{pinned: true},
			want: plan{expect: true, kind: shapeKeyValue, blocking: true}},
		{name: "BLPOP queued in MULTI is queued", cmd: "BLPOP l 0", sess: inMulti, opts: opts{pinned: true},
			want: plan{expect: true, kind: shapeKeyValue, blocking: true, queued: true}},
		{name: "XREAD with BLOCK pins and blocks", cmd: "XREAD BLOCK 0 STREAMS s $", sess: plainFlow,
			want: plan{pin: true, expect: true, kind: shapeStreams, blocking: true}},
		{name: "WATCH pins", cmd: "WATCH k", sess: plainFlow,
			want: plan{pin: true, expect: true}},
		{name: "MULTI", cmd: "MULTI", sess: plainFlow, opts: opts{pinned: true},
			want: plan{expect: true}},
		{name: "EXEC after a queued SELECT asks Redis for the database", cmd: "EXEC", sess: txSelected, opts: opts{pinned: true},
			want: plan{expect: true, kind: shapeExec, after: afterExecSelect}},
		{name: "ASKING pins, and the next command runs with it", cmd: "ASKING", sess: plainFlow,
			want: plan{pin: true, setsAsking: true, expect: true}},
		{name: "ASKING queued in MULTI is the transaction's", cmd: "ASKING", sess: inMulti, opts: opts{pinned: true},
			want: plan{expect: true, queued: true}},
		{name: "a command after ASKING that goes to Redis follows it there", cmd: "GET k", sess: afterAsking, opts: opts{pinned: true},
			want: plan{expect: true, kind: shapeValue}},
		{name: "an inspect command after ASKING carries it to its scripts", cmd: "STRLEN k", sess: afterAsking, opts: opts{pinned: true},
			want: plan{path: pathInspect, asking: true}},
		{name: "a script after ASKING carries it to the round trips before it", cmd: "EVAL s 1 k", sess: afterAsking, opts: opts{pinned: true},
			want: plan{path: pathScript, asking: true}},
		{name: "a list search after ASKING carries it", cmd: "LPOS l e", sess: afterAsking,
			opts: opts{pinned: true, listSearch: true}, want: plan{path: pathListSearch, listSearch: true, asking: true}},
		{name: "ASKING twice: the second holds for the next command", cmd: "ASKING", sess: afterAsking, opts: opts{pinned: true},
			want: plan{setsAsking: true, expect: true}},
		{name: "HELLO waits for the protocol it chose", cmd: "HELLO 3", sess: plainFlow,
			want: plan{pin: true, expect: true, after: afterHello}},
		{name: "RESET sets the connection up again", cmd: "RESET", sess: loggedIn, opts: opts{pinned: true},
			want: plan{expect: true, after: afterReset}},
		{name: "with RequireAuth every client pins", cmd: "GET k", sess: plainFlow, opts: opts{requireAuth: true},
			want: plan{pin: true, expect: true, kind: shapeValue}},
		{name: "the first AUTH selects the URL's database after it", cmd: "AUTH u p", sess: plainFlow,
			opts: opts{pinned: true, requireAuth: true}, want: plan{expect: true, after: afterFirstLogin}},
		{name: "another login waits for who it logs in as", cmd: "HELLO 2 AUTH u p", sess: loggedIn,
			opts: opts{pinned: true, requireAuth: true}, want: plan{expect: true, after: afterLogin | afterHello}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := argv(strings.Fields(tt.cmd)...)
			info := lookup(args[0])
			o := tt.sess
			sess := &session{proto: o.proto, inMulti: o.inMulti, relay: o.relay, replyOff: o.replyOff,
				dbQueued: o.dbQueued, authed: o.authed, skip: o.skip, asking: o.asking}
			in := &routeIn{
				sess: sess, pinned: tt.opts.pinned, pinDead: tt.opts.pinDead,
				rejectScripts: tt.opts.rejectScripts, requireAuth: tt.opts.requireAuth,
				scriptFast: tt.opts.scriptFast, listSearch: tt.opts.listSearch, sortCheck: tt.opts.sortCheck,
			}
			in.script = !in.rejectScripts && info.flags&rediscmd.Script != 0
			var got plan
			route(&got, in, info, args)
			wantInfo := info.name
			if tt.wantInfo != "" {
				wantInfo = tt.wantInfo
			}
			if got.info == nil || got.info.name != wantInfo {
				t.Errorf("served as %v, want %s", got.info, wantInfo)
			}
			got.info, tt.want.info = nil, nil
			if got != tt.want {
				t.Errorf("%s:\n got %+v\nwant %+v", tt.cmd, got, tt.want)
			}
			if sess.inMulti != o.inMulti || sess.skip != o.skip || sess.replyOff != o.replyOff || sess.asking != o.asking {
				t.Errorf("route changed the session: %+v", o)
			}
		})
	}
}

// TestRoute_Allocs: deciding a command's route allocates nothing.
func TestRoute_Allocs(t *testing.T) {
	c := &client{s: newTestServer(t), sess: session{proto: 2}}
	for _, cmd := range []string{"GET key", "SET key value", "SORT l BY w_*", "CLIENT REPLY SKIP", "BLPOP l 0"} {
		args := argv(strings.Fields(cmd)...)
		info := lookup(args[0])
		if n := testing.AllocsPerRun(100, func() {
			var in routeIn
			c.routeIn(&in, info, args)
			var p plan
			route(&p, &in, info, args)
		}); n != 0 {
			t.Errorf("%s: %v allocations", cmd, n)
		}
	}
}

// BenchmarkRoute_Get: the cost route adds to each pipelined GET.
func BenchmarkRoute_Get(b *testing.B) {
	c := &client{s: newTestServer(b), sess: session{proto: 2}}
	args := argv("GET", "key:000001")
	info := lookup(args[0])
	for b.Loop() {
		var in routeIn
		c.routeIn(&in, info, args)
		var p plan
		route(&p, &in, info, args)
	}
}
