package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/codec"
)

// TestPorts_RoundTrip: what a user of the portable profile does across
// languages. A Node program writes JSON documents straight to Redis with
// ioredis, compressed by ports/node; the proxy reads them back as they
// were. The proxy, writing with a portable codec, stores values a Python
// program reads straight from Redis with redis-py and ports/python.
func TestPorts_RoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping other languages in -short mode")
	}
	node := scriptOrSkip(t, portScript("node", "ports/node/node_modules", "write.js"), "", "")
	python := scriptOrSkip(t, portScript("/usr/bin/python3", "", "read.py"), "", "")
	e := startEnv(t, func(s *Server) {
		enc, err := codec.NewEncoder(codec.PortableDefault, codec.WithMinSize(64))
		if err != nil {
			t.Fatal(err)
		}
		s.Encoder = enc
	})
	ctx := context.Background()
	proxied := redis.NewClient(&redis.Options{Addr: e.addr})
	stored := redis.NewClient(&redis.Options{Addr: e.redis.Addr})
	t.Cleanup(func() { proxied.Close(); stored.Close() })

	// Node writes, the proxy reads.
	lines := runClient(t, append(node, e.redis.URL(), "node:", "10"))
	if len(lines) != 10 {
		t.Fatalf("the Node program wrote %d documents, want 10:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, line := range lines {
		key, sum, _ := strings.Cut(line, " ")
		raw, err := stored.Get(ctx, key).Bytes()
		if err != nil || !codec.IsFramed(raw) {
			t.Fatalf("%s: Redis holds %d bytes, not a frame (%v)", key, len(raw), err)
		}
		got, err := proxied.Get(ctx, key).Bytes()
		if err != nil || digest(got) != sum {
			t.Fatalf("%s read through the proxy: %d bytes, %v; not the document Node wrote", key, len(got), err)
		}
	}

	// The proxy writes, Python reads.
	keys := []string{}
	want := map[string]string{}
	for i := range 10 {
		key := "py:" + strconv.Itoa(i)
		doc := []byte(compressible(300+i*500, i))
		if err := proxied.Set(ctx, key, doc, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if raw, _ := stored.Get(ctx, key).Bytes(); !codec.IsFramed(raw) || bytes.Equal(raw, doc) {
			t.Fatalf("%s: the proxy stored it raw", key)
		}
		keys, want[key] = append(keys, key), digest(doc)
	}
	for _, line := range runClient(t, append(append(python, e.redis.URL()), keys...)) {
		key, sum, _ := strings.Cut(line, " ")
		if want[key] != sum {
			t.Errorf("%s decoded in Python: not the value written through the proxy", key)
		}
		delete(want, key)
	}
	if len(want) > 0 {
		t.Errorf("Python did not read %d keys", len(want))
	}
}

// portScript returns a script under testdata/ports run by interpreter, or
// why it cannot run here: the interpreter or the port's packages missing.
func portScript(interpreter, needs, script string) func(string, string) ([]string, string) {
	return func(string, string) ([]string, string) {
		if _, err := exec.LookPath(interpreter); err != nil {
			return nil, interpreter + " not installed"
		}
		if needs != "" {
			if _, err := os.Stat("../" + needs); err != nil {
				return nil, needs + " missing (bash scripts/setup-ports.sh installs it)"
			}
		}
		if script == "read.py" && exec.Command(interpreter, "-c", "import redis, zstandard, lz4, brotli, snappy").Run() != nil {
			return nil, "redis-py or the compression modules missing (bash scripts/setup-ports.sh, setup-clients.sh)"
		}
		return []string{interpreter, "testdata/ports/" + script}, ""
	}
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
