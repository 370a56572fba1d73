package proxy

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/squeeze-kv/squeeze/codec"
)

// commandSeries returns what reg's scrape shows of cmd: its
// squeeze_proxy_commands_total, and the count and sum of its
// squeeze_proxy_command_seconds, with the histogram's buckets.
func commandSeries(t *testing.T, reg *prometheus.Registry, cmd string) (total float64, hist *dto.Histogram) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	hist = &dto.Histogram{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != cmd {
				continue
			}
			switch mf.GetName() {
			case "squeeze_proxy_commands_total":
				total = m.GetCounter().GetValue()
			case "squeeze_proxy_command_seconds":
				hist = m.GetHistogram()
			}
		}
	}
	return total, hist
}

// TestMetrics_Command counts commands and their latency per command name,
// with the stats resolved once and then reused, and shows them in a
// scrape as a counter and a histogram whose counts agree.
func TestMetrics_Command(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, codec.DefaultAlgorithm)
	for range 3 {
		m.command("GET", time.Millisecond)
	}
	m.command("SET", 2*time.Millisecond)
	if got, h := commandSeries(t, reg, "GET"); got != 3 || h.GetSampleCount() != 3 || h.GetSampleSum() != 0.003 {
		t.Errorf("GET count %v, histogram %d observations summing to %v s; want 3, 3, 0.003", got, h.GetSampleCount(), h.GetSampleSum())
	}
	if got, _ := commandSeries(t, reg, "SET"); got != 1 {
		t.Errorf("SET count %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.commands, "squeeze_proxy_command_seconds"); n != 2 {
		t.Errorf("%d latency series, want 2", n)
	}
	// By the command's id: the same series, resolved once.
	get := commandTable["get"]
	m.commandByID(get.id, get.name, time.Millisecond)
	m.commandByID(0, "OTHER", time.Millisecond) // unknown: by name
	if got, _ := commandSeries(t, reg, "GET"); got != 4 {
		t.Errorf("GET count %v after commandByID, want 4", got)
	}
	if got, _ := commandSeries(t, reg, "OTHER"); got != 1 {
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

// TestMetrics_PendingObs: replies emitted together are counted once per
// run of the same command and latency, and nothing is lost at a change
// or a flush.
func TestMetrics_PendingObs(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, codec.DefaultAlgorithm)
	get, set := m.stats("GET"), m.stats("SET")
	var p pendingObs
	for range 16 {
		p.note(get, 100*time.Microsecond)
	}
	p.note(set, 100*time.Microsecond)
	p.note(get, 3*time.Millisecond)
	if got, _ := commandSeries(t, reg, "GET"); got != 16 {
		t.Errorf("GET count %v before the flush, want the 16 of the first run", got)
	}
	p.flush()
	p.flush() // nothing more
	_, h := commandSeries(t, reg, "GET")
	if h.GetSampleCount() != 17 || math.Abs(h.GetSampleSum()-0.0046) > 1e-9 {
		t.Errorf("GET: %d observations summing to %v s, want 17 summing to 0.0046", h.GetSampleCount(), h.GetSampleSum())
	}
	if got, _ := commandSeries(t, reg, "SET"); got != 1 {
		t.Errorf("SET count %v, want 1", got)
	}
	if allocs := testing.AllocsPerRun(100, func() { p.note(get, time.Millisecond); p.note(set, time.Millisecond) }); allocs != 0 {
		t.Errorf("note allocates %v times per call", allocs)
	}
}

// TestLatencyBucket puts durations in the buckets Prometheus would (an
// upper bound holds its own value) for every bound and its neighbours.
func TestLatencyBucket(t *testing.T) {
	want := func(d time.Duration) int {
		for i, b := range latencyBounds {
			if d.Seconds() <= b {
				return i
			}
		}
		return latencyBuckets
	}
	ds := []time.Duration{-time.Second, 0, 1, time.Hour}
	for i := range latencyBuckets + 1 {
		b := latencyFirst << i
		ds = append(ds, b-1, b, b+1)
	}
	for _, d := range ds {
		if got := latencyBucket(d); got != want(d) {
			t.Errorf("latencyBucket(%v) = %d, want %d", d, got, want(d))
		}
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
		_, h := commandSeries(t, reg, cmd)
		return h.GetSampleCount(), h.GetSampleSum()
	}
	if n, sum := hist("GET"); n != 50 || sum < 0 || sum > 50*5 {
		t.Errorf("GET latency: %d observations, sum %v s; want 50, each short", n, sum)
	}
	if n, sum := hist("BLPOP"); n != 1 || sum < 0.2 || sum > 5 {
		t.Errorf("BLPOP latency: %d observations, sum %v s; want 1 of at least 0.2 s", n, sum)
	}
}
