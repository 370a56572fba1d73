package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/squeeze-kv/squeeze/internal/units"
	"github.com/squeeze-kv/squeeze/proxy"
)

// checkTimeout bounds the round trip to the upstream in --check.
const checkTimeout = 5 * time.Second

// certWarnBefore is how close to its expiry a certificate makes --check
// warn.
const certWarnBefore = 14 * 24 * time.Hour

// checkProxy is "squeeze proxy --check": the settings, read as a proxy
// would read them at start, are already parsed, and srv is built from them
// (codec, rules, dictionaries loaded from the upstream). It checks what a
// start would not until the first client: the listen and metrics
// addresses parse, the certificates are in date, and the upstream answers
// PING over a connection made as the proxy makes them (TLS, AUTH, SELECT).
// It prints the settings in force and returns nil, or the first failure.
// It listens on nothing, so it can check the config file of a proxy that
// is running (before a SIGHUP) as well as one about to start.
func checkProxy(ctx context.Context, w io.Writer, p *proxyFlags, srv *proxy.Server, listenCfg *tls.Config, certs *listenTLS, procs int, now time.Time) error {
	defer srv.Close()
	if err := checkAddr("--listen", p.listen); err != nil {
		return err
	}
	if p.metrics != "" {
		if err := checkAddr("--metrics", p.metrics); err != nil {
			return err
		}
	}
	var warnings []string
	if w := p.remoteClientsWarning(); w != "" {
		if p.allowRemote {
			w += " (--allow-remote-clients)"
		} else {
			w += ": the proxy will not start so unless --client-auth require or --allow-remote-clients is given"
		}
		warnings = append(warnings, w)
	}
	certLine := func(flag string, c *tls.Certificate) (string, error) {
		leaf := c.Leaf
		if leaf == nil && len(c.Certificate) > 0 {
			var err error
			if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
				return "", fmt.Errorf("%s: %w", flag, err)
			}
		}
		if leaf == nil {
			return "", fmt.Errorf("%s: no certificate", flag)
		}
		switch left := leaf.NotAfter.Sub(now); {
		case left <= 0:
			return "", fmt.Errorf("%s: the certificate (%s) expired on %s", flag, leaf.Subject, leaf.NotAfter.UTC().Format(time.DateOnly))
		case now.Before(leaf.NotBefore):
			return "", fmt.Errorf("%s: the certificate (%s) is not valid before %s", flag, leaf.Subject, leaf.NotBefore.UTC().Format(time.DateTime))
		case left < certWarnBefore:
			warnings = append(warnings, fmt.Sprintf("%s: the certificate (%s) expires in %d days", flag, leaf.Subject, int(left.Hours()/24)))
		}
		return fmt.Sprintf("%s, valid until %s", leaf.Subject, leaf.NotAfter.UTC().Format(time.DateOnly)), nil
	}
	listenTLSLine := "off"
	if certs != nil {
		line, err := certLine("--tls-cert", certs.cert.Load())
		if err != nil {
			return err
		}
		listenTLSLine = line
		if listenCfg.ClientCAs != nil {
			listenTLSLine += "; client certificates required (--tls-client-ca)"
		}
	}
	upstreamCert := ""
	if u, err := proxy.ParseUpstream(p.upstream); err == nil && u.TLS == nil && srv.TLSConfig != nil {
		warnings = append(warnings, fmt.Sprintf("--upstream-ca, --upstream-cert and --upstream-key are for a rediss:// upstream; %s does not use them", redactURL(p.upstream)))
	}
	if srv.TLSConfig != nil && len(srv.TLSConfig.Certificates) > 0 {
		line, err := certLine("--upstream-cert", &srv.TLSConfig.Certificates[0])
		if err != nil {
			return err
		}
		upstreamCert = line
	}

	if p.maxMemory > 0 && int64(p.maxValue) > int64(p.maxMemory)/2 {
		warnings = append(warnings, fmt.Sprintf("--max-value %s is over half of --max-memory %s: one value decoded at its largest takes more than the bound leaves room for", p.maxValue.String(), p.maxMemory.String()))
	}
	if name := laterCodec(srv.Encoder, srv.Rules); name != "" {
		warnings = append(warnings, name+": "+laterCodecWarning)
	}

	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	start := time.Now()
	if err := srv.Ready(cctx); err != nil {
		return fmt.Errorf("upstream %s: %w", redactURL(p.upstream), err)
	}
	rtt := time.Since(start)
	server, err := upstreamServer(cctx, p, srv)
	serverLine := server.String()
	if err != nil {
		serverLine = "unknown (" + err.Error() + ")"
	} else if w := server.untested(); w != "" {
		warnings = append(warnings, w)
	}
	bulkLine, bulkWarning := checkMaxBulk(cctx, p, srv)
	if bulkWarning != "" {
		warnings = append(warnings, bulkWarning)
	}

	prefixes, err := upstreamScriptPrefixes(cctx, p, srv)
	if err != nil {
		warnings = append(warnings, "key prefixes scripts use: "+err.Error())
	}

	inForce, _ := srv.MaxBulkInForce()
	res := checkResult{
		ScriptPrefixes: prefixes, ScriptPrefixTTL: ttlString(p.scriptPrefixTTL),
		OK: true, Listen: p.listen, ClientTLS: listenTLSLine, ClientAuth: p.clientAuth,
		Upstream: redactURL(p.upstream), PingMicros: float64(rtt.Nanoseconds()) / 1e3, Server: serverLine, UpstreamCert: upstreamCert,
		Codec: codecLabel(srv.Encoder), MinSizeBytes: int64(p.minSize), MinGain: p.minGain, Dict: p.dict,
		MaxValueBytes: int64(p.maxValue), MaxBulkBytes: inForce, MaxBulk: bulkLine,
		Scripts: p.scripts, ListSearch: p.listSearch, Procs: procs, Metrics: p.metrics, Warnings: warnings,
		ClientBufferBytes: int64(p.clientBuffer), ClientBufferLimitBytes: srv.ClientBufferLimitInForce(), MaxMemoryBytes: int64(p.maxMemory),
	}
	if rules := p.rules.String(); rules != "" {
		res.Rules = strings.Split(rules, ";")
	}
	if res.Warnings == nil {
		res.Warnings = []string{}
	}
	if p.jsonOut {
		return writeJSON(w, res)
	}
	fmt.Fprintln(w, "squeeze proxy --check: ok")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name, value string) { fmt.Fprintf(tw, "  %s\t%s\n", name, value) }
	row("listen", res.Listen)
	row("client TLS", res.ClientTLS)
	row("client auth", res.ClientAuth)
	row("upstream", fmt.Sprintf("%s (answered PING in %s)", res.Upstream, rtt.Round(10*time.Microsecond)))
	row("server", serverLine)
	if upstreamCert != "" {
		row("upstream cert", upstreamCert)
	}
	row("codec", fmt.Sprintf("%s, min-size %s, min-gain %g", res.Codec, p.minSize.String(), p.minGain))
	row("dict", res.Dict)
	if len(res.Rules) > 0 {
		row("rules", strings.Join(res.Rules, ";"))
	}
	row("max-value", p.maxValue.String())
	row("max-bulk", bulkLine)
	row("buffers", fmt.Sprintf("client-buffer %s (stop reading), client-buffer-limit %s (close)", p.clientBuffer.String(), sizeString(srv.ClientBufferLimitInForce())))
	row("max-memory", maxMemoryLine(p.maxMemory))
	row("scripts", res.Scripts+"; "+scriptPrefixesLine(prefixes, p.scriptPrefixTTL, now))
	row("list-search", res.ListSearch)
	row("procs", fmt.Sprint(procs))
	if p.metrics != "" {
		row("metrics", p.metrics)
	}
	tw.Flush()
	for _, wn := range warnings {
		fmt.Fprintln(w, "warning:", wn)
	}
	return nil
}

// checkResult is what --check --json prints: the settings in force, as
// the text output gives them, with sizes in bytes.
type checkResult struct {
	OK            bool     `json:"ok"`
	Listen        string   `json:"listen"`
	ClientTLS     string   `json:"client_tls"` // "off", or the certificate's subject and expiry
	ClientAuth    string   `json:"client_auth"`
	Upstream      string   `json:"upstream"` // the URL, password hidden
	PingMicros    float64  `json:"ping_us"`
	Server        string   `json:"server"` // "Redis 8.0.2", "Valkey 8.0.1", or "unknown (why)"
	UpstreamCert  string   `json:"upstream_cert,omitempty"`
	Codec         string   `json:"codec"`
	MinSizeBytes  int64    `json:"min_size_bytes"`
	MinGain       float64  `json:"min_gain"`
	Dict          string   `json:"dict"`
	Rules         []string `json:"rules,omitempty"`
	MaxValueBytes int64    `json:"max_value_bytes"`
	MaxBulkBytes  int64    `json:"max_bulk_bytes"` // the limit in force
	MaxBulk       string   `json:"max_bulk"`       // where it comes from
	Scripts       string   `json:"scripts"`
	// ScriptPrefixes: the key prefixes stored uncompressed because
	// scripts use them (squeeze:script-prefixes), with their last use.
	ScriptPrefixes  []checkScriptPrefix `json:"script_prefixes"`
	ScriptPrefixTTL string              `json:"script_prefix_ttl"` // "never" or a duration
	ListSearch      string              `json:"list_search"`
	Procs           int                 `json:"procs"`

	ClientBufferBytes      int64    `json:"client_buffer_bytes"`
	ClientBufferLimitBytes int64    `json:"client_buffer_limit_bytes"`
	MaxMemoryBytes         int64    `json:"max_memory_bytes"` // 0: no bound
	Metrics                string   `json:"metrics,omitempty"`
	Warnings               []string `json:"warnings"`
}

// checkAddr checks that addr is a host:port, or a unix socket path (one
// with a /), as --listen and --metrics take them.
func checkAddr(flag, addr string) error {
	if strings.Contains(addr, "/") && flag == "--listen" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError("%s %q: %v", flag, addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return usageError("%s %q: bad port: %v", flag, addr, err)
	}
	if host != "" && net.ParseIP(host) == nil {
		if _, err := net.LookupHost(host); err != nil {
			return fmt.Errorf("%s %q: %w", flag, addr, err)
		}
	}
	return nil
}

// checkMaxBulk describes the bulk length limit in force for --check, with a
// warning when --max-bulk differs from Redis's proto-max-bulk-len.
func checkMaxBulk(ctx context.Context, p *proxyFlags, srv *proxy.Server) (line, warning string) {
	redisBulk, err := upstreamMaxBulk(ctx, p, srv)
	if p.maxBulk == 0 { // Redis's own, which Ready's connection has read
		n, fromRedis := srv.MaxBulkInForce()
		inForce := units.SizeFlag(n)
		if fromRedis {
			return fmt.Sprintf("%s, Redis's proto-max-bulk-len (--max-bulk 0)", inForce.String()), ""
		}
		if err == nil { // Redis answered this client, not the proxy's connection: an ACL difference
			err = errors.New("the proxy's connection could not read it")
		}
		return fmt.Sprintf("%s, Redis's default (--max-bulk 0; Redis's proto-max-bulk-len unknown: %v)", inForce.String(), err), ""
	}
	if err != nil {
		return fmt.Sprintf("%s (Redis's proto-max-bulk-len unknown: %v)", p.maxBulk.String(), err), ""
	}
	line = fmt.Sprintf("%s (Redis's proto-max-bulk-len: %s)", p.maxBulk.String(), redisBulk.String())
	switch {
	case int64(redisBulk) < int64(p.maxBulk):
		warning = fmt.Sprintf("--max-bulk %s is above Redis's proto-max-bulk-len %s: a value between the two that does not "+
			"compress below it reaches Redis, which answers a protocol error and closes the connection, failing the commands "+
			"of other clients on it; set --max-bulk %s, or 0 to follow Redis", p.maxBulk.String(), redisBulk.String(), redisBulk.String())
	case int64(redisBulk) > int64(p.maxBulk):
		warning = fmt.Sprintf("--max-bulk %s is below Redis's proto-max-bulk-len %s: the proxy refuses values Redis "+
			"would take; set --max-bulk %s, or 0 to follow Redis", p.maxBulk.String(), redisBulk.String(), redisBulk.String())
	}
	return line, warning
}

// upstreamMaxBulk asks the upstream for its proto-max-bulk-len. Managed
// services often refuse CONFIG; the error says so.
func upstreamMaxBulk(ctx context.Context, p *proxyFlags, srv *proxy.Server) (units.SizeFlag, error) {
	rdb, err := p.upstreamClient(srv)
	if err != nil {
		return 0, err
	}
	defer rdb.Close()
	m, err := rdb.ConfigGet(ctx, "proto-max-bulk-len").Result()
	if err != nil {
		return 0, fmt.Errorf("CONFIG GET: %w", err)
	}
	v, ok := m["proto-max-bulk-len"]
	if !ok {
		return 0, errors.New("CONFIG GET proto-max-bulk-len: no such setting")
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("CONFIG GET proto-max-bulk-len: %q: %w", v, err)
	}
	return units.SizeFlag(n), nil
}

// serverInfo names the server behind the upstream, from INFO server.
type serverInfo struct {
	Name         string // "Redis" or "Valkey"
	Version      string // "8.0.2"
	Major, Minor int
}

func (s serverInfo) String() string { return s.Name + " " + s.Version }

// untested returns a warning when the server is older than those squeeze
// is tested with (Redis 7.0 and 8.0, Valkey 8.0), or "".
func (s serverInfo) untested() string {
	if s.Name == "Redis" && s.Major < 7 {
		return fmt.Sprintf("%s is older than the servers squeeze is tested with (Redis 7.0 and 8.0, Valkey 8.0): "+
			"commands the proxy rewrites may be missing or behave otherwise there", s)
	}
	return ""
}

// parseServerInfo reads the server's name and version from the reply to
// INFO server. Valkey reports redis_version 7.2.4 for compatibility and its
// own version in valkey_version.
func parseServerInfo(info string) (serverInfo, error) {
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	s := serverInfo{Name: "Redis", Version: fields["redis_version"]}
	if v, ok := fields["valkey_version"]; ok {
		s = serverInfo{Name: "Valkey", Version: v}
	}
	if s.Version == "" {
		return s, errors.New("INFO server gives no version")
	}
	major, rest, _ := strings.Cut(s.Version, ".")
	minor, _, _ := strings.Cut(rest, ".")
	var err1, err2 error
	s.Major, err1 = strconv.Atoi(major)
	s.Minor, err2 = strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("INFO server: version %q is not major.minor", s.Version)
	}
	return s, nil
}

// upstreamServer asks the upstream which server it is (INFO server).
// Managed services may refuse INFO; the error says so.
func upstreamServer(ctx context.Context, p *proxyFlags, srv *proxy.Server) (serverInfo, error) {
	rdb, err := p.upstreamClient(srv)
	if err != nil {
		return serverInfo{}, err
	}
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return serverInfo{}, fmt.Errorf("INFO server: %w", err)
	}
	return parseServerInfo(info)
}

// maxMemoryLine says the process bound in force.
func maxMemoryLine(n units.SizeFlag) string {
	if n <= 0 {
		return "none (--max-memory 0)"
	}
	return n.String() + " (half: one command in flight per client; all: the client holding the most is closed)"
}

// sizeString prints n bytes as the size flags print them.
func sizeString(n int64) string {
	f := units.SizeFlag(n)
	return f.String()
}

// checkScriptPrefix is one key prefix stored uncompressed for scripts.
type checkScriptPrefix struct {
	Prefix   string    `json:"prefix"`
	LastUsed time.Time `json:"last_used,omitzero"` // zero: not recorded
}

// upstreamScriptPrefixes reads the key prefixes scripts use, and when a
// script last used each, from the upstream (through the cluster when it is
// one), sorted.
func upstreamScriptPrefixes(ctx context.Context, p *proxyFlags, srv *proxy.Server) ([]checkScriptPrefix, error) {
	rdb, err := p.upstreamClient(srv)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	members, err := rdb.SMembers(ctx, proxy.ScriptPrefixesKey).Result()
	if err != nil {
		return nil, fmt.Errorf("SMEMBERS %s: %w", proxy.ScriptPrefixesKey, err)
	}
	used, err := rdb.HGetAll(ctx, proxy.ScriptPrefixesUsedKey).Result()
	if err != nil {
		return nil, fmt.Errorf("HGETALL %s: %w", proxy.ScriptPrefixesUsedKey, err)
	}
	out := []checkScriptPrefix{}
	for _, m := range members {
		sp := checkScriptPrefix{Prefix: m}
		if ms, err := strconv.ParseInt(used[m], 10, 64); err == nil && ms > 0 {
			sp.LastUsed = time.UnixMilli(ms).UTC()
		}
		out = append(out, sp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Prefix < out[j].Prefix })
	return out, nil
}

// ttlString says --script-prefix-ttl.
func ttlString(d time.Duration) string {
	if d == 0 {
		return "never"
	}
	return d.String()
}

// scriptPrefixesLine says which prefixes are stored uncompressed because
// scripts use them, and until when.
func scriptPrefixesLine(ps []checkScriptPrefix, ttl time.Duration, now time.Time) string {
	if len(ps) == 0 {
		return "no key prefix is stored uncompressed for scripts"
	}
	var parts []string
	for _, sp := range ps {
		switch {
		case sp.LastUsed.IsZero():
			parts = append(parts, fmt.Sprintf("%q", sp.Prefix))
		case ttl == 0:
			parts = append(parts, fmt.Sprintf("%q (last used %s ago)", sp.Prefix, now.Sub(sp.LastUsed).Round(time.Second)))
		default:
			parts = append(parts, fmt.Sprintf("%q (last used %s ago, compressed again in %s without use)", sp.Prefix,
				now.Sub(sp.LastUsed).Round(time.Second), max(0, sp.LastUsed.Add(ttl).Sub(now)).Round(time.Second)))
		}
	}
	what := fmt.Sprintf("%d key prefixes stored uncompressed because scripts use them", len(ps))
	if len(ps) == 1 {
		what = "1 key prefix stored uncompressed because scripts use it"
	}
	return fmt.Sprintf("%s (--script-prefix-ttl %s): %s", what, ttlString(ttl), strings.Join(parts, ", "))
}
