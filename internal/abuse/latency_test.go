package abuse

import (
	"bufio"
	"bytes"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := summarize(ds, 2)
	want := latencies{n: 100, failed: 2, p50: 50 * time.Millisecond, p99: 99 * time.Millisecond, max: 100 * time.Millisecond}
	if got != want {
		t.Errorf("summarize: %+v, want %+v", got, want)
	}
	if c := got.cells(); !slices.Equal(c, []string{"100", "2", "50.0 ms", "99.0 ms", "100.0 ms"}) {
		t.Errorf("cells %q", c)
	}
	if c := summarize(nil, 3).cells(); !slices.Equal(c, []string{"0", "3", "-", "-", "-"}) {
		t.Errorf("cells of none %q", c)
	}
	if len(latencyHeader) != len(got.cells()) {
		t.Errorf("header of %d cells, rows of %d", len(latencyHeader), len(got.cells()))
	}
}

func TestPingBound(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		given, direct, want time.Duration
	}{
		{0, 40 * ms, 0},             // no bound given: none
		{50 * ms, 1 * ms, 50 * ms},  // a quiet machine: the bound given
		{50 * ms, 30 * ms, 90 * ms}, // a busy one: 3x what Redis itself took
		{50 * ms, 0, 50 * ms},
	} {
		if got := pingBound(tc.given, tc.direct); got != tc.want {
			t.Errorf("pingBound(%s, %s) = %s, want %s", tc.given, tc.direct, got, tc.want)
		}
	}
}

func TestJudgePing(t *testing.T) {
	ms := time.Millisecond
	at := func(p99 time.Duration) latencies { return latencies{n: 100, p99: p99} }
	for _, tc := range []struct {
		name                string
		given, proxy, direc time.Duration
		line, missed        string // substrings; missed "" wants none
	}{
		{"not judged", 0, 3000 * ms, 1 * ms, "not judged (no --ping-p99)", ""},
		{"within", 50 * ms, 20 * ms, 1 * ms, "within the bound 50.0 ms", ""},
		{"over", 50 * ms, 2992 * ms, 1 * ms, "OVER the bound 50.0 ms",
			"pause: other clients' PING p99 through the proxy 2992.0 ms over the bound 50.0 ms (max of --ping-p99 50.0 ms and 3 x the direct p99 1.0 ms)"},
		{"busy machine", 50 * ms, 80 * ms, 30 * ms, "within the bound 90.0 ms", ""},
		{"busy machine, over", 50 * ms, 100 * ms, 30 * ms, "OVER the bound 90.0 ms", "over the bound 90.0 ms"},
	} {
		line, missed := judgePing("pause", tc.given, at(tc.proxy), at(tc.direc))
		if !strings.Contains(line, tc.line) {
			t.Errorf("%s: line %q, want %q in it", tc.name, line, tc.line)
		}
		if (tc.missed == "") != (missed == "") || !strings.Contains(missed, tc.missed) {
			t.Errorf("%s: missed %q, want %q", tc.name, missed, tc.missed)
		}
	}
}

func TestJudgeInnocent(t *testing.T) {
	if m := judgeInnocent("flood", 0, ""); m != "" {
		t.Errorf("no failure: %q", m)
	}
	m := judgeInnocent("flood", 3, "innocent writer 1: GET abuse:101:7: nil")
	if !strings.Contains(m, "flood: 3 failed round trips of innocent clients") || !strings.Contains(m, "GET abuse:101:7: nil") {
		t.Errorf("got %q", m)
	}
}

// TestProberDuring: round trips count in the windows they started in,
// failed ones with their wait; the first failure is kept with its name.
func TestProberDuring(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	p := &prober{}
	for _, s := range []sample{
		{at: sec(0.5), d: time.Millisecond},
		{at: sec(1), d: 3 * time.Second}, // starts the window: in
		{at: sec(2), d: 2 * time.Millisecond, failed: true},
		{at: sec(4), d: 5 * time.Millisecond},  // ends it: out
		{at: sec(10), d: 7 * time.Millisecond}, // a second window
	} {
		p.record(s, "GET through the proxy", errIf(s.failed))
	}
	got := p.during(window{sec(1), sec(4)}, window{sec(9), sec(11)})
	want := latencies{n: 3, failed: 1, p50: 7 * time.Millisecond, p99: 3 * time.Second, max: 3 * time.Second}
	if got != want {
		t.Errorf("during: %+v, want %+v", got, want)
	}
	if all := p.during(); all.n != 5 || all.failed != 1 {
		t.Errorf("all: %+v", all)
	}
	n, first := probers{p, &prober{}}.failures()
	if n != 1 || first != "GET through the proxy: wrong" {
		t.Errorf("failures: %d, %q", n, first)
	}
	q := &prober{done: make(chan struct{})}
	q.signal()
	q.signal() // twice (a deferred stop after a stop) must not panic
}

func errIf(failed bool) error {
	if failed {
		return replyError{"wrong"}
	}
	return nil
}

// TestCheckBulk: a prober's GET fails on an error, a nil, or other bytes.
func TestCheckBulk(t *testing.T) {
	want := []byte("value")
	for _, tc := range []struct {
		r    reply
		fail string
	}{
		{reply{kind: '$', bulk: []byte("value")}, ""},
		{reply{kind: '-', text: "ERR paused"}, "ERR paused"},
		{reply{kind: '$', null: true}, "nil"},
		{reply{kind: '$', bulk: []byte("other")}, "5 bytes that are not the value"},
		{reply{kind: '+', text: "value"}, "not the value"},
	} {
		err := checkBulk("GET k", tc.r, want)
		if (err == nil) != (tc.fail == "") || (err != nil && !strings.Contains(err.Error(), tc.fail)) {
			t.Errorf("%+v: %v, want %q", tc.r, err, tc.fail)
		}
	}
}

// TestFloodLoad: the short form sends more than its proxy's --max-memory
// (so the bound is exercised) yet stays small enough for CI; the long
// form is the 200 x 50 x 1 MiB flood.
func TestFloodLoad(t *testing.T) {
	short := Config{}.floodLoad()
	if short.total() <= short.maxMemory || short.total() > 250<<20 {
		t.Errorf("short form sends %s against --max-memory %s", iec(short.total()), iec(short.maxMemory))
	}
	long := Config{Duration: 30 * time.Second}.floodLoad()
	if long.clients != 200 || long.commands != 50 || long.size != 1<<20 || long.hold != 30*time.Second || long.settle != 10*time.Second {
		t.Errorf("long form %+v", long)
	}
	if long.total() <= long.maxMemory {
		t.Errorf("long form sends %s against --max-memory %s", iec(long.total()), iec(long.maxMemory))
	}
	own := Config{FloodClients: 50, FloodSets: 20, FloodHold: 3 * time.Second}.floodLoad()
	if own.clients != 50 || own.commands != 20 || own.hold != 3*time.Second || own.maxMemory != short.maxMemory {
		t.Errorf("short form with its own flood %+v", own)
	}
}

// TestHostileInputs: every input is there, the garbage line holds no
// line end or quote of its own (Redis reads it as one inline command).
func TestHostileInputs(t *testing.T) {
	in := hostileInputs(7)
	var names []string
	for _, h := range in {
		names = append(names, h.name)
	}
	for _, want := range []string{"POST / HTTP/1.1", "Host: x", "SYNC", "PSYNC ? -1"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %q input", want)
		}
	}
	for _, h := range in {
		if strings.HasPrefix(h.name, "64 random") {
			body := bytes.TrimSuffix(h.data, []byte("\r\n"))
			if len(body) != 64 || bytes.ContainsAny(body, "\r\n\"'") || body[0] != 0x16 {
				t.Errorf("garbage %q", h.data)
			}
		}
	}
}

// pongServer answers every line it reads ending in PING with +PONG on
// loopback, and counts its connections and PINGs: a stand-in for the
// server end of a prober's connection, not for Redis.
type pongServer struct {
	addr         string
	conns, pings atomic.Int32
}

func startPongServer(t *testing.T) *pongServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &pongServer{addr: ln.Addr().String()}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			go func() {
				defer nc.Close()
				sc := bufio.NewScanner(nc)
				for sc.Scan() {
					if strings.HasSuffix(strings.TrimSpace(sc.Text()), "PING") {
						s.pings.Add(1)
						nc.Write([]byte("+PONG\r\n"))
					}
				}
			}()
		}
	}()
	return s
}

// TestStartProber_ConnectsBeforeTheLoad: a prober has its connection, and
// its first PING answered, when startProber returns, and that PING is not
// one of its samples; a dial prober connects anew for every round trip.
func TestStartProber_ConnectsBeforeTheLoad(t *testing.T) {
	s := startPongServer(t)
	p := startProber(s.addr, "PING", pingOp)
	if c, n := s.conns.Load(), s.pings.Load(); c != 1 || n != 1 {
		t.Errorf("when startProber returned: %d connections, %d PINGs; want 1 and 1", c, n)
	}
	if got := p.during(); got.n != 0 {
		t.Errorf("samples before the first round trip: %d, want 0 (the warm-up PING is not one)", got.n)
	}
	time.Sleep(5 * probeEvery)
	p.stop()
	if got := p.during(); got.n == 0 || got.failed != 0 || s.conns.Load() != 1 {
		t.Errorf("after the load: %+v over %d connections, want samples without failures on 1", got, s.conns.Load())
	}

	d := startPongServer(t)
	q := startDialProber(d.addr, "connect+PING", pingOp)
	time.Sleep(5 * probeEvery)
	q.stop()
	got := q.during()
	if got.n < 2 || got.failed != 0 || int(d.conns.Load()) != got.n {
		t.Errorf("dial prober: %+v over %d connections, want one connection per round trip", got, d.conns.Load())
	}
}
