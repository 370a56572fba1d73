package dictstore

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/squeeze-kv/squeeze/codec"
)

// BenchmarkDictionary measures the CPU cost of a dictionary on small JSON
// values: encode and decode of one value with zstd:1, with and without a
// 64 KiB-at-most dictionary trained on its peers.
func BenchmarkDictionary(b *testing.B) {
	var train [][]byte
	for len(train) < 2000 {
		train = append(train, profiles(1, uint64(len(train)))...)
	}
	d, err := TrainID(train, DefaultDictSize)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 8, 32} { // documents per value: about 0.5, 4 and 16 kB
		val := bytes.Join(profiles(n, 99), []byte(","))
		for _, withDict := range []bool{false, true} {
			opts := []codec.EncoderOption{codec.WithMinGain(-1)}
			var dopts []codec.DecoderOption
			name := "plain"
			if withDict {
				opts, dopts, name = append(opts, codec.WithDictionary(d)), append(dopts, codec.WithDictionaries(d)), "dict"
			}
			enc, _ := codec.NewEncoder(codec.MustParseAlgorithm("zstd:1"), opts...)
			dec, _ := codec.NewDecoder(dopts...)
			frame := enc.AppendEncode(nil, val)
			b.Run(fmt.Sprintf("encode/%s/size=%d", name, len(val)), func(b *testing.B) {
				b.SetBytes(int64(len(val)))
				b.ReportAllocs()
				buf := make([]byte, 0, len(val)*2)
				for b.Loop() {
					buf = enc.AppendEncode(buf[:0], val)
				}
				b.ReportMetric(float64(len(frame)), "stored-bytes")
			})
			b.Run(fmt.Sprintf("decode/%s/size=%d", name, len(val)), func(b *testing.B) {
				b.SetBytes(int64(len(val)))
				b.ReportAllocs()
				buf := make([]byte, 0, len(val))
				for b.Loop() {
					buf, _ = dec.AppendDecode(buf[:0], frame)
				}
			})
		}
	}
}
