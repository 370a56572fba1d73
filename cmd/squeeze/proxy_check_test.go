package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/internal/testutil"
	"github.com/squeeze-kv/squeeze/proxy"
)

// TestProxyCheck_OK: --check against a Redis that wants a password prints
// the settings in force, hides the password, and exits 0 without
// listening.
func TestProxyCheck_OK(t *testing.T) {
	r := startRedisWithPassword(t, "s3cret")
	upstream := "redis://:s3cret@" + r.Addr + "/2"
	listen := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	out, stderr, code := runCLI(t, nil, "proxy", "--check", "--listen", listen, "--upstream", upstream,
		"--codec", "zstd:3", "--min-size", "1KiB", "--rule", "session:=lz4", "--rule", "event:=minlz", "--metrics", "127.0.0.1:9121")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"squeeze proxy --check: ok",
		"listen       " + listen,
		"client TLS   off",
		"upstream     redis://:***@" + r.Addr + "/2 (answered PING in ",
		"codec        zstd:3, min-size 1KiB, min-gain 0.1",
		"server       " + serverOf(t, r, "s3cret").String() + "\n",
		"rules        session:=lz4:fast;event:=minlz:fastest",
		"warning: minlz:fastest: writing a codec that squeeze readers built before it cannot read",
		"max-value    512MiB",
		"max-bulk     512MiB, Redis's proto-max-bulk-len (--max-bulk 0)",
		"metrics      127.0.0.1:9121",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+stderr, "s3cret") {
		t.Errorf("the password is printed:\n%s%s", out, stderr)
	}
	if n := strings.Count(out, "warning"); n != 1 {
		t.Errorf("%d warnings, want the one on minlz:\n%s", n, out)
	}
	// Nothing listens: --check never opened the address.
	if c, err := net.DialTimeout("tcp", listen, time.Second); err == nil {
		c.Close()
		t.Errorf("something listens on %s after --check", listen)
	}
}

// TestProxyCheck_JSON: --check --json prints one object with the settings
// in force, sizes in bytes, and the warnings; --json alone is a usage error.
func TestProxyCheck_JSON(t *testing.T) {
	r := testutil.StartRedis(t)
	out, stderr, code := runCLI(t, nil, "proxy", "--check", "--json", "--upstream", r.URL(), "--min-size", "1KiB",
		"--rule", "a:=zstd:1", "--rule", "b:=minlz")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	var got checkResult
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	if !got.OK || got.Upstream != r.URL() || got.Codec != "s2:default" || got.MinSizeBytes != 1024 ||
		got.MaxBulkBytes != 512<<20 || got.MaxValueBytes != 512<<20 || got.PingMicros <= 0 || got.Procs < 1 {
		t.Errorf("unexpected result: %+v", got)
	}
	if want := serverOf(t, r, "").String(); got.Server != want {
		t.Errorf("server %q, want %q", got.Server, want)
	}
	if want := []string{"a:=zstd:1", "b:=minlz:fastest"}; !slices.Equal(got.Rules, want) {
		t.Errorf("rules %q, want %q", got.Rules, want)
	}
	if len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], "minlz:fastest") {
		t.Errorf("warnings %q, want the one on minlz", got.Warnings)
	}
	var fields map[string]any
	json.Unmarshal([]byte(out), &fields)
	for _, f := range []string{"ok", "listen", "client_tls", "upstream", "ping_us", "server", "codec", "min_size_bytes", "max_bulk_bytes", "max_bulk", "warnings"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("no field %q in %s", f, out)
		}
	}
	if _, stderr, code := runCLI(t, nil, "proxy", "--json"); code != 2 || !strings.Contains(stderr, "--json goes with --check") {
		t.Errorf("--json alone: exit %d, %s", code, stderr)
	}
}

// TestProxyCheck_Failures: each broken setting or upstream fails --check
// with an error that names it: exit 1, or 2 for a usage error.
func TestProxyCheck_Failures(t *testing.T) {
	r := startRedisWithPassword(t, "s3cret")
	dead := "redis://127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	dir := t.TempDir()
	conf := filepath.Join(dir, "proxy.conf")
	os.WriteFile(conf, []byte("check = true\n"), 0o644)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"nothing listens upstream", []string{"--upstream", dead}, 1, "squeeze: upstream " + dead + ": "},
		{"wrong password", []string{"--upstream", "redis://:nope@" + r.Addr}, 1, "WRONGPASS"},
		{"no password", []string{"--upstream", r.URL()}, 1, "NOAUTH"},
		{"database out of range", []string{"--upstream", "redis://:s3cret@" + r.Addr + "/99"}, 1, "DB index is out of range"},
		{"unpublished dictionary", []string{"--upstream", "redis://:s3cret@" + r.Addr, "--dict", "12345"}, 1, "--dict 12345"},
		{"listen without a port", []string{"--upstream", "redis://:s3cret@" + r.Addr, "--listen", "127.0.0.1"}, 2, "--listen \"127.0.0.1\""},
		{"metrics port out of range", []string{"--upstream", "redis://:s3cret@" + r.Addr, "--metrics", "127.0.0.1:70000"}, 2, "--metrics \"127.0.0.1:70000\": bad port"},
		{"bad codec", []string{"--upstream", "redis://:s3cret@" + r.Addr, "--codec", "zstd:99"}, 2, "--codec"},
		{"max-bulk below Redis's least", []string{"--upstream", "redis://:s3cret@" + r.Addr, "--max-bulk", "64KiB"}, 2, "--max-bulk 64KiB is below 1MiB"},
		{"check in a config file", []string{"--config", conf}, 2, "check = true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := runCLI(t, nil, append([]string{"proxy", "--check"}, tt.args...)...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q: want exit %d and %q", code, stderr, tt.code, tt.want)
			}
			if strings.Contains(out, "ok") {
				t.Errorf("a failed check printed ok:\n%s", out)
			}
		})
	}
}

// TestProxyCheck_Certificates: --check prints the client-facing and the
// upstream certificates with their expiry, warns when one expires within
// two weeks, and fails on one that has expired or is not yet valid.
func TestProxyCheck_Certificates(t *testing.T) {
	pki := testutil.NewPKI(t)
	cert, key := pki.Server(t, "proxy")
	clientCert, clientKey := pki.Client(t, "squeeze-proxy")
	r := testutil.StartRedis(t)
	args := []string{"proxy", "--check", "--upstream", r.URL(), "--tls-cert", cert, "--tls-key", key, "--tls-client-ca", pki.CAFile}
	out, stderr, code := runCLI(t, nil, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"client TLS   CN=127.0.0.1, valid until ",
		"; client certificates required (--tls-client-ca)",
		"warning: --tls-cert: the certificate (CN=127.0.0.1) expires in 0 days",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// The dates, checked at other times with checkProxy itself.
	e := env{Stdout: io.Discard, Stderr: io.Discard}
	at := func(now time.Time, extra ...string) (string, error) {
		fs, p, _ := newProxyFlags(e)
		flags := append([]string{"--upstream", r.URL(), "--tls-cert", cert, "--tls-key", key,
			"--upstream-cert", clientCert, "--upstream-key", clientKey}, extra...)
		if err := parseFlags(fs, flags); err != nil {
			t.Fatal(err)
		}
		srv, err := p.buildServer(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg, certs, err := newListenTLS(p)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		err = checkProxy(context.Background(), &buf, p, srv, cfg, certs, 1, now)
		return buf.String(), err
	}
	if _, err := at(time.Now().Add(2 * time.Hour)); err == nil || !strings.Contains(err.Error(), "--tls-cert: the certificate (CN=127.0.0.1) expired on ") {
		t.Errorf("two hours on: %v, want the expired --tls-cert named", err)
	}
	if _, err := at(time.Now().Add(-2 * time.Hour)); err == nil || !strings.Contains(err.Error(), "is not valid before") {
		t.Errorf("two hours before: %v, want not valid yet", err)
	}
	// A plain-text upstream ignores the client certificate, but --check
	// still reads its dates: it would be used with a rediss:// upstream.
	got, err := at(time.Now().Add(-10 * time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"upstream cert  CN=squeeze-proxy, valid until ",
		"warning: --upstream-ca, --upstream-cert and --upstream-key are for a rediss:// upstream; " + r.URL() + " does not use them"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

// startRedisWithPassword starts a redis-server that wants this password.
func startRedisWithPassword(t *testing.T, password string) *testutil.Redis {
	t.Helper()
	r := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	if err := rdb.ConfigSet(context.Background(), "requirepass", password).Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestProxyCheck_MaxBulk: --check shows the bulk length limit in force:
// Redis's proto-max-bulk-len by default, or an explicit --max-bulk, with a
// warning either way it differs from Redis's; it says so when Redis
// refuses CONFIG. The proxy applies --max-bulk to what clients send.
func TestProxyCheck_MaxBulk(t *testing.T) {
	r := testutil.StartRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	if err := rdb.ConfigSet(ctx, "proto-max-bulk-len", "2mb").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(ctx, "ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all", "-config", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"default: Redis's", nil, []string{"max-bulk     2MiB, Redis's proto-max-bulk-len (--max-bulk 0)"}},
		{"above Redis's", []string{"--max-bulk", "512MiB"}, []string{"max-bulk     512MiB (Redis's proto-max-bulk-len: 2MiB)",
			"warning: --max-bulk 512MiB is above Redis's proto-max-bulk-len 2MiB: a value between the two", "set --max-bulk 2MiB, or 0 to follow Redis"}},
		{"below Redis's", []string{"--max-bulk", "1MiB"}, []string{"warning: --max-bulk 1MiB is below Redis's proto-max-bulk-len 2MiB: the proxy refuses values Redis would take"}},
		{"equal", []string{"--max-bulk", "2MiB"}, []string{"max-bulk     2MiB (Redis's proto-max-bulk-len: 2MiB)"}},
		{"CONFIG refused", []string{"--max-bulk", "2MiB", "--upstream", "redis://app:pw@" + r.Addr},
			[]string{"max-bulk     2MiB (Redis's proto-max-bulk-len unknown: CONFIG GET: NOPERM"}},
		{"CONFIG refused, default", []string{"--upstream", "redis://app:pw@" + r.Addr},
			[]string{"max-bulk     512MiB, Redis's default (--max-bulk 0; Redis's proto-max-bulk-len unknown: CONFIG GET: NOPERM",
				"server       unknown (INFO server: NOPERM"}}, // INFO refused too: not a failure
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := runCLI(t, nil, append([]string{"proxy", "--check", "--upstream", r.URL()}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d\n%s%s", code, out, stderr)
			}
			for _, want := range tt.want {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if wantWarn := strings.Contains(strings.Join(tt.want, ""), "warning"); strings.Contains(out, "warning") != wantWarn {
				t.Errorf("warning printed: %v, want %v:\n%s", !wantWarn, wantWarn, out)
			}
		})
	}

	// The proxy holds clients to --max-bulk: a 1.5 MB argument is refused
	// with Redis's error at 1MiB (from its length: the test sends only the
	// start), and taken at 2MiB.
	value := strings.Repeat("x", 1500000)
	for _, limit := range []string{"1MiB", "2MiB"} {
		addr, _ := startProxyCommand(t, "--upstream", r.URL(), "--max-bulk", limit, "--codec", "none")
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		msg := "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$" + strconv.Itoa(len(value)) + "\r\n"
		if limit == "2MiB" {
			msg += value + "\r\n"
		}
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		reply := make([]byte, 100)
		n, _ := nc.Read(reply)
		nc.Close()
		want := "+OK\r\n"
		if limit == "1MiB" {
			want = "-ERR Protocol error: invalid bulk length\r\n"
		}
		if got := string(reply[:n]); got != want {
			t.Errorf("--max-bulk %s: SET of 1.5 MB: %q, want %q", limit, got, want)
		}
	}
}

// serverOf reads the name and version of the server r, as --check prints
// them, from its INFO; password is "" for a server without one.
func serverOf(t *testing.T, r *testutil.Redis, password string) serverInfo {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, Password: password})
	defer rdb.Close()
	info, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	s, err := parseServerInfo(info)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestParseServerInfo reads the name and version of Redis and Valkey from
// INFO server, and warns of servers older than those squeeze is tested
// with.
func TestParseServerInfo(t *testing.T) {
	tests := []struct {
		info, want, err string
		untested        bool
	}{
		{"# Server\r\nredis_version:8.0.2\r\nredis_git_sha1:00000000\r\nredis_mode:standalone\r\n", "Redis 8.0.2", "", false},
		{"# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n", "Valkey 8.0.1", "", false},
		{"redis_version:7.0.15\n", "Redis 7.0.15", "", false},
		{"redis_version:6.2.14\n", "Redis 6.2.14", "", true},
		{"redis_version:255.255.255\n", "Redis 255.255.255", "", false}, // unstable builds
		{"# Server\r\nos:Linux\r\n", "", "gives no version", false},
		{"redis_version:eight\n", "", "is not major.minor", false},
		{"", "", "gives no version", false},
	}
	for _, tt := range tests {
		s, err := parseServerInfo(tt.info)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want %q", tt.info, err, tt.err)
			}
			continue
		}
		if err != nil || s.String() != tt.want {
			t.Errorf("%q: %q, %v; want %q", tt.info, s, err, tt.want)
		}
		if got := s.untested() != ""; got != tt.untested {
			t.Errorf("%q: untested warning %v, want %v", tt.info, got, tt.untested)
		}
	}
}

// TestProxyCheck_RemoteClients: --check warns about a --listen address
// other hosts reach while clients act with the URL's credentials, and says
// that the proxy will not start so; --client-auth require needs no warning.
func TestProxyCheck_RemoteClients(t *testing.T) {
	r := testutil.StartRedis(t)
	out, stderr, _ := runCLI(t, nil, "proxy", "--check", "--listen", "0.0.0.0:"+strconv.Itoa(testutil.FreePort(t)), "--upstream", r.URL())
	if !strings.Contains(out, "warning: --listen 0.0.0.0:") || !strings.Contains(out, "will not start so") {
		t.Errorf("no warning about remote clients:\n%s%s", out, stderr)
	}
	out, stderr, _ = runCLI(t, nil, "proxy", "--check", "--listen", "0.0.0.0:"+strconv.Itoa(testutil.FreePort(t)), "--upstream", r.URL(), "--client-auth", "require")
	if strings.Contains(out, "reachable from other hosts") {
		t.Errorf("a warning with --client-auth require:\n%s%s", out, stderr)
	}
}

// TestProxyCheck_ScriptPrefixes: --check lists the key prefixes stored
// uncompressed because scripts use them, with their last use and when they
// are compressed again, in text and JSON.
func TestProxyCheck_ScriptPrefixes(t *testing.T) {
	r := testutil.StartRedis(t)
	out, stderr, code := runCLI(t, nil, "proxy", "--check", "--upstream", r.URL())
	if code != 0 || !strings.Contains(out, "pass; no key prefix is stored uncompressed for scripts") {
		t.Fatalf("exit %d, want no script prefixes:\n%s%s", code, out, stderr)
	}
	used := time.Now().Add(-time.Hour).UnixMilli()
	testutil.Do(r.Addr, "SADD", proxy.ScriptPrefixesKey, "session:", "lock:")
	testutil.Do(r.Addr, "HSET", proxy.ScriptPrefixesUsedKey, "session:", strconv.FormatInt(used, 10))
	out, stderr, code = runCLI(t, nil, "proxy", "--check", "--upstream", r.URL(), "--script-prefix-ttl", "24h")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{`2 key prefixes stored uncompressed because scripts use them (--script-prefix-ttl 24h0m0s)`, `"lock:"`,
		`"session:" (last used 1h0m0s ago, compressed again in 23h0m0s without use)`} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	out, _, _ = runCLI(t, nil, "proxy", "--check", "--json", "--upstream", r.URL(), "--script-prefix-ttl", "0")
	var got checkResult
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.ScriptPrefixes) != 2 || got.ScriptPrefixes[1].Prefix != "session:" || got.ScriptPrefixes[1].LastUsed.UnixMilli() != used || got.ScriptPrefixTTL != "never" {
		t.Fatalf("JSON: %+v", got)
	}
}
