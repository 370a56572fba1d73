package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/dictstore"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

func TestProxySettings_Precedence(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "squeeze.conf")
	os.WriteFile(cfg, []byte("# squeeze proxy settings\nupstream = redis://file:1\ncodec = lz4\nmin-size = 1KiB\nscripts = reject # no EVAL\n"), 0o644)
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		upstream string
		codec    string
		minSize  int64
		scripts  string
	}{
		{"file", map[string]string{"SQUEEZE_CONFIG": cfg}, nil, "redis://file:1", "lz4", 1024, "reject"},
		{"env beats file", map[string]string{"SQUEEZE_CONFIG": cfg, "SQUEEZE_UPSTREAM": "redis://env:2", "SQUEEZE_MIN_SIZE": "10"}, nil, "redis://env:2", "lz4", 10, "reject"},
		{"flags beat env", map[string]string{"SQUEEZE_UPSTREAM": "redis://env:2"}, []string{"--config", cfg, "--upstream", "redis://flag:3", "--scripts=pass"}, "redis://flag:3", "lz4", 1024, "pass"},
		{"defaults", nil, nil, "redis://127.0.0.1:6379", "", 64, "pass"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := proxySettings(t, tt.env, tt.args)
			if p.upstream != tt.upstream || p.codecName != tt.codec || int64(p.minSize) != tt.minSize || p.scripts != tt.scripts {
				t.Errorf("got upstream %s codec %s min-size %d scripts %s", p.upstream, p.codecName, p.minSize, p.scripts)
			}
		})
	}
}

// proxySettings reads the proxy's settings as runProxy does: the config
// file, then the environment vars, then the command line args.
func proxySettings(t *testing.T, vars map[string]string, args []string) *proxyFlags {
	t.Helper()
	fs, p, _ := newProxyFlags(env{Stdout: io.Discard, Stderr: io.Discard})
	if err := applySettings(fs, args, func(k string) string { return vars[k] }); err != nil {
		t.Fatal(err)
	}
	if err := parseFlags(fs, args); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProxySettings_Errors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.conf")
	os.WriteFile(bad, []byte("no-such-flag = 1\n"), 0o644)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--codec", "zstd:99"}, "--codec"},
		{[]string{"--upstream", "http://x"}, "scheme must be redis"},
		{[]string{"--scripts", "maybe"}, "--scripts must be pass or reject"},
		{[]string{"--list-search", "fuzzy"}, "--list-search must be exact or stored"},
		{[]string{"--script-prefix-ttl", "-1h"}, "--script-prefix-ttl must not be negative"},
		{[]string{"--script-prefix-ttl", "a week"}, "for flag -script-prefix-ttl"},
		{[]string{"--client-auth", "maybe"}, "--client-auth must be pass or require"},
		{[]string{"--cluster-map", "10.0.0.1:6379"}, "--cluster-map: cluster map: \"10.0.0.1:6379\" is not node=proxy"},
		{[]string{"--cluster-port-offset", "70000"}, "--cluster-port-offset 70000 is out of range"},
		{[]string{"--min-gain", "2"}, "--min-gain"},
		{[]string{"--config", bad}, "bad.conf:1"},
		{[]string{"extra"}, "no arguments"},
		{[]string{"--upstream-ca", filepath.Join(dir, "missing.pem")}, "--upstream-ca"},
		{[]string{"--upstream-ca", bad}, "no PEM certificate"},
		{[]string{"--pprof"}, "--pprof needs --metrics"},
		{[]string{"--listen", "0.0.0.0:6380"}, "--listen 0.0.0.0:6380 is reachable from other hosts"},
		{[]string{"--listen", ":6380"}, "--allow-remote-clients"},
		{[]string{"--listen", "[::]:6380"}, "--client-auth require"},
		{[]string{"--procs", "-2"}, "--procs must be"},
		{[]string{"--max-in-flight", "0"}, "--max-in-flight and --client-buffer must be positive"},
		{[]string{"--client-buffer", "64MiB", "--client-buffer-limit", "1MiB"}, "--client-buffer-limit 1MiB is below --client-buffer 64MiB"},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		code := run(context.Background(), env{Stdout: io.Discard, Stderr: &stderr}, append([]string{"proxy"}, tt.args...))
		if code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}

// TestProxyCommand runs "squeeze proxy" with redis-cli as the client and
// checks that values are stored compressed, that /metrics reports them,
// that /healthz and /readyz answer, and that cancelling (SIGTERM) drains
// and exits 0.
func TestProxyCommand(t *testing.T) {
	r := testutil.StartRedis(t)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not installed")
	}
	port := testutil.FreePort(t)
	mport := testutil.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, env{Stdout: io.Discard, Stderr: &stderr}, []string{"proxy",
			"--listen", "127.0.0.1:" + strconv.Itoa(port), "--upstream", r.URL(),
			"--metrics", "127.0.0.1:" + strconv.Itoa(mport), "--pprof", "--log-format", "json"})
	}()
	redisCLI := func(port int, args ...string) string {
		t.Helper()
		var out []byte
		var err error
		for i := 0; i < 100; i++ { // the proxy may still be starting
			out, err = exec.Command(cli, append([]string{"-p", strconv.Itoa(port)}, args...)...).CombinedOutput()
			if err == nil && !strings.Contains(string(out), "Connection refused") {
				return strings.TrimSpace(string(out))
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("redis-cli %q: %v %s", args, err, out)
		return ""
	}
	doc := strings.Repeat(`{"user":"squeeze","tags":["a","b"],"n":12345},`, 400)
	if got := redisCLI(port, "SET", "doc", doc); got != "OK" {
		t.Fatalf("SET: %q", got)
	}
	if got := redisCLI(port, "GET", "doc"); got != doc {
		t.Fatalf("GET through proxy: %d bytes, want %d", len(got), len(doc))
	}
	if got := redisCLI(port, "STRLEN", "doc"); got != strconv.Itoa(len(doc)) {
		t.Fatalf("STRLEN: %q", got)
	}
	_, rport, _ := net.SplitHostPort(r.Addr)
	rp, _ := strconv.Atoi(rport)
	stored, _ := strconv.Atoi(redisCLI(rp, "STRLEN", "doc"))
	if stored == 0 || stored > len(doc)/4 {
		t.Fatalf("Redis stores %d bytes for a %d-byte document; want under a quarter", stored, len(doc))
	}
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(mport) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`squeeze_proxy_values_total{outcome="compressed"} 1`, `squeeze_proxy_commands_total{cmd="GET"} 1`, `squeeze_proxy_connections_total`, `squeeze_proxy_command_seconds_bucket`, `squeeze_proxy_value_bytes_original_total{codec="` + codec.DefaultAlgorithm.String() + `"} ` + strconv.Itoa(len(doc))} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// The proxy reads the server's name and version once it listens.
	server := serverOf(t, r, "")
	wantInfo := `squeeze_proxy_upstream_info{server="` + server.Name + `",version="` + server.Version + `"} 1`
	for i := 0; !strings.Contains(string(body), wantInfo); i++ {
		if i == 100 {
			t.Fatalf("/metrics lacks %s", wantInfo)
		}
		time.Sleep(50 * time.Millisecond)
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(mport) + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"} {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(mport) + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != want {
			t.Errorf("%s: %d %q, want 200 %q", path, resp.StatusCode, body, want)
		}
	}
	resp, err = http.Get("http://127.0.0.1:" + strconv.Itoa(mport) + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine profile") {
		t.Errorf("/debug/pprof/goroutine: %d %.200s", resp.StatusCode, body)
	}
	resp, err = http.Get("http://127.0.0.1:" + strconv.Itoa(mport) + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), os.Args[0]) {
		t.Errorf("/debug/pprof/cmdline: %d %.200q", resp.StatusCode, body)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("proxy did not stop after cancel")
	}
	if !strings.Contains(stderr.String(), `"msg":"squeeze proxy stopped"`) {
		t.Errorf("log lacks the stop message: %s", stderr.String())
	}
	if want := `"msg":"upstream server","server":"` + server.String() + `"`; !strings.Contains(stderr.String(), want) {
		t.Errorf("log lacks %s: %s", want, stderr.String())
	}
	if strings.Contains(stderr.String(), wantLaterCodecWarning) {
		t.Errorf("warning about a later codec while writing s2: %s", stderr.String())
	}
}

const wantLaterCodecWarning = "writing a codec that squeeze readers built before it cannot read"

// TestProxyCommand_LaterCodecWarning: a proxy told to write minlz (here in
// a per-prefix rule) warns at start that older readers cannot read it.
func TestProxyCommand_LaterCodecWarning(t *testing.T) {
	r := testutil.StartRedis(t)
	_, log := startProxyCommand(t, "--upstream", r.URL(), "--rule", "doc:=minlz")
	if !strings.Contains(log.String(), wantLaterCodecWarning) || !strings.Contains(log.String(), "minlz:fastest") {
		t.Fatalf("no warning about writing minlz: %s", log.String())
	}
}

func TestProbeUpstream(t *testing.T) {
	if err := probeUpstream("redis://127.0.0.1:1"); err == nil {
		t.Error("probe of a closed port succeeded")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := probeUpstream("redis://" + ln.Addr().String()); err != nil {
		t.Errorf("probe of a listening port: %v", err)
	}
}

func TestProxyProcs(t *testing.T) {
	for _, tc := range []struct {
		flag    int
		env     string
		cpus    int
		want    int
		wantErr string
	}{
		{0, "", 1, 1, ""},
		{0, "", 2, 1, ""},
		{0, "", 8, 4, ""},
		{0, "3", 8, 3, ""},
		{2, "3", 8, 2, ""},
		{-1, "", 8, 0, "--procs must be"},
		{0, "lots", 8, 0, "GOMAXPROCS must be"},
	} {
		got, err := proxyProcs(tc.flag, tc.env, tc.cpus)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("proxyProcs(%d, %q, %d): error %v, want %q", tc.flag, tc.env, tc.cpus, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("proxyProcs(%d, %q, %d) = %d, %v; want %d", tc.flag, tc.env, tc.cpus, got, err, tc.want)
		}
	}
}

// TestProxySettings_ListSearch: --list-search reaches the server.
func TestProxySettings_ListSearch(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		stored bool
	}{{nil, false}, {[]string{"--list-search", "exact"}, false}, {[]string{"--list-search=stored"}, true}} {
		fs, p, _ := newProxyFlags(env{Stdout: io.Discard, Stderr: io.Discard})
		if err := parseFlags(fs, tt.args); err != nil {
			t.Fatal(err)
		}
		s, err := p.buildServer(slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.StoredListSearch != tt.stored {
			t.Errorf("%q: StoredListSearch = %v, want %v", tt.args, s.StoredListSearch, tt.stored)
		}
	}
}

// TestProxySettings_ScriptPrefixTTL: --script-prefix-ttl (also from a
// config file) reaches the server; 0 means for ever, the default a week.
func TestProxySettings_ScriptPrefixTTL(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "p.conf")
	os.WriteFile(conf, []byte("script-prefix-ttl = 36h\n"), 0o644)
	for _, tt := range []struct {
		args []string
		want time.Duration
	}{{nil, 7 * 24 * time.Hour}, {[]string{"--script-prefix-ttl", "2h"}, 2 * time.Hour}, {[]string{"--script-prefix-ttl=0"}, -1},
		{[]string{"--config", conf}, 36 * time.Hour}} {
		fs, p, _ := newProxyFlags(env{Stdout: io.Discard, Stderr: io.Discard})
		if err := applySettings(fs, tt.args, func(string) string { return "" }); err != nil {
			t.Fatal(err)
		}
		if err := parseFlags(fs, tt.args); err != nil {
			t.Fatal(err)
		}
		s, err := p.buildServer(slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.ScriptPrefixTTL != tt.want {
			t.Errorf("%q: ScriptPrefixTTL = %v, want %v", tt.args, s.ScriptPrefixTTL, tt.want)
		}
	}
}

// TestProxySettings_Cluster: --cluster-map and --cluster-port-offset (also
// from the environment) reach the server; without them it has no map.
func TestProxySettings_Cluster(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		env    map[string]string
		nodes  map[string]string
		offset int
		none   bool
	}{
		{none: true},
		{args: []string{"--cluster-port-offset", "1000"}, offset: 1000},
		{args: []string{"--cluster-map", "a:1=b:2, c:3=d:4"}, nodes: map[string]string{"a:1": "b:2", "c:3": "d:4"}},
		{env: map[string]string{"SQUEEZE_CLUSTER_PORT_OFFSET": "-1"}, offset: -1},
	} {
		fs, p, _ := newProxyFlags(env{Stdout: io.Discard, Stderr: io.Discard})
		if err := applySettings(fs, tt.args, func(k string) string { return tt.env[k] }); err != nil {
			t.Fatal(err)
		}
		if err := parseFlags(fs, tt.args); err != nil {
			t.Fatal(err)
		}
		s, err := p.buildServer(slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if tt.none {
			if s.Cluster != nil {
				t.Errorf("%q: a cluster map without the flags: %+v", tt.args, s.Cluster)
			}
			continue
		}
		if s.Cluster == nil || s.Cluster.PortOffset != tt.offset || fmt.Sprint(s.Cluster.Nodes) != fmt.Sprint(tt.nodes) {
			t.Errorf("%q %v: cluster map %+v, want nodes %v offset %d", tt.args, tt.env, s.Cluster, tt.nodes, tt.offset)
		}
	}
}

// TestProxyDictionaries_Cluster: in front of a cluster node, the proxy
// loads a published dictionary whose key lives on another node (a cluster
// client follows the redirection); without the cluster flags it cannot.
func TestProxyDictionaries_Cluster(t *testing.T) {
	nodes := testutil.StartCluster(t, 2)
	ctx := context.Background()
	var docs [][]byte
	for i := range 1000 {
		docs = append(docs, fmt.Appendf(nil, `{"user_id":%d,"country":"%s","plan":"%s","features":{"dark_mode":%v}}`, i*7919, []string{"DE", "FR", "US"}[i%3], []string{"free", "pro"}[i%2], i%5 == 0))
	}
	d, err := codec.TrainDictionary(40077, docs, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr}})
	defer cc.Close()
	if err := dictstore.Publish(ctx, cc, d, dictstore.Meta{}); err != nil {
		t.Fatal(err)
	}
	away := nodes[0] // the node that does not hold the dictionary's key
	if r, _ := testutil.Do(nodes[0].Addr, "EXISTS", dictstore.Key(d.ID)); r == ":1" {
		away = nodes[1]
	}
	for _, tt := range []struct {
		flags []string
		ok    bool
	}{{nil, false}, {[]string{"--cluster-port-offset", "1"}, true}} {
		fs, p, _ := newProxyFlags(env{Stdout: io.Discard, Stderr: io.Discard})
		args := append([]string{"--upstream", away.URL(), "--dict", strconv.Itoa(int(d.ID))}, tt.flags...)
		if err := parseFlags(fs, args); err != nil {
			t.Fatal(err)
		}
		srv, err := p.buildServer(slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		closeDicts, err := p.setupDictionaries(ctx, srv)
		if !tt.ok {
			if err == nil || !strings.Contains(err.Error(), "MOVED") {
				t.Fatalf("%q: %v, want the redirection as an error", tt.flags, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tt.flags, err)
		}
		h, err := codec.ParseHeader(srv.Encoder.AppendEncode(nil, bytes.Repeat(docs[1], 3)))
		closeDicts()
		if err != nil || !h.HasDict || h.DictID != uint64(d.ID) {
			t.Fatalf("%q: a new value's header %+v, %v: want dictionary %d", tt.flags, h, err, d.ID)
		}
	}
}

// TestProxySettings_ClientAuth: --client-auth require (or SQUEEZE_CLIENT_AUTH)
// makes every client authenticate itself.
func TestProxySettings_ClientAuth(t *testing.T) {
	for _, tt := range []struct {
		env     map[string]string
		args    []string
		require bool
	}{
		{nil, nil, false},
		{nil, []string{"--client-auth", "require"}, true},
		{map[string]string{"SQUEEZE_CLIENT_AUTH": "require"}, nil, true},
		{map[string]string{"SQUEEZE_CLIENT_AUTH": "require"}, []string{"--client-auth=pass"}, false},
	} {
		p := proxySettings(t, tt.env, tt.args)
		srv, err := p.buildServer(slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil || srv.RequireAuth != tt.require {
			t.Errorf("env %v args %q: RequireAuth %v, %v; want %v", tt.env, tt.args, srv != nil && srv.RequireAuth, err, tt.require)
		}
	}
}

// TestProxyCommand_NotReady: with nothing listening at --upstream the
// proxy starts (a sidecar may start before its Redis) and /readyz says
// why it is not ready, while /healthz answers.
func TestProxyCommand_NotReady(t *testing.T) {
	mport := testutil.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, env{Stdout: io.Discard, Stderr: io.Discard}, []string{"proxy",
			"--listen", "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t)), "--upstream", "redis://127.0.0.1:" + strconv.Itoa(testutil.FreePort(t)),
			"--metrics", "127.0.0.1:" + strconv.Itoa(mport)})
	}()
	defer func() { cancel(); <-done }()
	get := func(path string) (int, string) {
		for range 200 { // the metrics server may still be starting
			resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(mport) + path)
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return resp.StatusCode, string(body)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s: no answer", path)
		return 0, ""
	}
	if code, body := get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready: dial upstream") {
		t.Errorf("/readyz: %d %q, want 503 naming the dial error", code, body)
	}
}

// TestProxyCommand_Secrets: a proxy behind Sentinels that require a
// password, its upstream URL holding the master's password and
// sentinel_password, serves clients, and neither its log nor the
// profiler's /debug/pprof/cmdline shows either password. A parameter
// the URL does not take is an error naming it and the accepted ones,
// and showing no secret.
func TestProxyCommand_Secrets(t *testing.T) {
	const masterPW, sentinelPW = "masterpw7731", "sentinelpw9924"
	master := testutil.StartRedis(t)
	if out, err := testutil.Do(master.Addr, "CONFIG", "SET", "requirepass", masterPW); err != nil {
		t.Fatalf("CONFIG SET requirepass: %v %q", err, out)
	}
	sen := testutil.StartSentinel(t, "m", master.Addr)
	for _, c := range [][]string{
		{"SENTINEL", "SET", "m", "auth-pass", masterPW},
		{"ACL", "SETUSER", "default", "resetpass", ">" + sentinelPW},
	} {
		if out, err := testutil.Do(sen.Addr, c...); err != nil {
			t.Fatalf("%q on the Sentinel: %v %q", c, err, out)
		}
	}
	upstream := "sentinel://:" + masterPW + "@" + sen.Addr + "/m?sentinel_password=" + sentinelPW
	port, mport := testutil.FreePort(t), testutil.FreePort(t)
	args := []string{"proxy", "--listen", "127.0.0.1:" + strconv.Itoa(port), "--upstream", upstream,
		"--metrics", "127.0.0.1:" + strconv.Itoa(mport), "--pprof", "--log-format", "json"}
	oldArgs := os.Args // what /debug/pprof/cmdline serves: the process's command line
	os.Args = append([]string{"squeeze"}, args...)
	t.Cleanup(func() { os.Args = oldArgs })
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, env{Stdout: io.Discard, Stderr: &stderr}, args) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("proxy did not stop")
		}
	}()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1})
	defer rdb.Close()
	for i := 0; rdb.Set(ctx, "k", "v", 0).Err() != nil; i++ {
		if i == 200 {
			t.Fatalf("proxy not serving after 4s: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(mport) + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	cmdline, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(cmdline), "sentinel_password=***") {
		t.Errorf("/debug/pprof/cmdline: %q, want the URL with its secrets redacted", cmdline)
	}
	log := stderr.String()
	if !strings.Contains(log, `"upstream":"sentinel://:***@`+sen.Addr+`/m?sentinel_password=***"`) {
		t.Errorf("the listening line does not name the upstream redacted: %s", log)
	}
	for _, pw := range []string{masterPW, sentinelPW} {
		if strings.Contains(string(cmdline), pw) {
			t.Errorf("/debug/pprof/cmdline shows a password: %q", cmdline)
		}
		if strings.Contains(log, pw) {
			t.Errorf("the log shows a password: %s", log)
		}
	}
	// A parameter the URL does not take.
	for _, bad := range []string{
		"sentinel://" + sen.Addr + "/m?password=" + sentinelPW,
		"redis://:" + masterPW + "@" + master.Addr + "?password=" + masterPW,
	} {
		var out syncBuffer
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // a proxy that started anyway stops
		defer cancel()
		code := run(ctx, env{Stdout: io.Discard, Stderr: &out}, []string{"proxy",
			"--listen", "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t)), "--upstream", bad})
		want := `unknown parameter "password"; a sentinel:// URL accepts sentinel_password`
		if strings.HasPrefix(bad, "redis:") {
			want = `unknown parameter "password"; a redis:// URL accepts db`
		}
		if code != 2 || !strings.Contains(out.String(), want) {
			t.Errorf("--upstream %s: exit %d, %q; want 2 and %q", redactURL(bad), code, out.String(), want)
		}
		if strings.Contains(out.String(), masterPW) || strings.Contains(out.String(), sentinelPW) {
			t.Errorf("the error shows a password: %q", out.String())
		}
	}
}

// TestCmdlineHandler: the profiler's /debug/pprof/cmdline shows the command
// line with the passwords of its URLs redacted, in either flag form.
func TestCmdlineHandler(t *testing.T) {
	args := []string{"squeeze", "proxy", "--upstream", "redis://app:s3cret@10.1.2.3:6379/0",
		"--upstream=rediss://:hunter2@cache:6380", "--upstream", "sentinel://:pw1@s1,s2/m?sentinel_password=sentpw",
		"--listen", "127.0.0.1:6380"}
	rec := httptest.NewRecorder()
	cmdlineHandler(args)(rec, httptest.NewRequest("GET", "/debug/pprof/cmdline", nil))
	got := rec.Body.String()
	for _, secret := range []string{"s3cret", "hunter2", "pw1", "sentpw"} {
		if strings.Contains(got, secret) {
			t.Errorf("cmdline shows the password %q: %q", secret, got)
		}
	}
	want := strings.Join([]string{"squeeze", "proxy", "--upstream", "redis://app:***@10.1.2.3:6379/0",
		"--upstream=rediss://:***@cache:6380", "--upstream", "sentinel://:***@s1,s2/m?sentinel_password=***",
		"--listen", "127.0.0.1:6380"}, "\x00")
	if got != want {
		t.Errorf("cmdline = %q, want %q", got, want)
	}
}

func TestListenReachable(t *testing.T) {
	for _, c := range []struct {
		listen string
		want   bool
	}{
		{"127.0.0.1:6380", false}, {"127.0.0.5:6380", false}, {"[::1]:6380", false}, {"localhost:6380", false},
		{"/run/squeeze/proxy.sock", false}, {"./proxy.sock", false},
		{":6380", true}, {"0.0.0.0:6380", true}, {"[::]:6380", true}, {"10.0.0.5:6380", true},
		{"proxy.internal:6380", true},
	} {
		if got := listenReachable(c.listen); got != c.want {
			t.Errorf("listenReachable(%q) = %v, want %v", c.listen, got, c.want)
		}
	}
}
