// Package codec implements squeeze's self-describing frame format, as
// specified in docs/FORMAT.md, over the zstd, lz4, s2, snappy, MinLZ,
// brotli, gzip, deflate, zlib and xz algorithms.
//
// An Encoder applies the write policy: values shorter than a minimum size,
// that compress by less than a minimum gain, or that read as numbers
// (Numeric), are stored raw; a raw value that happens to begin with the
// frame magic is wrapped in a "none" frame, so that every value squeeze
// writes reads back unambiguously. A Decoder applies the
// read policy: bytes without the magic are returned as they are, so values
// written before squeeze existed keep working, and a frame that fails
// validation is an error wrapping ErrCorrupt, never silent garbage.
//
// Both are safe for concurrent use and allocate nothing in steady state when
// the caller reuses its destination buffer:
//
//	enc, _ := codec.NewEncoder(codec.MustParseAlgorithm("zstd:3"))
//	dec, _ := codec.NewDecoder()
//	frame := enc.AppendEncode(buf[:0], value)
//	value, err := dec.AppendDecode(out[:0], frame)
package codec
