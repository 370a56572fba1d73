package difftest

import (
	"bufio"
	"flag"
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

var steps = flag.Int("diff.steps", 400, "steps per differential run (raise for long runs)")

// TestRun_SameServerTwice checks the harness itself: two plain redis-servers
// fed the same sequence must never differ, in RESP2 and RESP3.
func TestRun_SameServerTwice(t *testing.T) {
	for _, resp3 := range []bool{false, true} {
		a, b := testutil.StartRedis(t), testutil.StartRedis(t)
		res, err := Run(a.Addr, b.Addr, Config{Seed: 42, Steps: *steps, RESP3: resp3, MaxValue: 256 << 10})
		if err != nil {
			t.Fatalf("resp3=%v: %v", resp3, err)
		}
		if res.Commands < *steps || len(res.ByCommand) < 40 {
			t.Fatalf("resp3=%v: ran %d commands of %d kinds; the generator should cover more", resp3, res.Commands, len(res.ByCommand))
		}
	}
}

// TestRun_DetectsDifference makes sure a real difference is reported: B
// starts with a key that A lacks.
func TestRun_DetectsDifference(t *testing.T) {
	a, b := testutil.StartRedis(t), testutil.StartRedis(t)
	c, err := dial(b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	c.send([][]string{{"SET", "s:3", "only on B"}, {"HSET", "h:1", "f1", "x"}, {"RPUSH", "l:2", "y"}})
	for i := 0; i < 3; i++ {
		ReadReply(c.r)
	}
	c.Close()
	_, err = Run(a.Addr, b.Addr, Config{Seed: 7, Steps: 2000, MaxValue: 4096})
	m, ok := err.(*Mismatch)
	if !ok {
		t.Fatalf("want a *Mismatch, got %v", err)
	}
	if !strings.Contains(m.Error(), "A:") {
		t.Fatalf("mismatch text: %v", m)
	}
}

func TestReadReply(t *testing.T) {
	in := "*3\r\n$3\r\nfoo\r\n$-1\r\n%1\r\n+k\r\n:1\r\n|1\r\n+a\r\n+b\r\n,1.5\r\n_\r\n"
	r := bufio.NewReader(strings.NewReader(in))
	want := []string{`*[$"foo" $nil %[+"k" :"1"]]`, `,[|[+"a" +"b"]]`, `_nil`}
	for _, w := range want {
		rep, err := ReadReply(r)
		if err != nil {
			t.Fatal(err)
		}
		if rep.String() != w {
			t.Errorf("got %s, want %s", rep, w)
		}
	}
	if _, err := ReadReply(bufio.NewReader(strings.NewReader("?x\r\n"))); err == nil {
		t.Error("unknown type accepted")
	}
}

// TestRunMulti_SameServerTwice checks the multi-client harness: two plain
// redis-servers playing the same scenes never differ, and every kind of
// scene is played.
func TestRunMulti_SameServerTwice(t *testing.T) {
	a, b := testutil.StartRedis(t), testutil.StartRedis(t)
	n, err := RunMulti(a.Addr, b.Addr, MultiConfig{Seed: 42, Scenes: 40, MaxValue: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if n != 40 {
		t.Fatalf("played %d scenes of 40", n)
	}
	g := &multiGen{r: newMultiRand(42), max: 1024}
	kinds := map[string]bool{}
	for i := range 40 {
		kinds[g.scene(i).name] = true
	}
	if len(kinds) != 4 {
		t.Fatalf("scene kinds in 40 scenes: %v", kinds)
	}
}

// TestRunMulti_DetectsDifference: a push only one server sends is found.
func TestRunMulti_DetectsDifference(t *testing.T) {
	a, b := testutil.StartRedis(t), testutil.StartRedis(t)
	c, err := dial(b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	// A subscriber on B only: PUBLISH counts one more receiver there.
	c.send([][]string{{"PSUBSCRIBE", "*"}})
	ReadReply(c.r)
	defer c.Close()
	_, err = RunMulti(a.Addr, b.Addr, MultiConfig{Seed: 3, Scenes: 40, MaxValue: 1024})
	if _, ok := err.(*Mismatch); !ok {
		t.Fatalf("want a *Mismatch, got %v", err)
	}
}
