package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestProxy_TLSUpstream runs the proxy against a redis-server that speaks
// TLS on a second port (rediss://), trusting a private CA, and checks that
// values go in compressed and come back whole; an untrusted certificate is
// a clear error, not a silent plaintext fallback.
func TestProxy_TLSUpstream(t *testing.T) {
	pki := testutil.NewPKI(t)
	caFile := pki.CAFile
	certFile, keyFile := pki.Server(t, "redis")
	tlsPort := testutil.FreePort(t)
	r := testutil.StartRedis(t, "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", certFile,
		"--tls-key-file", keyFile, "--tls-ca-cert-file", caFile, "--tls-auth-clients", "no")
	roots := x509.NewCertPool()
	pemBytes, _ := os.ReadFile(caFile)
	roots.AppendCertsFromPEM(pemBytes)
	upstream := "rediss://127.0.0.1:" + strconv.Itoa(tlsPort)

	e := startProxy(t, upstream, r, func(s *Server) { s.TLSConfig = &tls.Config{RootCAs: roots} })
	c := dialRaw(t, e.addr)
	doc := compressible(20000, 1)
	if got := c.do("SET", "doc", doc); got != "+OK\r\n" {
		t.Fatalf("SET over TLS: %q", got)
	}
	if got := c.do("GET", "doc"); got != bulk(doc) {
		t.Fatalf("GET over TLS returned %d bytes, want the document", len(got))
	}
	stored := dialRaw(t, r.Addr).do("GET", "doc") // Redis's plain port shows the frame
	if !strings.Contains(stored, codec.Magic) || len(stored) >= len(doc) {
		t.Fatalf("stored value is not a compressed frame (%d bytes)", len(stored))
	}

	// The proxy's own connections for the prefixes scripts use go over
	// TLS too: a prefix is announced and saved.
	c.do("EVAL", "return redis.call('STRLEN', KEYS[1])", "1", "doc")
	waitMember(t, dialRaw(t, r.Addr), ScriptPrefixesKey, "doc")

	// Without the private CA the handshake fails and the client is told.
	e2 := startProxy(t, upstream, r)
	if got := dialRaw(t, e2.addr).do("GET", "doc"); !strings.HasPrefix(got, "-ERR") || !strings.Contains(got, "certificate") {
		t.Fatalf("untrusted upstream certificate: %q", got)
	}
}
