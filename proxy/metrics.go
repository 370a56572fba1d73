package proxy

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/squeeze-kv/squeeze/codec"
)

// Metrics are the proxy's Prometheus collectors. A nil *Metrics records
// nothing. Register them with NewMetrics.
type Metrics struct {
	conns        prometheus.Gauge
	connsTotal   prometheus.Counter
	commands     *commandCollector      // squeeze_proxy_commands_total and _command_seconds
	bytesIn      *prometheus.CounterVec // original bytes of values written, by codec
	bytesStored  *prometheus.CounterVec // stored bytes of values written, by codec
	values       *prometheus.CounterVec // by outcome: compressed, raw, wrapped, decoded
	decodeErrors prometheus.Counter
	quarantine   *prometheus.CounterVec
	dropped      *prometheus.CounterVec
	upErrors     *prometheus.CounterVec
	redirects    *prometheus.CounterVec
	failovers    prometheus.Counter
	streams      prometheus.Counter
	parks        prometheus.Counter
	expired      prometheus.Counter
	streamBytes  prometheus.Counter
	passed       *prometheus.CounterVec
	reloads      *prometheus.CounterVec
	upstreamInfo *prometheus.GaugeVec
	scriptPrefix *prometheus.GaugeVec   // by prefix: its last use by a script
	scriptEvents *prometheus.CounterVec // prefixes learned and forgotten
	// Pre-resolved children keep the hot path free of label lookups.
	outcome  [3]prometheus.Counter
	decodedC prometheus.Counter
	byCmd    sync.Map // command name -> *commandStats
	// scriptSet: the prefixes scriptPrefix has a series of.
	scriptSet sync.Map
	// byID holds the stats of the defined commands by cmdInfo.id,
	// resolved on first use: no hashing of the name per command.
	byID []atomic.Pointer[commandStats]
}

// NewMetrics creates the proxy's collectors and registers them with reg
// (prometheus.DefaultRegisterer when nil). The byte counters are labelled
// by the codec that wrote the values; alg's series are created at once.
func NewMetrics(reg prometheus.Registerer, alg codec.Algorithm) *Metrics {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	m := &Metrics{
		conns:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "squeeze_proxy_connections", Help: "Client connections open now."}),
		connsTotal:   prometheus.NewCounter(prometheus.CounterOpts{Name: "squeeze_proxy_connections_total", Help: "Client connections accepted."}),
		commands:     newCommandCollector(),
		bytesIn:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "squeeze_proxy_value_bytes_original_total", Help: "Bytes of values clients wrote, before compression."}, []string{"codec"}),
		bytesStored:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "squeeze_proxy_value_bytes_stored_total", Help: "Bytes of those values as sent to Redis, after compression."}, []string{"codec"}),
		values:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "squeeze_proxy_values_total", Help: "Values written, by outcome: compressed, raw (too small or incompressible), wrapped (raw but began with the frame magic); and decoded on reads."}, []string{"outcome"}),
		decodeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "squeeze_proxy_decode_errors_total", Help: "Stored values that failed to decode (corrupt, checksum, too large); the client got an error."}),
		quarantine:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "squeeze_proxy_quarantined_total", Help: "Undecodable values that a destructive read (LPOP, GETDEL ...) took out of Redis, by outcome: kept (under a squeeze:quarantine: key) or lost (the write failed or the queue was full)."}, []string{"outcome"}),
		dropped:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "squeeze_proxy_clients_dropped_total", Help: "Client connections the proxy closed because they held more unread replies than a bound allows, by bound: client-buffer-limit or max-memory."}, []string{"bound"}),
		upErrors:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "squeeze_proxy_upstream_errors_total", Help: "Upstream failures, by kind: dial, tls, conn."}, []string{"kind"}),
		failovers:    prometheus.NewCounter(prometheus.CounterOpts{Name: "squeeze_proxy_sentinel_failovers_total", Help: "Master switches announced by Redis Sentinel (sentinel:// upstreams); each closes the upstream connections."}),
		expired:      prometheus.NewCounter(prometheus.CounterOpts{Name: "squeeze_proxy_order_barriers_expired_total", Help: "Order barriers ended after holding other clients' commands for 250 ms as the oldest (a command Redis kept waiting, by CLIENT PAUSE or a long run): the commands after it were then ordered as they reached Redis."}),
		parks:        prometheus.NewCounter(prometheus.CounterOpts{Name: "squeeze_proxy_upstream_parked_total", Help: "Shared upstream connections Redis held (a CLIENT PAUSE) that the proxy set aside, sending other clients' commands on a new one meanwhile."}),
		streams:      prometheus.NewCounter(prometheus.CounterOpts{Name: "squeeze_proxy_streamed_values_total", Help: "SET values of 1 MiB or more stored as they are, passed to Redis as they arrived instead of whole."}),
		streamBytes:  prometheus.NewCounter(prometheus.CounterOpts{Name: "squeeze_proxy_streamed_bytes_total", Help: "Bytes of the values counted in squeeze_proxy_streamed_values_total."}),
		passed:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "squeeze_proxy_passed_replies_total", Help: "Replies of one raw value of 64 KiB or more passed from Redis to the client as they arrived, by outcome: whole, or stored (the client read too slowly: the rest was read into memory and written from there)."}, []string{"outcome"}),
		reloads:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "squeeze_proxy_config_reloads_total", Help: "Reloads of the write policy (SIGHUP), by outcome: ok, or failed (the policy in force is unchanged)."}, []string{"outcome"}),
		redirects:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "squeeze_proxy_cluster_redirects_total", Help: "Redis Cluster redirections and topology replies, by outcome: rewritten (to name the proxy in front of the node) or refused (no proxy address for the node)."}, []string{"outcome"}),
		upstreamInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "squeeze_proxy_upstream_info", Help: "The server behind the upstream, as INFO server names it when the proxy starts: 1 for its name (Redis, Valkey) and version."}, []string{"server", "version"}),
		scriptPrefix: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "squeeze_proxy_script_prefix_last_use_seconds", Help: "Key prefixes whose values are stored uncompressed because scripts use them (see squeeze:script-prefixes), one series each: the Unix time a script last declared a key of it. Compressed again after --script-prefix-ttl without use."}, []string{"prefix"}),
		scriptEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "squeeze_proxy_script_prefix_changes_total", Help: "Key prefixes kept uncompressed because scripts use them, by change: learned (from then on stored uncompressed) or forgotten (unused for --script-prefix-ttl: compressed again)."}, []string{"change"}),
	}
	reg.MustRegister(m.conns, m.connsTotal, m.commands, m.bytesIn, m.bytesStored, m.values, m.decodeErrors, m.quarantine, m.dropped, m.upErrors, m.redirects, m.failovers, m.parks, m.expired, m.streams, m.streamBytes, m.passed, m.reloads, m.upstreamInfo, m.scriptPrefix, m.scriptEvents)
	m.outcome[codec.Compressed] = m.values.WithLabelValues("compressed")
	m.outcome[codec.StoredRaw] = m.values.WithLabelValues("raw")
	m.outcome[codec.Wrapped] = m.values.WithLabelValues("wrapped")
	m.byteCounters(alg.String()) // the series exist from the start
	m.byID = make([]atomic.Pointer[commandStats], commandCount+1)
	m.decodedC = m.values.WithLabelValues("decoded")
	return m
}

func (m *Metrics) encoded(o codec.Outcome) {
	if m == nil {
		return
	}
	if int(o) < len(m.outcome) {
		m.outcome[o].Inc()
	}
}

// byteCounters returns the counters of the original and stored bytes of
// the values a codec wrote.
func (m *Metrics) byteCounters(codec string) (orig, stored prometheus.Counter) {
	return m.bytesIn.WithLabelValues(codec), m.bytesStored.WithLabelValues(codec)
}

func (m *Metrics) decoded(id codec.ID, stored, orig int) {
	if m == nil {
		return
	}
	m.decodedC.Inc()
}

func (m *Metrics) quarantined(outcome string) {
	if m != nil {
		m.quarantine.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) clientDropped(bound string) {
	if m != nil {
		m.dropped.WithLabelValues(bound).Inc()
	}
}

func (m *Metrics) decodeError() {
	if m != nil {
		m.decodeErrors.Inc()
	}
}

// clusterRedirect counts a -MOVED, -ASK or CLUSTER topology reply the
// proxy rewrote (or refused, when it had no proxy address for a node).
func (m *Metrics) clusterRedirect(rewritten bool) {
	if m != nil {
		m.redirects.WithLabelValues(map[bool]string{true: "rewritten", false: "refused"}[rewritten]).Inc()
	}
}

// UpstreamServer records the server behind the upstream (name such as
// Redis or Valkey, and version) in squeeze_proxy_upstream_info, replacing
// what an earlier call recorded.
func (m *Metrics) UpstreamServer(name, version string) {
	if m == nil {
		return
	}
	m.upstreamInfo.Reset()
	m.upstreamInfo.WithLabelValues(name, version).Set(1)
}

// Reloaded counts a reload of the write policy (squeeze proxy on SIGHUP)
// that succeeded (ok) or failed and left the policy in force unchanged.
func (m *Metrics) Reloaded(ok bool) {
	if m != nil {
		m.reloads.WithLabelValues(map[bool]string{true: "ok", false: "failed"}[ok]).Inc()
	}
}

// scriptPrefixLearned records a prefix kept plain for scripts, last used
// at ms (Unix ms); a new one counts as learned.
func (m *Metrics) scriptPrefixLearned(prefix string, ms int64) {
	if m == nil {
		return
	}
	g, err := m.scriptPrefix.GetMetricWithLabelValues(prefix)
	if err != nil {
		return
	}
	if ms > 0 {
		g.Set(float64(ms) / 1000)
	}
	if !m.scriptSeen(prefix, true) {
		m.scriptEvents.WithLabelValues("learned").Inc()
	}
}

// scriptPrefixForgotten records a prefix compressed again.
func (m *Metrics) scriptPrefixForgotten(prefix string) {
	if m == nil {
		return
	}
	m.scriptPrefix.DeleteLabelValues(prefix)
	if m.scriptSeen(prefix, false) {
		m.scriptEvents.WithLabelValues("forgotten").Inc()
	}
}

// scriptSeen records whether prefix is kept plain and returns whether it
// was.
func (m *Metrics) scriptSeen(prefix string, now bool) bool {
	if now {
		_, was := m.scriptSet.LoadOrStore(prefix, struct{}{})
		return was
	}
	_, was := m.scriptSet.LoadAndDelete(prefix)
	return was
}

func (m *Metrics) failover() {
	if m != nil {
		m.failovers.Inc()
	}
}

// streamed counts a value of size bytes that streamed (stream.go).
func (m *Metrics) streamed(size int64) {
	if m != nil {
		m.streams.Inc()
		m.streamBytes.Add(float64(size))
	}
}

func (m *Metrics) passedReply(outcome string) {
	if m != nil {
		m.passed.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) upstreamError(kind string) {
	if m != nil {
		m.upErrors.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) connOpened() {
	if m != nil {
		m.conns.Inc()
		m.connsTotal.Inc()
	}
}

func (m *Metrics) connClosed() {
	if m != nil {
		m.conns.Dec()
	}
}

// statsOf returns the stats of a command whose cmdInfo.id is id (0: look
// it up by name), or nil when m is nil.
func (m *Metrics) statsOf(id int32, name string) *commandStats {
	if m == nil {
		return nil
	}
	if id <= 0 || int(id) >= len(m.byID) {
		return m.stats(name)
	}
	s := m.byID[id].Load()
	if s == nil {
		s = m.stats(name)
		m.byID[id].Store(s)
	}
	return s
}

// stats returns the stats of a command's label, made on first use.
func (m *Metrics) stats(name string) *commandStats {
	v, ok := m.byCmd.Load(name)
	if !ok {
		var loaded bool
		v, loaded = m.byCmd.LoadOrStore(name, &commandStats{name: name})
		if !loaded {
			m.commands.add(v.(*commandStats))
		}
	}
	return v.(*commandStats)
}

// commandByID counts one command whose cmdInfo.id is id (0: by name)
// that took d.
func (m *Metrics) commandByID(id int32, name string, d time.Duration) {
	if m != nil {
		m.statsOf(id, name).observe(d, 1)
	}
}

// command counts one command that took d.
func (m *Metrics) command(name string, d time.Duration) {
	if m != nil {
		m.stats(name).observe(d, 1)
	}
}

func (m *Metrics) orderExpired() {
	if m != nil {
		m.expired.Inc()
	}
}

func (m *Metrics) parked() {
	if m != nil {
		m.parks.Inc()
	}
}
