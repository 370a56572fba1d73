package proxy

import (
	"bytes"
	"io"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/resp"
)

// TestProxy_PipelineAllocs: in steady state, a pipeline of 16 GETs and 16
// SETs through the proxy (read by the event loop, sent on the shared
// connection, replies written by its reader) allocates nothing: not the
// calls (pooled), not the queues, not the batch bookkeeping. Counted over
// the whole process, the test's own client included. With metrics on, the
// commands are counted without allocating either.
func TestProxy_PipelineAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	t.Run("metrics off", func(t *testing.T) { pipelineAllocs(t, false) })
	t.Run("metrics on", func(t *testing.T) { pipelineAllocs(t, true) })
}

func pipelineAllocs(t *testing.T, metrics bool) {
	e := startEnv(t, withMinSize(1<<30), func(s *Server) {
		if metrics {
			s.Metrics = NewMetrics(prometheus.NewRegistry(), codec.DefaultAlgorithm)
		}
	})
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var req, want []byte
	for range 16 {
		req = resp.AppendCommand(req, []byte("SET"), []byte("k"), []byte("value"))
		want = append(want, "+OK\r\n"...)
		req = resp.AppendCommand(req, []byte("GET"), []byte("k"))
		want = append(want, "$5\r\nvalue\r\n"...)
	}
	got := make([]byte, len(want))
	round := func() {
		if _, err := nc.Write(req); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(nc, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("reply %q, %v", got, err)
		}
	}
	for range 200 { // warm the pools, buffers and windows
		round()
	}
	if n := testing.AllocsPerRun(500, round); n > 0.5 {
		t.Fatalf("%v allocations per pipeline of 32 commands, want 0", n)
	}
}
