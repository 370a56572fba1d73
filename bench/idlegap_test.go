package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// BenchmarkIdleGap is the control behind the note on the write slowdown
// in docs/RESULTS.md ("Redis with and without compression"): it times SET
// of the 47.5 kB document after the client first works for a while,
// spinning (no compression at all) or encoding it with s2 (against SET of
// the same s2 frame encoded beforehand), and reports the SET's time beyond
// that work ("set-us/op"). On a machine where a CPU that idles a few µs
// wakes slowly, the SET itself gets slower once the gap passes that
// threshold, and a compressed write pays for the gap as well as for the
// encoding.
//
//	go test ./bench -run '^$' -bench IdleGap -count 5
func BenchmarkIdleGap(b *testing.B) {
	srv := testutil.StartRedis(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	val := JSONDocument(DefaultSeed+47500, 47500)
	enc, err := codec.NewEncoder(codec.DefaultAlgorithm)
	if err != nil {
		b.Fatal(err)
	}
	set := func(b *testing.B, v []byte) {
		if err := rdb.Set(ctx, KeyPrefix+"gap", v, 0).Err(); err != nil {
			b.Fatal(err)
		}
	}
	timeSets := func(b *testing.B, work func() []byte) {
		var setTime time.Duration
		for b.Loop() {
			v := work()
			t0 := time.Now()
			set(b, v)
			setTime += time.Since(t0)
		}
		b.ReportMetric(float64(setTime.Microseconds())/float64(b.N), "set-us/op")
	}
	for _, gap := range []time.Duration{0, 10 * time.Microsecond, 20 * time.Microsecond, 55 * time.Microsecond} {
		b.Run(fmt.Sprintf("spin=%s", gap), func(b *testing.B) {
			timeSets(b, func() []byte {
				for t0 := time.Now(); time.Since(t0) < gap; {
				}
				return val
			})
		})
	}
	frame := enc.AppendEncode(nil, val)
	b.Run("s2-frame-no-work", func(b *testing.B) {
		timeSets(b, func() []byte { return frame })
	})
	var buf []byte
	b.Run("s2", func(b *testing.B) {
		timeSets(b, func() []byte {
			buf = enc.AppendEncode(buf[:0], val)
			return buf
		})
	})
	rdb.Del(ctx, KeyPrefix+"gap")
}
