package proxy

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/resp"
)

// TestProxy_LargeCommandsAsSent: commands of 32 KiB and more that go to
// Redis as the client sent them are sent from the read buffer, not copied
// into the batch (client.handle, rewriter.forwardsAsIs). Pipelined with
// small commands before and after them, every reply and every stored value
// is Redis's; values the policy compresses, values that begin with the
// frame magic (wrapped) and arguments after the value still take the
// rewriting path.
func TestProxy_LargeCommandsAsSent(t *testing.T) {
	noise := make([]byte, 200<<10)
	rand.NewChaCha8([32]byte{21}).Read(noise)
	incompressible := string(noise)
	text := strings.Repeat(`{"id":1,"name":"squeeze"},`, 6000) // 156 kB, compresses
	magic := string(codec.Magic) + incompressible[:50<<10]
	for _, tc := range []struct {
		name     string
		opts     []envOpt
		storedAs func(key, value string) bool // what Redis holds for value
	}{
		{"compression off", []envOpt{withMinSize(1 << 30)}, func(k, v string) bool { return !strings.HasPrefix(v, string(codec.Magic)) }},
		{"compression on", nil, func(k, v string) bool {
			return v == incompressible[:len(v)] && !strings.HasPrefix(v, string(codec.Magic))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEnv(t, tc.opts...)
			c := dialRaw(t, e.addr)
			direct := dialRaw(t, e.redis.Addr)
			values := map[string]string{
				"big:raw":   incompressible,
				"big:text":  text,
				"big:magic": magic,
				"big:ex":    incompressible[:40<<10],
				"big:m1":    incompressible[:33<<10],
			}
			cmds := [][]string{
				{"SET", "small", "1"},
				{"SET", "big:raw", values["big:raw"]},
				{"INCR", "small"},
				{"SET", "big:text", values["big:text"]},
				{"SET", "big:magic", values["big:magic"]},
				{"SET", "big:ex", values["big:ex"], "EX", "100"},
				{"MSET", "big:m1", values["big:m1"], "small2", "x"},
				{"GET", "big:raw"}, {"GET", "big:text"}, {"GET", "big:magic"}, {"GET", "big:ex"}, {"GET", "big:m1"},
				{"INCR", "small"},
			}
			want := []string{"+OK\r\n", "+OK\r\n", ":2\r\n", "+OK\r\n", "+OK\r\n", "+OK\r\n", "+OK\r\n",
				bulk(values["big:raw"]), bulk(values["big:text"]), bulk(values["big:magic"]), bulk(values["big:ex"]), bulk(values["big:m1"]),
				":3\r\n"}
			for round := range 3 {
				c.send(cmds...)
				for i, w := range want {
					if got := c.read(); got != w {
						t.Fatalf("round %d, %s: reply %.60q, want %.60q", round, cmds[i][0], got, w)
					}
				}
			}
			for k, v := range values {
				stored := direct.do("GET", k)
				asIs := stored == bulk(v)
				if wantAsIs := tc.storedAs(k, v); asIs != wantAsIs {
					t.Errorf("%s: Redis holds it as sent: %v, want %v (%d bytes stored for %d)", k, asIs, wantAsIs, len(stored), len(v))
				}
			}
			if ttl := direct.do("TTL", "big:ex"); ttl == ":-1\r\n" || ttl == ":-2\r\n" {
				t.Errorf("big:ex lost its EX: TTL %q", ttl)
			}
			waitHeldZero(t, e.srv)
		})
	}
}

// TestForwardsAsIs: only a multibulk command whose arguments lie in place
// in its bytes, in the one encoding appendRequest writes, with values the
// policy stores as they are, is forwarded as sent.
func TestForwardsAsIs(t *testing.T) {
	e := startEnv(t, withMinSize(1<<30))
	if err := e.srv.init(); err != nil { // the policies in force (Serve does it too)
		t.Fatal(err)
	}
	r := &rewriter{s: e.srv}
	set := lookup([]byte("SET"))
	for _, tc := range []struct {
		name string
		raw  string
		want bool
	}{
		{"canonical", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n", true},
		{"empty value", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n", true},
		{"ten arguments", "*10\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nEX\r\n$2\r\n10\r\n$3\r\nGET\r\n$2\r\nNX\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n", true},
		{"inline", "SET k hello\r\n", false},
		{"value with the frame magic", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\n" + string(codec.Magic) + "ab\r\n", false},
		{"count line ends \\rX", "*3\rX$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n", false},
		{"length line ends \\rX", "*3\r\n$3\r\nSET\r\n$1\rXk\r\n$5\r\nhello\r\n", false},
		{"value ends \\rX", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhelloXX", false},
		{"last value ends \\r\\r", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\r", false},
	} {
		args, n, err := resp.ReadCommand(nil, []byte(tc.raw), 0)
		if err != nil || n != len(tc.raw) {
			t.Fatalf("%s: %v", tc.name, err)
		}
		raw := []byte(tc.raw)
		args, _, _ = resp.ReadCommand(args[:0], raw, 0) // slices of raw
		if got := r.forwardsAsIs(set, args, raw); got != tc.want {
			t.Errorf("%s: forwardsAsIs %v, want %v", tc.name, got, tc.want)
		}
		if tc.want {
			if req := r.appendRequest(nil, set, args); string(req) != tc.raw {
				t.Errorf("%s: appendRequest writes %q, not the bytes forwarded", tc.name, req)
			}
		}
	}
	// Arguments that are not raw's own slices (a copy, a rewritten one).
	raw := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n")
	args, _, _ := resp.ReadCommand(nil, raw, 0)
	args[2] = []byte("hello")
	if r.forwardsAsIs(set, args, raw) {
		t.Error("forwardsAsIs took arguments that are not slices of the command")
	}
	for n := range 1000 {
		if got, want := headerLen(n), len(resp.AppendHeader(nil, resp.BulkString, n)); got != want {
			t.Fatalf("headerLen(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestProxy_LargeCommandsAsSentConcurrent: clients that pipeline large
// SETs sent as they came, beside clients that pipeline small commands, on
// the shared connection the event loop holds (upConn.sendHeld writes the
// large ones at once): every reply is the right one, in order, and every
// value is whole.
func TestProxy_LargeCommandsAsSentConcurrent(t *testing.T) {
	e := startEnv(t, withMinSize(1<<30))
	noise := make([]byte, 120<<10)
	rand.NewChaCha8([32]byte{22}).Read(noise)
	pipelineClients(t, e, 8, 15, func(i, r int) (cmds [][]string, want []string) {
		key, n := fmt.Sprintf("big:%d", i), fmt.Sprintf("n:%d", i)
		if i%2 == 0 {
			v := string(noise[(i+r)%7*1000:][:(40+r*5)<<10])
			cmds = [][]string{{"SET", key, v}, {"INCR", n}, {"SET", key + ":b", v}, {"GET", key}, {"STRLEN", key + ":b"}}
			want = []string{"+OK\r\n", fmt.Sprintf(":%d\r\n", r+1), "+OK\r\n", bulk(v), fmt.Sprintf(":%d\r\n", len(v))}
			return cmds, want
		}
		for j := range 20 {
			cmds = append(cmds, []string{"INCR", n})
			want = append(want, fmt.Sprintf(":%d\r\n", r*20+j+1))
		}
		return cmds, want
	})
	waitHeldZero(t, e.srv)
}

// TestProxy_LargeCommandOddSeparators: Redis 7 and 8 do not look at the
// byte after each "\r" of a command, nor at the two after a value, and
// neither does the proxy's parser; Valkey 9 answers a protocol error and
// closes the connection. A large SET whose separators are "\rX" instead of
// "\r\n" is therefore re-encoded, never forwarded as sent: it is stored
// whole through the proxy, and the upstream connection it shares with
// another client's pipeline stays up whatever the server (the other
// client's replies all come). Sent directly, the server either stores the
// same value or answers its protocol error.
func TestProxy_LargeCommandOddSeparators(t *testing.T) {
	e := startEnv(t, withMinSize(1<<30))
	value := strings.Repeat("v", 40<<10)
	odd := func(key string) string {
		return strings.ReplaceAll(fmt.Sprintf("*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(key), key, len(value), value), "\r\n", "\rX")
	}
	// Directly: the server's own answer.
	d := dialRaw(t, e.redis.Addr)
	if _, err := d.nc.Write([]byte(odd("odd:direct"))); err != nil {
		t.Fatal(err)
	}
	directReply := d.read()
	switch directReply {
	case "+OK\r\n":
	case "-ERR Protocol error: invalid CRLF in request\r\n":
		t.Logf("this server refuses the command sent directly: %q", directReply)
	default:
		t.Fatalf("directly: SET with odd separators: %q", directReply)
	}
	// Through the proxy, while another client pipelines on the shared
	// connection.
	other := dialRaw(t, e.addr)
	c := dialRaw(t, e.addr)
	for round := range 5 {
		other.send([]string{"INCR", "n"}, []string{"INCR", "n"})
		if _, err := c.nc.Write([]byte(odd(fmt.Sprintf("odd:proxy:%d", round)))); err != nil {
			t.Fatal(err)
		}
		other.send([]string{"INCR", "n"})
		if got := c.read(); got != "+OK\r\n" {
			t.Fatalf("round %d: SET with odd separators through the proxy: %q", round, got)
		}
		for i := range 3 {
			if got, want := other.read(), fmt.Sprintf(":%d\r\n", round*3+i+1); got != want {
				t.Fatalf("round %d: the other client's INCR %d: %q, want %q", round, i, got, want)
			}
		}
	}
	check := dialRaw(t, e.redis.Addr)
	for round := range 5 {
		if got := check.do("GET", fmt.Sprintf("odd:proxy:%d", round)); got != bulk(value) {
			t.Fatalf("round %d: stored through the proxy %d bytes, want %d", round, len(got), len(bulk(value)))
		}
	}
	if directReply == "+OK\r\n" {
		if got := check.do("GET", "odd:direct"); got != bulk(value) {
			t.Fatalf("stored directly %d bytes, want %d", len(got), len(bulk(value)))
		}
	}
}

// TestProxy_LargeCommandDeadUpstream: a large command forwarded as sent
// to a Redis that is gone gets the proxy's upstream error, at once, and the
// client's connection stays usable for the error replies after it.
func TestProxy_LargeCommandDeadUpstream(t *testing.T) {
	e := startEnv(t, withMinSize(1<<30))
	c := dialRaw(t, e.addr)
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatal(got)
	}
	e.redis.Stop()
	value := strings.Repeat("v", 100<<10)
	c.send([]string{"SET", "k", value}, []string{"SET", "k2", value})
	for i := range 2 {
		if got := c.read(); !strings.HasPrefix(got, "-ERR squeeze: upstream: ") {
			t.Fatalf("SET %d with Redis gone: %.120q, want the upstream error", i, got)
		}
	}
	waitHeldZero(t, e.srv)
}
