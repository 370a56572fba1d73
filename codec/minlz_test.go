package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/minio/minlz"
)

// minlzChunks builds a minlz payload by hand: each part compressed as one
// MinLZ block after its uvarint length.
func minlzChunks(t testing.TB, parts ...[]byte) []byte {
	var p []byte
	for _, part := range parts {
		block, err := minlz.Encode(nil, part, minlz.LevelFastest)
		if err != nil {
			t.Fatal(err)
		}
		p = binary.AppendUvarint(p, uint64(len(block)))
		p = append(p, block...)
	}
	return p
}

// minlzFrame puts payload behind a minlz header for a value of n bytes
// (without checksum, so that only the payload decides).
func minlzFrame(n int, payload []byte) []byte {
	return append(AppendHeader(nil, Header{ID: IDMinLZ, OriginalLen: uint64(n)}), payload...)
}

func TestMinLZSections(t *testing.T) {
	const max = minlz.MaxBlockSize
	tests := []struct{ n, parts, count, size int }{
		{0, 1, 1, 0},
		{1, 1, 1, 1},
		{1000, 1, 1, 1000},
		{max, 1, 1, max},
		{max + 1, 1, 2, max/2 + 1},
		{3 * max, 1, 3, max},
		{ParallelMinSize, 2, 2, ParallelMinSize / 2},
		{1e6 + 1, 3, 3, 333334},
		{3*max + 5, 2, 4, (3*max + 5 + 3) / 4},
	}
	for _, tt := range tests {
		count, size := minlzSections(tt.n, tt.parts)
		if count != tt.count || size != tt.size {
			t.Errorf("minlzSections(%d, %d) = %d, %d; want %d, %d", tt.n, tt.parts, count, size, tt.count, tt.size)
		}
		if tt.n > 0 && (size > max || (count-1)*size >= tt.n || count*size < tt.n) {
			t.Errorf("minlzSections(%d, %d) = %d x %d does not cut the value into blocks", tt.n, tt.parts, count, size)
		}
	}
}

// TestMinLZ_LargeValues: a MinLZ block holds at most 8 MiB, so larger
// values take several chunks, on one goroutine or several.
func TestMinLZ_LargeValues(t *testing.T) {
	if testing.Short() {
		t.Skip("writes values of 8-17 MiB")
	}
	dec := mustDecoder(t)
	for _, n := range []int{minlz.MaxBlockSize, minlz.MaxBlockSize + 1, 2*minlz.MaxBlockSize + 12345} {
		in := sampleJSON(n)[:n]
		for _, conc := range []int{1, 2} {
			t.Run(fmt.Sprintf("%d/conc=%d", n, conc), func(t *testing.T) {
				frame := mustEncoder(t, MustParseAlgorithm("minlz:superfast"), WithConcurrency(conc)).AppendEncode(nil, in)
				h, err := ParseHeader(frame)
				if err != nil || h.ID != IDMinLZ || h.OriginalLen != uint64(n) {
					t.Fatalf("header %+v, err %v", h, err)
				}
				wantChunks, _ := minlzSections(n, parallelParts(n, conc))
				if got := countMinLZChunks(t, frame[h.Len:]); got != wantChunks {
					t.Errorf("%d chunks, want %d", got, wantChunks)
				}
				got, err := dec.AppendDecode(nil, frame)
				if err != nil || !bytes.Equal(got, in) {
					t.Fatalf("round trip: %d bytes, err %v", len(got), err)
				}
			})
		}
	}
}

func countMinLZChunks(t *testing.T, p []byte) int {
	n := 0
	for len(p) > 0 {
		l, k := binary.Uvarint(p)
		if k <= 0 || l > uint64(len(p)-k) {
			t.Fatalf("chunk %d: bad length", n)
		}
		p = p[k+int(l):]
		n++
	}
	return n
}

func TestMinLZ_Payloads(t *testing.T) {
	hello := []byte("hello hello hello hello hello hello hello")
	world := []byte("world, world, world, world, world, world")
	two := minlzChunks(t, hello, world)
	s2Block := s2.Encode(nil, hello)
	tests := []struct {
		name    string
		n       int
		payload []byte
		want    []byte // nil: an error
		err     error
	}{
		{"one chunk", len(hello), minlzChunks(t, hello), hello, nil},
		{"two chunks", len(hello) + len(world), two, append(append([]byte(nil), hello...), world...), nil},
		{"empty value", 0, minlzChunks(t, nil), []byte{}, nil},
		{"empty payload", 0, nil, []byte{}, nil},
		{"no payload for a value", 5, nil, nil, ErrTruncated},
		{"chunks short of the value", len(hello) + 1, minlzChunks(t, hello), nil, ErrTruncated},
		{"chunks beyond the value", len(hello) + len(world) - 1, two, nil, ErrCorrupt},
		{"block length past the end", len(hello), append([]byte{0xff, 0x01}, minlzChunks(t, hello)[1:]...), nil, ErrTruncated},
		{"unterminated length", 1, bytes.Repeat([]byte{0xff}, 11), nil, ErrCorrupt},
		{"an s2 block (minlz would fall back)", len(hello), append(binary.AppendUvarint(nil, uint64(len(s2Block))), s2Block...), nil, ErrCorrupt},
		{"trailing byte", len(hello), append(minlzChunks(t, hello), 0x00), nil, ErrCorrupt},
	}
	dec := mustDecoder(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dec.AppendDecode(nil, minlzFrame(tt.n, tt.payload))
			if tt.want != nil {
				if err != nil || !bytes.Equal(got, tt.want) {
					t.Fatalf("got %q, err %v; want %q", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, tt.err) || len(got) != 0 {
				t.Fatalf("got %d bytes, err %v; want %v", len(got), err, tt.err)
			}
		})
	}
}

// TestMinLZ_ZeroAllocs: compressing and decoding a value of one chunk into
// buffers with room allocates nothing.
func TestMinLZ_ZeroAllocs(t *testing.T) {
	in := sampleJSON(47500)
	dec := mustDecoder(t)
	for _, s := range []string{"minlz:superfast", "minlz:fastest"} {
		enc := mustEncoder(t, MustParseAlgorithm(s))
		frame := enc.AppendEncode(nil, in)
		out, _ := dec.AppendDecode(nil, frame)
		if n := testing.AllocsPerRun(50, func() { frame = enc.AppendEncode(frame[:0], in) }); n != 0 {
			t.Errorf("%s: AppendEncode allocates %.1f times", s, n)
		}
		if n := testing.AllocsPerRun(50, func() { out, _ = dec.AppendDecode(out[:0], frame) }); n != 0 {
			t.Errorf("%s: AppendDecode allocates %.1f times", s, n)
		}
	}
}
