package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/client"
	"github.com/squeeze-kv/squeeze/codec"
)

// Install the hook on a go-redis client; values are then compressed on the
// way in and decompressed on the way out. This example needs a Redis server
// on 127.0.0.1:6379, so it is compiled but not run; TestExample runs the same
// steps against a throwaway server.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	if _, err := client.Install(rdb, client.Config{Algorithm: codec.MustParseAlgorithm("zstd:3")}); err != nil {
		panic(err)
	}
	doc := strings.Repeat(`{"user":42,"tags":["redis","compression"]},`, 100)
	if err := rdb.Set(ctx, "doc", doc, 0).Err(); err != nil {
		panic(err)
	}
	got, _ := rdb.Get(ctx, "doc").Result()
	n, _ := rdb.StrLen(ctx, "doc").Result() // the original length, from the frame header
	fmt.Println(got == doc, n)
}

// A reply the hook could not decode before the caller sees it is refused
// before the command is sent, so this example needs no server.
func ExampleInstall_refused() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}) // never dialed here
	defer rdb.Close()
	if _, err := client.Install(rdb, client.Config{}); err != nil {
		panic(err)
	}
	var out strings.Builder
	err := rdb.DoRawWriteTo(context.Background(), &out, "GET", "doc").Err()
	fmt.Println(errors.Is(err, client.ErrUnsupported))
	// Output:
	// true
}

// Keys that byte-level commands must see as stored, such as packed counters
// updated with BITFIELD, are marked raw: the hook leaves them alone.
func ExampleConfig_raw() {
	cfg := client.Config{
		Raw: func(key string) bool { return strings.HasPrefix(key, "cnt:") },
	}
	h, err := client.NewHook(cfg)
	fmt.Println(h != nil, err)
	// Output: true <nil>
}
