package proxy

import (
	"math/bits"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The latency histogram's buckets: 25 µs doubling 16 times (to 0.82 s),
// and +Inf. latencyBucket computes a duration's bucket with integer
// arithmetic; latencyBounds are the same bounds in seconds for Collect.
const (
	latencyFirst   = 25 * time.Microsecond
	latencyBuckets = 16
)

var latencyBounds = prometheus.ExponentialBuckets(latencyFirst.Seconds(), 2, latencyBuckets)

// latencyBucket returns the index of the first bucket whose upper bound
// (inclusive, as in Prometheus) holds d; latencyBuckets for +Inf.
func latencyBucket(d time.Duration) int {
	if d <= latencyFirst {
		return 0
	}
	// d in (first*k, first*(k+1)] with k >= 1: the bound first*2^i
	// holds it for the least i with 2^i >= k+1, i.e. bits.Len(k).
	return min(bits.Len64(uint64((d-1)/latencyFirst)), latencyBuckets)
}

// commandStats are one command label's series of
// squeeze_proxy_commands_total and squeeze_proxy_command_seconds, kept in
// plain atomic counters that Collect reads. A prometheus.Histogram takes
// one observation at a time (four atomic operations and a search of its
// bounds each: 4% of the proxy's CPU at -P 16); the replies a client gets
// in one write were mostly read in one batch and are ready at one instant,
// so they share a latency, and observe counts them with two additions.
type commandStats struct {
	name    string
	sumNs   atomic.Uint64
	buckets [latencyBuckets + 1]atomic.Uint64 // not cumulative; the last is +Inf
}

// observe counts n commands that each took d.
func (s *commandStats) observe(d time.Duration, n uint64) {
	if d < 0 {
		d = 0
	}
	s.buckets[latencyBucket(d)].Add(n)
	s.sumNs.Add(uint64(d) * n)
}

// commandCollector exports every commandStats as a counter and a
// histogram. The count of both is the sum of the buckets, so that a scrape
// never shows a histogram whose count disagrees with its buckets.
type commandCollector struct {
	commandsDesc, latencyDesc *prometheus.Desc
	mu                        sync.Mutex
	stats                     []*commandStats // by first use; under mu
}

func newCommandCollector() *commandCollector {
	return &commandCollector{
		commandsDesc: prometheus.NewDesc("squeeze_proxy_commands_total",
			"Commands received, by command (OTHER for those the proxy passes through without knowing them).", []string{"cmd"}, nil),
		latencyDesc: prometheus.NewDesc("squeeze_proxy_command_seconds",
			"Time from reading a command to having its reply ready, by command.", []string{"cmd"}, nil),
	}
}

func (cc *commandCollector) add(s *commandStats) {
	cc.mu.Lock()
	cc.stats = append(cc.stats, s)
	cc.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (cc *commandCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cc.commandsDesc
	ch <- cc.latencyDesc
}

// Collect implements prometheus.Collector.
func (cc *commandCollector) Collect(ch chan<- prometheus.Metric) {
	cc.mu.Lock()
	stats := append([]*commandStats(nil), cc.stats...)
	cc.mu.Unlock()
	sort.Slice(stats, func(i, j int) bool { return stats[i].name < stats[j].name })
	for _, s := range stats {
		var count uint64
		cumulative := make(map[float64]uint64, latencyBuckets)
		for i := range s.buckets {
			count += s.buckets[i].Load()
			if i < latencyBuckets {
				cumulative[latencyBounds[i]] = count
			}
		}
		sum := time.Duration(s.sumNs.Load()).Seconds()
		ch <- prometheus.MustNewConstMetric(cc.commandsDesc, prometheus.CounterValue, float64(count), s.name)
		ch <- prometheus.MustNewConstHistogram(cc.latencyDesc, count, sum, cumulative, s.name)
	}
}

// pendingObs gathers the commands a client's replies complete, while they
// share a command and a latency, into one observation (client.emit); a
// client's owner of output flushes it before it gives ownership up.
type pendingObs struct {
	stats *commandStats
	d     time.Duration
	n     uint64
}

// note counts one command of stats that took d, flushing what was
// gathered if it differs.
func (p *pendingObs) note(stats *commandStats, d time.Duration) {
	if p.n > 0 && (p.stats != stats || p.d != d) {
		p.flush()
	}
	p.stats, p.d = stats, d
	p.n++
}

// flush records what was gathered.
func (p *pendingObs) flush() {
	if p.n > 0 {
		p.stats.observe(p.d, p.n)
		p.stats, p.n = nil, 0
	}
}
