package proxy

import (
	"bytes"
	"strconv"

	"github.com/squeeze-kv/squeeze/resp"
)

// BITFIELD and BITFIELD_RO run inside the inspect script, and a Lua script
// receives integer replies as doubles: above 2^53 a GET of an i64 or u63
// field would be rounded (9007199254740993 read back as ...992). Where a
// command has a field wider than 53 bits the proxy runs it exactly instead:
// it checks the subcommands as Redis would accept them, and the script runs
// them one at a time (each with the OVERFLOW mode in force), reading the
// field's 64 bits from its offset as two exact u32 values, before a SET
// (which replies with the old value) or after a GET or INCRBY. The proxy
// takes the field's bits from those and replies with the exact integers.
// Anything it does not recognise runs as one command, for Redis's own
// error; fields up to 53 bits, which doubles hold exactly, run as one
// command too.
//
// The script's part (inspectScript, modes '4' and '5'): ARGV from the
// command's place holds the command's name and key, then for each
// subcommand six values: GET, SET or INCRBY; the type; the offset as sent;
// the value (empty for GET); the OVERFLOW mode; the field's bit offset.
// It replies with a marker that describes itself, so that a reply inside
// EXEC is read the same way: the bulk string "\xC1SQB", then per
// subcommand nil (an OVERFLOW FAIL) or [high u32, low u32, type].

// maxExactBitOffset bounds the bit offsets of the exact path, so that the
// reads 64 bits past a field stay within every server's limit (512 MiB).
const maxExactBitOffset = 1<<32 - 64

// bitfieldOp is one subcommand of an exact BITFIELD.
type bitfieldOp struct {
	op       string // GET, SET or INCRBY
	signed   bool
	width    uint
	bitOff   int64
	typ, off []byte
	val      []byte
	overflow string
}

// exactBitfield returns the exact form of a BITFIELD or BITFIELD_RO command
// (its cmdInfo and the script's arguments), or ok false
// where the command runs as it is.
func exactBitfield(info *cmdInfo, args [][]byte) (ex *cmdInfo, sargs [][]byte, ok bool) {
	var ops []bitfieldOp
	ro := info == bitfieldROCmd
	if (info != bitfieldCmd && !ro) || len(args) < 3 {
		return nil, nil, false
	}
	overflow, wide := "WRAP", false
	for i := 2; i < len(args); {
		switch {
		case is(args[i], "GET") && i+2 < len(args):
			o, ok := parseBitfieldField("GET", args[i+1], args[i+2], nil, overflow)
			if !ok {
				return nil, nil, false
			}
			ops, wide, i = append(ops, o), wide || o.width > 53, i+3
		case !ro && (is(args[i], "SET") || is(args[i], "INCRBY")) && i+3 < len(args):
			name := "SET"
			if is(args[i], "INCRBY") {
				name = "INCRBY"
			}
			if _, ok := resp.ParseInt(args[i+3]); !ok {
				return nil, nil, false
			}
			o, ok := parseBitfieldField(name, args[i+1], args[i+2], args[i+3], overflow)
			if !ok {
				return nil, nil, false
			}
			ops, wide, i = append(ops, o), wide || o.width > 53, i+4
		case !ro && is(args[i], "OVERFLOW") && i+1 < len(args):
			switch {
			case is(args[i+1], "WRAP"):
				overflow = "WRAP"
			case is(args[i+1], "SAT"):
				overflow = "SAT"
			case is(args[i+1], "FAIL"):
				overflow = "FAIL"
			default:
				return nil, nil, false
			}
			i += 2
		default:
			return nil, nil, false
		}
	}
	if !wide {
		return nil, nil, false
	}
	sargs = append(sargs, args[0], args[1])
	for _, o := range ops {
		sargs = append(sargs, []byte(o.op), o.typ, o.off, o.val, []byte(o.overflow), strconv.AppendInt(nil, o.bitOff, 10))
	}
	if ro {
		return bitfieldROExact, sargs, true
	}
	return bitfieldExact, sargs, true
}

// parseBitfieldField checks a type (i1..i64, u1..u63) and an offset (N or
// #N, plain digits) as Redis accepts them.
func parseBitfieldField(op string, typ, off, val []byte, overflow string) (bitfieldOp, bool) {
	o := bitfieldOp{op: op, typ: typ, off: off, val: val, overflow: overflow}
	if len(typ) < 2 || len(typ) > 3 || (typ[0] != 'i' && typ[0] != 'I' && typ[0] != 'u' && typ[0] != 'U') {
		return o, false
	}
	w, ok := plainOffset(typ[1:])
	o.signed = typ[0] == 'i' || typ[0] == 'I'
	if !ok || w < 1 || (o.signed && w > 64) || (!o.signed && w > 63) {
		return o, false
	}
	o.width = uint(w)
	mul := int64(1)
	if len(off) > 0 && off[0] == '#' {
		off, mul = off[1:], w
	}
	n, ok := plainOffset(off)
	if !ok || n > maxExactBitOffset/mul {
		return o, false
	}
	o.bitOff = n * mul
	if o.bitOff > maxExactBitOffset {
		return o, false
	}
	return o, true
}

// bitfieldMagic begins the script's reply for an exact BITFIELD.
var bitfieldMagic = []byte("\xC1SQB")

// isBitfieldMarker reports whether v is the script's exact BITFIELD reply.
func isBitfieldMarker(v resp.Value) bool {
	if v.Type != resp.Array || v.N < 1 {
		return false
	}
	it := v.Elements()
	e, _ := it.Next()
	return e.Type == resp.BulkString && bytes.Equal(e.Str, bitfieldMagic)
}

// exactBitfieldReply turns the script's reply for an exact BITFIELD (see
// above) into Redis's reply. Anything else (an error) is returned as it is.
func exactBitfieldReply(reply []byte, proto int) []byte {
	v, _, err := resp.ReadValue(reply)
	if err != nil || !isBitfieldMarker(v) {
		return reply
	}
	out := resp.AppendArray(nil, v.N-1)
	it := v.Elements()
	it.Next()
	for {
		e, ok := it.Next()
		if !ok {
			return out
		}
		if e.Type != resp.Array || e.N != 3 {
			out = appendNull(out, proto)
			continue
		}
		h := e.Elements()
		hi, _ := h.Next()
		lo, _ := h.Next()
		typ, _ := h.Next()
		hv, ok1 := resp.ParseInt(hi.Str)
		lv, ok2 := resp.ParseInt(lo.Str)
		o, ok3 := parseBitfieldField("GET", typ.Str, []byte("0"), nil, "")
		if hi.Type != resp.Integer || lo.Type != resp.Integer || !ok1 || !ok2 || !ok3 {
			return reply
		}
		bits := uint64(uint32(hv))<<32 | uint64(uint32(lv))
		shift := 64 - o.width
		n := int64(bits >> shift)
		if o.signed {
			n = int64(bits) >> shift // arithmetic: the sign bit extends
		}
		out = resp.AppendInt(out, n)
	}
}

// appendNull appends the null reply of the protocol.
func appendNull(dst []byte, proto int) []byte {
	if proto == 3 {
		return append(dst, "_\r\n"...)
	}
	return append(dst, "$-1\r\n"...)
}
