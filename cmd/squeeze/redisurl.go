package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/squeeze-kv/squeeze/archive"
	"github.com/squeeze-kv/squeeze/counters"
	"github.com/squeeze-kv/squeeze/dictstore"
)

// envRedis names the Redis of every command when --redis is not given, so
// that a shell (or a guide) says once which server the commands work on.
// The proxy reads --upstream and SQUEEZE_UPSTREAM instead.
const envRedis = "SQUEEZE_REDIS"

// localRedis is what the commands that have a default server (archive,
// counters) use when neither --redis nor SQUEEZE_REDIS names one.
const localRedis = "redis://127.0.0.1:6379"

// redisForms lists what --redis and SQUEEZE_REDIS accept, for help texts
// and errors.
const redisForms = "redis://[user:pass@]host:port[/db], host:port, rediss://, unix:///path/redis.sock or sentinel://host:26379/master"

// addRedisFlag defines --redis on fs, its value empty unless given: the
// command resolves it with resolveRedis. purpose begins the help line
// ("Redis server `URL` holding the data"); fallback says what is used
// when neither the flag nor SQUEEZE_REDIS names a server.
func addRedisFlag(fs *flag.FlagSet, purpose, fallback string) *string {
	return fs.String("redis", "", fmt.Sprintf("%s: %s (default: $%s, else %s)", purpose, redisForms, envRedis, fallback))
}

// resolveRedis returns the URL of the Redis a command talks to: the value
// of --redis when given, else SQUEEZE_REDIS when set, else def (empty when
// the command has no default). host:port and the path of a unix socket
// become URLs. A value that is none of the accepted forms is a usage error
// naming where it came from.
func resolveRedis(flagValue, def string) (string, error) {
	raw, from := flagValue, "--redis"
	if raw == "" {
		raw, from = strings.TrimSpace(os.Getenv(envRedis)), envRedis
	}
	if raw == "" {
		return def, nil
	}
	u, err := normalizeRedisURL(raw)
	if err != nil {
		return "", usageError("%s %s: %v", from, redactURL(raw), err)
	}
	return u, nil
}

// normalizeRedisURL turns the short forms of a Redis address into the URL
// go-redis parses: host:port (and [v6]:port) into redis://host:port, an
// absolute path into unix://path. URLs pass unchanged.
func normalizeRedisURL(s string) (string, error) {
	switch {
	case strings.Contains(s, "://"):
		return s, nil
	case strings.HasPrefix(s, "/"):
		return "unix://" + s, nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("not a Redis address; want %s", redisForms)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q is not a number in 1..65535; want %s", port, redisForms)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return "redis://" + net.JoinHostPort(host, port), nil
}

// needRedisError is the error of a command that has no default server when
// neither --redis nor SQUEEZE_REDIS names one.
func needRedisError(cmd, why string) error {
	return usageError("%s needs a Redis: --redis URL or %s=URL (%s; e.g. --redis 127.0.0.1:6379)", cmd, envRedis, why)
}

// atRedis names the server in an error that says something is not there
// (a key, a file of an archive, a dictionary), so that a command that read
// the wrong server (a forgotten --redis or SQUEEZE_REDIS) says which one
// it read. Other errors pass unchanged.
func atRedis(err error, url string) error {
	if err == nil {
		return nil
	}
	var nf notFoundError
	for _, target := range []error{archive.ErrNotFound, dictstore.ErrNotFound, counters.ErrSource} {
		if errors.Is(err, target) {
			return fmt.Errorf("%w, on the Redis at %s", err, redactURL(url))
		}
	}
	if errors.As(err, &nf) {
		return fmt.Errorf("%w, on the Redis at %s", err, redactURL(url))
	}
	return err
}

// notFoundError is the error of a command that reads a key, a hash field or
// a list element that is not there; atRedis adds the server to it.
type notFoundError struct{ msg string }

func (e notFoundError) Error() string { return e.msg }

func notFound(format string, args ...any) error { return notFoundError{fmt.Sprintf(format, args...)} }

// addBenchRedisFlag defines --redis for the demo and the benchmark studies,
// which start a throwaway redis-server of their own unless it is given:
// they write and measure, so they ignore SQUEEZE_REDIS, which names the
// Redis that holds your data.
func addBenchRedisFlag(fs *flag.FlagSet, purpose string) *string {
	return fs.String("redis", "", fmt.Sprintf("%s (`URL`: redis://host:port/db, host:port, unix:///path.sock); default: start a throwaway redis-server ($%s is not read: a benchmark writes to your server only when told to)", purpose, envRedis))
}
