package client

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
	"github.com/squeeze-kv/squeeze/proxy"
)

// startProxy runs a squeeze proxy in front of r, compressing with enc, and
// returns its address.
func startProxy(t *testing.T, r *testutil.Redis, enc *codec.Encoder) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &proxy.Server{Upstream: r.URL(), Encoder: enc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		s.Close()
		<-done
	})
	return ln.Addr().String()
}

// TestInterop_Proxy writes through the library and reads through the proxy,
// and the other way round, with every codec and level, for each family; and
// checks values written raw by a plain client read as they are through both.
func TestInterop_Proxy(t *testing.T) {
	ctx := context.Background()
	r := testutil.StartRedis(t)
	plain := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer plain.Close()
	v := big("interop")

	type side struct {
		name string
		c    *redis.Client
	}
	for _, alg := range codec.Algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			enc, err := codec.NewEncoder(alg, codec.WithMinSize(0), codec.WithMinGain(-1))
			if err != nil {
				t.Fatal(err)
			}
			lib := redis.NewClient(&redis.Options{Addr: r.Addr})
			defer lib.Close()
			if _, err := Install(lib, Config{Encoder: enc}); err != nil {
				t.Fatal(err)
			}
			viaProxy := redis.NewClient(&redis.Options{Addr: startProxy(t, r, enc)})
			defer viaProxy.Close()

			for _, dir := range [][2]side{{{"library", lib}, {"proxy", viaProxy}}, {{"proxy", viaProxy}, {"library", lib}}} {
				w, rd := dir[0], dir[1]
				k := alg.String() + ":" + w.name + ":"
				if err := w.c.Set(ctx, k+"s", v, 0).Err(); err != nil {
					t.Fatal(err)
				}
				w.c.HSet(ctx, k+"h", "f", v, "g", "x")
				w.c.RPush(ctx, k+"l", v, "x", v)
				w.c.XAdd(ctx, &redis.XAddArgs{Stream: k + "x", Values: []any{"f", v}})
				if alg.ID != codec.IDNone {
					stored := plain.Get(ctx, k+"s").Val()
					if h, err := codec.ParseHeader([]byte(stored)); err != nil || h.ID != alg.ID {
						t.Fatalf("%s wrote %+v, %v", w.name, h, err)
					}
				}
				if got, err := rd.c.Get(ctx, k+"s").Result(); err != nil || got != v {
					t.Fatalf("%s -> %s GET: %v", w.name, rd.name, err)
				}
				if got := rd.c.HGetAll(ctx, k+"h").Val(); got["f"] != v || got["g"] != "x" {
					t.Fatalf("%s -> %s HGETALL", w.name, rd.name)
				}
				if got := rd.c.LRange(ctx, k+"l", 0, -1).Val(); !slices.Equal(got, []string{v, "x", v}) {
					t.Fatalf("%s -> %s LRANGE", w.name, rd.name)
				}
				if got := rd.c.XRange(ctx, k+"x", "-", "+").Val(); len(got) != 1 || got[0].Values["f"] != v {
					t.Fatalf("%s -> %s XRANGE", w.name, rd.name)
				}
				if n := rd.c.StrLen(ctx, k+"s").Val(); n != int64(len(v)) {
					t.Fatalf("%s -> %s STRLEN = %d, want %d", w.name, rd.name, n, len(v))
				}
			}

			// Values written raw by a client without squeeze read as they are.
			for _, raw := range []string{"", "plain", big("old client"), "\x00\xff"} {
				plain.Set(ctx, "raw:"+alg.String(), raw, 0)
				for _, s := range []side{{"library", lib}, {"proxy", viaProxy}} {
					if got, err := s.c.Get(ctx, "raw:"+alg.String()).Result(); err != nil || got != raw {
						t.Fatalf("raw %q via %s = %q, %v", raw, s.name, got, err)
					}
				}
			}
		})
	}
}

// TestInterop_ScriptPrefixAnnounced: a prefix the hook learns reaches a
// proxy in front of the same Redis at once, which then stores its values
// plain, and its last use is saved for the proxies' TTL.
func TestInterop_ScriptPrefixAnnounced(t *testing.T) {
	ctx := context.Background()
	r := testutil.StartRedis(t)
	enc, err := codec.NewEncoder(codec.DefaultAlgorithm, codec.WithMinSize(0))
	if err != nil {
		t.Fatal(err)
	}
	viaProxy := redis.NewClient(&redis.Options{Addr: startProxy(t, r, enc)})
	defer viaProxy.Close()
	viaProxy.Ping(ctx) // the proxy is up
	plain := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer plain.Close()
	// and listens for prefixes (a busy machine starts the listener late).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if plain.PubSubNumSub(ctx, ScriptPrefixesKey).Val()[ScriptPrefixesKey] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the proxy does not listen for script prefixes after 10 s")
		}
	}
	lib := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer lib.Close()
	if _, err := Install(lib, Config{Encoder: enc}); err != nil {
		t.Fatal(err)
	}
	token := big("token")
	lib.Set(ctx, "mutex:a", token, 0)
	if n, err := redis.NewScript(lockRelease).Run(ctx, lib, []string{"mutex:a"}, token).Int(); err != nil || n != 1 {
		t.Fatalf("release = %d, %v", n, err)
	}
	if err := viaProxy.Set(ctx, "mutex:b", token, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if codec.IsFramed([]byte(plain.Get(ctx, "mutex:b").Val())) {
		t.Fatal("the proxy stored mutex:b compressed right after the hook learned mutex:")
	}
	if plain.HExists(ctx, ScriptPrefixesKey+":used", "mutex:").Val() != true {
		t.Fatal("the hook did not save the prefix's last use")
	}
}
