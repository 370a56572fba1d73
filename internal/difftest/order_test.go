package difftest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestOrderScenes_SettledSameOnTwoServers checks the generator and its
// model: two plain redis-servers playing the same order scenes settled
// record the same replies (the outcome is defined), and no settled read
// waits for an item the model promised and the server never sent.
func TestOrderScenes_SettledSameOnTwoServers(t *testing.T) {
	a, b := testutil.StartRedis(t), testutil.StartRedis(t)
	g := &orderGen{multiGen{r: newMultiRand(42), max: 4 << 10}, true, true, true}
	for i := range 60 {
		sc := g.scene(i)
		ta, err := playSettled(a.Addr, sc, 10*time.Second)
		if err != nil {
			t.Fatalf("scene %d on A: %v\n%s", i, err, sc.describe(0)[0])
		}
		tb, err := playSettled(b.Addr, sc, 10*time.Second)
		if err != nil {
			t.Fatalf("scene %d on B: %v", i, err)
		}
		if m := firstDifference(i, sc, ta, tb, false); m != nil {
			t.Fatalf("two redis-servers differ: %v", m)
		}
	}
}

// TestOrderScenes_Cover checks that the scenes hold what they are for:
// every kind and op, and commands sent before an earlier command of
// another client has been answered, so that the order decides.
func TestOrderScenes_Cover(t *testing.T) {
	g := &orderGen{multiGen{r: newMultiRand(7), max: 1024}, false, false, false}
	kinds := map[string]bool{}
	sent := map[string]int{}
	overlapping := 0
	for i := range 60 {
		sc := g.scene(i)
		kinds[sc.name] = true
		// unread[c]: replies client c has been sent and not yet read.
		unread := make([]int, sc.clients)
		overlap := false
		for _, a := range sc.acts {
			switch {
			case a.send != nil:
				name := strings.ToUpper(a.send[0])
				if name == "CLIENT" {
					name += " " + strings.ToUpper(a.send[1])
				}
				sent[name]++
				for c, n := range unread {
					if c != a.client && n > 0 {
						overlap = true
					}
				}
				unread[a.client] += a.settle.replies
			case a.read:
				unread[a.client] = max(0, unread[a.client]-1)
			}
		}
		if overlap {
			overlapping++
		}
	}
	if len(kinds) != len(orderKinds) {
		t.Errorf("kinds in 60 scenes: %v", kinds)
	}
	for _, name := range []string{"SELECT", "CLIENT SETNAME", "CLIENT GETNAME", "HELLO", "SET", "GET",
		"APPEND", "DEL", "GETRANGE", "LPUSH", "BRPOPLPUSH", "LRANGE", "LLEN",
		"SUBSCRIBE", "UNSUBSCRIBE", "PSUBSCRIBE", "PUNSUBSCRIBE", "PUBLISH"} {
		if sent[name] == 0 {
			t.Errorf("no %s in 60 scenes: %v", name, sent)
		}
	}
	if overlapping < 50 {
		t.Errorf("%d of 60 scenes send a command while another client's reply is outstanding", overlapping)
	}
}

// TestRunOrder_DetectsDifference: a subscriber only the target has makes
// PUBLISH count one more receiver there. (The target plays settled too:
// Redis itself runs commands sent at once on several sockets in an order
// of its own, so a plain redis-server played as written differs from the
// reference in most seeds; the proxy must not.)
func TestRunOrder_DetectsDifference(t *testing.T) {
	a, b := testutil.StartRedis(t), testutil.StartRedis(t)
	listenToAll(t, b.Addr)
	_, err := runOrder(a.Addr, b.Addr, MultiConfig{Seed: 3, Scenes: 30, MaxValue: 1024}, playSettled)
	m, ok := err.(*Mismatch)
	if !ok {
		t.Fatalf("want a *Mismatch, got %v", err)
	}
	if !strings.Contains(m.Commands[0], "PUBLISH") {
		t.Fatalf("mismatch without a PUBLISH: %v", m)
	}
}

// TestRunOrder_Replays: a scene that departs once is played again under
// new names and the run goes on (Replays 1), or the run ends there
// (Replays 0); a target that departs every time fails even with a replay.
func TestRunOrder_Replays(t *testing.T) {
	a, b := testutil.StartRedis(t), testutil.StartRedis(t)
	plays := 0
	var renamed []string
	departOnce := func(addr string, sc scene, timeout time.Duration) ([]string, error) {
		plays++
		out, err := playSettled(addr, sc, timeout)
		if plays == 3 && len(out) > 0 {
			out[0] += " (changed)"
		}
		if plays == 4 {
			for _, a := range sc.acts {
				for _, arg := range a.send {
					if strings.HasPrefix(arg, "o:") {
						renamed = append(renamed, arg)
					}
				}
			}
		}
		return out, err
	}
	var logged []string
	cfg := MultiConfig{Seed: 3, Scenes: 6, MaxValue: 1024, Replays: 1,
		Logf: func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) }}
	if n, err := runOrder(a.Addr, b.Addr, cfg, departOnce); err != nil || n != 6 {
		t.Fatalf("one departure, one replay: %d scenes, %v", n, err)
	}
	if len(logged) != 1 || !strings.HasPrefix(logged[0], "scene 2 departed") {
		t.Fatalf("logged %q, want one replay of scene 2", logged)
	}
	if len(renamed) == 0 {
		t.Fatal("the replay sent no key or channel")
	}
	for _, name := range renamed {
		if !strings.HasPrefix(name, "o:2.1:") {
			t.Fatalf("the replay sent %q, want the names under o:2.1:", name)
		}
	}

	plays = 0
	cfg.Replays, cfg.Seed = 0, 4
	if _, err := runOrder(a.Addr, b.Addr, cfg, departOnce); err == nil {
		t.Fatal("one departure without a replay: no error")
	} else if m, ok := err.(*Mismatch); !ok || m.Step != 2 {
		t.Fatalf("want a *Mismatch at scene 2, got %v", err)
	}

	// Fresh servers: the scenes' names begin again with each seed.
	a, b = testutil.StartRedis(t), testutil.StartRedis(t)
	listenToAll(t, b.Addr)
	logged = nil
	cfg.Replays, cfg.Seed, cfg.Scenes = 1, 3, 30
	if _, err := runOrder(a.Addr, b.Addr, cfg, playSettled); err == nil {
		t.Fatal("a target that departs every time passed with a replay")
	} else if _, ok := err.(*Mismatch); !ok {
		t.Fatalf("want a *Mismatch, got %v", err)
	}
	if len(logged) != 1 {
		t.Fatalf("logged %d replays, want 1", len(logged))
	}
}

// listenToAll subscribes a connection of the test to every channel of the
// server at addr, which makes its PUBLISH replies count one receiver more
// than another server's.
func listenToAll(t *testing.T, addr string) {
	c, err := dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.send([][]string{{"PSUBSCRIBE", "*"}})
	if _, err := ReadReply(c.r); err != nil {
		t.Fatal(err)
	}
}
