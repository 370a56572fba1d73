package counters

import (
	"errors"
	"fmt"
)

// ErrValueRange is returned when a value does not fit the series' type.
var ErrValueRange = errors.New("counters: value out of range for type")

// Bytes returns the length in bytes of a string holding slots slots of
// type t: the size a series is pre-sized to.
func (t Type) Bytes(slots int) int {
	t = t.orDefault()
	return int((uint64(slots)*uint64(t.Bits) + 7) / 8)
}

// AppendEncode appends to dst the BITFIELD image of values: slot i holds
// values[i] at bit offset i*t.Bits, most significant bit first, exactly as
// "BITFIELD key SET <t> #i <v>" would lay it out. The last byte is padded with
// zero bits. It returns an error wrapping ErrValueRange, and dst unchanged,
// when a value does not fit t.
func AppendEncode(dst []byte, t Type, values []int64) ([]byte, error) {
	t = t.orDefault()
	if !t.Valid() {
		return dst, fmt.Errorf("%w %s", ErrType, t)
	}
	for i, v := range values {
		if !t.Fits(v) {
			return dst, fmt.Errorf("%w: slot %d value %d does not fit %s (%d..%d)", ErrValueRange, i, v, t, t.Min(), t.Max())
		}
	}
	start := len(dst)
	n := t.Bytes(len(values))
	dst = append(dst, make([]byte, n)...)
	b := dst[start:]
	bits := uint64(t.Bits)
	for i, v := range values {
		putBits(b, uint64(i)*bits, t.Bits, uint64(v))
	}
	return dst, nil
}

// AppendDecode appends to dst the values of slots [from, from+n) read from
// b, the BITFIELD image of a series of type t (as GET returns it). Bits past
// the end of b read as zero, as they do for BITFIELD GET.
func AppendDecode(dst []int64, t Type, b []byte, from, n int) []int64 {
	t = t.orDefault()
	bits := uint64(t.Bits)
	for i := 0; i < n; i++ {
		u := getBits(b, uint64(from+i)*bits, t.Bits)
		dst = append(dst, t.extend(u))
	}
	return dst
}

// extend converts the raw bits of one slot into its value.
func (t Type) extend(u uint64) int64 {
	if t.Signed && t.Bits < 64 {
		shift := 64 - t.Bits
		return int64(u<<shift) >> shift
	}
	return int64(u)
}

// putBits stores the low n bits of v at bit offset off of b, MSB first.
func putBits(b []byte, off uint64, n uint8, v uint64) {
	if off%8 == 0 && n%8 == 0 {
		i := off / 8
		for k := int(n/8) - 1; k >= 0; k-- {
			b[i+uint64(k)] = byte(v)
			v >>= 8
		}
		return
	}
	for k := int(n) - 1; k >= 0; k-- {
		bit := (v >> uint(int(n)-1-k)) & 1
		p := off + uint64(k)
		mask := byte(0x80) >> (p % 8)
		if bit == 1 {
			b[p/8] |= mask
		} else {
			b[p/8] &^= mask
		}
	}
}

// getBits reads n bits at bit offset off of b, MSB first; bits past the end
// of b are zero.
func getBits(b []byte, off uint64, n uint8) uint64 {
	if off%8 == 0 && n%8 == 0 && off/8+uint64(n/8) <= uint64(len(b)) {
		var v uint64
		for _, c := range b[off/8 : off/8+uint64(n/8)] {
			v = v<<8 | uint64(c)
		}
		return v
	}
	var v uint64
	for k := uint64(0); k < uint64(n); k++ {
		p := off + k
		v <<= 1
		if p/8 < uint64(len(b)) && b[p/8]&(0x80>>(p%8)) != 0 {
			v |= 1
		}
	}
	return v
}
