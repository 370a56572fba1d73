package proxy

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestProxy_SameAsRedis runs single-connection transcripts on Redis and
// through the proxy (in front of another Redis) and compares every reply.
func TestProxy_SameAsRedis(t *testing.T) {
	direct := testutil.StartRedis(t)
	e := startEnv(t)
	big := compressible(3000, 9)
	scripts := map[string][][]string{
		"client reply": {{"CLIENT", "REPLY", "OFF"}, {"SET", "a", big}, {"CLIENT", "REPLY", "ON"}, {"GET", "a"}, {"CLIENT", "REPLY", "SKIP"}, {"GET", "a"}, {"STRLEN", "a"}},
		"select":       {{"SELECT", "3"}, {"SET", "db3", big}, {"SELECT", "0"}, {"GET", "db3"}, {"SELECT", "3"}, {"GET", "db3"}, {"SWAPDB", "0", "3"}},
		"hello reset":  {{"HELLO", "3"}, {"HSET", "h", "f", big}, {"HGETALL", "h"}, {"RESET"}, {"HGETALL", "h"}, {"HELLO", "2", "SETNAME", "x"}, {"CLIENT", "GETNAME"}},
		"multi":        {{"MULTI"}, {"SET", "m", big}, {"GET", "m"}, {"STRLEN", "m"}, {"APPEND", "m", "tail"}, {"GETRANGE", "m", "-6", "-1"}, {"EXEC"}, {"MULTI"}, {"GET", "m"}, {"DISCARD"}, {"EXEC"}},
		"multi error":  {{"MULTI"}, {"SET", "m", big}, {"NOSUCHCMD"}, {"GET"}, {"EXEC"}, {"GET", "m"}},
		"errors":       {{"NOSUCHCMD", "x"}, {"GET"}, {"STRLEN"}, {"SET", "k"}, {"APPEND", "k"}, {"LPUSH", "l", big}, {"GET", "l"}, {"STRLEN", "l"}, {"HSTRLEN", "l", "x"}},
		"blocking":     {{"RPUSH", "bl", big}, {"BLPOP", "bl", "1"}, {"BLPOP", "bl", "0.01"}, {"BLMPOP", "0.01", "1", "bl", "LEFT"}},
		"quit":         {{"SET", "q", big}, {"QUIT"}, {"GET", "q"}},
	}
	for name, cmds := range scripts {
		t.Run(name, func(t *testing.T) {
			a, b := dialRaw(t, direct.Addr), dialRaw(t, e.addr)
			a.do("FLUSHALL")
			b.do("FLUSHALL")
			a.send(cmds...)
			b.send(cmds...)
			for i := 0; ; i++ {
				ra, rb := a.read(), b.read()
				// Client ids count connections, which differ.
				ra, rb = clientID.ReplaceAllString(ra, "id:N"), clientID.ReplaceAllString(rb, "id:N")
				if ra != rb {
					t.Fatalf("reply %d differs:\nredis: %.200q\nproxy: %.200q", i, ra, rb)
				}
				if ra == "" {
					if strings.EqualFold(cmds[len(cmds)-1][0], "QUIT") || i >= expectedReplies(cmds) {
						break
					}
					t.Fatalf("reply %d: connection closed", i)
				}
				if i > 3*len(cmds) {
					t.Fatal("too many replies")
				}
				// Stop once the replies seen cover the commands (no timeouts).
				if i == expectedReplies(cmds)-1 {
					break
				}
			}
		})
	}
}

var clientID = regexp.MustCompile(`\$2\r\nid\r\n:[0-9]+`)

// expectedReplies counts the replies Redis sends for cmds (CLIENT REPLY OFF
// and SKIP silence some; QUIT ends the connection).
func expectedReplies(cmds [][]string) int {
	n, off, skip := 0, false, 0
	for _, c := range cmds {
		name := strings.ToUpper(c[0])
		if name == "CLIENT" && len(c) > 2 && strings.EqualFold(c[1], "REPLY") {
			switch strings.ToUpper(c[2]) {
			case "OFF":
				off = true
				continue
			case "SKIP":
				skip = 2
			case "ON":
				off = false
			}
		}
		if skip > 0 {
			skip--
			continue
		}
		if !off {
			n++
		}
		if name == "QUIT" {
			break
		}
	}
	return n
}

func TestProxy_Inline(t *testing.T) {
	e := startEnv(t)
	p := dialRaw(t, e.addr)
	p.write([]byte("SET greeting \"hello\\x20world\"\r\nGET greeting\nPING\r\n"))
	for _, want := range []string{"+OK\r\n", bulk("hello world"), "+PONG\r\n"} {
		if got := p.read(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

func TestProxy_PubSub(t *testing.T) {
	e := startEnv(t)
	big := compressible(4000, 4)
	for _, proto := range []string{"2", "3"} {
		sub, pub := dialRaw(t, e.addr), dialRaw(t, e.addr)
		if proto == "3" {
			sub.do("HELLO", "3")
		}
		sub.send([]string{"SUBSCRIBE", "c" + proto, "ch" + proto})
		want := []string{"*3\r\n$9\r\nsubscribe\r\n$2\r\nc" + proto + "\r\n:1\r\n", "*3\r\n$9\r\nsubscribe\r\n$3\r\nch" + proto + "\r\n:2\r\n"}
		if proto == "3" {
			for i := range want {
				want[i] = ">" + want[i][1:]
			}
		}
		for _, w := range want {
			if got := sub.read(); got != w {
				t.Fatalf("RESP%s subscribe: %q, want %q", proto, got, w)
			}
		}
		if got := pub.do("PUBLISH", "ch"+proto, big); got != ":1\r\n" {
			t.Fatalf("PUBLISH: %q", got)
		}
		msg := "*3\r\n$7\r\nmessage\r\n$3\r\nch" + proto + "\r\n" + bulk(big)
		if proto == "3" {
			msg = ">" + msg[1:]
		}
		if got := sub.read(); got != msg {
			t.Fatalf("RESP%s message: %.100q", proto, got)
		}
		if proto == "2" { // leave the subscribed state: values decode again
			sub.send([]string{"UNSUBSCRIBE"})
			sub.read()
			if got := sub.read(); !strings.HasSuffix(got, ":0\r\n") {
				t.Fatalf("last unsubscribe reply: %q", got)
			}
			pub.do("SET", "k2", big)
			for i := 0; i < 3; i++ {
				if got := sub.do("GET", "k2"); got != bulk(big) {
					t.Fatalf("GET after UNSUBSCRIBE: %.100q", got)
				}
			}
			if got := sub.do("STRLEN", "k2"); got != ":4000\r\n" {
				t.Fatalf("STRLEN after UNSUBSCRIBE: %q", got)
			}
		}
		if proto == "3" { // RESP3 allows commands while subscribed
			pub.do("SET", "k", big)
			if got := sub.do("GET", "k"); got != bulk(big) {
				t.Fatalf("GET while subscribed: %.100q", got)
			}
		}
	}
}

// TestProxy_PushesAndRepliesInOrder: a RESP3 client's push messages and
// replies come in the order Redis sends them, directly and through the
// proxy, where SELECT runs as a round trip of its own: its reply went out
// before the confirmations of a SUBSCRIBE sent before it, and it let a
// confirmation go before the replies still queued ahead of it (9 runs of
// 10).
func TestProxy_PushesAndRepliesInOrder(t *testing.T) {
	sub := func(kind, ch string, n int) string {
		return ">3\r\n$" + strconv.Itoa(len(kind)) + "\r\n" + kind + "\r\n$" + strconv.Itoa(len(ch)) + "\r\n" + ch + "\r\n:" + strconv.Itoa(n) + "\r\n"
	}
	e := startEnv(t)
	for _, tc := range []struct {
		name string
		send func(key string) [][]string
		want func(key string) []string
	}{
		{"SELECT after SUBSCRIBE of two channels",
			func(key string) [][]string { return [][]string{{"SUBSCRIBE", key + ":a", key + ":b"}, {"SELECT", "0"}} },
			func(key string) []string {
				return []string{sub("subscribe", key+":a", 1), sub("subscribe", key+":b", 2), "+OK\r\n"}
			}},
		{"PSUBSCRIBE between replies, SELECT after",
			func(key string) [][]string {
				return [][]string{{"GET", key}, {"SET", key, "v"}, {"PSUBSCRIBE", "po:*"}, {"PUBLISH", "other", "m"}, {"SELECT", "1"}}
			},
			func(key string) []string {
				return []string{"_\r\n", "+OK\r\n", sub("psubscribe", "po:*", 1), ":0\r\n", "+OK\r\n"}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for n, addr := range []string{e.redis.Addr, e.addr} {
				for i := range 30 {
					c := dialRaw(t, addr)
					c.do("HELLO", "3")
					key := fmt.Sprintf("pushorder:%d:%d:%d", len(tc.name), n, i)
					c.send(tc.send(key)...)
					for j, want := range tc.want(key) {
						if got := c.read(); got != want {
							t.Fatalf("%s round %d: item %d = %q, want %q", addr, i, j, got, want)
						}
					}
					c.nc.Close()
				}
			}
		})
	}
}

func TestProxy_BlockingAndWatch(t *testing.T) {
	e := startEnv(t)
	big := compressible(8000, 6)
	a, b := dialRaw(t, e.addr), dialRaw(t, e.addr)
	a.send([]string{"BLPOP", "jobs", "5"})
	waitBlocked(t, e.redis.Addr, 1)
	if got := b.do("RPUSH", "jobs", big); got != ":1\r\n" {
		t.Fatal(got)
	}
	if got := a.read(); got != "*2\r\n"+bulk("jobs")+bulk(big) {
		t.Fatalf("BLPOP: %.100q", got)
	}
	// WATCH: another client's write aborts the transaction.
	a.do("SET", "w", big)
	a.do("WATCH", "w")
	b.do("SET", "w", "changed")
	a.do("MULTI")
	a.do("GET", "w")
	if got := a.do("EXEC"); got != "*-1\r\n" {
		t.Fatalf("EXEC after a watched write: %q", got)
	}
	// Client tracking (RESP3): the invalidation push arrives.
	a.do("HELLO", "3")
	a.do("CLIENT", "TRACKING", "ON")
	if got := a.do("GET", "w"); got != bulk("changed") {
		t.Fatalf("GET: %q", got)
	}
	b.do("SET", "w", big)
	if got := a.read(); !strings.HasPrefix(got, ">2\r\n$10\r\ninvalidate\r\n") {
		t.Fatalf("tracking push: %q", got)
	}
}

func TestProxy_Monitor(t *testing.T) {
	e := startEnv(t)
	m, c := dialRaw(t, e.addr), dialRaw(t, e.addr)
	if got := m.do("MONITOR"); got != "+OK\r\n" {
		t.Fatalf("MONITOR: %q", got)
	}
	// Drop the proxy's shared upstream connections (all but MONITOR's
	// and this one), so that the SET below goes over a new one.
	direct := dialRaw(t, e.redis.Addr)
	for _, line := range strings.Split(direct.do("CLIENT", "LIST"), "\n") {
		if strings.Contains(line, " cmd=monitor ") || strings.Contains(line, " cmd=client|list ") {
			continue
		}
		if id, _, ok := strings.Cut(strings.TrimPrefix(line, "id="), " "); ok && strings.HasPrefix(line, "id=") {
			direct.do("CLIENT", "KILL", "ID", id)
		}
	}
	// A SET sent before the proxy sees the connection closed gets its
	// error (it is not sent again: it may have run) and never reaches Redis.
	for i := 0; ; i++ {
		got := c.do("SET", "monitored", "v")
		if got == "+OK\r\n" {
			break
		}
		if i == 10 || !strings.HasPrefix(got, "-ERR squeeze: upstream") {
			t.Fatalf("SET after the upstream connections were dropped: %q", got)
		}
		t.Logf("SET: %q", got)
		time.Sleep(10 * time.Millisecond)
	}
	// A new upstream connection first asks CONFIG GET proto-max-bulk-len,
	// COMMAND INFO and COMMAND DOCS (learnCaps) and CLIENT ID (for the
	// stall watcher, stall.go), and the proxy reloads the
	// key prefixes scripts were seen to use (SMEMBERS, HGETALL, and the
	// proxy's own connections dialed again, with SUBSCRIBE: scriptshare.go);
	// MONITOR shows the truth: a bounded number of such lines may come
	// before the SET.
	var lines []string
	for range 12 {
		got := m.read()
		lines = append(lines, got)
		if strings.Contains(got, `] "SET" "monitored" "v"`) {
			return
		}
		if !strings.Contains(got, `] "COMMAND" `) && !strings.Contains(got, `] "CONFIG" "GET" `) &&
			!strings.Contains(got, `] "CLIENT" "ID"`) &&
			!strings.Contains(got, `] "SMEMBERS" "squeeze:script-prefixes"`) &&
			!strings.Contains(got, `] "HGETALL" "squeeze:script-prefixes:used"`) &&
			!strings.Contains(got, `] "SUBSCRIBE" "squeeze:script-prefixes"`) {
			break
		}
	}
	t.Fatalf("monitor lines: %q", lines)
}
