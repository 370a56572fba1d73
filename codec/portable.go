package codec

import (
	"fmt"
	"strings"
)

// Portable reports whether the codec belongs to the portable profile
// (docs/FORMAT.md, section 8): codecs that maintained libraries read and
// write in every mainstream language (none, zstd, lz4, snappy, brotli,
// gzip, deflate, zlib). s2 and minlz have decoders in Go only; xz is left
// out of the profile.
func (id ID) Portable() bool {
	switch id {
	case IDNone, IDZstd, IDLZ4, IDSnappy, IDBrotli, IDGzip, IDDeflate, IDZlib:
		return true
	}
	return false
}

// PortableDefault is the codec squeeze writes under the portable profile
// when none is configured: snappy, which S2's library writes in its
// Snappy-compatible form, s2's portable stand-in (a fraction of a percent
// larger, as fast; docs/FORMAT.md, section 8).
var PortableDefault = Algorithm{ID: IDSnappy, Level: 1}

// PortableNames returns the names of the portable codecs, in ID order.
func PortableNames() []string {
	var names []string
	for _, c := range codecs {
		if c.id.Portable() {
			names = append(names, c.name)
		}
	}
	return names
}

// CheckPortable returns an error when a writes a codec outside the
// portable profile, naming the codecs that are in it.
func CheckPortable(a Algorithm) error {
	if a.ID.Portable() {
		return nil
	}
	why := "not in the portable profile"
	if a.ID == IDS2 || a.ID == IDMinLZ {
		why = "Go-only: no other language reads it"
	}
	return fmt.Errorf("codec %s is %s (portable codecs: %s; snappy stands in for s2)", a, why, strings.Join(PortableNames(), ", "))
}
