package codec

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"
)

// Outcome tells what AppendEncodeOutcome did with a value.
type Outcome uint8

const (
	// Compressed: the value was written as a compressed frame.
	Compressed Outcome = iota
	// StoredRaw: the value was too short, compressed too little or reads
	// as a number (Numeric), and was written as it is.
	StoredRaw
	// Wrapped: the value was stored uncompressed but began with the magic,
	// so it was wrapped in a none frame to read back unambiguously.
	Wrapped
)

// String returns the outcome's name as the CLI prints it ("compressed", "raw", ...).
func (o Outcome) String() string {
	switch o {
	case Compressed:
		return "compressed"
	case StoredRaw:
		return "raw"
	case Wrapped:
		return "wrapped"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// EncoderOption configures an Encoder.
type EncoderOption func(*Encoder) error

// WithMinSize stores values shorter than n bytes raw (default
// DefaultMinSize). 0 compresses every value.
func WithMinSize(n int) EncoderOption {
	return func(e *Encoder) error {
		if n < 0 {
			return fmt.Errorf("codec: min size %d is negative", n)
		}
		e.minSize = n
		return nil
	}
}

// WithMinGain stores a value raw when compression saves less than the
// fraction f of its size (default DefaultMinGain, 0.10). f must be below 1. A
// negative f keeps every frame, even one larger than its value: for tests
// that want every value framed.
func WithMinGain(f float64) EncoderOption {
	return func(e *Encoder) error {
		if f >= 1 || f != f {
			return fmt.Errorf("codec: min gain %v must be below 1", f)
		}
		e.minGain = f
		return nil
	}
}

// WithChecksum turns the CRC-32C of the original bytes on or off (default
// on). Without it, corruption that the codec itself does not detect goes
// unnoticed.
func WithChecksum(on bool) EncoderOption {
	return func(e *Encoder) error { e.checksum = on; return nil }
}

// An Encoder writes frames with one algorithm under the write policy. It is
// safe for concurrent use; it keeps codec state (one zstd encoder, pools of
// lz4, brotli and flate writers) for reuse across calls.
type Encoder struct {
	alg      Algorithm
	minSize  int
	minGain  float64
	checksum bool
	dict     *Dictionary
	comp     compressor
	// concurrency caps the goroutines of one large value (WithConcurrency).
	concurrency int
}

// compressor appends the payload of src to dst.
type compressor interface {
	appendCompress(dst, src []byte) ([]byte, error)
}

// parallelCompressor is a compressor that can also cut a value into parts
// compressed at once (see WithConcurrency); parts is at least 2.
type parallelCompressor interface {
	appendCompressParallel(dst, src []byte, parts int) ([]byte, error)
}

// NewEncoder returns an Encoder for a. It fails if a names an unknown codec
// or level, or an option is invalid.
func NewEncoder(a Algorithm, opts ...EncoderOption) (*Encoder, error) {
	if _, err := ParseAlgorithm(a.String()); err != nil || !a.ID.Known() {
		return nil, fmt.Errorf("codec: invalid algorithm %v", a)
	}
	if canon, _ := ParseAlgorithm(a.String()); canon != a {
		return nil, fmt.Errorf("codec: invalid level %d for %s", a.Level, a.ID)
	}
	e := &Encoder{alg: a, minSize: DefaultMinSize, minGain: DefaultMinGain, checksum: true, concurrency: defaultConcurrency()}
	for _, o := range opts {
		if err := o(e); err != nil {
			return nil, err
		}
	}
	var err error
	e.comp, err = newCompressor(a, e.dict, e.concurrency)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Algorithm returns the algorithm e compresses with.
func (e *Encoder) Algorithm() Algorithm { return e.alg }

// AppendEncode appends to dst what squeeze stores for the value src: a
// compressed frame, src itself, or src wrapped in a none frame (see
// AppendEncodeOutcome). dst and src must not overlap.
func (e *Encoder) AppendEncode(dst, src []byte) []byte {
	dst, _ = e.AppendEncodeOutcome(dst, src)
	return dst
}

// AppendEncodeOutcome is AppendEncode that also reports what it stored.
func (e *Encoder) AppendEncodeOutcome(dst, src []byte) ([]byte, Outcome) {
	dst, out := e.AppendFrame(dst, src)
	if out == StoredRaw {
		dst = append(dst, src...)
	}
	return dst, out
}

// AppendFrame is AppendEncodeOutcome for callers that store src themselves
// when it is to be stored raw: on StoredRaw it appends nothing, which saves
// copying a large value that does not compress (or that the policy leaves
// raw). On Compressed and Wrapped it appends the frame.
func (e *Encoder) AppendFrame(dst, src []byte) ([]byte, Outcome) {
	start := len(dst)
	if len(src) >= e.minSize && e.alg.ID != IDNone && !Numeric(src) && !ServerInterpreted(src) {
		out, ok := e.appendFrame(dst, src)
		if ok {
			return out, Compressed
		}
		dst = out[:start]
	}
	if !IsFramed(src) {
		return dst, StoredRaw
	}
	return e.appendNoneFrame(dst, src), Wrapped
}

// appendFrame appends a compressed frame of src and reports whether it met
// the minimum gain. On false the caller truncates the result to its start.
func (e *Encoder) appendFrame(dst, src []byte) ([]byte, bool) {
	start := len(dst)
	h := Header{ID: e.alg.ID, OriginalLen: uint64(len(src)), HasChecksum: e.checksum}
	if e.dict != nil {
		h.HasDict, h.DictID = true, uint64(e.dict.ID)
	}
	dst = AppendHeader(dst, h)
	hlen := len(dst) - start
	limit := len(src) - hlen // no frame is worth more than the raw value...
	if e.minGain >= 0 {
		limit = int(float64(len(src))*(1-e.minGain)) - hlen
		if limit < 0 {
			return dst, false
		}
	} else {
		limit = -1 // ...unless the caller asked for frames always
	}
	var out []byte
	var err error
	if p, ok := e.comp.(parallelCompressor); ok && parallelParts(len(src), e.concurrency) > 1 {
		out, err = p.appendCompressParallel(dst, src, parallelParts(len(src), e.concurrency))
	} else {
		out, err = e.comp.appendCompress(dst, src)
	}
	if err != nil || (limit >= 0 && len(out)-len(dst) > limit) {
		return out, false
	}
	if e.checksum {
		binary.LittleEndian.PutUint32(out[start+hlen-4:], Checksum(src))
	}
	return out, true
}

func (e *Encoder) appendNoneFrame(dst, src []byte) []byte {
	h := Header{ID: IDNone, OriginalLen: uint64(len(src)), HasChecksum: e.checksum}
	if e.checksum {
		h.Checksum = Checksum(src)
	}
	dst = AppendHeader(dst, h)
	return append(dst, src...)
}

// grow returns dst with room for n more bytes.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	out := make([]byte, len(dst), len(dst)+n)
	copy(out, dst)
	return out
}

func newCompressor(a Algorithm, d *Dictionary, concurrency int) (compressor, error) {
	switch a.ID {
	case IDNone:
		return noneCompressor{}, nil
	case IDZstd:
		opts := []zstd.EOption{
			zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(a.Level)),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithEncoderCRC(false), // the frame has its own checksum
			zstd.WithLowerEncoderMem(true),
		}
		if d != nil {
			opts = append(opts, zstd.WithEncoderDict(d.Data))
		}
		enc, err := zstd.NewWriter(nil, opts...)
		if err != nil {
			return nil, err
		}
		z := zstdCompressor{enc: enc}
		if d == nil && concurrency > 1 { // the job mode takes no dictionary
			if z.par, err = newZstdParallel(zstd.EncoderLevelFromZstd(a.Level), concurrency); err != nil {
				return nil, err
			}
		}
		return z, nil
	case IDLZ4:
		if a.Level == 0 {
			return &lz4Compressor{pool: sync.Pool{New: func() any { return new(lz4.Compressor) }}}, nil
		}
		lvl := lz4.CompressionLevel(1 << (8 + a.Level))
		return &lz4Compressor{pool: sync.Pool{New: func() any { return &lz4.CompressorHC{Level: lvl} }}}, nil
	case IDS2, IDSnappy:
		fn := s2Funcs[boolIndex(a.ID == IDSnappy)][a.Level-1]
		return s2Compressor{fn: fn, par: &s2Parallel{fn: fn}}, nil
	case IDBrotli:
		return newStreamCompressor(func(w *appendWriter) streamWriter {
			return brotli.NewWriterLevel(w, a.Level)
		}), nil
	case IDGzip:
		return newStreamCompressor(func(w *appendWriter) streamWriter {
			z, _ := gzip.NewWriterLevel(w, a.Level)
			return z
		}), nil
	case IDDeflate:
		return newStreamCompressor(func(w *appendWriter) streamWriter {
			z, _ := flate.NewWriter(w, a.Level)
			return z
		}), nil
	case IDZlib:
		return newStreamCompressor(func(w *appendWriter) streamWriter {
			z, _ := zlib.NewWriterLevel(w, a.Level)
			return z
		}), nil
	case IDXZ:
		return xzCompressor{}, nil
	case IDMinLZ:
		return minlzCompressor{level: a.Level}, nil
	}
	return nil, fmt.Errorf("codec: no compressor for %v", a)
}

type noneCompressor struct{}

func (noneCompressor) appendCompress(dst, src []byte) ([]byte, error) {
	return append(dst, src...), nil
}

type zstdCompressor struct {
	enc *zstd.Encoder
	par *zstdParallel // nil with a dictionary or a concurrency of 1
}

func (z zstdCompressor) appendCompress(dst, src []byte) ([]byte, error) {
	return z.enc.EncodeAll(src, dst), nil
}

func (z zstdCompressor) appendCompressParallel(dst, src []byte, parts int) ([]byte, error) {
	if z.par == nil || len(src) < zstdParallelMin {
		return z.appendCompress(dst, src)
	}
	return z.par.appendCompress(dst, src)
}

// blockCompressor is lz4's fast or HC block compressor; neither is safe for
// concurrent use, so they are pooled.
type blockCompressor interface {
	CompressBlock(src, dst []byte) (int, error)
}

type lz4Compressor struct{ pool sync.Pool } // of blockCompressor

func (z *lz4Compressor) appendCompress(dst, src []byte) ([]byte, error) {
	bound := lz4.CompressBlockBound(len(src))
	dst = grow(dst, bound)
	c := z.pool.Get().(blockCompressor)
	n, err := c.CompressBlock(src, dst[len(dst):len(dst)+bound])
	z.pool.Put(c)
	if err != nil {
		return dst, err
	}
	if n == 0 && len(src) > 0 {
		return dst, fmt.Errorf("codec: lz4 found the value incompressible")
	}
	return dst[:len(dst)+n], nil
}

// s2Funcs[snappy][level-1] are the block encoders; snappy output is written
// by s2 in its snappy-compatible form.
var s2Funcs = [2][3]func(dst, src []byte) []byte{
	{s2.Encode, s2.EncodeBetter, s2.EncodeBest},
	{s2.EncodeSnappy, s2.EncodeSnappyBetter, s2.EncodeSnappyBest},
}

type s2Compressor struct {
	fn  func(dst, src []byte) []byte
	par *s2Parallel
}

func (z s2Compressor) appendCompressParallel(dst, src []byte, parts int) ([]byte, error) {
	if s2.MaxEncodedLen(len(src)) < 0 {
		return dst, fmt.Errorf("codec: value of %d bytes too large for s2", len(src))
	}
	return z.par.appendCompress(dst, src, parts)
}

func (z s2Compressor) appendCompress(dst, src []byte) ([]byte, error) {
	bound := s2.MaxEncodedLen(len(src))
	if bound < 0 {
		return dst, fmt.Errorf("codec: value of %d bytes too large for s2", len(src))
	}
	dst = grow(dst, bound)
	// The s2 functions use dst as scratch from its start: hand them the tail.
	out := z.fn(dst[len(dst):len(dst)+bound], src)
	return dst[:len(dst)+len(out)], nil
}

// appendWriter is an io.Writer that appends to a byte slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// streamWriter is a compressing writer that can be reset onto a new output.
type streamWriter interface {
	io.WriteCloser
	Reset(io.Writer)
}

// streamState is a pooled writer with the appendWriter it writes to.
type streamState struct {
	out appendWriter
	w   streamWriter
}

// streamCompressor pools stream writers (brotli, gzip, deflate, zlib), whose
// state is large and costly to build, and resets them per value.
type streamCompressor struct{ pool sync.Pool }

func newStreamCompressor(mk func(w *appendWriter) streamWriter) *streamCompressor {
	sc := &streamCompressor{}
	sc.pool.New = func() any {
		s := &streamState{}
		s.w = mk(&s.out)
		return s
	}
	return sc
}

func (sc *streamCompressor) appendCompress(dst, src []byte) ([]byte, error) {
	s := sc.pool.Get().(*streamState)
	s.out.b = dst
	s.w.Reset(&s.out)
	_, err := s.w.Write(src)
	if err == nil {
		err = s.w.Close()
	}
	out := s.out.b
	s.out.b = nil
	sc.pool.Put(s)
	return out, err
}

type xzCompressor struct{}

func (xzCompressor) appendCompress(dst, src []byte) ([]byte, error) {
	w := &appendWriter{b: dst}
	z, err := xz.WriterConfig{CheckSum: xz.None}.NewWriter(w)
	if err != nil {
		return dst, err
	}
	if _, err := z.Write(src); err != nil {
		return w.b, err
	}
	err = z.Close()
	return w.b, err
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// MinSize returns the length under which e stores values raw.
func (e *Encoder) MinSize() int { return e.minSize }

// Concurrency returns how many goroutines may compress one value of
// ParallelMinSize bytes or more (WithConcurrency).
func (e *Encoder) Concurrency() int { return e.concurrency }
