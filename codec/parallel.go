package codec

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// ParallelMinSize is the value size from which an Encoder whose concurrency
// is above 1 (see WithConcurrency) compresses one value on several cores.
// Below it the goroutines cost more than they save.
const ParallelMinSize = 512 << 10

// parallelChunk is the smallest section of a value one goroutine
// compresses: smaller sections lose too much ratio at their seams.
const parallelChunk = 256 << 10

// WithConcurrency lets the Encoder compress one value of ParallelMinSize
// bytes or more on up to n goroutines (default runtime.GOMAXPROCS(0) when
// NewEncoder runs; 1 compresses every value on the calling goroutine).
// Only s2, snappy, minlz and zstd split a value (zstd from 768 KiB, without a
// dictionary); the frames are the same format
// either way and decode with any Decoder. Smaller values never start
// goroutines, so the steady state of small values stays free of
// allocations.
func WithConcurrency(n int) EncoderOption {
	return func(e *Encoder) error {
		if n < 1 {
			return fmt.Errorf("codec: concurrency %d must be at least 1", n)
		}
		e.concurrency = n
		return nil
	}
}

// parallelParts returns how many sections a value of n bytes is cut into
// by an encoder of concurrency c: 1 below ParallelMinSize.
func parallelParts(n, c int) int {
	if c <= 1 || n < ParallelMinSize {
		return 1
	}
	return min(c, n/parallelChunk)
}

// s2Parallel compresses the sections of a value as independent s2 (or
// snappy) blocks on their own goroutines and joins them into one block: a
// block is a uvarint of the decoded length followed by literal and copy
// elements whose offsets point back into the decoded output, and no block
// starts with a repeat offset, so the elements of consecutive blocks make a
// valid block of the concatenated input (s2.ConcatBlocks relies on the
// same). Copies never cross a seam, which costs a little ratio.
//
// Each section is compressed straight into its own region of dst (its
// worst-case size), and the bodies are then moved down behind the header:
// no scratch buffers, which a sync.Pool would lose at every GC, and a
// moved body is a quarter of the value or less.
type s2Parallel struct {
	fn func(dst, src []byte) []byte
}

func (z *s2Parallel) appendCompress(dst, src []byte, parts int) ([]byte, error) {
	start := len(dst)
	var hdr [binary.MaxVarintLen64]byte
	hn := binary.PutUvarint(hdr[:], uint64(len(src)))
	size := (len(src) + parts - 1) / parts
	total := hn
	for i := range parts {
		total += s2.MaxEncodedLen(min(size, len(src)-i*size))
	}
	dst = grow(dst, total)
	buf := dst[:start+total]
	outs := make([][]byte, parts)
	var wg sync.WaitGroup
	off := start + hn
	for i := range parts {
		chunk := src[i*size : min((i+1)*size, len(src))]
		bound := s2.MaxEncodedLen(len(chunk))
		region := buf[off : off+bound : off+bound] // capped: no section writes into the next
		off += bound
		if i == parts-1 {
			outs[i] = z.fn(region, chunk) // the caller's goroutine takes the last section
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); outs[i] = z.fn(region, chunk) }()
	}
	wg.Wait()
	copy(buf[start:], hdr[:hn])
	end := start + hn
	for _, o := range outs {
		_, n := binary.Uvarint(o)
		end += copy(buf[end:], o[n:])
	}
	return buf[:end], nil
}

// zstdParallel compresses large values with klauspost's streaming encoder in
// its job mode (WithConcurrentBlocks): the value is cut into sections that
// are compressed at once, each seeing the end of the previous section, and
// written in order as one standard zstd frame. Streaming encoders are not
// safe for concurrent use and are costly to build (hash tables per
// goroutine), so up to one per goroutine of the Encoder's concurrency is
// kept in a free list, which, unlike a sync.Pool, survives garbage
// collections: the large values this path serves make many.
type zstdParallel struct {
	free chan *zstdStream
	mk   func() (*zstdStream, error)
}

type zstdStream struct {
	out appendWriter
	enc *zstd.Encoder
}

// zstdJobWindow is the window of the parallel zstd encoder. The encoder cuts
// its input into jobs of four windows (at least 512 KiB), so this window
// gives 1 MB values two jobs; each job also sees the last eighth of a
// window of the job before.
const zstdJobWindow = 128 << 10

// zstdParallelMin is the smallest value the parallel zstd encoder takes: one
// and a half jobs. Below it the value is a single job, and the streaming
// encoder only adds its own costs (measured: 512 KiB values were no faster).
const zstdParallelMin = 3 * 4 * zstdJobWindow / 2

func newZstdParallel(level zstd.EncoderLevel, concurrency int) (*zstdParallel, error) {
	z := &zstdParallel{free: make(chan *zstdStream, concurrency)}
	z.mk = func() (*zstdStream, error) {
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(level),
			zstd.WithEncoderConcurrency(concurrency),
			zstd.WithConcurrentBlocks(true),
			zstd.WithWindowSize(zstdJobWindow),
			zstd.WithEncoderCRC(false),
		)
		return &zstdStream{enc: enc}, err
	}
	s, err := z.mk() // fail at NewEncoder, not at the first large value
	if err != nil {
		return nil, err
	}
	z.free <- s
	return z, nil
}

func (z *zstdParallel) appendCompress(dst, src []byte) ([]byte, error) {
	var s *zstdStream
	select {
	case s = <-z.free:
	default:
		var err error
		if s, err = z.mk(); err != nil {
			return dst, err
		}
	}
	s.out.b = dst
	s.enc.ResetContentSize(&s.out, int64(len(src)))
	_, err := s.enc.Write(src)
	if cerr := s.enc.Close(); err == nil {
		err = cerr
	}
	out := s.out.b
	s.out.b = nil
	select {
	case z.free <- s:
	default: // more goroutines than the list holds: let this one go
	}
	return out, err
}

// defaultConcurrency is WithConcurrency's default.
func defaultConcurrency() int { return runtime.GOMAXPROCS(0) }
