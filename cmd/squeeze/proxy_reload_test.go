//go:build unix

package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestProxyCommand_Reload: after the config file changes, SIGHUP puts the
// new write policy in force on the running proxy, over a connection opened
// before; a config that does not parse changes nothing and is logged.
func TestProxyCommand_Reload(t *testing.T) {
	r := testutil.StartRedis(t)
	cfg := filepath.Join(t.TempDir(), "squeeze.conf")
	write := func(text string) {
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("codec = lz4\nmin-size = 0\n")
	port, mport := testutil.FreePort(t), testutil.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, env{Stdout: io.Discard, Stderr: &stderr}, []string{"proxy", "--config", cfg,
			"--listen", "127.0.0.1:" + strconv.Itoa(port), "--upstream", r.URL(), "--log-format", "json",
			"--metrics", "127.0.0.1:" + strconv.Itoa(mport)})
	}()
	defer func() { cancel(); <-done }()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), PoolSize: 1})
	defer rdb.Close()
	direct := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer direct.Close()
	ctx2 := context.Background()
	doc := strings.Repeat(`{"user":"squeeze","tags":["a","b"],"n":12345},`, 100)
	for i := 0; rdb.Ping(ctx2).Err() != nil; i++ { // the proxy may still be starting
		if i > 200 {
			t.Fatal("proxy did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stored := func(key string) codec.ID {
		t.Helper()
		if err := rdb.Set(ctx2, key, doc, 0).Err(); err != nil {
			t.Fatal(err)
		}
		h, err := codec.ParseHeader([]byte(direct.Get(ctx2, key).Val()))
		if err != nil {
			return codec.IDNone // raw
		}
		return h.ID
	}
	reload := func(wantLog string) {
		t.Helper()
		sendSIGHUP(t)
		for i := 0; !strings.Contains(stderr.String(), wantLog); i++ {
			if i > 250 {
				t.Fatalf("no %q in the log:\n%s", wantLog, stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if id := stored("a"); id != codec.IDLZ4 {
		t.Fatalf("before SIGHUP: stored with %s, want lz4", id)
	}
	write("codec = zstd:3\nmin-size = 0\nrule = img:=none\nmax-in-flight = 100\nlisten = 127.0.0.1:1 # the command line beats it\n")
	reload("write policy reloaded")
	if id := stored("b"); id != codec.IDZstd {
		t.Errorf("after SIGHUP: stored with %s, want zstd", id)
	}
	if id := stored("img:1"); id != codec.IDNone {
		t.Errorf("after SIGHUP: img:1 stored with %s, want raw", id)
	}
	if !strings.Contains(stderr.String(), `"settings":"max-in-flight"`) {
		t.Errorf("the changed --max-in-flight is not logged as needing a restart:\n%s", stderr.String())
	}
	write("codec = zstd:99\n")
	reload("settings not reloaded")
	if id := stored("c"); id != codec.IDZstd {
		t.Errorf("after a bad config: stored with %s, want zstd still", id)
	}
	if got := rdb.Get(ctx2, "a").Val(); got != doc {
		t.Errorf("a value written before the reload reads back as %d bytes", len(got))
	}
	// The counters follow the log lines.
	for i := 0; ; i++ {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(mport) + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ok := strings.Contains(string(body), `squeeze_proxy_config_reloads_total{outcome="ok"} 1`)
		failed := strings.Contains(string(body), `squeeze_proxy_config_reloads_total{outcome="failed"} 1`)
		if ok && failed {
			break
		}
		if i > 100 {
			t.Fatalf("/metrics: reload counters ok %v, failed %v", ok, failed)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
