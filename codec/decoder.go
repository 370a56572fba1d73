package codec

import (
	"bytes"
	"errors"
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

// DecoderOption configures a Decoder.
type DecoderOption func(*Decoder) error

// WithMaxDecodedSize sets the largest original length a frame may declare
// (default DefaultMaxDecodedSize, 512 MiB). Larger frames fail with
// ErrTooLarge before anything is allocated for them.
func WithMaxDecodedSize(n int64) DecoderOption {
	return func(d *Decoder) error {
		if n <= 0 {
			return fmt.Errorf("codec: max decoded size %d must be positive", n)
		}
		d.max = n
		return nil
	}
}

// A Decoder reads values written by any Encoder, whatever the codec. It is
// safe for concurrent use.
type Decoder struct {
	max      int64
	zstd     *zstd.Decoder
	dicts    map[uint64]bool // dictionary IDs the zstd decoder has
	dictData [][]byte

	brotli, gzip, flate, zlib sync.Pool // of *streamReader
	// zstdStreams are single-goroutine zstd stream decoders for
	// ValueReader, with zstd's limits set as for d.zstd.
	zstdStreams sync.Pool
	zlimit      uint64
}

// NewDecoder returns a Decoder.
func NewDecoder(opts ...DecoderOption) (*Decoder, error) {
	d := &Decoder{max: DefaultMaxDecodedSize}
	for _, o := range opts {
		if err := o(d); err != nil {
			return nil, err
		}
	}
	var err error
	// zstd's own limits bound its window and history buffers. They must not
	// be smaller than a legitimate frame's window (which rounds the value's
	// size up), so they get headroom above max; the output itself is bounded
	// by the header's length through WithDecodeAllCapLimit.
	zlimit := uint64(max(2*d.max, 8<<20))
	d.zlimit = zlimit
	d.zstd, err = zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithDecoderMaxMemory(zlimit),
		zstd.WithDecoderMaxWindow(zlimit),
		zstd.WithDecodeAllCapLimit(true), // never write past what the header declared
		zstd.WithDecoderDicts(d.dictData...))
	if err != nil {
		return nil, err
	}
	return d, nil
}

// MaxDecodedSize returns the largest original length d accepts.
func (d *Decoder) MaxDecodedSize() int64 { return d.max }

// AppendDecode appends the value stored as src to dst. Bytes that do not
// begin with the magic are appended unchanged (the read policy: values
// written without squeeze read as they are). A frame that fails validation
// returns dst unchanged and an error wrapping ErrCorrupt (ErrTruncated and
// ErrChecksum among them), ErrTooLarge, ErrUnknownCodec,
// ErrUnsupportedVersion or ErrUnknownDictionary. dst and src must not
// overlap.
func (d *Decoder) AppendDecode(dst, src []byte) ([]byte, error) {
	if !IsFramed(src) {
		return append(dst, src...), nil
	}
	h, err := ParseHeader(src)
	if err != nil {
		return dst, err
	}
	return d.appendPayload(dst, src[h.Len:], &h)
}

// DecodeFrame is AppendDecode for bytes that must be a frame: unframed
// input is an error wrapping ErrCorrupt.
func (d *Decoder) DecodeFrame(dst, src []byte) ([]byte, error) {
	h, err := ParseHeader(src)
	if err != nil {
		return dst, err
	}
	return d.appendPayload(dst, src[h.Len:], &h)
}

func (d *Decoder) appendPayload(dst, payload []byte, h *Header) ([]byte, error) {
	if h.OriginalLen > uint64(d.max) {
		return dst, fmt.Errorf("%w: frame declares %d bytes, limit is %d", ErrTooLarge, h.OriginalLen, d.max)
	}
	if h.HasDict && (h.ID != IDZstd || !d.dicts[h.DictID]) {
		return dst, fmt.Errorf("%w: id %d", ErrUnknownDictionary, h.DictID)
	}
	n := int(h.OriginalLen)
	start := len(dst)
	// A payload can be shorter than its value, but never by more than the
	// best ratio of any codec: this rejects bombs before allocating.
	if err := plausible(h.ID, len(payload), n); err != nil {
		return dst, err
	}
	orig := dst
	dst = grow(dst, n)
	// The decoders see exactly n bytes of room, so none can write more.
	out, err := d.decompress(h.ID, dst[:start:start+n], payload, n)
	if err != nil {
		return orig, err
	}
	if len(out)-start != n {
		return orig, fmt.Errorf("%w: %s payload decodes to %d bytes, header says %d", ErrCorrupt, h.ID, len(out)-start, n)
	}
	if n == 0 || &out[start] == &dst[:start+n][start] {
		out = dst[:start+n] // hand back the whole capacity for the caller's next append
	}
	if h.HasChecksum {
		if sum := Checksum(out[start:]); sum != h.Checksum {
			return orig, fmt.Errorf("%w: crc32c %08x, header says %08x", ErrChecksum, sum, h.Checksum)
		}
	}
	return out, nil
}

// plausible rejects payloads too short for the length they claim. The
// bounds are loose (each codec's largest possible expansion) so no valid
// frame is refused.
func plausible(id ID, payloadLen, n int) error {
	var maxRatio int
	switch id {
	case IDNone:
		if payloadLen != n {
			if payloadLen < n {
				return fmt.Errorf("%w: none payload has %d of %d bytes", ErrTruncated, payloadLen, n)
			}
			return fmt.Errorf("%w: none payload has %d bytes, header says %d", ErrCorrupt, payloadLen, n)
		}
		return nil
	case IDLZ4:
		maxRatio = 256 // each lz4 sequence byte yields at most 255 more
	case IDS2, IDSnappy, IDMinLZ:
		return nil // s2 and MinLZ blocks store their decoded length; checked before decoding
	default:
		return nil // zstd, brotli, flate and xz are bounded while decoding
	}
	if payloadLen*maxRatio+16 < n {
		return fmt.Errorf("%w: %d byte %s payload cannot hold %d bytes", ErrCorrupt, payloadLen, id, n)
	}
	return nil
}

// decompress appends the n-byte value of payload to dst, whose capacity
// leaves exactly n bytes of room.
func (d *Decoder) decompress(id ID, dst, payload []byte, n int) ([]byte, error) {
	switch id {
	case IDNone:
		return append(dst, payload...), nil
	case IDZstd:
		out, err := d.zstd.DecodeAll(payload, dst)
		if err != nil {
			return dst, corrupt(id, err)
		}
		return out, nil
	case IDLZ4:
		out := dst[len(dst) : len(dst)+n]
		if n == 0 {
			out = emptyLZ4[:0] // the lz4 assembly dereferences dst even when empty
		}
		k, err := lz4.UncompressBlock(payload, out)
		if err != nil {
			return dst, corrupt(id, err)
		}
		return dst[:len(dst)+k], nil
	case IDS2, IDSnappy:
		dl, err := s2.DecodedLen(payload)
		if err != nil {
			return dst, corrupt(id, err)
		}
		if dl != n {
			return dst, fmt.Errorf("%w: %s block holds %d bytes, header says %d", ErrCorrupt, id, dl, n)
		}
		out, err := s2.Decode(dst[len(dst):len(dst)+n], payload)
		if err != nil {
			return dst, corrupt(id, err)
		}
		return dst[:len(dst)+len(out)], nil
	case IDBrotli:
		return d.readStream(&d.brotli, id, dst, payload, n)
	case IDGzip:
		return d.readStream(&d.gzip, id, dst, payload, n)
	case IDDeflate:
		return d.readStream(&d.flate, id, dst, payload, n)
	case IDZlib:
		return d.readStream(&d.zlib, id, dst, payload, n)
	case IDMinLZ:
		return decodeMinLZ(dst, payload, n)
	case IDXZ:
		r, err := xz.NewReader(bytes.NewReader(payload))
		if err != nil {
			return dst, corrupt(id, err)
		}
		return readExactly(r, id, dst, n, make([]byte, 1))
	}
	return dst, fmt.Errorf("%w: 0x%02x", ErrUnknownCodec, uint8(id))
}

var emptyLZ4 [1]byte

// streamReader is a pooled decompressing reader over a bytes.Reader.
type streamReader struct {
	src bytes.Reader
	r   io.Reader
	one [1]byte
}

func (d *Decoder) readStream(pool *sync.Pool, id ID, dst, payload []byte, n int) ([]byte, error) {
	s, _ := pool.Get().(*streamReader)
	if s == nil {
		s = &streamReader{}
	}
	s.src.Reset(payload)
	var err error
	switch {
	case s.r == nil:
		switch id {
		case IDBrotli:
			s.r = brotli.NewReader(&s.src)
		case IDGzip:
			s.r, err = gzip.NewReader(&s.src)
		case IDDeflate:
			s.r = flate.NewReader(&s.src)
		case IDZlib:
			s.r, err = zlib.NewReader(&s.src)
		}
	default:
		switch r := s.r.(type) {
		case *brotli.Reader:
			err = r.Reset(&s.src)
		case *gzip.Reader:
			err = r.Reset(&s.src)
		case flate.Resetter:
			err = r.Reset(&s.src, nil)
		}
	}
	if err != nil {
		s.r = nil // a reader whose reset failed is not reused
		pool.Put(s)
		return dst, corrupt(id, err)
	}
	if z, ok := s.r.(*gzip.Reader); ok {
		z.Multistream(false) // one member (docs/FORMAT.md); Reset turns it back on
	}
	out, err := readExactly(s.r, id, dst, n, s.one[:])
	// The payload is one stream and nothing after it. The flate and zlib
	// readers stop at the end of the stream without looking further (they
	// read from a bytes.Reader byte by byte, never ahead), so what is left
	// there follows the stream.
	if left := s.src.Len(); err == nil && left != 0 {
		out, err = dst, fmt.Errorf("%w: %d bytes after the %s stream", ErrCorrupt, left, id)
	}
	s.src.Reset(nil)
	pool.Put(s)
	return out, err
}

// readExactly reads n bytes from r into dst's spare capacity and checks
// that r ends there: a stream longer than its header says is corrupt.
func readExactly(r io.Reader, id ID, dst []byte, n int, one []byte) ([]byte, error) {
	k, err := io.ReadFull(r, dst[len(dst):len(dst)+n])
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return dst, fmt.Errorf("%w: %s payload ends after %d of %d bytes", ErrTruncated, id, k, n)
		}
		return dst, corrupt(id, err)
	}
	if m, err := r.Read(one); m != 0 || (err != io.EOF && err != nil) {
		if m != 0 {
			return dst, fmt.Errorf("%w: %s payload decodes to more than %d bytes", ErrCorrupt, id, n)
		}
		return dst, corrupt(id, err)
	} else if err == nil {
		// Some readers return (0, nil) before EOF; one more read settles it.
		if m, err := r.Read(one); m != 0 || err != io.EOF {
			if m != 0 {
				return dst, fmt.Errorf("%w: %s payload decodes to more than %d bytes", ErrCorrupt, id, n)
			}
			if err != nil {
				return dst, corrupt(id, err)
			}
		}
	}
	return dst[:len(dst)+n], nil
}

func corrupt(id ID, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %s payload: %v", ErrTruncated, id, err)
	}
	return fmt.Errorf("%w: %s payload: %v", ErrCorrupt, id, err)
}
