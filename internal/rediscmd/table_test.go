package rediscmd_test

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/internal/difftest"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// serverCommand is what COMMAND says of one command.
type serverCommand struct {
	name  string
	arity int
	flags []string
	tips  []string
	// first, last, step: COMMAND's key positions
	first, last, step int
}

// commands asks the server at addr for COMMAND and returns its commands
// (not their subcommands).
func commands(t *testing.T, addr string) []serverCommand {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("*1\r\n$7\r\nCOMMAND\r\n")); err != nil {
		t.Fatal(err)
	}
	r, err := difftest.ReadReply(bufio.NewReader(c))
	if err != nil {
		t.Fatal(err)
	}
	var out []serverCommand
	for _, e := range r.Elems {
		if len(e.Elems) < 3 {
			t.Fatalf("COMMAND: an entry of %d elements: %s", len(e.Elems), e)
		}
		sc := serverCommand{name: strings.ToUpper(e.Elems[0].Str)}
		sc.arity, _ = strconv.Atoi(e.Elems[1].Str)
		for _, f := range e.Elems[2].Elems {
			sc.flags = append(sc.flags, f.Str)
		}
		if len(e.Elems) > 5 {
			sc.first, _ = strconv.Atoi(e.Elems[3].Str)
			sc.last, _ = strconv.Atoi(e.Elems[4].Str)
			sc.step, _ = strconv.Atoi(e.Elems[5].Str)
		}
		if len(e.Elems) > 7 { // Redis 7's command tips
			for _, tip := range e.Elems[7].Elems {
				sc.tips = append(sc.tips, tip.Str)
			}
		}
		out = append(out, sc)
	}
	if len(out) < 100 {
		t.Fatalf("COMMAND listed %d commands", len(out))
	}
	return out
}

// TestTable_ClassifiesEveryCommand walks COMMAND of the server the tests
// run against (SQUEEZE_REDIS_SERVER: each Redis and Valkey version CI
// tests) and fails on a command the table does not know, so a newer
// server's commands are classified before squeeze claims to serve it. It
// also holds the table's facts against the server's own: arity, blocking,
// writes, undefined reply order, refused commands that the server itself
// refuses inside MULTI, and HTTP lines that are no command of the server.
func TestTable_ClassifiesEveryCommand(t *testing.T) {
	srv := testutil.StartRedis(t)
	var missing []string
	for _, sc := range commands(t, srv.Addr) {
		spec := rediscmd.LookupString(sc.name)
		if spec == nil {
			missing = append(missing, sc.name)
			continue
		}
		has := func(flag string) bool { return slices.Contains(sc.flags, flag) }
		if spec.Arity != 0 && spec.Arity != sc.arity {
			t.Errorf("%s: arity %d in the table, %d in the server", sc.name, spec.Arity, sc.arity)
		}
		if has("blocking") && !spec.Has(rediscmd.Blocking) && !spec.Has(rediscmd.BlockOption) {
			t.Errorf("%s: the server says it may block, the table does not", sc.name)
		}
		if spec.Has(rediscmd.Blocking) && sc.name != "WAIT" && sc.name != "WAITAOF" && !has("blocking") {
			t.Errorf("%s: the table says it blocks, the server does not", sc.name)
		}
		if (spec.Values != rediscmd.ValuesNone && !spec.Has(rediscmd.ListSearch) || spec.Has(rediscmd.Destructive)) && !has("write") {
			t.Errorf("%s: the table says it writes, the server does not", sc.name)
		}
		if spec.Has(rediscmd.ReadOnly) && !has("readonly") {
			t.Errorf("%s: the table says it only reads, the server does not", sc.name)
		}
		if spec.Has(rediscmd.Refused) && !has("no_multi") {
			t.Errorf("%s: the table refuses it, but the server would queue it in MULTI, where a proxy passes it on", sc.name)
		}
		if spec.Has(rediscmd.Hostile) {
			t.Errorf("%s: the table takes it for an HTTP line, the server for a command", sc.name)
		}
		if spec.Has(rediscmd.Unordered) && len(sc.tips) > 0 && !slices.Contains(sc.tips, "nondeterministic_output_order") {
			t.Errorf("%s: the table says its reply's order is undefined, the server does not (tips %q)", sc.name, sc.tips)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Errorf("%d commands of %s are not in the command table (internal/rediscmd/table.go): %s\n"+
			"classify each: values in its arguments or reply, or Other", len(missing), serverVersion(srv.Addr), strings.Join(missing, " "))
	}
}

func serverVersion(addr string) string {
	info, err := testutil.Do(addr, "INFO", "server")
	if err != nil {
		return addr
	}
	var name, version string
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			name, version = "Redis", v
		}
		if v, ok := strings.CutPrefix(line, "valkey_version:"); ok {
			name, version = "Valkey", v
		}
	}
	return fmt.Sprintf("%s %s", name, version)
}

// TestTable_Touches holds every command the table says touches only keys
// at fixed places (or nothing) against the server's key positions: a
// proxy lets such a command pass another client's barrier when their keys
// differ, so a wrong position would reorder commands on one key.
func TestTable_Touches(t *testing.T) {
	srv := testutil.StartRedis(t)
	known := map[string]serverCommand{}
	for _, sc := range commands(t, srv.Addr) {
		known[sc.name] = sc
	}
	n := 0
	for _, spec := range rediscmd.All() {
		first, last, step, ok := spec.Touches.KeyPositions()
		if !ok {
			continue
		}
		n++
		sc, found := known[spec.Name]
		if !found {
			continue // a command of another server version
		}
		if sc.first != first || sc.last != last || sc.step != step {
			t.Errorf("%s: keys at %d..%d step %d in the table, %d..%d step %d in the server",
				spec.Name, first, last, step, sc.first, sc.last, sc.step)
		}
		if ro := slices.Contains(sc.flags, "readonly"); first > 0 && spec.ReadsOnly != ro {
			t.Errorf("%s: reads only in the table: %v; the server flags it readonly: %v", spec.Name, spec.ReadsOnly, ro)
		}
		for _, f := range []string{"movablekeys", "pubsub", "admin", "noscript", "blocking"} {
			if slices.Contains(sc.flags, f) {
				t.Errorf("%s: the table says it touches only its keys, the server flags it %s", spec.Name, f)
			}
		}
		if spec.Has(rediscmd.Pin) || spec.Has(rediscmd.Script) || spec.Has(rediscmd.Patterns) {
			t.Errorf("%s: pins, runs a script or reads patterns, yet touches only its keys", spec.Name)
		}
	}
	if n < 50 {
		t.Errorf("only %d commands touch keys at fixed places", n)
	}
}

// TestTable_Wakes: the commands that may serve a blocked client are
// those that add to a list, a sorted set or a stream, each with a key
// the table places (else Wakes would change nothing), and no blocking
// command itself.
func TestTable_Wakes(t *testing.T) {
	var wakes []string
	for _, s := range rediscmd.All() {
		if s.Wakes {
			wakes = append(wakes, s.Name)
			if s.Touches == rediscmd.TouchesAny {
				t.Errorf("%s wakes but its keys are not placed", s.Name)
			}
			if s.Has(rediscmd.Blocking) {
				t.Errorf("%s wakes and blocks", s.Name)
			}
		}
	}
	slices.Sort(wakes)
	if want := []string{"LPUSH", "LPUSHX", "RPUSH", "RPUSHX", "XADD", "ZADD", "ZINCRBY"}; !slices.Equal(wakes, want) {
		t.Errorf("wakes: %v, want %v", wakes, want)
	}
}
