package difftest

import (
	"strconv"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestPlayGap_SpacesSends plays a scene of sends from two clients with a
// gap on a real redis-server: the sends keep their order and their
// distance (the play takes at least the gaps), and the replies are
// Redis's.
func TestPlayGap_SpacesSends(t *testing.T) {
	r := testutil.StartRedis(t)
	const n = 20
	sc := scene{name: "gap", clients: 2}
	for i := range n {
		sc.acts = append(sc.acts, action{client: i % 2, send: []string{"RPUSH", "gap:list", strconv.Itoa(i)}})
	}
	for i := range n {
		sc.acts = append(sc.acts, action{client: i % 2, read: true})
	}
	sc.acts = append(sc.acts, action{client: 0, send: []string{"LRANGE", "gap:list", "0", "-1"}}, action{client: 0, read: true})
	const gap = 2 * time.Millisecond
	start := time.Now()
	out, err := playGap(r.Addr, sc, 10*time.Second, gap)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < n*gap {
		t.Errorf("%d sends %v apart took %v", n+1, gap, took)
	}
	if len(out) != n+1 {
		t.Fatalf("got %d records, want %d", len(out), n+1)
	}
	// The client of each RPUSH was told the list's length after it: the
	// sends ran in the order they were made.
	for i := range n {
		if want := strconv.Itoa(i%2) + ` :"` + strconv.Itoa(i+1) + `"`; out[i] != want {
			t.Errorf("record %d = %q, want %q", i, out[i], want)
		}
	}
}
