package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/resp"
)

func TestBlockedInList(t *testing.T) {
	line := func(flags string) []byte {
		return resp.AppendBulkString(nil, "id=4 addr=127.0.0.1:39088 laddr=127.0.0.1:6379 fd=8 name= age=1 idle=1 flags="+flags+" db=0 sub=0 cmd=set\n")
	}
	for _, tc := range []struct {
		reply []byte
		want  bool
	}{
		{line("b"), true},
		{line("bN"), true},
		{line("N"), false},
		{line("x"), false},
		{resp.AppendBulkString(nil, ""), false}, // no such client
		{[]byte("-NOPERM this user has no permissions to run the 'client|list' command\r\n"), false},
		{[]byte("=15\r\ntxt:flags=b id=1\r\n"), false}, // no " flags=" field
	} {
		if got := blockedInList(tc.reply); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.reply, got, tc.want)
		}
	}
}

func TestProxy_PausedWriteHoldsOnlyItsClient(t *testing.T) {
	// During CLIENT PAUSE WRITE Redis holds a client's write and serves
	// other clients' reads. Through the proxy, a plain SET held by the
	// pause held the shared connection, and every other client's reads
	// behind it, for the whole pause: now the stall watcher parks that
	// connection, and other clients' commands get their replies while the
	// SET still waits (before its reply comes, not by a clock).
	e := startEnv(t)
	admin := dialRaw(t, e.redis.Addr)
	reader := dialWarm(t, e.addr)
	if got := reader.do("SET", "r", "value"); got != "+OK\r\n" {
		t.Fatalf("SET r = %q", got)
	}
	for round := range 3 {
		if got := admin.do("CLIENT", "PAUSE", "8000", "WRITE"); got != "+OK\r\n" {
			t.Fatalf("CLIENT PAUSE = %q", got)
		}
		writer := dialWarm(t, e.addr)
		writer.send([]string{"SET", fmt.Sprintf("w:%d", round), "x"})
		// Once Redis holds it (sent with the reads, in one write, the
		// reads would wait behind it as they would on one connection).
		for deadline := time.Now().Add(5 * time.Second); !strings.Contains(admin.do("CLIENT", "LIST"), "flags=b "); {
			if time.Now().After(deadline) {
				t.Fatal("Redis shows no client held by the pause")
			}
			time.Sleep(time.Millisecond)
		}
		for i := range 20 {
			if got := reader.do("GET", "r"); got != bulk("value") {
				t.Fatalf("round %d: GET %d during the pause = %q", round, i, got)
			}
			if got := reader.do("PING"); got != "+PONG\r\n" {
				t.Fatalf("round %d: PING %d during the pause = %q", round, i, got)
			}
			time.Sleep(2 * time.Millisecond) // let the watcher see the stall
		}
		// The held SET has not been answered: the reads above did not wait
		// for the pause to end.
		writer.nc.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if n, _ := writer.br.Peek(1); len(n) > 0 {
			t.Fatalf("round %d: the SET was answered during the pause: the test did not see a held write", round)
		}
		if got := admin.do("CLIENT", "UNPAUSE"); got != "+OK\r\n" {
			t.Fatalf("CLIENT UNPAUSE = %q", got)
		}
		if got := writer.read(); got != "+OK\r\n" {
			t.Fatalf("round %d: the held SET = %q after the pause", round, got)
		}
	}
}
