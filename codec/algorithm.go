package codec

import (
	"fmt"
	"strconv"
	"strings"
)

// ID is the codec byte of a frame. The values are part of the format and
// never change; new codecs get new values. See docs/FORMAT.md.
type ID uint8

// Codec IDs. Part of the format forever: never renumber.
const (
	IDNone    ID = 0x00 // payload is the original bytes
	IDZstd    ID = 0x01 // one zstd frame (RFC 8878)
	IDLZ4     ID = 0x02 // one lz4 block (no lz4 frame header)
	IDS2      ID = 0x03 // one s2 block
	IDSnappy  ID = 0x04 // one snappy block
	IDBrotli  ID = 0x05 // one brotli stream (RFC 7932)
	IDGzip    ID = 0x06 // one gzip member (RFC 1952)
	IDDeflate ID = 0x07 // raw deflate (RFC 1951)
	IDZlib    ID = 0x08 // zlib stream (RFC 1950)
	IDXZ      ID = 0x09 // one xz stream
	IDMinLZ   ID = 0x0a // MinLZ blocks, each after its length
)

// level is one named setting of a codec.
type level struct {
	name  string
	value int
}

// codecInfo describes the levels one codec accepts.
type codecInfo struct {
	id       ID
	name     string
	levels   []level // in increasing effort; names are what String prints
	def      int     // default level value
	numeric  [2]int  // accepted numeric range beyond the named levels, [0,0] if none
	slowFrom int     // levels >= slowFrom are the archival tier; -1 if never
}

var codecs = []codecInfo{
	{id: IDNone, name: "none", levels: []level{{"", 0}}, slowFrom: -1},
	{id: IDZstd, name: "zstd",
		// klauspost/compress has four encoder strategies; numeric zstd levels
		// 1-22 map onto them as zstd.EncoderLevelFromZstd does.
		levels:  []level{{"1", 1}, {"3", 3}, {"7", 7}, {"11", 11}},
		numeric: [2]int{1, 22}, def: 3, slowFrom: 10},
	{id: IDLZ4, name: "lz4",
		levels: []level{{"fast", 0}, {"hc1", 1}, {"hc2", 2}, {"hc3", 3}, {"hc4", 4}, {"hc5", 5},
			{"hc6", 6}, {"hc7", 7}, {"hc8", 8}, {"hc9", 9}},
		def: 0, slowFrom: -1},
	{id: IDS2, name: "s2", levels: []level{{"default", 1}, {"better", 2}, {"best", 3}}, def: 1, slowFrom: -1},
	{id: IDSnappy, name: "snappy", levels: []level{{"default", 1}, {"better", 2}, {"best", 3}}, def: 1, slowFrom: -1},
	{id: IDBrotli, name: "brotli", numeric: [2]int{0, 11}, def: 6, slowFrom: 10},
	{id: IDGzip, name: "gzip", numeric: [2]int{1, 9}, def: 6, slowFrom: -1},
	{id: IDDeflate, name: "deflate", numeric: [2]int{1, 9}, def: 6, slowFrom: -1},
	{id: IDZlib, name: "zlib", numeric: [2]int{1, 9}, def: 6, slowFrom: -1},
	{id: IDXZ, name: "xz", levels: []level{{"", 0}}, slowFrom: 0},
	// MinLZ's levels are -1 (superfast), 1, 2 and 3; 0 means "uncompressed"
	// to the library and is not offered.
	{id: IDMinLZ, name: "minlz", levels: []level{{"superfast", -1}, {"fastest", 1}, {"balanced", 2}, {"smallest", 3}},
		def: 1, slowFrom: 3},
}

func init() {
	// Codecs with a plain numeric range list every level by its number.
	for i := range codecs {
		c := &codecs[i]
		if len(c.levels) == 0 {
			for l := c.numeric[0]; l <= c.numeric[1]; l++ {
				c.levels = append(c.levels, level{strconv.Itoa(l), l})
			}
		}
	}
}

func infoOf(id ID) *codecInfo {
	for i := range codecs {
		if codecs[i].id == id {
			return &codecs[i]
		}
	}
	return nil
}

// String returns the codec's name, or "codec(0xNN)" for an unknown ID.
func (id ID) String() string {
	if c := infoOf(id); c != nil {
		return c.name
	}
	return fmt.Sprintf("codec(0x%02x)", uint8(id))
}

// Known reports whether this build can decode frames with this codec ID.
func (id ID) Known() bool { return infoOf(id) != nil }

// AddedLater reports whether the codec came after the first release of
// frame version 1 (minlz): readers built before it fail on its frames with
// ErrUnknownCodec, so writers should switch to it only once every reader
// knows it (docs/FORMAT.md, section 7).
func (id ID) AddedLater() bool { return id > IDXZ }

// Algorithm is a codec and one of its levels: what a user configures. The
// zero value is the none codec; use DefaultAlgorithm for squeeze's default.
//
// Level meanings: zstd takes the numeric zstd levels 1-22 (mapped onto the
// four strategies of the Go implementation: 1-2 fastest, 3-5 default, 6-9
// better, 10-22 best); lz4 takes 0 (fast) and 1-9 (HC depth); s2 and snappy
// take 1-3 (default, better, best); minlz -1 (superfast) and 1-3 (fastest,
// balanced, smallest); brotli 0-11; gzip, deflate and zlib 1-9; none and xz
// take no level.
type Algorithm struct {
	ID    ID
	Level int
}

// DefaultAlgorithm is what squeeze uses when no codec is configured: s2,
// whose writes cost a small fraction of zlib's and whose reads cost almost
// nothing, so that compression does not slow Redis down; it saves somewhat
// less than zstd (65-90% on JSON instead of 75-92%), and squeeze compact
// recompresses cold keys with a strong codec to win the rest.
var DefaultAlgorithm = Algorithm{ID: IDS2, Level: 1}

// Write and read policy defaults.
const (
	DefaultMinSize        = 64        // values shorter than this are stored raw
	DefaultMinGain        = 0.10      // store raw when compression saves less than 10%
	DefaultMaxDecodedSize = 512 << 20 // largest original length a Decoder accepts
)

// ParseAlgorithm parses "NAME" or "NAME:LEVEL", such as "zstd", "zstd:3",
// "lz4:hc9", "s2:better" or "brotli:1". A bare NAME means the codec's
// default level. The error for an unknown name or level lists what exists.
func ParseAlgorithm(s string) (Algorithm, error) {
	name, lv, hasLevel := strings.Cut(strings.ToLower(strings.TrimSpace(s)), ":")
	var c *codecInfo
	for i := range codecs {
		if codecs[i].name == name {
			c = &codecs[i]
		}
	}
	if c == nil {
		return Algorithm{}, fmt.Errorf("codec: unknown codec %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	a := Algorithm{ID: c.id, Level: c.def}
	if !hasLevel {
		return a, nil
	}
	for _, l := range c.levels {
		if l.name != "" && l.name == lv {
			a.Level = l.value
			return a, nil
		}
	}
	switch {
	case c.id == IDZstd:
		for _, n := range [...]struct {
			name string
			v    int
		}{{"fastest", 1}, {"default", 3}, {"better", 7}, {"best", 11}} {
			if lv == n.name {
				a.Level = n.v
				return a, nil
			}
		}
	case c.id == IDLZ4 && lv == "hc":
		a.Level = 9
		return a, nil
	case c.id == IDLZ4 || c.id == IDS2 || c.id == IDSnappy || c.id == IDMinLZ:
		if n, err := strconv.Atoi(lv); err == nil && n >= c.levels[0].value && n <= c.levels[len(c.levels)-1].value && !(c.id == IDMinLZ && n == 0) {
			a.Level = n
			return a, nil
		}
	}
	if n, err := strconv.Atoi(lv); err == nil && c.numeric != [2]int{} && n >= c.numeric[0] && n <= c.numeric[1] {
		a.Level = n
		return a, nil
	}
	return Algorithm{}, fmt.Errorf("codec: unknown level %q for %s (levels: %s)", lv, c.name, levelList(c))
}

// MustParseAlgorithm is ParseAlgorithm for constants; it panics on error.
func MustParseAlgorithm(s string) Algorithm {
	a, err := ParseAlgorithm(s)
	if err != nil {
		panic(err)
	}
	return a
}

func levelList(c *codecInfo) string {
	switch {
	case c.id == IDZstd:
		return "1-22, fastest, default, better, best"
	case c.numeric != [2]int{}:
		return fmt.Sprintf("%d-%d", c.numeric[0], c.numeric[1])
	case len(c.levels) == 1:
		return "none (the codec has a single setting)"
	}
	names := make([]string, len(c.levels))
	for i, l := range c.levels {
		names[i] = l.name
	}
	return strings.Join(names, ", ")
}

// Names returns the names of all codecs, in ID order.
func Names() []string {
	names := make([]string, len(codecs))
	for i, c := range codecs {
		names[i] = c.name
	}
	return names
}

// String returns the canonical "NAME:LEVEL" form that ParseAlgorithm reads
// back ("none" and "xz" have no level).
func (a Algorithm) String() string {
	c := infoOf(a.ID)
	if c == nil {
		return a.ID.String()
	}
	if len(c.levels) == 1 && c.levels[0].name == "" {
		return c.name
	}
	if c.id == IDZstd || c.numeric != [2]int{} {
		return c.name + ":" + strconv.Itoa(a.Level)
	}
	for _, l := range c.levels {
		if l.value == a.Level {
			return c.name + ":" + l.name
		}
	}
	return c.name + ":" + strconv.Itoa(a.Level)
}

// Slow reports whether the algorithm belongs to the archival tier: far
// slower to write than the others, for cold data only (xz, brotli 10-11,
// zstd 10+).
func (a Algorithm) Slow() bool {
	c := infoOf(a.ID)
	return c != nil && c.slowFrom >= 0 && a.Level >= c.slowFrom
}

// Algorithms returns every codec at every distinct level, in ID then level
// order. zstd is listed at the four levels that give distinct output (1, 3,
// 7, 11).
func Algorithms() []Algorithm {
	var all []Algorithm
	for _, c := range codecs {
		for _, l := range c.levels {
			all = append(all, Algorithm{ID: c.id, Level: l.value})
		}
	}
	return all
}

// Presets returns one or a few representative levels per codec: a table
// that fits a screen (the default of "squeeze bench codecs").
func Presets() []Algorithm {
	var out []Algorithm
	for _, s := range []string{"none", "zstd:1", "zstd:3", "zstd:7", "zstd:11", "lz4:fast", "lz4:hc9",
		"s2:default", "s2:better", "s2:best", "snappy", "minlz:superfast", "minlz:fastest", "minlz:balanced", "brotli:1", "brotli:3", "brotli:6", "brotli:9", "brotli:11",
		"gzip:1", "gzip:6", "gzip:9", "deflate:3", "zlib:6", "xz"} {
		out = append(out, MustParseAlgorithm(s))
	}
	return out
}
