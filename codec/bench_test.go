package codec

import (
	"fmt"
	"os"
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

// BenchmarkPortableCost measures what the portable profile costs against
// the default codec in speed, robustly on a noisy machine: each round
// times a batch with DefaultAlgorithm (s2) and a batch with a portable
// codec back to back (in alternating order), and the figures are medians
// over rounds: "time/default" (the portable codec's time over the
// default's, encode or decode), "bytes/default" (its frame size over the
// default's) and the median ns per value of each ("ns/value",
// "default-ns/value"). PortableDefault (snappy) is what --portable writes;
// lz4 and zstd:1 are the other portable codecs advise weighs for writes.
//
//	go test ./codec -run '^$' -bench PortableCost -benchtime 1x
//
// The values are generated JSON (sampleJSON) unless SQUEEZE_BENCH_CORPUS
// names a file, whose bytes are then cut or repeated to each size.
func BenchmarkPortableCost(b *testing.B) {
	corpus := os.Getenv("SQUEEZE_BENCH_CORPUS")
	var data []byte
	if corpus != "" {
		var err error
		if data, err = os.ReadFile(corpus); err != nil || len(data) == 0 {
			b.Fatalf("SQUEEZE_BENCH_CORPUS: %v (%d bytes)", err, len(data))
		}
	}
	value := func(n int) []byte {
		if data == nil {
			return sampleJSON(n)
		}
		out := make([]byte, 0, n)
		for len(out) < n {
			out = append(out, data[:min(len(data), n-len(out))]...)
		}
		return out
	}
	def := mustEncoder(b, DefaultAlgorithm, WithMinGain(-1), WithMinSize(0))
	dec := mustDecoder(b)
	for _, name := range []string{PortableDefault.String(), "lz4", "zstd:1"} {
		a := MustParseAlgorithm(name)
		port := mustEncoder(b, a, WithMinGain(-1), WithMinSize(0))
		for _, n := range benchSizes[1:] {
			in := value(n)
			defFrame := def.AppendEncode(nil, in)
			portFrame := port.AppendEncode(nil, in)
			buf := make([]byte, 0, 2*n+1024)
			out := make([]byte, 0, n)
			batch := max(1, 2e6/n) // about 2 MB per timed batch
			timeIt := func(fn func()) float64 {
				start := time.Now()
				for i := 0; i < batch; i++ {
					fn()
				}
				return float64(time.Since(start)) / float64(batch)
			}
			for _, op := range []string{"encode", "decode"} {
				b.Run(fmt.Sprintf("%s/%s/size=%s", op, a, sizeName(n)), func(b *testing.B) {
					var ratio, defNs, portNs []float64
					for r := 0; r < 21*b.N; r++ {
						var d, p float64
						runDef, runPort := func() { buf = def.AppendEncode(buf[:0], in) }, func() { buf = port.AppendEncode(buf[:0], in) }
						if op == "decode" {
							runDef = func() { out, _ = dec.AppendDecode(out[:0], defFrame) }
							runPort = func() { out, _ = dec.AppendDecode(out[:0], portFrame) }
						}
						if r%2 == 0 {
							d, p = timeIt(runDef), timeIt(runPort)
						} else {
							p, d = timeIt(runPort), timeIt(runDef)
						}
						ratio, defNs, portNs = append(ratio, p/d), append(defNs, d), append(portNs, p)
					}
					b.ReportMetric(median(ratio), "time/default")
					b.ReportMetric(float64(len(portFrame))/float64(len(defFrame)), "bytes/default")
					b.ReportMetric(median(portNs), "ns/value")
					b.ReportMetric(median(defNs), "default-ns/value")
				})
			}
		}
	}
}
