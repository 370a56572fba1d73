package proxy

import (
	"bytes"
	"context"
	"fmt"
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

// realClient is a client library of another language, driven by scripts
// under testdata/clients that run the commands an application would.
type realClient struct {
	name string
	// check and cluster return the command lines of the script for one
	// Redis (url) and for a cluster (seed is HOST:PORT), or the reason the
	// library is not installed here; cluster is nil for a library whose
	// cluster client is not tested.
	check   func(url, prefix string) ([]string, string)
	cluster func(seed, prefix string) ([]string, string)
}

var realClients = []realClient{
	{"node-redis", nodeScript("check.js", "node-redis"), nodeScript("cluster.js", "node-redis")},
	{"node-redis-resp3", nodeScript("check.js", "node-redis-resp3"), nil},
	{"ioredis", nodeScript("check.js", "ioredis"), nodeScript("cluster.js", "ioredis")},
	{"redis-py", pythonScript("check.py"), pythonScript("cluster.py")},
	{"redis-rb", rubyScript("check.rb"), rubyScript("cluster.rb")},
}

func nodeScript(script, lib string) func(url, prefix string) ([]string, string) {
	return func(url, prefix string) ([]string, string) {
		if _, err := exec.LookPath("node"); err != nil {
			return nil, "node not installed"
		}
		if _, err := os.Stat("testdata/clients/node/node_modules/ioredis"); err != nil {
			return nil, "node modules not installed (cd proxy/testdata/clients/node && npm ci)"
		}
		return []string{"node", "testdata/clients/node/" + script, lib, url, prefix}, ""
	}
}

func pythonScript(script string) func(url, prefix string) ([]string, string) {
	return func(url, prefix string) ([]string, string) {
		// Debian's python3-redis lives beside Debian's python3, which
		// another python3 earlier on PATH (pyenv, a virtualenv) may hide.
		for _, py := range []string{"/usr/bin/python3", "python3"} {
			if exec.Command(py, "-c", "import redis").Run() == nil {
				return []string{py, "testdata/clients/python/" + script, url, prefix}, ""
			}
		}
		return nil, "python3 with redis-py not installed (apt-get install -y python3-redis)"
	}
}

func rubyScript(script string) func(url, prefix string) ([]string, string) {
	return func(url, prefix string) ([]string, string) {
		if exec.Command("ruby", "-e", "require 'redis'").Run() != nil {
			return nil, "ruby with redis-rb not installed (apt-get install -y ruby-redis)"
		}
		return []string{"ruby", "testdata/clients/ruby/" + script, url, prefix}, ""
	}
}

// scriptOrSkip returns a script's command line, or skips the test when its
// library is missing, except under CI, where that fails it.
func scriptOrSkip(t *testing.T, script func(string, string) ([]string, string), target, prefix string) []string {
	t.Helper()
	argv, missing := script(target, prefix)
	if missing != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s under CI: bash scripts/setup-clients.sh installs it", missing)
		}
		t.Skip(missing)
	}
	return argv
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
			want := runClient(t, scriptOrSkip(t, rc.check, direct.URL(), prefix))
			got := runClient(t, scriptOrSkip(t, rc.check, "redis://"+e.addr, prefix))

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
				{"the moved list element", func(r *redis.Client) ([]byte, error) { return r.LIndex(ctx, prefix+"l3", 0).Bytes() }},
				{"the stream entry", func(r *redis.Client) ([]byte, error) {
					m, err := r.XRange(ctx, prefix+"s", "-", "+").Result()
					if err != nil || len(m) == 0 {
						return nil, fmt.Errorf("XRANGE: %v, %d entries", err, len(m))
					}
					return []byte(fmt.Sprint(m[0].Values["body"])), nil
				}},
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

// TestRealClients_Cluster gives the cluster clients of node-redis, ioredis,
// redis-py and redis-rb one proxy of a Redis Cluster: each must learn the
// other proxies from it, use only proxies, never the nodes, and read back
// every value it wrote on keys spread over all slots, while every node
// holds frames.
func TestRealClients_Cluster(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping client libraries in -short mode")
	}
	nodes, proxies := startClusterProxies(t)
	isProxy := map[string]bool{}
	for _, p := range proxies {
		isProxy[p.addr] = true
	}
	for _, rc := range realClients {
		if rc.cluster == nil {
			continue
		}
		t.Run(rc.name, func(t *testing.T) {
			prefix := rc.name + ":"
			out := runClient(t, scriptOrSkip(t, rc.cluster, proxies[0].addr, prefix))
			used := 0
			for _, line := range out {
				addr, ok := strings.CutPrefix(line, "node ")
				if !ok {
					t.Fatalf("unexpected output %q", line)
				}
				if !isProxy[addr] {
					t.Errorf("the client used %s, not a proxy", addr)
				}
				used++
			}
			if used != len(proxies) {
				t.Errorf("the client used %d addresses, want the %d proxies: %q", used, len(proxies), out)
			}
			framed := 0
			for _, n := range nodes {
				for i := range 30 {
					v, err := testutil.Do(n.Addr, "GET", prefix+"doc:"+strconv.Itoa(i))
					if err != nil || strings.HasPrefix(v, "-MOVED") || v == "$-1" {
						continue
					}
					if !codec.IsFramed([]byte(v)) {
						t.Errorf("%sdoc:%d on %s is stored raw", prefix, i, n.Addr)
					}
					framed++
				}
			}
			if framed != 30 {
				t.Errorf("found %d of 30 keys framed on their nodes", framed)
			}
		})
	}
}
