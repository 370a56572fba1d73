package counters

import (
	"bytes"
	"slices"
	"testing"
)

// FuzzParseHex checks that ParseHex never panics and that whatever it
// accepts round-trips through AppendHex (modulo letter case).
func FuzzParseHex(f *testing.F) {
	f.Add([]byte("0118009600fa0230"))
	f.Add([]byte("0118FFFFFFFFFFFFFFFB"))
	f.Add([]byte("01g"))
	f.Fuzz(func(t *testing.T, b []byte) {
		vals, err := ParseHex(nil, b)
		if err != nil {
			return
		}
		out, err := AppendHex(nil, vals)
		if err != nil {
			t.Fatalf("AppendHex of parsed %q: %v", b, err)
		}
		if !bytes.EqualFold(out, b) {
			t.Fatalf("round trip %q -> %v -> %q", b, vals, out)
		}
	})
}

// FuzzAppendDecode reads arbitrary bytes as a series of every width and
// checks that encoding the values gives the same bits back.
func FuzzAppendDecode(f *testing.F) {
	f.Add([]byte{0x01, 0x18, 0x00, 0x96}, uint8(16), false)
	f.Add([]byte{0xff, 0x80, 0x7f}, uint8(5), true)
	f.Add([]byte{}, uint8(64), true)
	f.Fuzz(func(t *testing.T, b []byte, bits uint8, signed bool) {
		typ := Type{Signed: signed, Bits: bits%64 + 1}
		if !typ.Valid() {
			return
		}
		n := len(b) * 8 / int(typ.Bits)
		vals := AppendDecode(nil, typ, b, 0, n)
		img, err := AppendEncode(nil, typ, vals)
		if err != nil {
			t.Fatalf("%s: decoded values do not encode: %v", typ, err)
		}
		used := n * int(typ.Bits)
		for i := 0; i < used; i++ {
			if (img[i/8]>>(7-i%8))&1 != (b[i/8]>>(7-i%8))&1 {
				t.Fatalf("%s: bit %d differs after round trip", typ, i)
			}
		}
		again := AppendDecode(nil, typ, img, 0, n)
		if !slices.Equal(vals, again) {
			t.Fatalf("%s: %v then %v", typ, vals, again)
		}
	})
}

// FuzzParseType checks ParseType never panics and that what it accepts
// prints back to itself (lowercase).
func FuzzParseType(f *testing.F) {
	for _, s := range []string{"u16", "i64", "u64", "x", "U8", "u016"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		typ, err := ParseType(s)
		if err != nil {
			return
		}
		if !typ.Valid() || !bytes.EqualFold([]byte(typ.String()), []byte(s)) {
			t.Fatalf("ParseType(%q) = %v", s, typ)
		}
	})
}
