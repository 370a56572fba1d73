package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Magic is the 3-byte prefix of every frame. 0xC1 can never appear in valid
// UTF-8, so no text value is mistaken for a frame.
const Magic = "\xC1SQ"

// Version is the frame format version this package writes.
const Version = 1

// Flag bits of the flags byte. Other bits are reserved and must be zero.
const (
	FlagChecksum = 1 << 0 // a CRC-32C of the original bytes follows the lengths
	FlagDict     = 1 << 1 // a dictionary id follows the original length
	flagReserved = ^uint8(FlagChecksum | FlagDict)
)

// MaxHeaderLen bounds the header: magic, version, codec, flags, two
// uvarints and the checksum.
const MaxHeaderLen = 3 + 3 + binary.MaxVarintLen64*2 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors returned by decoding. Use errors.Is: the returned errors wrap these
// with the reason.
var (
	// ErrCorrupt means the bytes begin with the magic but are not a valid frame.
	ErrCorrupt = errors.New("codec: corrupt frame")
	// ErrTruncated means the frame ends before its header or payload does. It
	// also matches ErrCorrupt.
	ErrTruncated = fmt.Errorf("%w: truncated", ErrCorrupt)
	// ErrChecksum means the decoded bytes do not match the frame's checksum.
	// It also matches ErrCorrupt.
	ErrChecksum = fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	// ErrTooLarge means the frame declares an original length above the
	// decoder's maximum; nothing was allocated for it.
	ErrTooLarge = errors.New("codec: decoded size above limit")
	// ErrUnknownCodec means the frame names a codec this build does not know
	// (written by a newer squeeze, or corrupt).
	ErrUnknownCodec = errors.New("codec: unknown codec id")
	// ErrUnsupportedVersion means the frame's format version is not one this
	// build reads.
	ErrUnsupportedVersion = errors.New("codec: unsupported frame version")
	// ErrUnknownDictionary means the frame was compressed with a dictionary
	// the decoder was not given.
	ErrUnknownDictionary = errors.New("codec: unknown dictionary")
)

// Header is the parsed header of a frame.
type Header struct {
	Version     uint8
	ID          ID
	Flags       uint8
	OriginalLen uint64 // length of the decoded value
	HasDict     bool
	DictID      uint64
	HasChecksum bool
	Checksum    uint32 // CRC-32C (Castagnoli) of the original bytes
	Len         int    // header length in bytes; the payload starts here
}

// IsFramed reports whether b begins with the frame magic. It does not
// validate the rest of the frame.
func IsFramed(b []byte) bool {
	return len(b) >= len(Magic) && b[0] == Magic[0] && b[1] == Magic[1] && b[2] == Magic[2]
}

// ParseHeader parses the header of the frame b without decoding the payload.
// It returns an error wrapping ErrCorrupt when b is not framed or the header
// is malformed, ErrTruncated when b ends inside the header,
// ErrUnsupportedVersion or ErrUnknownCodec. It does not check size limits.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if !IsFramed(b) {
		if len(b) < len(Magic) && len(b) > 0 && string(b) == Magic[:len(b)] {
			return h, fmt.Errorf("%w: %d bytes, header needs at least 7", ErrTruncated, len(b))
		}
		return h, fmt.Errorf("%w: no magic prefix", ErrCorrupt)
	}
	if len(b) < 7 {
		return h, fmt.Errorf("%w: %d bytes, header needs at least 7", ErrTruncated, len(b))
	}
	h.Version, h.ID, h.Flags = b[3], ID(b[4]), b[5]
	if h.Version != Version {
		return h, fmt.Errorf("%w: version %d (this build reads version %d)", ErrUnsupportedVersion, h.Version, Version)
	}
	if !h.ID.Known() {
		return h, fmt.Errorf("%w: 0x%02x (this build knows 0x00-0x%02x; written by a newer squeeze?)", ErrUnknownCodec, uint8(h.ID), uint8(codecs[len(codecs)-1].id))
	}
	if h.Flags&flagReserved != 0 {
		return h, fmt.Errorf("%w: reserved flag bits set (flags 0x%02x)", ErrCorrupt, h.Flags)
	}
	p := 6
	n, k := binary.Uvarint(b[p:])
	if k <= 0 {
		if k == 0 {
			return h, fmt.Errorf("%w: inside the original length", ErrTruncated)
		}
		return h, fmt.Errorf("%w: original length overflows 64 bits", ErrCorrupt)
	}
	h.OriginalLen, p = n, p+k
	if h.Flags&FlagDict != 0 {
		h.HasDict = true
		n, k = binary.Uvarint(b[p:])
		if k <= 0 {
			if k == 0 {
				return h, fmt.Errorf("%w: inside the dictionary id", ErrTruncated)
			}
			return h, fmt.Errorf("%w: dictionary id overflows 64 bits", ErrCorrupt)
		}
		h.DictID, p = n, p+k
	}
	if h.Flags&FlagChecksum != 0 {
		h.HasChecksum = true
		if len(b) < p+4 {
			return h, fmt.Errorf("%w: inside the checksum", ErrTruncated)
		}
		h.Checksum = binary.LittleEndian.Uint32(b[p:])
		p += 4
	}
	h.Len = p
	return h, nil
}

// AppendHeader appends the encoding of h to dst. It ignores h.Len and sets
// the flag bits from HasDict and HasChecksum.
func AppendHeader(dst []byte, h Header) []byte {
	flags := uint8(0)
	if h.HasChecksum {
		flags |= FlagChecksum
	}
	if h.HasDict {
		flags |= FlagDict
	}
	dst = append(dst, Magic...)
	dst = append(dst, Version, byte(h.ID), flags)
	dst = binary.AppendUvarint(dst, h.OriginalLen)
	if h.HasDict {
		dst = binary.AppendUvarint(dst, h.DictID)
	}
	if h.HasChecksum {
		dst = binary.LittleEndian.AppendUint32(dst, h.Checksum)
	}
	return dst
}

// Checksum returns the CRC-32C (Castagnoli) of b, the checksum frames carry.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
