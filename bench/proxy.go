package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/proxy"
)

// proxyFor starts an in-process squeeze proxy with algorithm a in front of
// the Redis that rdb talks to, on a free loopback port, and returns a client
// connected through it and a function that stops both.
func proxyFor(ctx context.Context, rdb *redis.Client, a codec.Algorithm) (*redis.Client, func(), error) {
	enc, err := codec.NewEncoder(a)
	if err != nil {
		return nil, nil, err
	}
	opt := rdb.Options()
	if opt.Network == "unix" {
		return nil, nil, errors.New("bench: the proxy path needs a TCP Redis address")
	}
	u := url.URL{Scheme: "redis", Host: opt.Addr, Path: "/" + strconv.Itoa(opt.DB)}
	if opt.Username != "" || opt.Password != "" {
		u.User = url.UserPassword(opt.Username, opt.Password)
	}
	if opt.TLSConfig != nil {
		u.Scheme = "rediss"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("proxy listener: %w", err)
	}
	srv := &proxy.Server{
		Upstream: u.String(),
		Encoder:  enc,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	done := make(chan error, 1)
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() { done <- srv.Serve(sctx, ln) }()
	// A stock go-redis client, as an application would use: it sends HELLO
	// on connect, so the proxy pins one upstream connection to it.
	client := redis.NewClient(&redis.Options{
		Addr: ln.Addr().String(), ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
	})
	stop := func() {
		client.Close()
		cancel()
		srv.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	}
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	defer pcancel()
	if err := client.Ping(pctx).Err(); err != nil {
		stop()
		return nil, nil, fmt.Errorf("proxy with %s: %w", a, err)
	}
	return client, stop, nil
}
