package codec

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"

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
// Only s2, snappy and zstd split a value (zstd from 768 KiB, without a
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
type s2Parallel struct {
	fn      func(dst, src []byte) []byte
	scratch sync.Pool // of *[]byte
}

func (z *s2Parallel) appendCompress(dst, src []byte, parts int) ([]byte, error) {
	var wg sync.WaitGroup
	bufs := make([]*[]byte, parts)
	size := (len(src) + parts - 1) / parts
	for i := range parts {
		chunk := src[i*size : min((i+1)*size, len(src))]
		b, _ := z.scratch.Get().(*[]byte)
		if b == nil {
			b = new([]byte)
		}
		bufs[i] = b
		work := func() {
			*b = z.fn((*b)[:cap(*b)], chunk)
		}
		if i == parts-1 {
			work() // the caller's goroutine takes the last section
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); work() }()
	}
	wg.Wait()
	var hdr [binary.MaxVarintLen64]byte
	hn := binary.PutUvarint(hdr[:], uint64(len(src)))
	total := hn
	for _, b := range bufs {
		_, n := binary.Uvarint(*b)
		total += len(*b) - n
	}
	dst = grow(dst, total)
	dst = append(dst, hdr[:hn]...)
	for _, b := range bufs {
		_, n := binary.Uvarint(*b)
		dst = append(dst, (*b)[n:]...)
		z.scratch.Put(b)
	}
	return dst, nil
}

// zstdParallel compresses large values with klauspost's streaming encoder in
// its job mode (WithConcurrentBlocks): the value is cut into sections that
// are compressed at once, each seeing the end of the previous section, and
// written in order as one standard zstd frame. Streaming encoders are not
// safe for concurrent use, so they are pooled.
type zstdParallel struct {
	pool sync.Pool // of *zstdStream
	err  error     // from building the first encoder
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
	mk := func() (*zstdStream, error) {
		s := &zstdStream{}
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(level),
			zstd.WithEncoderConcurrency(concurrency),
			zstd.WithConcurrentBlocks(true),
			zstd.WithWindowSize(zstdJobWindow),
			zstd.WithEncoderCRC(false),
		)
		s.enc = enc
		return s, err
	}
	z := &zstdParallel{}
	first, err := mk()
	if err != nil {
		return nil, err
	}
	z.pool.Put(first)
	z.pool.New = func() any {
		s, err := mk()
		if err != nil {
			return nil
		}
		return s
	}
	return z, nil
}

func (z *zstdParallel) appendCompress(dst, src []byte) ([]byte, error) {
	s, _ := z.pool.Get().(*zstdStream)
	if s == nil {
		return dst, fmt.Errorf("codec: cannot build a parallel zstd encoder")
	}
	s.out.b = dst
	s.enc.ResetContentSize(&s.out, int64(len(src)))
	_, err := s.enc.Write(src)
	if cerr := s.enc.Close(); err == nil {
		err = cerr
	}
	out := s.out.b
	s.out.b = nil
	z.pool.Put(s)
	return out, err
}

// defaultConcurrency is WithConcurrency's default.
func defaultConcurrency() int { return runtime.GOMAXPROCS(0) }
