package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/dictstore"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// profile is a small JSON value of the kind dictionaries are for.
func profile(i int) string {
	return fmt.Sprintf(`{"user_id":%d,"email":"user%d@example.com","country":"%s","plan":"%s","preferences":{"language":"en","timezone":"Europe/Berlin","dark_mode":%v,"notifications":{"email":true,"push":%v,"sms":false}},"cart":{"items":%d,"currency":"EUR"}}`,
		i*7919, i, []string{"DE", "FR", "US", "JP"}[i%4], []string{"free", "pro", "team"}[i%3], i%2 == 0, i%3 == 0, i%9)
}

// TestHook_Dictionaries: a client writing with a published dictionary, read
// back by a second client that has never seen the dictionary, whose
// resolver loads it from Redis on the first frame naming it.
func TestHook_Dictionaries(t *testing.T) {
	ctx := context.Background()
	r := testutil.StartRedis(t)
	plain := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer plain.Close()
	d := trainProfiles(t)

	newClient := func(cfg func(*Config, *dictstore.Resolver)) (*redis.Client, error) {
		rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
		t.Cleanup(func() { rdb.Close() })
		res, err := dictstore.NewResolver(plain)
		if err != nil {
			t.Fatal(err)
		}
		c := Config{MinSize: -1}
		cfg(&c, res)
		_, err = Install(rdb, c)
		return rdb, err
	}
	// Before publishing, a writer cannot pick the dictionary.
	if _, err := newClient(func(c *Config, res *dictstore.Resolver) { c.Dictionaries, c.DictionaryID = res, d.ID }); !errors.Is(err, dictstore.ErrNotFound) || !strings.Contains(err.Error(), dictstore.Key(d.ID)) {
		t.Fatalf("unpublished write dictionary: %v", err)
	}
	if _, err := newClient(func(c *Config, _ *dictstore.Resolver) { c.DictionaryID = d.ID }); err == nil {
		t.Fatal("DictionaryID without Dictionaries accepted")
	}
	// Published through a hooked client: the dictionary keys stay raw.
	publisher, err := newClient(func(*Config, *dictstore.Resolver) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := dictstore.Publish(ctx, publisher, d, dictstore.Meta{Pattern: "user:*"}); err != nil {
		t.Fatal(err)
	}
	if got, err := dictstore.Load(ctx, plain, d.ID); err != nil || string(got.Data) != string(d.Data) {
		t.Fatalf("dictionary published through the hook is not stored raw: %v", err)
	}

	writer, err := newClient(func(c *Config, res *dictstore.Resolver) { c.Dictionaries, c.DictionaryID = res, d.ID })
	if err != nil {
		t.Fatal(err)
	}
	reader, err := newClient(func(c *Config, res *dictstore.Resolver) { c.Dictionaries = res })
	if err != nil {
		t.Fatal(err)
	}
	noDicts, err := newClient(func(*Config, *dictstore.Resolver) {})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := writer.Set(ctx, fmt.Sprintf("user:%d", i), profile(1000+i), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	writer.HSet(ctx, "users", "a", profile(5000))
	stored := plain.Get(ctx, "user:3").Val()
	h, err := codec.ParseHeader([]byte(stored))
	if err != nil || !h.HasDict || h.DictID != uint64(d.ID) {
		t.Fatalf("stored frame %+v, %v: want dictionary %d", h, err, d.ID)
	}
	t.Logf("value of %d bytes stored in %d", len(profile(1003)), len(stored))
	for i := range 20 {
		if got, err := reader.Get(ctx, fmt.Sprintf("user:%d", i)).Result(); err != nil || got != profile(1000+i) {
			t.Fatalf("reader GET user:%d: %v", i, err)
		}
	}
	if got, err := reader.HGetAll(ctx, "users").Result(); err != nil || got["a"] != profile(5000) {
		t.Fatalf("reader HGETALL: %v", err)
	}
	if vals, err := reader.MGet(ctx, "user:1", "user:2").Result(); err != nil || vals[1] != profile(1002) {
		t.Fatalf("reader MGET: %v", err)
	}
	// A reader without a resolver says what is missing.
	_, err = noDicts.Get(ctx, "user:1").Result()
	if !errors.Is(err, codec.ErrUnknownDictionary) {
		t.Fatalf("reader without dictionaries: %v", err)
	}
}

// TestHook_DictionaryReadAllocs: decoding a frame that names a known
// dictionary goes through the resolver without a lock or extra allocation
// beyond the decoded value.
func TestHook_DictionaryReadAllocs(t *testing.T) {
	d := trainProfiles(t)
	unused := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer unused.Close()
	res, err := dictstore.NewResolver(unused)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Add(d); err != nil {
		t.Fatal(err)
	}
	h, err := NewHook(Config{Dictionaries: res})
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := codec.NewEncoder(codec.MustParseAlgorithm("zstd:1"), codec.WithDictionary(d), codec.WithMinSize(0))
	want := profile(7)
	frame := string(enc.AppendEncode(nil, []byte(want)))
	if n := testing.AllocsPerRun(100, func() {
		if v, err := h.decodeString(frame); err != nil || v != want {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Fatalf("%v allocations per decode, want 1 (the value)", n)
	}
}

// trainProfiles trains an 8 KiB dictionary on 400 generated profiles.
func trainProfiles(t *testing.T) codec.Dictionary {
	t.Helper()
	var samples [][]byte
	for i := range 400 {
		samples = append(samples, []byte(profile(i)))
	}
	d, err := dictstore.TrainID(samples, 8<<10)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
