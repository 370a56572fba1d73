package client

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/counters"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestExample runs the package example's steps against a throwaway server.
func TestExample(t *testing.T) {
	r := testutil.StartRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	if _, err := Install(rdb, Config{Algorithm: codec.MustParseAlgorithm("zstd:3")}); err != nil {
		t.Fatal(err)
	}
	doc := strings.Repeat(`{"user":42,"tags":["redis","compression"]},`, 100)
	if err := rdb.Set(ctx, "doc", doc, 0).Err(); err != nil {
		t.Fatal(err)
	}
	got, _ := rdb.Get(ctx, "doc").Result()
	n, _ := rdb.StrLen(ctx, "doc").Result()
	if got != doc || n != int64(len(doc)) {
		t.Fatalf("got %d bytes, STRLEN %d; want %d", len(got), n, len(doc))
	}
	plain := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer plain.Close()
	if stored := plain.StrLen(ctx, "doc").Val(); stored*5 > int64(len(doc)) {
		t.Fatalf("stored %d bytes for %d", stored, len(doc))
	}
}

// TestHook_WithCounters checks the counters package works through a hooked
// client when its keys are marked raw, and, on the values, when they are
// not (BITFIELD then runs on the decoded bytes, see inspect.go).
func TestHook_WithCounters(t *testing.T) {
	r := testutil.StartRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	if _, err := Install(rdb, Config{Raw: func(k string) bool { return strings.HasPrefix(k, "cnt:") }}); err != nil {
		t.Fatal(err)
	}
	s, _ := counters.New(rdb, counters.Config{Prefix: "cnt:", Slots: 365})
	if _, err := s.Create(ctx, "e"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Incr(ctx, "e", 10, 3); err != nil || v != 3 {
		t.Fatalf("Incr = %d, %v", v, err)
	}
	if err := s.Shift(ctx, "e", 5); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get(ctx, "e", 5); err != nil || v != 3 {
		t.Fatalf("Get after Shift = %d, %v", v, err)
	}
	other, _ := counters.New(rdb, counters.Config{Prefix: "other:", Slots: 365})
	if _, err := other.Create(ctx, "e"); err != nil {
		t.Fatal(err)
	}
	if v, err := other.Incr(ctx, "e", 1, 1); err != nil || v != 1 {
		t.Fatalf("BITFIELD on a non-raw key: %d, %v", v, err)
	}
	if v, err := other.Get(ctx, "e", 1); err != nil || v != 1 {
		t.Fatalf("Get on a non-raw key = %d, %v", v, err)
	}
}
