package valuescript

import (
	"strconv"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/resp"
)

// BITFIELD and BITFIELD_RO run inside Inspect, and a Lua script receives
// integer replies as doubles: above 2^53 a GET of an i64 or u63 field
// would be rounded. Where a command has a field wider than 53 bits it runs
// exactly instead (modes InspectExact and InspectExactRestore): the
// subcommands are checked as Redis accepts them (ExactBitfield), and the
// script runs them one at a time (each with the OVERFLOW mode in force),
// reading the field's 64 bits from its offset as two exact u32 values,
// before a SET (which replies with the old value) or after a GET or
// INCRBY. Its Command is then the command's name and key, and per
// subcommand six words: GET, SET or INCRBY; the type; the offset as sent;
// the value (empty for GET); the OVERFLOW mode; the field's bit offset.
// It replies BitfieldMarker, then per subcommand nil (an OVERFLOW FAIL) or
// [high u32, low u32, type], which BitfieldValue turns into the integer.
// Anything not recognised runs as one command, for Redis's own error;
// fields up to 53 bits, which doubles hold exactly, run as one command
// too.

// MaxExactBitOffset bounds the bit offsets of the exact path, so that the
// reads 64 bits past a field stay within every server's limit (512 MiB).
const MaxExactBitOffset = 1<<32 - 64

// A BitfieldField is one field of a BITFIELD subcommand.
type BitfieldField struct {
	Signed bool
	Width  uint
	BitOff int64 // the field's bit offset (#N multiplied out)
}

// ExactBitfield returns the Command of the exact form of a BITFIELD or
// BITFIELD_RO call (see above), or ok false where the call runs as it is.
func ExactBitfield(args [][]byte) (sargs [][]byte, ok bool) {
	if len(args) < 3 {
		return nil, false
	}
	ro := rediscmd.Is(args[0], "BITFIELD_RO")
	if !ro && !rediscmd.Is(args[0], "BITFIELD") {
		return nil, false
	}
	type op struct {
		name          string
		typ, off, val []byte
		overflow      string
		f             BitfieldField
	}
	var ops []op
	overflow, wide := "WRAP", false
	for i := 2; i < len(args); {
		switch {
		case rediscmd.Is(args[i], "GET") && i+2 < len(args):
			f, ok := ParseBitfieldField(args[i+1], args[i+2])
			if !ok {
				return nil, false
			}
			ops = append(ops, op{"GET", args[i+1], args[i+2], nil, overflow, f})
			wide, i = wide || f.Width > 53, i+3
		case !ro && (rediscmd.Is(args[i], "SET") || rediscmd.Is(args[i], "INCRBY")) && i+3 < len(args):
			name := "SET"
			if rediscmd.Is(args[i], "INCRBY") {
				name = "INCRBY"
			}
			if _, ok := resp.ParseInt(args[i+3]); !ok {
				return nil, false
			}
			f, ok := ParseBitfieldField(args[i+1], args[i+2])
			if !ok {
				return nil, false
			}
			ops = append(ops, op{name, args[i+1], args[i+2], args[i+3], overflow, f})
			wide, i = wide || f.Width > 53, i+4
		case !ro && rediscmd.Is(args[i], "OVERFLOW") && i+1 < len(args):
			switch {
			case rediscmd.Is(args[i+1], "WRAP"):
				overflow = "WRAP"
			case rediscmd.Is(args[i+1], "SAT"):
				overflow = "SAT"
			case rediscmd.Is(args[i+1], "FAIL"):
				overflow = "FAIL"
			default:
				return nil, false
			}
			i += 2
		default:
			return nil, false
		}
	}
	if !wide {
		return nil, false
	}
	sargs = append(sargs, args[0], args[1])
	for _, o := range ops {
		val := o.val
		if val == nil {
			val = []byte{}
		}
		sargs = append(sargs, []byte(o.name), o.typ, o.off, val, []byte(o.overflow), strconv.AppendInt(nil, o.f.BitOff, 10))
	}
	return sargs, true
}

// ParseBitfieldField checks a type (i1..i64, u1..u63) and an offset (N or
// #N, plain digits) as Redis accepts them, within MaxExactBitOffset.
func ParseBitfieldField(typ, off []byte) (BitfieldField, bool) {
	var f BitfieldField
	if len(typ) < 2 || len(typ) > 3 || (typ[0] != 'i' && typ[0] != 'I' && typ[0] != 'u' && typ[0] != 'U') {
		return f, false
	}
	w, ok := PlainOffset(typ[1:])
	f.Signed = typ[0] == 'i' || typ[0] == 'I'
	if !ok || w < 1 || (f.Signed && w > 64) || (!f.Signed && w > 63) {
		return f, false
	}
	f.Width = uint(w)
	mul := int64(1)
	if len(off) > 0 && off[0] == '#' {
		off, mul = off[1:], w
	}
	n, ok := PlainOffset(off)
	if !ok || n > MaxExactBitOffset/mul {
		return f, false
	}
	f.BitOff = n * mul
	if f.BitOff > MaxExactBitOffset {
		return f, false
	}
	return f, true
}

// BitfieldValue returns the integer a field of type typ holds, from the
// 64 bits at its offset read as two u32 values, hi and lo (an element of
// the exact reply); ok is false for a type ParseBitfieldField refuses.
func BitfieldValue(hi, lo int64, typ []byte) (n int64, ok bool) {
	f, ok := ParseBitfieldField(typ, []byte("0"))
	if !ok {
		return 0, false
	}
	bits := uint64(uint32(hi))<<32 | uint64(uint32(lo))
	shift := 64 - f.Width
	if f.Signed {
		return int64(bits) >> shift, true // arithmetic: the sign bit extends
	}
	return int64(bits >> shift), true
}
