package proxy

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
	var nilMetrics *Metrics
	nilMetrics.command("GET", time.Second) // records nothing, no panic
	if allocs := testing.AllocsPerRun(100, func() { m.command("GET", time.Millisecond) }); allocs != 0 {
		t.Errorf("command allocates %v times per call", allocs)
	}
}
