package counters_test

import (
	"fmt"

	"github.com/squeeze-kv/squeeze/counters"
)

// The seed article's hash field "0118009600fa0230" holds four days as four
// hex characters each: 8 bytes per u16 counter plus the hash's overhead. The
// same four days packed as BITFIELD u16 take 2 bytes per counter, and
// BITFIELD GET/INCRBY read and update them in place.
func Example() {
	days, err := counters.ParseHex(nil, []byte("0118009600fa0230"))
	if err != nil {
		panic(err)
	}
	img, err := counters.AppendEncode(nil, counters.U16, days)
	if err != nil {
		panic(err)
	}
	fmt.Println(days)
	fmt.Printf("%d bytes: %x\n", len(img), img)
	fmt.Println(counters.AppendDecode(nil, counters.U16, img, 1, 2))
	// Output:
	// [280 150 250 560]
	// 8 bytes: 0118009600fa0230
	// [150 250]
}

func ExampleParseType() {
	for _, s := range []string{"u16", "i64", "u12", "u64"} {
		t, err := counters.ParseType(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(t, t.Min(), t.Max(), t.Bytes(365))
	}
	// Output:
	// u16 0 65535 730
	// i64 -9223372036854775808 9223372036854775807 2920
	// u12 0 4095 548
	// counters: invalid type "u64": want u1..u63 or i1..i64 (e.g. u16)
}
