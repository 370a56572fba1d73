package proxy

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/resp"
)

// TestProxy_LargeValuesReuseBuffers: once warm, SET and GET of a 4.2 MB
// raw value through the proxy allocate next to nothing: the read buffers,
// the request and the reply come from the reused large buffers
// (internal/bufpool). Before, each allocated and zeroed 9-13 MB, and the
// collector ran every request or two.
func TestProxy_LargeValuesReuseBuffers(t *testing.T) {
	e := startEnv(t, withMinSize(1<<30))
	val := make([]byte, 4_200_000)
	rand.NewChaCha8([32]byte{21}).Read(val)
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(time.Minute))
	set := resp.AppendCommand(nil, []byte("SET"), []byte("doc"), val)
	get := resp.AppendCommand(nil, []byte("GET"), []byte("doc"))
	want := resp.AppendBulk(nil, val)
	reply := make([]byte, len(want))
	round := func() {
		if _, err := nc.Write(set); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(nc, reply[:5]); err != nil || string(reply[:5]) != "+OK\r\n" {
			t.Fatalf("SET: %q %v", reply[:5], err)
		}
		if _, err := nc.Write(get); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(nc, reply); err != nil || !bytes.Equal(reply, want) {
			t.Fatalf("GET: %v", err)
		}
	}
	for range 3 {
		round() // warm the buffers
	}
	// The least of three batches: the count is the process's, and other
	// tests' servers may still be winding down.
	const rounds = 5
	per := ^uint64(0)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range rounds {
			round()
		}
		runtime.ReadMemStats(&after)
		per = min(per, (after.TotalAlloc-before.TotalAlloc)/rounds)
	}
	t.Logf("%d bytes allocated per SET and GET of 4.2 MB", per)
	if per > 1<<20 {
		t.Fatalf("a SET and a GET of 4.2 MB allocate %d bytes; want under 1 MiB (the large buffers are not reused)", per)
	}
}

// TestUpstreamGrowth: the upstream reader's buffer grows at once to a
// large reply's whole size, and doubles without a hint.
func TestUpstreamGrowth(t *testing.T) {
	if got := upstreamGrowth(32<<10, 4_200_000); got < 4_200_000 {
		t.Fatalf("upstreamGrowth to a 4.2 MB reply: %d", got)
	}
	if got := upstreamGrowth(32<<10, 0); got != 64<<10 {
		t.Fatalf("upstreamGrowth without a hint: %d, want it doubled", got)
	}
}
