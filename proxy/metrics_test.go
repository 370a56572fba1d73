package proxy

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/squeeze-kv/squeeze/codec"
)

// TestMetrics_Command counts commands and their latency per command name,
// with the label children resolved once and then reused.
func TestMetrics_Command(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, codec.DefaultAlgorithm)
	for range 3 {
		m.command("GET", time.Millisecond)
	}
	m.command("SET", 2*time.Millisecond)
	if got := testutil.ToFloat64(m.commands.WithLabelValues("GET")); got != 3 {
		t.Errorf("GET count %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.commands.WithLabelValues("SET")); got != 1 {
		t.Errorf("SET count %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.latency); n != 2 {
		t.Errorf("%d latency series, want 2", n)
	}
	// By the command's id: the same series, resolved once.
	get := commandTable["get"]
	m.commandByID(get.id, get.name, time.Millisecond)
	m.commandByID(0, "OTHER", time.Millisecond) // unknown: by name
	if got := testutil.ToFloat64(m.commands.WithLabelValues("GET")); got != 4 {
		t.Errorf("GET count %v after commandByID, want 4", got)
	}
	if got := testutil.ToFloat64(m.commands.WithLabelValues("OTHER")); got != 1 {
		t.Errorf("OTHER count %v, want 1", got)
	}
	if allocs := testing.AllocsPerRun(100, func() { m.commandByID(get.id, get.name, time.Millisecond) }); allocs != 0 {
		t.Errorf("commandByID allocates %v times per call", allocs)
	}
	var nilMetrics *Metrics
	nilMetrics.command("GET", time.Second) // records nothing, no panic
	nilMetrics.commandByID(get.id, get.name, time.Second)
	if allocs := testing.AllocsPerRun(100, func() { m.command("GET", time.Millisecond) }); allocs != 0 {
		t.Errorf("command allocates %v times per call", allocs)
	}
}

// TestMetrics_LatencyThroughProxy checks the latency histogram against
// real commands: a pipeline of GETs read in one batch is counted once per
// command, and a BLPOP that waits for its 0.2 s timeout is observed as
// taking at least that long, though the clock is read once per batch of
// commands and once per batch of replies.
func TestMetrics_LatencyThroughProxy(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, codec.DefaultAlgorithm)
	e := startEnv(t, func(s *Server) { s.Metrics = m })
	c := dialRaw(t, e.addr)
	var cmds [][]string
	for range 50 {
		cmds = append(cmds, []string{"GET", "k"})
	}
	c.send(cmds...)
	for range 50 {
		if got := c.read(); got != "$-1\r\n" {
			t.Fatalf("GET: %q", got)
		}
	}
	if got := c.do("BLPOP", "empty", "0.2"); got != "*-1\r\n" {
		t.Fatalf("BLPOP: %q", got)
	}
	hist := func(cmd string) (count uint64, sum float64) {
		var pb dto.Metric
		if err := m.latency.WithLabelValues(cmd).(prometheus.Histogram).Write(&pb); err != nil {
			t.Fatal(err)
		}
		return pb.GetHistogram().GetSampleCount(), pb.GetHistogram().GetSampleSum()
	}
	if n, sum := hist("GET"); n != 50 || sum < 0 || sum > 50*5 {
		t.Errorf("GET latency: %d observations, sum %v s; want 50, each short", n, sum)
	}
	if n, sum := hist("BLPOP"); n != 1 || sum < 0.2 || sum > 5 {
		t.Errorf("BLPOP latency: %d observations, sum %v s; want 1 of at least 0.2 s", n, sum)
	}
}
