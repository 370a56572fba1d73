package client

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestHook_SetAllocs: compressing a SET's value costs no allocation of the
// value's size once the frame pool is warm (the frame is recycled after the
// send); what remains is boxing the frame into the command's []any.
func TestHook_SetAllocs(t *testing.T) {
	h, err := NewHook(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	val := big("allocs")
	cmd := redis.NewStatusCmd(ctx, "set", "k", val)
	run := func() {
		p, err := h.prepare(ctx, cmd)
		if err != nil || p.nsaved != 1 {
			t.Fatalf("prepare: %v, %d args replaced", err, p.nsaved)
		}
		h.undo(cmd, p)
	}
	run()
	if n := testing.AllocsPerRun(100, run); n > 1 {
		t.Fatalf("%v allocations per compressed SET, want at most 1", n)
	}
	if cmd.Args()[2] != val {
		t.Fatal("args not restored")
	}
}
