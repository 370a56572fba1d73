package codec

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// numericCases are strings C's strtod reads whole (true) or not (false).
var numericCases = []struct {
	in   string
	want bool
}{
	{"0", true},
	{"-12", true},
	{"+3.25", true},
	{".5", true},
	{"5.", true},
	{"1e10", true},
	{"1E-10", true},
	{"2.5e+3", true},
	{"  \t\n42", true},
	{"0x1F", true},
	{"0X1.8p3", true},
	{"-0x.8P-1", true},
	{"inf", true},
	{"-Infinity", true},
	{"NaN", true},
	{"nan(0x_1)", true},
	{strings.Repeat("1", 200), true},
	{strings.Repeat("9", 400) + "." + strings.Repeat("0", 100), true},

	{"", false},
	{"   ", false},
	{"+", false},
	{".", false},
	{"1.2.3", false},
	{"1e", false},
	{"1e+", false},
	{"0x", false},
	{"0xg", false},
	{"0x1p", false},
	{"42 ", false}, // strtod stops at the space; Redis wants all of it
	{"1_000", false},
	{"infinit", false},
	{"nan(", false},
	{"nan(a-b)", false},
	{"nantucket", false},
	{"12abc", false},
	{`{"n":1}`, false},
	{strings.Repeat("1", 200) + "x", false},
}

func TestNumeric(t *testing.T) {
	for _, c := range numericCases {
		if got := Numeric([]byte(c.in)); got != c.want {
			t.Errorf("Numeric(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestEncoder_NumbersStayRaw: a long number that would compress well is
// stored as it is, so Redis can still sort by it; the same length of text is
// compressed.
func TestEncoder_NumbersStayRaw(t *testing.T) {
	enc := mustEncoder(t, MustParseAlgorithm("s2"))
	number := []byte(strings.Repeat("1", 500))
	out, outcome := enc.AppendEncodeOutcome(nil, number)
	if outcome != StoredRaw || !bytes.Equal(out, number) {
		t.Fatalf("number: outcome %v, %d bytes; want it stored raw", outcome, len(out))
	}
	text := []byte(strings.Repeat("a", 500))
	if _, outcome := enc.AppendEncodeOutcome(nil, text); outcome != Compressed {
		t.Fatalf("text: outcome %v, want compressed", outcome)
	}
}

// FuzzNumeric checks Numeric against Go's strconv.ParseFloat on the forms
// both accept alike: plain decimal numbers without spaces or underscores.
func FuzzNumeric(f *testing.F) {
	for _, c := range numericCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Numeric([]byte(s))
		if strings.ContainsAny(s, "_xXpPiInN \t\n\v\f\r") {
			return // forms where Go and C differ
		}
		_, err := strconv.ParseFloat(s, 64)
		var numErr *strconv.NumError
		if err != nil && (!asNumError(err, &numErr) || numErr.Err == strconv.ErrRange) {
			err = nil // out of range is still a number's syntax
		}
		if want := err == nil; got != want {
			t.Fatalf("Numeric(%q) = %v, strconv.ParseFloat says %v", s, got, want)
		}
	})
}

func asNumError(err error, target **strconv.NumError) bool {
	ne, ok := err.(*strconv.NumError)
	*target = ne
	return ok
}

// TestEncoder_HyperLogLogStaysRaw: a HyperLogLog (a string that begins with
// "HYLL"), large and compressible as its dense form is, is stored as it is,
// so that Redis's PF* commands still read it; other text of that length is
// compressed.
func TestEncoder_HyperLogLogStaysRaw(t *testing.T) {
	enc := mustEncoder(t, MustParseAlgorithm("s2"))
	for _, v := range [][]byte{
		append([]byte("HYLL\x00\x00\x00\x00\x00\x00\x00\x00"), make([]byte, 12288)...), // dense, all zero
		[]byte("HYLL" + strings.Repeat("\x01\x7f", 200)),                               // sparse-like
	} {
		out, outcome := enc.AppendEncodeOutcome(nil, v)
		if outcome != StoredRaw || !bytes.Equal(out, v) {
			t.Fatalf("HyperLogLog of %d bytes: outcome %v, %d bytes; want it stored raw", len(v), outcome, len(out))
		}
	}
	for _, v := range []string{"HYL-" + strings.Repeat("L", 500), "hyll" + strings.Repeat("a", 500), "xHYLL" + strings.Repeat("a", 500)} {
		if _, outcome := enc.AppendEncodeOutcome(nil, []byte(v)); outcome != Compressed {
			t.Fatalf("%.8q...: outcome %v, want compressed", v, outcome)
		}
	}
}
