package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// writeTestPKI writes a CA and a server certificate for 127.0.0.1 into dir
// and returns the paths of ca.pem, server.pem and server.key.
func writeTestPKI(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "squeeze test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server.key", "EC PRIVATE KEY", keyDER)
}

// TestProxy_TLSUpstream runs the proxy against a redis-server that speaks
// TLS on a second port (rediss://), trusting a private CA, and checks that
// values go in compressed and come back whole; an untrusted certificate is
// a clear error, not a silent plaintext fallback.
func TestProxy_TLSUpstream(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := writeTestPKI(t, dir)
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

	// Without the private CA the handshake fails and the client is told.
	e2 := startProxy(t, upstream, r)
	if got := dialRaw(t, e2.addr).do("GET", "doc"); !strings.HasPrefix(got, "-ERR") || !strings.Contains(got, "certificate") {
		t.Fatalf("untrusted upstream certificate: %q", got)
	}
}
