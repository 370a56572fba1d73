package proxy

import (
	"bytes"

	"github.com/squeeze-kv/squeeze/internal/valuescript"
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

// maxExactBitOffset is valuescript.MaxExactBitOffset.
const maxExactBitOffset = valuescript.MaxExactBitOffset

// exactBitfield returns the exact form of a BITFIELD or BITFIELD_RO command
// (its cmdInfo and the script's arguments, see valuescript.ExactBitfield),
// or ok false where the command runs as it is.
func exactBitfield(info *cmdInfo, args [][]byte) (ex *cmdInfo, sargs [][]byte, ok bool) {
	if info != bitfieldCmd && info != bitfieldROCmd {
		return nil, nil, false
	}
	if sargs, ok = valuescript.ExactBitfield(args); !ok {
		return nil, nil, false
	}
	if info == bitfieldROCmd {
		return bitfieldROExact, sargs, true
	}
	return bitfieldExact, sargs, true
}

// bitfieldMagic begins the script's reply for an exact BITFIELD.
var bitfieldMagic = []byte(valuescript.BitfieldMarker)

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
		n, ok3 := valuescript.BitfieldValue(hv, lv, typ.Str)
		if hi.Type != resp.Integer || lo.Type != resp.Integer || !ok1 || !ok2 || !ok3 {
			return reply
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
