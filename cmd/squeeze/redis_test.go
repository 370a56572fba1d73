package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/dictstore"
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
	_, err := os.Stat("report") // the demo's default --report, in the package directory
	hadReport := err == nil
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
				if args[0] == "demo" && !hadReport {
					if _, err := os.Stat("report"); !os.IsNotExist(err) {
						t.Errorf("a failed demo left ./report behind (stat: %v)", err)
					}
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

// TestInspect_Redis: "squeeze inspect --redis URL KEY [FIELD|INDEX]" reads
// the stored bytes itself, verifies frames that name a published
// dictionary with it, and says clearly what it cannot inspect.
func TestInspect_Redis(t *testing.T) {
	r := testutil.StartRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	docs := publishTestDict(t, r.Addr, 31337)
	d, err := dictstore.NewResolver(rdb)
	if err != nil {
		t.Fatal(err)
	}
	dict, err := d.Dictionary(ctx, 31337)
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Join(docs[:20], []byte(","))
	plain, _ := codec.NewEncoder(codec.MustParseAlgorithm("zstd:3"))
	withDict, _ := codec.NewEncoder(codec.MustParseAlgorithm("zstd:1"), codec.WithDictionary(dict))
	rdb.Set(ctx, "doc", plain.AppendEncode(nil, value), 0)
	rdb.HSet(ctx, "h", "f", withDict.AppendEncode(nil, value))
	rdb.RPush(ctx, "l", "first", plain.AppendEncode(nil, value))
	rdb.Set(ctx, "raw", "just text", 0)
	rdb.SAdd(ctx, "set", "member")
	url := "redis://" + r.Addr
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"doc"}, 0, `string "doc": squeeze frame`},
		{[]string{"h", "f"}, 0, "dict id   31337"},
		{[]string{"l", "1"}, 0, `list "l" index 1: squeeze frame`},
		{[]string{"l"}, 0, "raw value"},
		{[]string{"raw"}, 0, "raw value (no squeeze frame): 9 bytes"},
		{[]string{"h"}, 2, "name the FIELD"},
		{[]string{"h", "nofield"}, 1, `hash "h" has no field "nofield"`},
		{[]string{"set"}, 1, `"set" is a set`},
		{[]string{"missing"}, 1, `key "missing" does not exist`},
		{[]string{"l", "x"}, 2, "INDEX must be a number"},
	} {
		out, errs, code := runCLI(t, nil, append([]string{"inspect", "--redis", url}, tt.args...)...)
		if code != tt.code || !strings.Contains(out+errs, tt.want) {
			t.Errorf("inspect %q: exit %d, %q %q; want %d and %q", tt.args, code, out, errs, tt.code, tt.want)
		}
	}
	out, _, code := runCLI(t, nil, "inspect", "--json", "--redis", url, "h", "f")
	if code != 0 || !strings.Contains(out, `"valid": true`) || !strings.Contains(out, `"source": "hash \"h\" field \"f\""`) {
		t.Errorf("inspect --json of a dictionary frame: %d %s", code, out)
	}
}
