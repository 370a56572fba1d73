package proxy

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/resp"
)

// TestProxy_LargeValuesPipelined: values of several MB, compressible and
// random, pipelined with small commands in one write and also trickled in
// small pieces, give the same replies through the proxy as from Redis. It
// covers the read buffers that grow at once to a pending large argument or
// reply, and the large replies handed to their calls with the replies
// behind them moved to a new buffer.
func TestProxy_LargeValuesPipelined(t *testing.T) {
	e := startEnv(t)
	random := make([]byte, 3<<20)
	rand.NewChaCha8([32]byte{7}).Read(random)
	big := compressible(5<<20, 3)
	var req []byte
	add := func(args ...string) {
		b := make([][]byte, len(args))
		for i, a := range args {
			b[i] = []byte(a)
		}
		req = resp.AppendCommand(req, b...)
	}
	add("SET", "big", big)
	add("SET", "small", "v")
	add("SET", "random", string(random))
	add("GET", "big")
	add("GET", "small")
	add("GET", "random")
	add("MGET", "big", "small", "random", "none")
	add("SET", "big", strings.ToUpper(big), "GET")
	add("RPUSH", "list", big, string(random), "x")
	add("LRANGE", "list", "0", "-1")
	add("STRLEN", "big")
	add("GETRANGE", "random", "1000000", "1000010")
	add("PING")
	const commands = 13

	exchange := func(addr string, pieces int) []string {
		c := dialRaw(t, addr)
		c.send([]string{"FLUSHDB"})
		if got := c.read(); got != "+OK\r\n" {
			t.Fatalf("FLUSHDB: %q", got)
		}
		go func() {
			// Write from another goroutine: replies fill the socket
			// buffers while requests are still being written.
			step := (len(req) + pieces - 1) / pieces
			for off := 0; off < len(req); off += step {
				c.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
				if _, err := c.nc.Write(req[off:min(off+step, len(req))]); err != nil {
					return // the reads below report the failure
				}
				if pieces > 1 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
		replies := make([]string, commands)
		for i := range replies {
			if replies[i] = c.read(); replies[i] == "" {
				t.Fatalf("%s: connection ended at reply %d", addr, i)
			}
		}
		return replies
	}
	for _, pieces := range []int{1, 300} {
		want := exchange(e.redis.Addr, pieces)
		got := exchange(e.addr, pieces)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%d pieces, reply %d through the proxy: %d bytes %.60q, want %d bytes %.60q",
					pieces, i, len(got[i]), got[i], len(want[i]), want[i])
			}
		}
		// The proxy stored the compressible values compressed.
		if stored := dialRaw(t, e.redis.Addr).do("STRLEN", "big"); !bytes.HasPrefix([]byte(stored), []byte(":")) || len(stored) > 9 {
			t.Fatalf("STRLEN big in Redis: %q, want a compressed frame well under 5 MB", stored)
		}
	}
}

// TestReadGrowth: a full read buffer doubles, jumps toward a large pending
// value, but never past 4n + 1 MiB, so a bare header cannot make the proxy
// allocate the size it announces.
func TestReadGrowth(t *testing.T) {
	tests := []struct{ n, need, want int }{
		{0, 0, 4 << 10},                           // empty: still grows
		{16 << 10, 0, 32 << 10},                   // unknown end: double
		{16 << 10, 20 << 10, 32 << 10},            // near: double
		{16 << 10, 10 << 20, 4*(16<<10) + 1<<20},  // far: jump, capped
		{4 << 20, 10 << 20, 10 << 20},             // within the cap: exactly the value
		{16 << 10, 512 << 20, 4*(16<<10) + 1<<20}, // a 512 MB header: about 1 MiB
		{64 << 20, 512 << 20, 4*(64<<20) + 1<<20}, // the cap grows with the data
		{300 << 20, 512 << 20, 600 << 20},         // the rest of a value that mostly came: double
	}
	for _, tt := range tests {
		if got := readGrowth(tt.n, tt.need); got != tt.want {
			t.Errorf("readGrowth(%d, %d) = %d, want %d", tt.n, tt.need, got, tt.want)
		}
	}
}
