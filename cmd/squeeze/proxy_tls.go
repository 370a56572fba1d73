package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync/atomic"
)

// listenTLS holds the certificate the proxy presents to its clients, read
// from files at start and again at every SIGHUP, so that a renewed
// certificate (cert-manager, certbot) takes effect without a restart:
// connections made from then on get the new one.
type listenTLS struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

// newListenTLS returns the TLS settings of --tls-cert, --tls-key and
// --tls-client-ca, or nil when TLS is off. With a client CA, clients must
// present a certificate it signed (mutual TLS), as redis-server does with
// tls-auth-clients yes.
func newListenTLS(p *proxyFlags) (*tls.Config, *listenTLS, error) {
	switch {
	case p.tlsCert == "" && p.tlsKey == "" && p.tlsClientCA == "":
		return nil, nil, nil
	case p.tlsCert == "" && p.tlsKey == "":
		return nil, nil, usageError("--tls-client-ca needs --tls-cert and --tls-key: clients check the proxy's certificate before it checks theirs")
	case p.tlsCert == "" || p.tlsKey == "":
		return nil, nil, usageError("--tls-cert and --tls-key go together: the certificate clients see and its private key")
	}
	l := &listenTLS{certFile: p.tlsCert, keyFile: p.tlsKey}
	if err := l.reload(); err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return l.cert.Load(), nil
		},
	}
	if p.tlsClientCA != "" {
		pemBytes, err := os.ReadFile(p.tlsClientCA)
		if err != nil {
			return nil, nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			return nil, nil, fmt.Errorf("--tls-client-ca: no PEM certificate in %s", p.tlsClientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, l, nil
}

// reload reads the certificate and key files again; on error the
// certificate in use stays.
func (l *listenTLS) reload() error {
	cert, err := tls.LoadX509KeyPair(l.certFile, l.keyFile)
	if err != nil {
		return fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	l.cert.Store(&cert)
	return nil
}
