package proxy

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
)

func scopeFor(t *testing.T, up bool, cmds ...[]string) *reqScope {
	t.Helper()
	return scopeWith(t, up, false, cmds...)
}

// scopeWith is scopeFor with blocked: clients may be blocked in Redis.
func scopeWith(t *testing.T, up, blocked bool, cmds ...[]string) *reqScope {
	t.Helper()
	s := &reqScope{}
	for _, cmd := range cmds {
		args := make([][]byte, len(cmd))
		for i, a := range cmd {
			args[i] = []byte(a)
		}
		info := lookup(args[0])
		s.note(info, args, up, blocked)
	}
	return s
}

func TestReqScope_Note(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmds [][]string
		up   bool
		any  bool
		keys int
		// blocked: clients may be blocked in Redis.
		blocked bool
	}{
		{"ping touches nothing", [][]string{{"PING"}}, true, false, 0, false},
		{"get", [][]string{{"GET", "k"}}, true, false, 1, false},
		{"mset keys only", [][]string{{"MSET", "a", "1", "b", "2"}}, true, false, 2, false},
		{"del every key", [][]string{{"DEL", "a", "b", "c"}}, true, false, 3, false},
		{"a batch adds up", [][]string{{"GET", "a"}, {"SET", "b", "v"}}, true, false, 2, false},
		{"no barrier up: not noted", [][]string{{"GET", "k"}}, false, true, 0, false},
		{"a script: any", [][]string{{"GET", "a"}, {"EVAL", "return 1", "0"}}, true, true, 1, false},
		{"publish: any", [][]string{{"PUBLISH", "ch", "m"}}, true, true, 0, false},
		{"unknown command: any", [][]string{{"NOSUCHCOMMAND", "k"}}, true, true, 0, false},
		{"sort reads patterns: any", [][]string{{"SORT", "k", "BY", "w_*"}}, true, true, 0, false},
		{name: "a push, nobody blocked", cmds: [][]string{{"LPUSH", "src", "x"}}, up: true, keys: 1},
		{name: "a push may serve a blocked BRPOPLPUSH: any", cmds: [][]string{{"LPUSH", "src", "x"}}, up: true, blocked: true, any: true},
		{name: "a GET serves nobody blocked", cmds: [][]string{{"GET", "k"}}, up: true, blocked: true, keys: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := scopeWith(t, tc.up, tc.blocked, tc.cmds...)
			if s.any != tc.any || (!s.any && len(s.keys) != tc.keys) {
				t.Errorf("any=%v keys=%d, want any=%v keys=%d", s.any, len(s.keys), tc.any, tc.keys)
			}
		})
	}
}

func TestHeldKeys_PassOrHold(t *testing.T) {
	var h heldKeys
	barrier := scopeFor(t, true, []string{"SET", "k", "v"})
	h.add(barrier)
	if !h.passOrHold(scopeFor(t, true, []string{"PING"})) {
		t.Error("PING held behind a barrier on k")
	}
	if !h.passOrHold(scopeFor(t, true, []string{"GET", "j"})) {
		t.Error("GET j held behind a barrier on k")
	}
	mset := scopeFor(t, true, []string{"MSET", "j", "1", "k", "2"})
	if h.passOrHold(mset) {
		t.Fatal("MSET j k passed a barrier on k")
	}
	// The held MSET's keys hold what comes after it on them.
	if h.passOrHold(scopeFor(t, true, []string{"GET", "j"})) {
		t.Error("GET j passed a held MSET j k")
	}
	h.release(scopeFor(t, true, []string{"GET", "j"}).keys, 0)
	if h.passOrHold(nil) {
		t.Error("a batch of unknown keys passed")
	}
	var back atomic.Int32
	back.Store(1)
	own := scopeFor(t, true, []string{"GET", "free"})
	own.heldBack = &back
	if h.passOrHold(own) {
		t.Error("a client's batch passed its own held request")
	}
	// Release all: the barrier, the MSET, the nil batch, the client's.
	h.releaseScope(barrier)
	h.release(mset.keys, 1)
	h.release(own.keys, 0)
	if h.any != 0 || len(h.keys) != 0 {
		t.Fatalf("after every release: any=%d keys=%v", h.any, h.keys)
	}
	if !h.passOrHold(scopeFor(t, true, []string{"GET", "k"})) {
		t.Error("GET k held with no barrier")
	}

	// A barrier of a command that only reads its key holds the writes
	// of that key, not the reads.
	read := scopeFor(t, true, []string{"STRLEN", "r"})
	h.add(read)
	if !h.passOrHold(scopeFor(t, true, []string{"GET", "r"})) {
		t.Error("GET r held behind a barrier of STRLEN r")
	}
	if h.passOrHold(scopeFor(t, true, []string{"APPEND", "r", "x"})) {
		t.Error("APPEND r passed a barrier of STRLEN r")
	}
}

func TestTouches_ProxyEntries(t *testing.T) {
	// The proxy's entries carry the table's fact, Other commands too.
	for name, want := range map[string]rediscmd.Touches{
		"get": rediscmd.TouchesKey1, "del": rediscmd.TouchesKeysFrom1, "ping": rediscmd.TouchesNothing,
		"mset": rediscmd.TouchesKeysEvery2, "eval": rediscmd.TouchesAny, "publish": rediscmd.TouchesAny,
	} {
		if got := lookup([]byte(name)).touches; got != want {
			t.Errorf("%s: touches %d, want %d", name, got, want)
		}
	}
}

func TestReqScope_Conflicts(t *testing.T) {
	get := func(k string) *reqScope { return scopeFor(t, true, []string{"GET", k}) }
	set := func(k string) *reqScope { return scopeFor(t, true, []string{"SET", k, "v"}) }
	for _, tc := range []struct {
		name string
		a, b *reqScope
		want bool
	}{
		{"different keys", set("a"), set("b"), false},
		{"same key, one writes", set("a"), get("a"), true},
		{"same key, both write", set("a"), set("a"), true},
		{"same key, both only read", get("a"), scopeFor(t, true, []string{"STRLEN", "a"}), false},
		{"one of several", scopeFor(t, true, []string{"DEL", "x", "a"}), get("a"), true},
		{"read of one of several", scopeFor(t, true, []string{"MGET", "x", "a"}), get("a"), false},
		{"nothing touches nothing", scopeFor(t, true, []string{"PING"}), get("a"), false},
		{"anything", scopeFor(t, true, []string{"EVAL", "return 1", "0"}), get("a"), true},
		{"unknown (nil)", nil, get("a"), true},
	} {
		if got := tc.a.conflicts(tc.b); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if got := tc.b.conflicts(tc.a); got != tc.want {
			t.Errorf("%s, reversed: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestOrder_DisjointBarriersDoNotWait(t *testing.T) {
	// A barrier raised after another waits for it only when their
	// commands touch something in common that one of them writes
	// (orderState.waitsFor).
	var p pool
	scope := func(k string) *reqScope { return scopeFor(t, true, []string{"SET", k, "v"}) }
	first := p.raiseOrderFor(scope("a"))
	other := p.raiseOrderFor(scope("b"))
	same := p.raiseOrderFor(scope("a"))
	anything := p.raiseOrderFor(nil)
	o := &p.order
	o.mu.Lock()
	waits := []bool{o.waitsFor(first), o.waitsFor(other), o.waitsFor(same), o.waitsFor(anything)}
	o.mu.Unlock()
	if want := []bool{false, false, true, true}; !slices.Equal(waits, want) {
		t.Fatalf("waits %v, want %v (first on a, then b, a again, anything)", waits, want)
	}
	done := make(chan struct{})
	go func() { p.awaitOrder(same); close(done) }()
	p.endOrder(other)
	select {
	case <-done:
		t.Fatal("the second barrier on a got its turn while the first held a")
	case <-time.After(20 * time.Millisecond):
	}
	p.endOrder(first)
	<-done // woken by the end of the one it waited for
	for _, h := range []*orderHold{same, anything} {
		p.endOrder(h)
	}
}

// TestOrder_SweeperCountsExpired: a barrier that stays the oldest for
// maxOrderHold is ended by the sweeper and counted
// (squeeze_proxy_order_barriers_expired_total); one ended by its owner
// is not.
func TestOrder_SweeperCountsExpired(t *testing.T) {
	var p pool
	p.raiseOrderFor(nil).end() // ended in time: not counted
	h := p.raiseOrderFor(nil)
	for end := time.Now().Add(5 * time.Second); !h.ended.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the sweeper did not end the barrier within 5 s")
		}
	}
	if n := p.order.expired.Load(); n != 1 {
		t.Fatalf("%d barriers counted as expired, want 1", n)
	}
}

// TestConfirmations_FirstSubscribeOwesItsOtherChannels: a RESP2 client's
// first SUBSCRIBE of two channels, then SUBSCRIBE c and PSUBSCRIBE p*,
// each in a batch of its own. The first one's reply is its first
// channel's confirmation; its second comes as a relayed message and must
// not count for SUBSCRIBE c: it did, and then c's confirmation ended the
// PSUBSCRIBE's barrier before Redis had taken it (a PUBLISH sent right
// after it counted no receiver, in order scenes of pub/sub).
func TestConfirmations_FirstSubscribeOwesItsOtherChannels(t *testing.T) {
	var p pool
	c := &client{}
	first := &plan{info: lookup([]byte("SUBSCRIBE")), expect: true, relayEnter: true, confirmsAfter: 1}
	c.noteTail(first, newCall())
	c.noteTail(&plan{info: lookup([]byte("SUBSCRIBE")), confirms: 1}, nil)
	hc := p.raiseOrderFor(nil)
	c.pinned.confirms.arm(hc)
	c.noteTail(&plan{info: lookup([]byte("PSUBSCRIBE")), confirms: 1}, nil)
	hp := p.raiseOrderFor(nil)
	c.pinned.confirms.arm(hp)
	defer hc.end()
	defer hp.end()

	sub := confirmation{kind: confirmSub, count: -1}
	c.pinned.confirms.confirmed(sub) // subscribe b 2: the first SUBSCRIBE's
	if hc.ended.Load() || hp.ended.Load() {
		t.Fatalf("the first SUBSCRIBE's second confirmation ended a later command's barrier (SUBSCRIBE c: %v, PSUBSCRIBE: %v)", hc.ended.Load(), hp.ended.Load())
	}
	c.pinned.confirms.confirmed(sub) // subscribe c 3
	if !hc.ended.Load() || hp.ended.Load() {
		t.Fatalf("after SUBSCRIBE c's confirmation: its barrier ended %v, the PSUBSCRIBE's %v; want true, false", hc.ended.Load(), hp.ended.Load())
	}
	c.pinned.confirms.confirmed(sub) // psubscribe p* 4
	if !hp.ended.Load() {
		t.Fatal("the PSUBSCRIBE's confirmation did not end its barrier")
	}
}

// TestConfirmations_UnsubscribeAllOwesOnePerSubscription: a client with
// two channels and a pattern sends UNSUBSCRIBE without names, then
// PUNSUBSCRIBE p*, each in a batch of its own. Redis confirms the
// UNSUBSCRIBE once per channel: owed once, its second confirmation
// counted for the PUNSUBSCRIBE and ended its barrier before Redis had
// taken it.
func TestConfirmations_UnsubscribeAllOwesOnePerSubscription(t *testing.T) {
	var p pool
	c := &client{}
	confirm := func(msg string) { c.pinned.confirms.confirmed(confirmationOf([]byte(msg))) }
	// The subscriptions so far, as Redis confirmed them.
	c.noteTail(&plan{info: lookup([]byte("SUBSCRIBE")), confirms: 2}, nil)
	c.noteTail(&plan{info: lookup([]byte("PSUBSCRIBE")), confirms: 1}, nil)
	confirm("*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n")
	confirm("*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n")
	confirm(">3\r\n$10\r\npsubscribe\r\n$2\r\np*\r\n:3\r\n")

	c.noteTail(&plan{info: lookup([]byte("UNSUBSCRIBE")), confirms: 1, confirmsEach: true}, nil)
	hu := p.raiseOrderFor(nil)
	c.pinned.confirms.arm(hu)
	c.noteTail(&plan{info: lookup([]byte("PUNSUBSCRIBE")), confirms: 1}, nil)
	hp := p.raiseOrderFor(nil)
	c.pinned.confirms.arm(hp)
	defer hu.end()
	defer hp.end()

	confirm("*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:2\r\n")
	if !hu.ended.Load() {
		t.Fatal("the UNSUBSCRIBE's first confirmation did not end its barrier")
	}
	confirm("*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:1\r\n")
	if hp.ended.Load() {
		t.Fatal("the UNSUBSCRIBE's second confirmation ended the PUNSUBSCRIBE's barrier")
	}
	if got := c.pinned.confirms.subs; got != [3]int64{0, 1, 0} {
		t.Fatalf("subscriptions counted %v, want no channel and 1 pattern", got)
	}
	confirm("*3\r\n$12\r\npunsubscribe\r\n$2\r\np*\r\n:0\r\n")
	if !hp.ended.Load() {
		t.Fatal("the PUNSUBSCRIBE's confirmation did not end its barrier")
	}
}

// TestConfirmations_RelayReplyEndsItsBarrier: a RESP2 subscriber sends
// UNSUBSCRIBE, then PUBLISH, in one batch. The PUBLISH's reply is relayed
// (no call waits for it): its barrier ended once written, and another
// client's SUBSCRIBE sent after it on another connection ran first (order
// scenes, seed 103). It ends at the reply now, after the confirmations
// owed before it, and not at a published message.
func TestConfirmations_RelayReplyEndsItsBarrier(t *testing.T) {
	var p pool
	c := &client{}
	confirm := func(msg string) { c.pinned.confirms.confirmed(confirmationOf([]byte(msg))) }
	c.noteTail(&plan{info: lookup([]byte("SUBSCRIBE")), confirms: 1}, nil)
	confirm("*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n")

	c.noteTail(&plan{info: lookup([]byte("UNSUBSCRIBE")), confirms: 1, confirmsEach: true}, nil)
	c.noteTail(&plan{info: lookup([]byte("PUBLISH")), relayReply: true}, nil)
	if !c.in.tail.confirms || c.in.tail.silent {
		t.Fatalf("a command whose reply is relayed: tail %+v, want it to wait for a confirmation", c.in.tail)
	}
	h := p.raiseOrderFor(nil)
	defer h.end()
	c.pinned.confirms.arm(h)
	confirm("*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n")
	confirm("*3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n")
	if h.ended.Load() {
		t.Fatal("the PUBLISH's barrier ended before its reply")
	}
	confirm(":0\r\n")
	if !h.ended.Load() {
		t.Fatal("the PUBLISH's relayed reply did not end its barrier")
	}
}

func TestConfirmationOf(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want confirmation
	}{
		{"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n", confirmation{confirmSub, famChannel, 1}},
		{">3\r\n$12\r\nPUNSUBSCRIBE\r\n$2\r\np*\r\n:0\r\n", confirmation{confirmUnsub, famPattern, 0}},
		{"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n", confirmation{confirmUnsub, famChannel, 0}},
		{">3\r\n$10\r\nssubscribe\r\n$1\r\ns\r\n:4\r\n", confirmation{confirmSub, famShard, 4}},
		{"*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nm\r\n", confirmation{confirmNone, famChannel, -1}},
		{"-ERR refused\r\n", confirmation{confirmRefused, famChannel, -1}},
		{"*4\r\n$8\r\npmessage\r\n$2\r\np*\r\n$1\r\na\r\n$1\r\nm\r\n", confirmation{confirmNone, famChannel, -1}},
		{">3\r\n$8\r\nsmessage\r\n$1\r\ns\r\n$1\r\nm\r\n", confirmation{confirmNone, famChannel, -1}},
		{"+OK\r\n", confirmation{confirmReply, famChannel, -1}},
		{":0\r\n", confirmation{confirmReply, famChannel, -1}},
		{"*2\r\n$4\r\npong\r\n$0\r\n\r\n", confirmation{confirmReply, famChannel, -1}},
		{"*0\r\n", confirmation{confirmReply, famChannel, -1}},
		{"*2\r\n:1\r\n:2\r\n", confirmation{confirmReply, famChannel, -1}},
		{"*3\r\n$9\r\nsubscr", confirmation{confirmNone, famChannel, -1}},
		{"", confirmation{confirmNone, famChannel, -1}},
	} {
		if got := confirmationOf([]byte(tc.msg)); got != tc.want {
			t.Errorf("%q: %+v, want %+v", tc.msg, got, tc.want)
		}
	}
}

// TestOrder_BarrierBehindHeldRequestWaitsForAll: a barrier of a command
// that only reads k, raised while a SET of k is held behind barriers,
// waits for every barrier raised before it, also one on other keys: the
// SET leaves when the barrier it waits behind ends, and the command must
// run after it (a client's LLEN, on a private connection, ran before
// another client's LPUSH held behind a barrier on other keys).
func TestOrder_BarrierBehindHeldRequestWaitsForAll(t *testing.T) {
	var p pool
	o := &p.order
	other := p.raiseOrderFor(scopeFor(t, true, []string{"SET", "j", "v"}))
	free := p.raiseOrderFor(scopeFor(t, true, []string{"STRLEN", "k"}))
	set := scopeFor(t, true, []string{"SET", "k", "v"})
	if o.held.passOrHold(set) {
		t.Fatal("SET k passed a barrier of STRLEN k")
	}
	o.heldCalls.Add(1) // as holdBatch counts it
	behind := p.raiseOrderFor(scopeFor(t, true, []string{"LLEN", "k"}))
	unrelated := p.raiseOrderFor(scopeFor(t, true, []string{"GET", "x"}))
	defer func() {
		for _, h := range []*orderHold{other, free, behind, unrelated} {
			h.end()
		}
	}()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.waitsFor(free) {
		t.Error("a barrier of STRLEN k, raised before the SET was held, waits")
	}
	if !o.waitsFor(behind) {
		t.Error("a barrier of LLEN k, raised while a SET of k is held, does not wait")
	}
	if o.waitsFor(unrelated) {
		t.Error("a barrier of GET x waits for barriers of other keys")
	}
}
