package codec

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/zstd"
)

// A ValueReader reads the value of one frame in pieces, for a caller that
// passes a large value on as it is decoded instead of holding it whole (a
// proxy writing it to a client): memory stays at the codec's window and
// the caller's buffer, whatever the value's size, so a frame of a few kB
// that decodes to hundreds of MiB costs no more than a small one.
//
// Only frames whose codec decodes as a stream without holding the whole
// value stream: zstd without a dictionary (Streams). Read checks what
// AppendDecode checks, as the value comes: it returns io.EOF only once
// exactly the header's length came out with the header's checksum; past
// the length, short of it, or with another checksum it returns an error
// wrapping ErrCorrupt, ErrTruncated or ErrChecksum, after the bytes it has
// already returned. A caller that must not pass on a wrong value holds
// back the last piece until Read says io.EOF. Errors and io.EOF repeat.
type ValueReader struct {
	d   *Decoder
	h   Header
	src bytes.Reader
	z   *zstd.Decoder
	n   uint64 // bytes returned
	crc uint32
	err error
}

// Streams reports whether NewValueReader reads frames with header h.
func Streams(h Header) bool { return h.ID == IDZstd && !h.HasDict }

// NewValueReader returns a reader of frame's value, or an error when the
// header is invalid, declares more than the Decoder's maximum, or names a
// codec or a dictionary that does not stream (Streams). Close releases it.
func (d *Decoder) NewValueReader(frame []byte) (*ValueReader, error) {
	h, err := ParseHeader(frame)
	if err != nil {
		return nil, err
	}
	if h.OriginalLen > uint64(d.max) {
		return nil, fmt.Errorf("%w: frame declares %d bytes, limit is %d", ErrTooLarge, h.OriginalLen, d.max)
	}
	if !Streams(h) {
		return nil, fmt.Errorf("codec: a %s frame (dictionary: %v) does not stream", h.ID, h.HasDict)
	}
	r := &ValueReader{d: d, h: h}
	r.src.Reset(frame[h.Len:])
	z, _ := d.zstdStreams.Get().(*zstd.Decoder)
	if z == nil {
		z, err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1), // decodes in Read, no goroutines
			zstd.WithDecoderMaxMemory(d.zlimit),
			zstd.WithDecoderMaxWindow(d.zlimit))
		if err != nil {
			return nil, err
		}
	}
	if err := z.Reset(&r.src); err != nil {
		d.zstdStreams.Put(z)
		return nil, corrupt(IDZstd, err)
	}
	r.z = z
	return r, nil
}

// Header is the frame's header.
func (r *ValueReader) Header() Header { return r.h }

// Read reads the next piece of the value into p.
func (r *ValueReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	// At most one byte past the declared length, to see a payload that
	// decodes to more.
	if rest := r.h.OriginalLen - r.n; uint64(len(p)) > rest+1 {
		p = p[:rest+1]
	}
	k, err := r.z.Read(p)
	if r.n+uint64(k) > r.h.OriginalLen {
		k = int(r.h.OriginalLen - r.n)
		r.err = fmt.Errorf("%w: zstd payload decodes to more than the %d bytes the header says", ErrCorrupt, r.h.OriginalLen)
	}
	r.n += uint64(k)
	if r.h.HasChecksum {
		r.crc = crc32.Update(r.crc, castagnoli, p[:k])
	}
	switch {
	case r.err != nil:
	case errors.Is(err, io.EOF):
		switch {
		case r.n != r.h.OriginalLen:
			r.err = fmt.Errorf("%w: zstd payload decodes to %d bytes, header says %d", ErrTruncated, r.n, r.h.OriginalLen)
		case r.h.HasChecksum && r.crc != r.h.Checksum:
			r.err = fmt.Errorf("%w: crc32c %08x, header says %08x", ErrChecksum, r.crc, r.h.Checksum)
		default:
			r.err = io.EOF
		}
	case err != nil:
		r.err = corrupt(IDZstd, err)
	}
	return k, r.err
}

// Close releases the reader's decoder; the reader must not be used after.
func (r *ValueReader) Close() {
	if r.z != nil {
		r.z.Reset(nil)
		r.d.zstdStreams.Put(r.z)
		r.z = nil
	}
	if r.err == nil {
		r.err = errors.New("codec: ValueReader closed")
	}
}
