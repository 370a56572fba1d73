package proxy

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/resp"
)

// TestProxy_NoLeakAfterMutatedSequences: clients send sequences of
// connection-state commands (HELLO, SUBSCRIBE and UNSUBSCRIBE forms,
// MULTI, RESET ...), mutated (a byte changed, cut short, a stray CRLF), and
// leave at once. Afterwards the proxy holds no goroutine and Redis no
// connection more than before. Before, a client whose last bytes and FIN
// came in one read ("*1", then close) stayed registered in the event loop
// for good, with its reader and writer goroutines.
func TestProxy_NoLeakAfterMutatedSequences(t *testing.T) {
	e := startEnv(t)
	d := dialRaw(t, e.redis.Addr)
	redisClients := func() int { return strings.Count(d.do("CLIENT", "LIST"), "\n") }
	// One client first, so that the shared connection and the event
	// loop's goroutine exist before the baseline is taken.
	c0 := dialRaw(t, e.addr)
	c0.do("PING")
	c0.nc.Close()
	settle := func(want func() bool) bool {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if want() {
				return true
			}
		}
		return false
	}
	time.Sleep(100 * time.Millisecond)
	baseG, baseR := runtime.NumGoroutine(), redisClients()
	r := rand.New(rand.NewPCG(20, 7))
	cmds := [][]string{{"HELLO", "3"}, {"HELLO", "2"}, {"HELLO", "9"}, {"SUBSCRIBE", "a"}, {"SUBSCRIBE", "a", "b"},
		{"UNSUBSCRIBE"}, {"UNSUBSCRIBE", "a"}, {"PSUBSCRIBE", "x*"}, {"PUNSUBSCRIBE"}, {"SSUBSCRIBE", "s"},
		{"MULTI"}, {"EXEC"}, {"DISCARD"}, {"PING"}, {"GET", "k"}, {"RESET"}, {"BLPOP", "l", "0"}, {"QUIT"}}
	n := 400
	if testing.Short() {
		n = 150
	}
	for range n {
		c := dialRaw(t, e.addr)
		var raw []byte
		for range 1 + r.IntN(6) {
			var args [][]byte
			for _, a := range cmds[r.IntN(len(cmds))] {
				args = append(args, []byte(a))
			}
			raw = resp.AppendCommand(raw, args...)
		}
		for m := r.IntN(3); m > 0 && len(raw) > 1; m-- {
			switch r.IntN(3) {
			case 0:
				raw[r.IntN(len(raw))] = byte(r.IntN(256))
			case 1:
				raw = raw[:1+r.IntN(len(raw)-1)]
			default:
				i := r.IntN(len(raw))
				raw = append(raw[:i], append([]byte("\r\n"), raw[i:]...)...)
			}
		}
		c.nc.Write(raw)
		if r.IntN(2) == 0 {
			time.Sleep(time.Millisecond)
		}
		c.nc.Close()
	}
	if !settle(func() bool { return runtime.NumGoroutine() <= baseG }) {
		buf := make([]byte, 1<<22)
		t.Fatalf("goroutines %d, %d before the clients:\n%s", runtime.NumGoroutine(), baseG, buf[:runtime.Stack(buf, true)])
	}
	if !settle(func() bool { return redisClients() <= baseR }) {
		t.Fatalf("Redis has %d connections, %d before the clients", redisClients(), baseR)
	}
	// The same for the smallest case, every time: a partial command, then
	// the end of input, in one segment.
	for _, b := range []string{"*1", "*1\r\n", "*2\r\n$3\r\nGET\r\n$1\r\n", "$"} {
		c := dialRaw(t, e.addr)
		c.nc.Write([]byte(b))
		c.nc.Close()
	}
	if !settle(func() bool { return runtime.NumGoroutine() <= baseG }) {
		t.Fatalf("goroutines %d after partial commands, %d before", runtime.NumGoroutine(), baseG)
	}
}

// TestProxy_BlockedClientStallsNoOne: a client whose commands wait behind
// its own blocked BLPOP (a SUBSCRIBE, a HELLO, a STRLEN) holds up no other
// client, as with Redis, where they simply wait their turn; and when it
// leaves, nothing of it stays. Before, the SUBSCRIBE's order barrier lasted
// until Redis ran it, which the BLPOP put off for good: every client that
// needed a barrier afterwards hung.
func TestProxy_BlockedClientStallsNoOne(t *testing.T) {
	e := startEnv(t)
	c0 := dialRaw(t, e.addr)
	c0.do("PING")
	time.Sleep(50 * time.Millisecond)
	baseG := runtime.NumGoroutine()
	for _, behind := range [][]string{{"SUBSCRIBE", "a", "b"}, {"HELLO", "3"}, {"STRLEN", "k"}, {"MULTI"}} {
		blocked := dialRaw(t, e.addr)
		blocked.send([]string{"BLPOP", "never", "0"}, behind)
		waitBlocked(t, e.redis.Addr, 1)
		// Another client that needs an order barrier (a subscription) and
		// one that needs none are served at once.
		other := dialRaw(t, e.addr)
		other.nc.SetDeadline(time.Now().Add(3 * time.Second))
		if r := other.do("SUBSCRIBE", "zz"); !strings.Contains(r, "subscribe") {
			t.Fatalf("behind %q: another client's SUBSCRIBE = %q", behind, r)
		}
		if r := c0.do("SET", "x", "1"); r != "+OK\r\n" {
			t.Fatalf("behind %q: SET = %q", behind, r)
		}
		other.nc.Close()
		blocked.nc.Close()
		waitBlocked(t, e.redis.Addr, 0)
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > baseG; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines %d, %d before:\n%s", runtime.NumGoroutine(), baseG, buf[:runtime.Stack(buf, true)])
		}
	}
}
