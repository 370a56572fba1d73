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
// (bigreply.go). Before, each allocated and zeroed 9-13 MB, and the
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

// TestHugeBuffers: a buffer above 16 MiB put back comes out again while
// such buffers are in use, and is let go (its memory returned to the
// system) once none was asked for in hugeIdle, so that an idle proxy does
// not stay as large as the largest value it carried.
func TestHugeBuffers(t *testing.T) {
	b := getBig(40 << 20)
	if cap(b) != 64<<20 {
		t.Fatalf("getBig(40 MiB): cap %d, want the 64 MiB class", cap(b))
	}
	b = append(b, 'x')
	first := &b[0]
	hugeMu.Lock()
	trimmed := hugeTrimmed
	hugeMu.Unlock()
	putBig(b)
	again := getBig(50 << 20)
	if &again[:1][0] != first {
		t.Fatal("a 64 MiB buffer put back did not come out again for the next request of its class")
	}
	putBig(again)
	for deadline := time.Now().Add(10 * hugeIdle); ; time.Sleep(hugeIdle / 10) {
		hugeMu.Lock()
		kept, n := len(hugeKept[26]), hugeTrimmed
		hugeMu.Unlock()
		if kept == 0 && n > trimmed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d buffers of 64 MiB still kept, %d trims, %v after the last use", kept, n-trimmed, 10*hugeIdle)
		}
	}
	hugeMu.Lock()
	defer hugeMu.Unlock()
	if hugeKeptN != 0 {
		t.Fatalf("%d bytes of huge buffers kept after the trim", hugeKeptN)
	}
}

// TestBigBuffers: getBig gives room for what is asked, and a buffer put
// back comes out again for a request of its class.
func TestBigBuffers(t *testing.T) {
	for _, n := range []int{1, 100 << 10, 256 << 10, 256<<10 + 1, 4_200_000, 10_000_000, 40 << 20} {
		b := getBig(n)
		if len(b) != 0 || cap(b) < n {
			t.Fatalf("getBig(%d): len %d cap %d", n, len(b), cap(b))
		}
		putBig(b)
	}
	b := getBig(4_200_000)
	b = append(b, 'x')
	putBig(b)
	kept := bigKeptN.Load()
	if again := getBig(5_000_000); cap(again) != 8<<20 || bigKeptN.Load() != kept-8<<20 {
		t.Fatalf("a 5 MB request after putting back an 8 MiB buffer: cap %d, kept %d -> %d bytes", cap(again), kept, bigKeptN.Load())
	}
	if got := upstreamGrowth(32<<10, 4_200_000); got < 4_200_000 {
		t.Fatalf("upstreamGrowth to a 4.2 MB reply: %d", got)
	}
	if got := upstreamGrowth(32<<10, 0); got != 64<<10 {
		t.Fatalf("upstreamGrowth without a hint: %d, want it doubled", got)
	}
}
