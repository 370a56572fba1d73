package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Environment variables with the TLS settings of every command's --redis
// when it is a rediss:// URL (the proxy has flags instead: --upstream-ca,
// --upstream-cert, --upstream-key).
const (
	envRedisCA   = "SQUEEZE_REDIS_CA"   // PEM file of the CA that signed Redis's certificate
	envRedisCert = "SQUEEZE_REDIS_CERT" // PEM file of a client certificate
	envRedisKey  = "SQUEEZE_REDIS_KEY"  // PEM file of its key
)

// clientTLS returns the TLS settings towards a rediss:// Redis: trust the
// CA in caFile (empty: the system's roots), and present the client
// certificate certFile with keyFile when given, which a Redis with
// tls-auth-clients yes (its default) requires. names says which flags or
// variables the files came from, for errors. It returns nil when all are
// empty.
func clientTLS(caFile, certFile, keyFile string, names [3]string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pemBytes, err := os.ReadFile(caFile)
		if err != nil {
			return nil, usageError("%s: %v", names[0], err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pemBytes) {
			return nil, usageError("%s: no PEM certificate in %s", names[0], caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, usageError("%s and %s go together: a client certificate and its private key", names[1], names[2])
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", names[1], names[2], err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// applyRedisTLSEnv puts the SQUEEZE_REDIS_CA, _CERT and _KEY settings into
// the TLS settings that go-redis made for a rediss:// URL (nil for other
// URLs, which they do not concern).
func applyRedisTLSEnv(cfg *tls.Config) error {
	if cfg == nil {
		return nil
	}
	env, err := clientTLS(os.Getenv(envRedisCA), os.Getenv(envRedisCert), os.Getenv(envRedisKey),
		[3]string{envRedisCA, envRedisCert, envRedisKey})
	if err != nil || env == nil {
		return err
	}
	if env.RootCAs != nil {
		cfg.RootCAs = env.RootCAs
	}
	cfg.Certificates = env.Certificates
	if cfg.MinVersion < env.MinVersion {
		cfg.MinVersion = env.MinVersion
	}
	return nil
}
