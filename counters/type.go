package counters

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Type is the fixed width of every slot of a series, as BITFIELD spells it:
// a signedness and a number of bits. Unsigned types hold 1 to 63 bits
// (Redis's limit), signed types 1 to 64. The zero value means U16, the width
// of the seed's "4 hex characters per day" layout.
type Type struct {
	Signed bool
	Bits   uint8
}

// Common types. Any width BITFIELD accepts is valid; see ParseType.
var (
	U8  = Type{Bits: 8}
	U16 = Type{Bits: 16}
	U32 = Type{Bits: 32}
	I8  = Type{Signed: true, Bits: 8}
	I16 = Type{Signed: true, Bits: 16}
	I32 = Type{Signed: true, Bits: 32}
	I64 = Type{Signed: true, Bits: 64}
)

// ErrType is returned for a type BITFIELD does not accept.
var ErrType = errors.New("counters: invalid type")

// ParseType parses a BITFIELD type such as "u16", "i64" or "u12".
// It returns an error wrapping ErrType for anything else.
func ParseType(s string) (Type, error) {
	if len(s) < 2 {
		return Type{}, fmt.Errorf("%w %q: want u1..u63 or i1..i64 (e.g. u16)", ErrType, s)
	}
	var t Type
	switch s[0] {
	case 'u', 'U':
	case 'i', 'I':
		t.Signed = true
	default:
		return Type{}, fmt.Errorf("%w %q: want u1..u63 or i1..i64 (e.g. u16)", ErrType, s)
	}
	n, err := strconv.Atoi(s[1:])
	if err != nil || n < 1 || n > 64 || (!t.Signed && n > 63) || s[1] < '1' || s[1] > '9' {
		return Type{}, fmt.Errorf("%w %q: want u1..u63 or i1..i64 (e.g. u16)", ErrType, s)
	}
	t.Bits = uint8(n)
	return t, nil
}

// orDefault returns U16 for the zero Type.
func (t Type) orDefault() Type {
	if t.Bits == 0 {
		return U16
	}
	return t
}

// Valid reports whether BITFIELD accepts t (the zero Type counts as U16).
func (t Type) Valid() bool {
	t = t.orDefault()
	if t.Signed {
		return t.Bits >= 1 && t.Bits <= 64
	}
	return t.Bits >= 1 && t.Bits <= 63
}

// String returns the BITFIELD spelling, such as "u16".
func (t Type) String() string {
	t = t.orDefault()
	if t.Signed {
		return "i" + strconv.Itoa(int(t.Bits))
	}
	return "u" + strconv.Itoa(int(t.Bits))
}

// Min returns the smallest value a slot of type t holds.
func (t Type) Min() int64 {
	t = t.orDefault()
	if !t.Signed {
		return 0
	}
	return -1 << (t.Bits - 1)
}

// Max returns the largest value a slot of type t holds.
func (t Type) Max() int64 {
	t = t.orDefault()
	if t.Signed {
		return 1<<(t.Bits-1) - 1
	}
	return 1<<t.Bits - 1
}

// Fits reports whether v is representable in a slot of type t.
func (t Type) Fits(v int64) bool { return v >= t.Min() && v <= t.Max() }

// Overflow is the rule BITFIELD applies when an increment leaves the range of
// the type: wrap around, saturate at the bound, or fail and leave the slot
// unchanged. The zero value is OverflowFail, so that no increment is ever
// silently lost or altered unless the user asked for it.
type Overflow uint8

// Overflow rules, as BITFIELD's OVERFLOW subcommand names them.
const (
	OverflowFail Overflow = 0
	OverflowSat  Overflow = 1
	OverflowWrap Overflow = 2
)

// String returns "FAIL", "SAT" or "WRAP".
func (o Overflow) String() string {
	switch o {
	case OverflowFail:
		return "FAIL"
	case OverflowSat:
		return "SAT"
	case OverflowWrap:
		return "WRAP"
	}
	return "Overflow(" + strconv.Itoa(int(o)) + ")"
}

// ParseOverflow parses "fail", "sat" or "wrap" (any case).
func ParseOverflow(s string) (Overflow, error) {
	switch strings.ToUpper(s) {
	case "FAIL":
		return OverflowFail, nil
	case "SAT":
		return OverflowSat, nil
	case "WRAP":
		return OverflowWrap, nil
	}
	return 0, fmt.Errorf("counters: invalid overflow rule %q: want fail, sat or wrap", s)
}
