package codec

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// benchSizes are the value sizes of the first seed study (empty, small,
// medium, big and large file).
var benchSizes = []int{0, 1024, 16600, 47500, 221900, 4200000}

func sizeName(n int) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.1fMB", float64(n)/1e6)
	case n >= 10000:
		return fmt.Sprintf("%.1fkB", float64(n)/1e3)
	case n >= 1024:
		return fmt.Sprintf("%dKiB", n/1024)
	}
	return fmt.Sprintf("%dB", n)
}

// BenchmarkAppendEncode: go test ./codec -run '^$' -bench AppendEncode -benchmem
func BenchmarkAppendEncode(b *testing.B) {
	for _, a := range Algorithms() {
		if a.Slow() {
			continue
		}
		for _, n := range benchSizes {
			in := sampleJSON(n)
			b.Run(fmt.Sprintf("%s/size=%s", a, sizeName(n)), func(b *testing.B) {
				enc := mustEncoder(b, a, WithMinGain(-1), WithMinSize(0))
				dst := enc.AppendEncode(nil, in)
				b.SetBytes(int64(n))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					dst = enc.AppendEncode(dst[:0], in)
				}
				b.ReportMetric(float64(len(in))/float64(max(len(dst), 1)), "ratio")
			})
		}
	}
}

// BenchmarkAppendDecode: go test ./codec -run '^$' -bench AppendDecode -benchmem
func BenchmarkAppendDecode(b *testing.B) {
	dec := mustDecoder(b)
	for _, a := range Algorithms() {
		if a.Slow() {
			continue
		}
		for _, n := range benchSizes {
			in := sampleJSON(n)
			b.Run(fmt.Sprintf("%s/size=%s", a, sizeName(n)), func(b *testing.B) {
				enc := mustEncoder(b, a, WithMinGain(-1), WithMinSize(0))
				frame := enc.AppendEncode(nil, in)
				out := make([]byte, 0, n)
				b.SetBytes(int64(n))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					var err error
					if out, err = dec.AppendDecode(out[:0], frame); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkFrameCost measures what the frame adds over calling the library
// directly, robustly on a noisy machine: each round times a batch of direct
// calls and a batch through the Encoder/Decoder back to back, and the
// reported figure is the median over rounds of frame time / direct time - 1,
// in percent ("frame-%" without checksum, "crc-%" with it).
//
//	go test ./codec -run '^$' -bench FrameCost -benchtime 1x
func BenchmarkFrameCost(b *testing.B) {
	zenc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false), zstd.WithLowerEncoderMem(true))
	zdec, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	var lz lz4.Compressor
	type fns struct {
		enc func(dst, src []byte) []byte
		dec func(dst, src []byte, n int) []byte
	}
	direct := map[string]fns{
		"zstd:1": {
			func(dst, src []byte) []byte { return zenc.EncodeAll(src, dst[:0]) },
			func(dst, src []byte, n int) []byte { out, _ := zdec.DecodeAll(src, dst[:0]); return out },
		},
		"lz4:fast": {
			func(dst, src []byte) []byte { k, _ := lz.CompressBlock(src, dst[:cap(dst)]); return dst[:k] },
			func(dst, src []byte, n int) []byte { k, _ := lz4.UncompressBlock(src, dst[:n]); return dst[:k] },
		},
		"s2:default": {
			func(dst, src []byte) []byte { return s2.Encode(dst[:cap(dst)], src) },
			func(dst, src []byte, n int) []byte { out, _ := s2.Decode(dst[:cap(dst)], src); return out },
		},
	}
	for _, name := range []string{"zstd:1", "lz4:fast", "s2:default"} {
		f := direct[name]
		a := MustParseAlgorithm(name)
		for _, n := range benchSizes[2:] {
			in := sampleJSON(n)
			payload := f.enc(make([]byte, 0, 2*n+1024), in)
			buf := make([]byte, 0, 2*n+1024)
			out := make([]byte, 0, n)
			noCRC := mustEncoder(b, a, WithChecksum(false), WithMinGain(-1))
			withCRC := mustEncoder(b, a, WithMinGain(-1))
			frameNoCRC := noCRC.AppendEncode(nil, in)
			frameCRC := withCRC.AppendEncode(nil, in)
			dec := mustDecoder(b)
			batch := max(1, 2e6/max(n, 1)) // about 2 MB per timed batch
			timeIt := func(fn func()) float64 {
				start := time.Now()
				for i := 0; i < batch; i++ {
					fn()
				}
				return float64(time.Since(start))
			}
			for _, op := range []string{"encode", "decode"} {
				b.Run(fmt.Sprintf("%s/%s/size=%s", op, name, sizeName(n)), func(b *testing.B) {
					var frameCost, crcCost []float64
					for r := 0; r < 21*b.N; r++ {
						var d, fr, fc float64
						if op == "encode" {
							d = timeIt(func() { buf = f.enc(buf[:0], in) })
							fr = timeIt(func() { buf = noCRC.AppendEncode(buf[:0], in) })
							fc = timeIt(func() { buf = withCRC.AppendEncode(buf[:0], in) })
						} else {
							d = timeIt(func() { out = f.dec(out[:0], payload, n) })
							fr = timeIt(func() { out, _ = dec.AppendDecode(out[:0], frameNoCRC) })
							fc = timeIt(func() { out, _ = dec.AppendDecode(out[:0], frameCRC) })
						}
						frameCost = append(frameCost, (fr/d-1)*100)
						crcCost = append(crcCost, (fc/d-1)*100)
					}
					b.ReportMetric(median(frameCost), "frame-%")
					b.ReportMetric(median(crcCost), "crc-%")
				})
			}
		}
	}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
