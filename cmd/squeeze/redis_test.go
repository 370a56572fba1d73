package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// silentServer accepts connections and never answers, as a host that is not
// a Redis server (or a hung one) does.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestRedisURL_FailsFast: every command that takes a Redis URL fails within
// the probe timeout with one clear line when nothing answers there (it used
// to wait 30 s, or fail with a bare "i/o timeout"), and never prints the
// password of the URL.
func TestRedisURL_FailsFast(t *testing.T) {
	old := redisProbeTimeout
	redisProbeTimeout = 500 * time.Millisecond
	t.Cleanup(func() { redisProbeTimeout = old })
	// Port 1 (tcpmux) is closed on any test machine; a port freed by the
	// test itself could be taken meanwhile by a test server of another
	// package.
	silent, closed := silentServer(t), "127.0.0.1:1"
	for _, target := range []struct{ addr, want string }{
		{silent, "no reply to PING within 500ms"},
		{closed, "connection refused"},
	} {
		url := "redis://user:s3cret@" + target.addr
		for _, args := range [][]string{
			{"bench", "redis", "--redis", url, "--quick"},
			{"bench", "docs", "--redis", url, "--shaped", "off"},
			{"bench", "codecs", "--from-redis", url},
			{"demo", "--redis", url},
			{"bench", "counters", "--redis", url, "--entities", "10", "--days", "3"},
			{"counters", "get", "--redis", url, "user42", "1"},
			{"counters", "incr", "--redis", url, "user42", "1"},
			{"counters", "migrate", "--from", "list", "--redis", url, "old", "new"},
		} {
			t.Run(target.want+"/"+strings.Join(args[:2], "_"), func(t *testing.T) {
				start := time.Now()
				stdout, stderr, code := runCLI(t, nil, args...)
				// A liveness bound, far from the 500 ms probe so that a loaded
				// machine passes: what it catches is the old 30 s hang.
				if took := time.Since(start); took > 15*time.Second {
					t.Errorf("took %v", took)
				}
				if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, target.want) {
					t.Errorf("exit %d, stdout %q, stderr %q; want one line with %q", code, stdout, stderr, target.want)
				}
				if strings.Contains(stderr, "s3cret") {
					t.Errorf("password printed: %q", stderr)
				}
			})
		}
	}
}

// TestRedisURL_Sentinel: commands that take --redis also take a
// sentinel:// URL and reach the master the Sentinel names.
func TestRedisURL_Sentinel(t *testing.T) {
	master := testutil.StartRedis(t)
	sen := testutil.StartSentinel(t, "m", master.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: master.Addr})
	defer rdb.Close()
	ctx := context.Background()
	for i := range 20 {
		rdb.Set(ctx, fmt.Sprintf("page:%d", i), strings.Repeat(`{"user":"squeeze","n":12345},`, 200), 0)
	}
	url := "sentinel://" + sen.Addr + "/m"
	out, errs, code := runCLI(t, nil, "advise", "--redis", url, "--no-dict")
	if code != 0 || !strings.Contains(out, "page:") {
		t.Fatalf("advise --redis %s: exit %d\n%s%s", url, code, out, errs)
	}
	if _, errs, code := runCLI(t, nil, "advise", "--redis", "sentinel://"+sen.Addr+"/nosuchmaster", "--no-dict"); code != 1 || !strings.Contains(errs, `does not know the master "nosuchmaster"`) {
		t.Errorf("advise with an unknown master: exit %d, %q", code, errs)
	}
}
