package codec

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestParallelParts(t *testing.T) {
	tests := []struct{ n, c, want int }{
		{ParallelMinSize - 1, 8, 1},
		{ParallelMinSize, 1, 1},
		{ParallelMinSize, 2, 2},
		{ParallelMinSize, 8, ParallelMinSize / parallelChunk},
		{20e6, 2, 2},
		{20e6, 4, 4},
	}
	for _, tt := range tests {
		if got := parallelParts(tt.n, tt.c); got != tt.want {
			t.Errorf("parallelParts(%d, %d) = %d, want %d", tt.n, tt.c, got, tt.want)
		}
	}
}

// TestParallelEncode checks that values compressed on several goroutines
// make frames of the same format: the plain Decoder reads them back
// byte for byte.
func TestParallelEncode(t *testing.T) {
	dec := mustDecoder(t)
	sizes := []int{ParallelMinSize, zstdParallelMin, 1e6, 3e6 + 7}
	for _, s := range []string{"s2:default", "s2:better", "s2:best", "snappy", "minlz:superfast", "minlz:fastest", "zstd:1", "zstd:3", "zstd:7"} {
		a := MustParseAlgorithm(s)
		for _, n := range sizes {
			t.Run(fmt.Sprintf("%s/%d", s, n), func(t *testing.T) {
				in := sampleJSON(n)[:n]
				serial := mustEncoder(t, a, WithConcurrency(1)).AppendEncode(nil, in)
				prefix := []byte("keep")
				frame := mustEncoder(t, a, WithConcurrency(3)).AppendEncode(prefix, in)
				if !bytes.HasPrefix(frame, []byte("keep")) {
					t.Fatal("dst's prefix was overwritten")
				}
				frame = frame[len(prefix):]
				if a.ID == IDZstd && n < zstdParallelMin {
					if !bytes.Equal(frame, serial) {
						t.Fatal("a zstd value below zstdParallelMin was not compressed serially")
					}
				} else if bytes.Equal(frame, serial) {
					t.Fatal("the parallel frame equals the serial one: the parallel path did not run")
				}
				h, err := ParseHeader(frame)
				if err != nil || h.ID != a.ID || h.OriginalLen != uint64(n) {
					t.Fatalf("header %+v, err %v", h, err)
				}
				got, err := dec.AppendDecode(nil, frame)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, in) {
					t.Fatalf("decoded %d bytes differ from the %d-byte input", len(got), n)
				}
				if a.ID == IDZstd {
					// One zstd frame that declares the whole value, as
					// FORMAT.md requires, not several concatenated ones.
					var zh zstd.Header
					if err := zh.Decode(frame[h.Len:]); err != nil || !zh.HasFCS || zh.FrameContentSize != uint64(n) {
						t.Fatalf("zstd header %+v, err %v: want one frame of %d bytes", zh, err, n)
					}
				}
				if len(frame) > len(serial)*11/10 {
					t.Errorf("parallel frame %d bytes, serial %d: more than 10%% larger", len(frame), len(serial))
				}
			})
		}
	}
}

func TestWithConcurrency_Invalid(t *testing.T) {
	if _, err := NewEncoder(DefaultAlgorithm, WithConcurrency(0)); err == nil {
		t.Fatal("WithConcurrency(0): no error")
	}
}

// BenchmarkLargeEncode compares compressing one large JSON value on the
// calling goroutine (conc=1) and on two (conc=2), with a garbage collection
// before each value:
//
//	go test ./codec -run '^$' -bench LargeEncode -count 6 > out.txt
//	benchstat -col /conc out.txt
func BenchmarkLargeEncode(b *testing.B) {
	for _, s := range []string{"s2:default", "snappy", "minlz:superfast", "minlz:fastest", "zstd:1", "zstd:3"} {
		a := MustParseAlgorithm(s)
		for _, n := range []int{256e3, ParallelMinSize, 1e6, 4e6, 20e6} {
			in := sampleJSON(n)
			for _, c := range []int{1, 2} {
				b.Run(fmt.Sprintf("%s/size=%s/conc=%d", a, sizeName(n), c), func(b *testing.B) {
					enc := mustEncoder(b, a, WithConcurrency(c))
					dst := enc.AppendEncode(nil, in)
					b.SetBytes(int64(n))
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						// A program that moves large values makes garbage
						// between them, and every GC empties sync.Pools.
						b.StopTimer()
						runtime.GC()
						b.StartTimer()
						dst = enc.AppendEncode(dst[:0], in)
					}
					b.ReportMetric(float64(len(in))/float64(max(len(dst), 1)), "ratio")
				})
			}
		}
	}
}

// TestParallelEncode_Dictionary: zstd's job mode takes no dictionary, so an
// Encoder with one compresses large values serially, against the
// dictionary.
func TestParallelEncode_Dictionary(t *testing.T) {
	d, err := TrainDictionary(40002, smallDocs(2000, 1), 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	in := sampleJSON(1e6)
	enc := mustEncoder(t, MustParseAlgorithm("zstd:1"), WithDictionary(d), WithConcurrency(3))
	frame := enc.AppendEncode(nil, in)
	if h, err := ParseHeader(frame); err != nil || !h.HasDict || h.DictID != 40002 {
		t.Fatalf("header %+v, err %v", h, err)
	}
	got, err := mustDecoder(t, WithDictionaries(d)).AppendDecode(nil, frame)
	if err != nil || !bytes.Equal(got, in) {
		t.Fatalf("round trip: %d bytes, err %v", len(got), err)
	}
}
