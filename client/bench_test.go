package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// benchSizes are the seed sizes of the issue: 0, 16.6 kB, 47.5 kB,
// 221.9 kB and 4.2 MB.
var benchSizes = []struct {
	name string
	n    int
}{
	{"0B", 0}, {"16.6kB", 16600}, {"47.5kB", 47500}, {"221.9kB", 221900}, {"4.2MB", 4200000},
}

// benchValue returns n bytes of JSON-like records with varied numbers and
// words: compressible like real documents, not a repeated string.
func benchValue(n int) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 42))
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"}
	b := make([]byte, 0, n+128)
	for len(b) < n {
		b = append(b, `{"id":`...)
		b = strconv.AppendInt(b, rng.Int64N(1e9), 10)
		b = append(b, `,"name":"`...)
		b = append(b, words[rng.IntN(len(words))]...)
		b = append(b, ' ')
		b = append(b, words[rng.IntN(len(words))]...)
		b = append(b, `","score":`...)
		b = strconv.AppendFloat(b, rng.Float64()*100, 'f', 3, 64)
		b = append(b, `,"active":true},`...)
	}
	return b[:n]
}

// BenchmarkGetSet measures SET and GET through the hook against plain
// go-redis on the same server, per seed size. The difference per op is the
// library's overhead (compression, decompression, bookkeeping); stored_B is
// what Redis holds.
//
//	go test -run '^$' -bench GetSet -benchtime 200x ./client
func BenchmarkGetSet(b *testing.B) {
	r := testutil.StartRedis(b)
	ctx := context.Background()
	for _, sz := range benchSizes {
		val := benchValue(sz.n)
		for _, mode := range []string{"plain", "squeeze"} {
			rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
			if mode == "squeeze" {
				if _, err := Install(rdb, Config{}); err != nil {
					b.Fatal(err)
				}
			}
			plain := redis.NewClient(&redis.Options{Addr: r.Addr})
			key := fmt.Sprintf("bench:%s:%s", sz.name, mode)
			b.Run(fmt.Sprintf("op=SET/size=%s/%s", sz.name, mode), func(b *testing.B) {
				b.SetBytes(int64(sz.n))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if err := rdb.Set(ctx, key, val, 0).Err(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(plain.StrLen(ctx, key).Val()), "stored_B")
			})
			b.Run(fmt.Sprintf("op=GET/size=%s/%s", sz.name, mode), func(b *testing.B) {
				b.SetBytes(int64(sz.n))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					v, err := rdb.Get(ctx, key).Bytes()
					if err != nil || len(v) != sz.n {
						b.Fatalf("GET: %d bytes, %v", len(v), err)
					}
				}
			})
			rdb.Close()
			plain.Close()
		}
	}
}

// BenchmarkHookOnly measures the hook's own work per command without a
// server round trip: encode on SET, decode on GET.
func BenchmarkHookOnly(b *testing.B) {
	h, err := NewHook(Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, sz := range benchSizes {
		val := string(benchValue(sz.n))
		frame := string(h.enc.AppendEncode(nil, []byte(val)))
		b.Run("op=SET/size="+sz.name, func(b *testing.B) {
			b.SetBytes(int64(sz.n))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				cmd := redis.NewStatusCmd(ctx, "set", "k", val)
				p, _ := h.prepare(ctx, cmd)
				h.undo(cmd, p)
			}
		})
		b.Run("op=GET/size="+sz.name, func(b *testing.B) {
			b.SetBytes(int64(sz.n))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				cmd := redis.NewStringCmd(ctx, "get", "k")
				cmd.SetVal(frame)
				if err := h.decodeReply(cmd, prepared{name: "get"}); err != nil || len(cmd.Val()) != sz.n {
					b.Fatal(err)
				}
			}
		})
	}
}
