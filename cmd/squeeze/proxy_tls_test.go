package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// startProxyCommand runs squeeze proxy with args (JSON logs) until the
// test ends, and waits until it listens; it returns the proxy's address and
// its log.
func startProxyCommand(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, env{Stdout: io.Discard, Stderr: stderr},
			append([]string{"proxy", "--listen", addr, "--log-format", "json"}, args...))
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("proxy exit %d: %s", code, stderr.String())
		}
	})
	for i := 0; !strings.Contains(stderr.String(), "squeeze proxy listening"); i++ {
		if i > 250 {
			t.Fatalf("proxy did not start: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return addr, stderr
}

func certPool(t *testing.T, caFile string) *x509.CertPool {
	t.Helper()
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	return pool
}

// TestProxyCommand_TLS: with --tls-cert and --tls-key clients reach the
// proxy over TLS only (go-redis, redis-cli --tls), values still go to Redis
// compressed, and SIGHUP puts a renewed certificate in force.
func TestProxyCommand_TLS(t *testing.T) {
	r := testutil.StartRedis(t)
	pki := testutil.NewPKI(t)
	certFile, keyFile := pki.Server(t, "proxy")
	addr, log := startProxyCommand(t, "--upstream", r.URL(), "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.Contains(log.String(), `"tls":true`) {
		t.Errorf("the start line does not say TLS is on: %s", log.String())
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: &tls.Config{RootCAs: certPool(t, pki.CAFile)}})
	defer rdb.Close()
	doc := strings.Repeat(`{"user":"squeeze","tags":["tls","proxy"],"n":12345},`, 200)
	if err := rdb.Set(ctx, "doc", doc, 0).Err(); err != nil {
		t.Fatalf("SET over TLS: %v", err)
	}
	if got, err := rdb.Get(ctx, "doc").Result(); err != nil || got != doc {
		t.Fatalf("GET over TLS: %d bytes, %v", len(got), err)
	}
	stored, err := testutil.Do(r.Addr, "GET", "doc")
	if err != nil || !strings.Contains(stored, codec.Magic) || len(stored) >= len(doc) {
		t.Fatalf("Redis does not hold a frame (%d bytes, %v)", len(stored), err)
	}

	// redis-cli, as a user would.
	if cli, err := exec.LookPath("redis-cli"); err == nil {
		host, port, _ := strings.Cut(addr, ":")
		out, err := exec.Command(cli, "--tls", "--cacert", pki.CAFile, "-h", host, "-p", port, "STRLEN", "doc").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != strconv.Itoa(len(doc)) {
			t.Errorf("redis-cli --tls STRLEN: %q, %v", out, err)
		}
	}

	// A plain-text client gets no answer but a closed connection.
	if out, err := testutil.Do(addr, "PING"); err == nil && strings.Contains(out, "PONG") {
		t.Fatalf("plain-text PING answered on the TLS port: %q", out)
	}

	// A renewed certificate (same files, new contents) after SIGHUP.
	seen := func() *x509.Certificate {
		t.Helper()
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: certPool(t, pki.CAFile)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0]
	}
	before := seen()
	newCert, newKey := pki.Server(t, "proxy-renewed")
	for _, f := range [][2]string{{newCert, certFile}, {newKey, keyFile}} {
		if err := os.Rename(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	sendSIGHUP(t)
	for i := 0; !strings.Contains(log.String(), "TLS certificate reloaded"); i++ {
		if i > 250 {
			t.Fatalf("no reload in the log: %s", log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if after := seen(); after.SerialNumber.Cmp(before.SerialNumber) == 0 {
		t.Fatalf("still serial %v after SIGHUP", after.SerialNumber)
	}
	if got, err := rdb.Get(ctx, "doc").Result(); err != nil || got != doc {
		t.Fatalf("GET after the reload: %d bytes, %v", len(got), err)
	}
}

// TestProxyCommand_MutualTLS: with --tls-client-ca a client without a
// certificate signed by that CA is refused at the handshake.
func TestProxyCommand_MutualTLS(t *testing.T) {
	r := testutil.StartRedis(t)
	pki := testutil.NewPKI(t)
	certFile, keyFile := pki.Server(t, "proxy")
	addr, log := startProxyCommand(t, "--upstream", r.URL(), "--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", pki.CAFile)
	ctx := context.Background()
	roots := certPool(t, pki.CAFile)

	anonymous := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: &tls.Config{RootCAs: roots}, MaxRetries: -1})
	defer anonymous.Close()
	if err := anonymous.Ping(ctx).Err(); err == nil {
		t.Fatal("a client without a certificate was let in")
	}

	other := testutil.NewPKI(t) // a certificate from another CA
	oc, ok := other.Client(t, "stranger")
	stranger, err := tls.LoadX509KeyPair(oc, ok)
	if err != nil {
		t.Fatal(err)
	}
	intruder := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1,
		TLSConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{stranger}}})
	defer intruder.Close()
	if err := intruder.Ping(ctx).Err(); err == nil {
		t.Fatal("a client with a certificate of another CA was let in")
	}
	for i := 0; strings.Count(log.String(), "client TLS handshake failed") < 2; i++ {
		if i > 250 {
			t.Fatalf("the refused handshakes are not logged: %s", log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	cc, ck := pki.Client(t, "app")
	mine, err := tls.LoadX509KeyPair(cc, ck)
	if err != nil {
		t.Fatal(err)
	}
	app := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{mine}}})
	defer app.Close()
	if err := app.Set(ctx, "k", strings.Repeat("mutual ", 100), 0).Err(); err != nil {
		t.Fatalf("SET with a client certificate: %v", err)
	}
	if got := app.Get(ctx, "k").Val(); got != strings.Repeat("mutual ", 100) {
		t.Fatalf("GET with a client certificate: %q", got)
	}
}

func TestProxyCommand_TLSUsage(t *testing.T) {
	pki := testutil.NewPKI(t)
	certFile, keyFile := pki.Server(t, "proxy")
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--tls-cert", certFile}, 2, "go together"},
		{[]string{"--tls-key", keyFile}, 2, "go together"},
		{[]string{"--tls-client-ca", pki.CAFile}, 2, "needs --tls-cert and --tls-key"},
		{[]string{"--tls-cert", keyFile, "--tls-key", certFile}, 1, "--tls-cert/--tls-key"},
		{[]string{"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", keyFile}, 1, "no PEM certificate"},
	} {
		var stderr syncBuffer
		code := run(context.Background(), env{Stdout: io.Discard, Stderr: &stderr},
			append([]string{"proxy", "--listen", "127.0.0.1:0"}, tt.args...))
		if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tt.args, code, stderr.String(), tt.code, tt.want)
		}
	}
}

// TestRedisTLS_ClientCertificates: a Redis whose TLS port requires client
// certificates (tls-auth-clients yes, its default) is reached by the
// commands' --redis rediss:// URL with SQUEEZE_REDIS_CA, _CERT and _KEY, and
// by the proxy with --upstream-ca, --upstream-cert and --upstream-key.
func TestRedisTLS_ClientCertificates(t *testing.T) {
	pki := testutil.NewPKI(t)
	srvCert, srvKey := pki.Server(t, "redis")
	cliCert, cliKey := pki.Client(t, "squeeze")
	tlsPort := strconv.Itoa(testutil.FreePort(t))
	r := testutil.StartRedis(t, "--tls-port", tlsPort, "--tls-cert-file", srvCert, "--tls-key-file", srvKey,
		"--tls-ca-cert-file", pki.CAFile, "--tls-auth-clients", "yes")
	enc, _ := codec.NewEncoder(codec.MustParseAlgorithm("zstd:3"))
	doc := strings.Repeat(`{"secure":true,"n":42},`, 300)
	if _, err := testutil.Do(r.Addr, "SET", "doc", string(enc.AppendEncode(nil, []byte(doc)))); err != nil {
		t.Fatal(err)
	}
	url := "rediss://127.0.0.1:" + tlsPort
	inspect := func() (string, string, int) { return runCLI(t, nil, "inspect", "--redis", url, "doc") }

	if _, errs, code := inspect(); code == 0 || !strings.Contains(errs, "certificate") {
		t.Fatalf("without the CA: exit %d, %s", code, errs)
	}
	t.Setenv(envRedisCA, pki.CAFile)
	if _, errs, code := inspect(); code == 0 {
		t.Fatalf("without a client certificate Redis let squeeze in: %s", errs)
	}
	t.Setenv(envRedisCert, cliCert)
	if _, errs, code := inspect(); code != 2 || !strings.Contains(errs, "go together") {
		t.Fatalf("a certificate without its key: exit %d, %s", code, errs)
	}
	t.Setenv(envRedisKey, cliKey)
	if out, errs, code := inspect(); code != 0 || !strings.Contains(out, "zstd") {
		t.Fatalf("with CA and client certificate: exit %d\n%s%s", code, out, errs)
	}

	addr, _ := startProxyCommand(t, "--upstream", url, "--upstream-ca", pki.CAFile,
		"--upstream-cert", cliCert, "--upstream-key", cliKey)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if got, err := rdb.Get(context.Background(), "doc").Result(); err != nil || got != doc {
		t.Fatalf("GET through the proxy over mutual TLS: %d bytes, %v", len(got), err)
	}
	if _, errs, code := runCLI(t, nil, "proxy", "--upstream", url, "--upstream-cert", cliCert); code != 2 || !strings.Contains(errs, "go together") {
		t.Fatalf("--upstream-cert without --upstream-key: exit %d, %s", code, errs)
	}
}
