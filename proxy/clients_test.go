package proxy

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// realClient is a client library of another language, driven by a script
// under testdata/clients that runs the commands an application would.
type realClient struct {
	name string
	// command returns the script's command line for url and prefix, or
	// the reason the library is not installed here.
	command func(url, prefix string) ([]string, string)
}

var realClients = []realClient{
	{"node-redis", nodeScript("node-redis")},
	{"node-redis-resp3", nodeScript("node-redis-resp3")},
	{"ioredis", nodeScript("ioredis")},
	{"redis-py", func(url, prefix string) ([]string, string) {
		// Debian's python3-redis lives beside Debian's python3, which
		// another python3 earlier on PATH (pyenv, a virtualenv) may hide.
		for _, py := range []string{"/usr/bin/python3", "python3"} {
			if exec.Command(py, "-c", "import redis").Run() == nil {
				return []string{py, "testdata/clients/python/check.py", url, prefix}, ""
			}
		}
		return nil, "python3 with redis-py not installed (apt-get install -y python3-redis)"
	}},
	{"redis-rb", func(url, prefix string) ([]string, string) {
		if exec.Command("ruby", "-e", "require 'redis'").Run() != nil {
			return nil, "ruby with redis-rb not installed (apt-get install -y ruby-redis)"
		}
		return []string{"ruby", "testdata/clients/ruby/check.rb", url, prefix}, ""
	}},
}

func nodeScript(lib string) func(url, prefix string) ([]string, string) {
	return func(url, prefix string) ([]string, string) {
		if _, err := exec.LookPath("node"); err != nil {
			return nil, "node not installed"
		}
		if _, err := os.Stat("testdata/clients/node/node_modules/ioredis"); err != nil {
			return nil, "node modules not installed (cd proxy/testdata/clients/node && npm ci)"
		}
		return []string{"node", "testdata/clients/node/check.js", lib, url, prefix}, ""
	}
}

// runClient runs a client script and returns its transcript, one JSON line
// per step.
func runClient(t *testing.T, argv []string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s\nstdout:\n%s", strings.Join(argv, " "), err, stderr.String(), stdout.String())
	}
	return strings.Split(strings.TrimSpace(stdout.String()), "\n")
}

// TestRealClients runs applications' commands with the client libraries of
// the languages squeeze's users write in (Node's node-redis in RESP2 and
// RESP3 and ioredis, Python's redis-py, Ruby's redis-rb) once against Redis
// and once through the proxy. The libraries must see the same replies (the
// scripts print digests of everything they got back and check each value
// read back against the one written), while Redis behind the proxy holds
// frames. A library that is not installed skips its part, except under CI,
// where .ci/run installs them all (scripts/setup-clients.sh).
func TestRealClients(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping client libraries in -short mode")
	}
	direct := testutil.StartRedis(t)
	e := startEnv(t, withMinSize(64))
	stored := redis.NewClient(&redis.Options{Addr: e.redis.Addr})
	proxied := redis.NewClient(&redis.Options{Addr: e.addr})
	t.Cleanup(func() { stored.Close(); proxied.Close() })

	for _, rc := range realClients {
		t.Run(rc.name, func(t *testing.T) {
			prefix := rc.name + ":"
			argv, missing := rc.command(direct.URL(), prefix)
			if missing != "" {
				if os.Getenv("CI") != "" {
					t.Fatalf("%s under CI: bash scripts/setup-clients.sh installs it", missing)
				}
				t.Skip(missing)
			}
			want := runClient(t, argv)
			argv, _ = rc.command("redis://"+e.addr, prefix)
			got := runClient(t, argv)

			if len(want) < 20 {
				t.Fatalf("the script ran only %d steps against Redis:\n%s", len(want), strings.Join(want, "\n"))
			}
			for i := 0; i < max(len(want), len(got)); i++ {
				var w, g string
				if i < len(want) {
					w = want[i]
				}
				if i < len(got) {
					g = got[i]
				}
				if w != g {
					t.Errorf("step %d through the proxy:\n got %s\nwant %s", i+1, g, w)
				}
			}

			// Behind the proxy, the values are frames, and much smaller
			// than what the clients read back.
			ctx := context.Background()
			for _, c := range []struct {
				what string
				get  func(*redis.Client) ([]byte, error)
			}{
				{"the string", func(r *redis.Client) ([]byte, error) { return r.Get(ctx, prefix+"binary").Bytes() }},
				{"the hash field", func(r *redis.Client) ([]byte, error) { return r.HGet(ctx, prefix+"h", "big").Bytes() }},
				{"the list element", func(r *redis.Client) ([]byte, error) { return r.LIndex(ctx, prefix+"l", 0).Bytes() }},
				{"the pipelined string", func(r *redis.Client) ([]byte, error) { return r.Get(ctx, prefix+"p:39").Bytes() }},
			} {
				frame, err := c.get(stored)
				if err != nil {
					t.Fatalf("%s in Redis: %v", c.what, err)
				}
				value, err := c.get(proxied)
				if err != nil {
					t.Fatalf("%s through the proxy: %v", c.what, err)
				}
				if !codec.IsFramed(frame) || 2*len(frame) > len(value) {
					t.Errorf("%s: Redis holds %d bytes (framed: %v) for a value of %d", c.what, len(frame), codec.IsFramed(frame), len(value))
				}
			}
		})
	}
}
