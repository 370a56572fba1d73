package client

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
)

// FuzzDecodeReply feeds arbitrary stored bytes to the reply decoding of
// GET, HGETALL and Do: it must never panic, must return values without the
// frame magic unchanged, and must decode what the encoder wrote.
func FuzzDecodeReply(f *testing.F) {
	h, err := NewHook(Config{MaxDecodedSize: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("plain"))
	f.Add([]byte("\xc1SQ\x01\x01\x00\x05garbage"))
	f.Add(h.enc.AppendEncode(nil, []byte("a value long enough to be compressed by zstd, a value long enough to be compressed")))
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, stored []byte) {
		cmd := redis.NewStringCmd(ctx, "get", "k")
		cmd.SetVal(string(stored))
		err := h.decodeReply(cmd, prepared{name: "get"})
		if !codec.IsFramed(stored) && (err != nil || cmd.Val() != string(stored)) {
			t.Fatalf("unframed %q changed: %q, %v", stored, cmd.Val(), err)
		}
		m := redis.NewMapStringStringCmd(ctx, "hgetall", "h")
		m.SetVal(map[string]string{"f": string(stored)})
		err2 := h.decodeReply(m, prepared{name: "hgetall"})
		if (err == nil) != (err2 == nil) || err == nil && m.Val()["f"] != cmd.Val() {
			t.Fatalf("GET and HGETALL disagree: %v / %v", err, err2)
		}
		do := redis.NewCmd(ctx, "xrange", "s", "-", "+")
		do.SetVal([]any{[]any{"1-0", []any{"f", string(stored)}}})
		_ = h.decodeReply(do, prepared{name: "xrange"})

		round := h.enc.AppendEncode(nil, stored)
		c2 := redis.NewStringCmd(ctx, "get", "k")
		c2.SetVal(string(round))
		if err := h.decodeReply(c2, prepared{name: "get"}); err != nil || c2.Val() != string(stored) {
			t.Fatalf("round trip of %q: %v", stored, err)
		}
	})
}
