package codec

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// sampleJSON returns n bytes of JSON-like text that compresses the way API
// documents do: repeated keys, varied values.
func sampleJSON(n int) []byte {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	var b bytes.Buffer
	b.WriteString(`{"items":[`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"user":"user%04d","score":%.3f,"tags":["t%d","t%d"],"active":%v,"note":"%s"}`,
			r.IntN(1e6), r.IntN(5000), r.Float64()*100, r.IntN(40), r.IntN(40), r.IntN(2) == 0,
			[]string{"ok", "pending review", "shipped to warehouse", "returned"}[r.IntN(4)])
	}
	b.WriteString("]}")
	return b.Bytes()[:n]
}

func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(2, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func mustEncoder(t testing.TB, a Algorithm, opts ...EncoderOption) *Encoder {
	t.Helper()
	e, err := NewEncoder(a, opts...)
	if err != nil {
		t.Fatalf("NewEncoder(%v): %v", a, err)
	}
	return e
}

func mustDecoder(t testing.TB, opts ...DecoderOption) *Decoder {
	t.Helper()
	d, err := NewDecoder(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRoundTrip_EveryAlgorithm(t *testing.T) {
	dec := mustDecoder(t)
	inputs := map[string][]byte{
		"empty":    {},
		"byte":     {'x'},
		"json-1k":  sampleJSON(1024),
		"json-64k": sampleJSON(64 << 10),
		"random":   randomBytes(4096),
		"magic":    append([]byte(Magic), sampleJSON(300)...),
	}
	for _, a := range Algorithms() {
		if a.Slow() && testing.Short() {
			continue
		}
		t.Run(a.String(), func(t *testing.T) {
			for _, always := range []bool{false, true} {
				opts := []EncoderOption{WithMinSize(0)}
				if always {
					opts = append(opts, WithMinGain(-1))
				}
				enc := mustEncoder(t, a, opts...)
				for name, in := range inputs {
					prefix := []byte("keep")
					frame := enc.AppendEncode(append([]byte(nil), prefix...), in)
					if !bytes.Equal(frame[:4], prefix) {
						t.Fatalf("%s: dst prefix overwritten", name)
					}
					got, err := dec.AppendDecode([]byte("pre"), frame[4:])
					if err != nil {
						t.Fatalf("%s (always=%v): decode: %v", name, always, err)
					}
					if !bytes.Equal(got[:3], []byte("pre")) || !bytes.Equal(got[3:], in) {
						t.Fatalf("%s (always=%v): round trip mismatch (%d bytes in, %d out)", name, always, len(in), len(got)-3)
					}
					if always && a.ID != IDNone && !IsFramed(frame[4:]) {
						t.Fatalf("%s: WithMinGain(-1) stored raw", name)
					}
				}
			}
		})
	}
}

func TestEncoder_WritePolicy(t *testing.T) {
	json := sampleJSON(4096)
	tests := []struct {
		name string
		in   []byte
		opts []EncoderOption
		want Outcome
	}{
		{"short value stays raw", []byte("hello world"), nil, StoredRaw},
		{"at min size compresses", []byte(strings.Repeat("abcd", DefaultMinSize/4)), nil, Compressed},
		{"compressible json", json, nil, Compressed},
		{"random bytes stay raw", randomBytes(4096), nil, StoredRaw},
		{"short magic value is wrapped", []byte(Magic + "x"), nil, Wrapped},
		{"incompressible magic value is wrapped", append([]byte(Magic), randomBytes(500)...), nil, Wrapped},
		{"gain below minimum stays raw", json, []EncoderOption{WithMinGain(0.99)}, StoredRaw},
		{"min size above value stays raw", json, []EncoderOption{WithMinSize(1 << 20)}, StoredRaw},
	}
	dec := mustDecoder(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := mustEncoder(t, DefaultAlgorithm, tt.opts...)
			out, got := enc.AppendEncodeOutcome(nil, tt.in)
			if got != tt.want {
				t.Fatalf("outcome %v, want %v", got, tt.want)
			}
			// AppendFrame: the same, except that a raw value is left to
			// the caller (nothing appended).
			prefix := []byte("prefix")
			frame, got2 := enc.AppendFrame(prefix, tt.in)
			wantFrame := append([]byte("prefix"), out...)
			if got == StoredRaw {
				wantFrame = prefix
			}
			if got2 != got || !bytes.Equal(frame, wantFrame) {
				t.Fatalf("AppendFrame: %v, %d bytes; want %v, %d bytes", got2, len(frame), got, len(wantFrame))
			}
			switch got {
			case StoredRaw:
				if !bytes.Equal(out, tt.in) {
					t.Fatal("raw value changed")
				}
			case Compressed:
				if len(out) >= len(tt.in) {
					t.Fatalf("compressed frame %d bytes for %d byte value", len(out), len(tt.in))
				}
			case Wrapped:
				h, err := ParseHeader(out)
				if err != nil || h.ID != IDNone {
					t.Fatalf("wrapped value header %+v, %v", h, err)
				}
			}
			back, err := dec.AppendDecode(nil, out)
			if err != nil || !bytes.Equal(back, tt.in) {
				t.Fatalf("read back: %v", err)
			}
		})
	}
}

func TestDecoder_ReadPolicyUnframed(t *testing.T) {
	dec := mustDecoder(t)
	for _, v := range []string{"", "plain", `{"json":true}`, "\xC1S", "\xC1"} {
		got, err := dec.AppendDecode(nil, []byte(v))
		if v == "\xC1S" || v == "\xC1" {
			// A prefix of the magic is not the magic: read as it is.
		}
		if err != nil || string(got) != v {
			t.Errorf("AppendDecode(%q) = %q, %v; want the bytes as they are", v, got, err)
		}
	}
}

func TestParseAlgorithm(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"zstd", "zstd:3"}, {"zstd:1", "zstd:1"}, {"ZSTD:22", "zstd:22"}, {"zstd:fastest", "zstd:1"},
		{"zstd:best", "zstd:11"}, {"lz4", "lz4:fast"}, {"lz4:hc9", "lz4:hc9"}, {"lz4:hc", "lz4:hc9"},
		{"lz4:3", "lz4:hc3"}, {"s2", "s2:default"}, {"s2:better", "s2:better"}, {"snappy", "snappy:default"},
		{"brotli", "brotli:6"}, {"brotli:0", "brotli:0"}, {"brotli:11", "brotli:11"}, {"gzip:9", "gzip:9"},
		{"deflate:1", "deflate:1"}, {"zlib", "zlib:6"}, {"xz", "xz"}, {"none", "none"},
	}
	for _, tt := range tests {
		a, err := ParseAlgorithm(tt.in)
		if err != nil {
			t.Errorf("ParseAlgorithm(%q): %v", tt.in, err)
			continue
		}
		if a.String() != tt.want {
			t.Errorf("ParseAlgorithm(%q) = %v, want %v", tt.in, a, tt.want)
		}
		if b, err := ParseAlgorithm(a.String()); err != nil || b != a {
			t.Errorf("String %q does not parse back: %v %v", a, b, err)
		}
	}
	bad := []struct{ in, mention string }{
		{"zip", "known: none, zstd, lz4, s2, snappy, brotli, gzip, deflate, zlib, xz"},
		{"zstd:23", "1-22"}, {"zstd:0", "1-22"}, {"brotli:12", "0-11"}, {"gzip:0", "1-9"},
		{"lz4:hc10", "fast, hc1"}, {"s2:fastest", "default, better, best"}, {"xz:9", "single setting"},
		{"none:1", "single setting"},
	}
	for _, tt := range bad {
		_, err := ParseAlgorithm(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("ParseAlgorithm(%q) error %v, want one mentioning %q", tt.in, err, tt.mention)
		}
	}
}

func TestNewEncoder_InvalidLevel(t *testing.T) {
	for _, a := range []Algorithm{{ID: IDZstd, Level: 0}, {ID: IDGzip, Level: 10}, {ID: 0x7f}} {
		if _, err := NewEncoder(a); err == nil {
			t.Errorf("NewEncoder(%+v) accepted an invalid algorithm", a)
		}
	}
	if _, err := NewEncoder(DefaultAlgorithm, WithMinGain(1)); err == nil {
		t.Error("WithMinGain(1) accepted")
	}
	if _, err := NewEncoder(DefaultAlgorithm, WithMinSize(-1)); err == nil {
		t.Error("WithMinSize(-1) accepted")
	}
	if _, err := NewDecoder(WithMaxDecodedSize(0)); err == nil {
		t.Error("WithMaxDecodedSize(0) accepted")
	}
}

func TestDecoder_Errors(t *testing.T) {
	dec := mustDecoder(t, WithMaxDecodedSize(1<<20))
	enc := mustEncoder(t, MustParseAlgorithm("zstd:1")) // its decoder tells truncation from corruption
	good := enc.AppendEncode(nil, sampleJSON(8192))
	h, _ := ParseHeader(good)

	flipPayload := append([]byte(nil), good...)
	flipPayload[len(flipPayload)-5] ^= 0x40
	badSum := append([]byte(nil), good...)
	badSum[h.Len-1] ^= 0xff
	huge := AppendHeader(nil, Header{ID: IDZstd, OriginalLen: 100 << 30})
	huge = append(huge, 0x28, 0xb5, 0x2f, 0xfd)
	unknown := append([]byte(nil), good...)
	unknown[4] = 0x7e
	version := append([]byte(nil), good...)
	version[3] = 2
	dict := AppendHeader(nil, Header{ID: IDZstd, OriginalLen: 10, HasDict: true, DictID: 7})
	lz4Bomb := AppendHeader(nil, Header{ID: IDLZ4, OriginalLen: 1 << 19})
	lz4Bomb = append(lz4Bomb, 0x1f, 'a', 0xff, 0xff)
	reserved := append([]byte(nil), good...)
	reserved[5] |= 0x80

	tests := []struct {
		name  string
		frame []byte
		want  error
		also  error
		text  string
	}{
		{"truncated header", good[:5], ErrTruncated, ErrCorrupt, "header needs at least 7"},
		{"truncated checksum", good[:h.Len-2], ErrTruncated, ErrCorrupt, "inside the checksum"},
		{"truncated payload", good[:len(good)/2], ErrTruncated, ErrCorrupt, "zstd payload"},
		{"flipped payload byte", flipPayload, ErrCorrupt, nil, ""},
		{"bad checksum", badSum, ErrChecksum, ErrCorrupt, "crc32c"},
		{"100 GB header", huge, ErrTooLarge, nil, "107374182400 bytes, limit is 1048576"},
		{"unknown codec", unknown, ErrUnknownCodec, nil, "0x7e"},
		{"future version", version, ErrUnsupportedVersion, nil, "version 2"},
		{"unknown dictionary", dict, ErrUnknownDictionary, nil, "id 7"},
		{"lz4 bomb", lz4Bomb, ErrCorrupt, nil, "cannot hold"},
		{"reserved flags", reserved, ErrCorrupt, nil, "reserved flag bits"},
		{"varint overflow", append([]byte(Magic+"\x01\x01\x00"), bytes.Repeat([]byte{0xff}, 11)...), ErrCorrupt, nil, "overflows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := dec.AppendDecode([]byte("dst"), tt.frame)
			if !errors.Is(err, tt.want) || (tt.also != nil && !errors.Is(err, tt.also)) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("err = %q, want it to mention %q", err, tt.text)
			}
			if string(out) != "dst" {
				t.Fatalf("dst changed on error: %q", out)
			}
		})
	}
	// Distinct errors are distinct.
	if errors.Is(ErrTooLarge, ErrCorrupt) || errors.Is(ErrUnknownCodec, ErrCorrupt) || errors.Is(ErrCorrupt, ErrTruncated) {
		t.Fatal("sentinels overlap")
	}
}

// TestDecoder_CorruptPayloadsEveryCodec flips bytes in every codec's payload:
// each must give an error or, if the codec cannot tell, the checksum must.
func TestDecoder_CorruptPayloadsEveryCodec(t *testing.T) {
	dec := mustDecoder(t)
	in := sampleJSON(3000)
	for _, a := range Presets() {
		if a.ID == IDNone {
			continue // stores values raw: nothing to corrupt but the value
		}
		enc := mustEncoder(t, a, WithMinGain(-1))
		frame := enc.AppendEncode(nil, in)
		h, _ := ParseHeader(frame)
		for i := h.Len; i < len(frame); i += 1 + (len(frame)-h.Len)/40 {
			bad := append([]byte(nil), frame...)
			bad[i] ^= 0x55
			out, err := dec.AppendDecode(nil, bad)
			if err == nil && !bytes.Equal(out, in) {
				t.Fatalf("%v: flipped byte %d decoded to wrong data without error", a, i)
			}
		}
		// Truncation at every tenth of the payload.
		for cut := h.Len; cut < len(frame); cut += 1 + (len(frame)-h.Len)/10 {
			if _, err := dec.AppendDecode(nil, frame[:cut]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v: truncated at %d/%d: err = %v", a, cut, len(frame), err)
			}
		}
	}
}

func TestChecksumOff(t *testing.T) {
	enc := mustEncoder(t, DefaultAlgorithm, WithChecksum(false))
	frame := enc.AppendEncode(nil, sampleJSON(2000))
	h, err := ParseHeader(frame)
	if err != nil || h.HasChecksum {
		t.Fatalf("header %+v %v", h, err)
	}
	got, err := mustDecoder(t).AppendDecode(nil, frame)
	if err != nil || !bytes.Equal(got, sampleJSON(2000)) {
		t.Fatal("round trip without checksum failed")
	}
}

func TestZeroAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("coverage instrumentation and the race detector allocate")
	}
	in := sampleJSON(16600)
	dec := mustDecoder(t)
	for _, s := range []string{"none", "zstd:1", "zstd:3", "lz4:fast", "lz4:hc9", "s2:default", "s2:better", "snappy", "gzip:6", "deflate:6", "zlib:6", "brotli:1"} {
		a := MustParseAlgorithm(s)
		enc := mustEncoder(t, a, WithMinGain(-1))
		frame := enc.AppendEncode(nil, in)
		dst := make([]byte, 0, 2*len(in)+1024)
		out := make([]byte, 0, len(in))
		for i := 0; i < 5; i++ { // warm pools
			enc.AppendEncode(dst[:0], in)
			dec.AppendDecode(out[:0], frame)
		}
		if n := testing.AllocsPerRun(50, func() { enc.AppendEncode(dst[:0], in) }); n != 0 {
			t.Errorf("%v: AppendEncode allocates %v times per call", a, n)
		}
		if n := testing.AllocsPerRun(50, func() {
			if _, err := dec.AppendDecode(out[:0], frame); err != nil {
				t.Fatal(err)
			}
		}); n != 0 && a.ID != IDBrotli { // the brotli reader allocates on reset
			t.Errorf("%v: AppendDecode allocates %v times per call", a, n)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	enc := mustEncoder(t, DefaultAlgorithm)
	dec := mustDecoder(t)
	done := make(chan error)
	for g := 0; g < 8; g++ {
		go func(g int) {
			in := sampleJSON(1000 + g*997)
			var buf, out []byte
			for i := 0; i < 200; i++ {
				buf = enc.AppendEncode(buf[:0], in)
				var err error
				out, err = dec.AppendDecode(out[:0], buf)
				if err != nil || !bytes.Equal(out, in) {
					done <- fmt.Errorf("goroutine %d: %v", g, err)
					return
				}
			}
			done <- nil
		}(g)
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestAppendDecode_KeepsCapacity: the result keeps the spare capacity of the
// buffer it was decoded into, so appending to it does not reallocate.
func TestAppendDecode_KeepsCapacity(t *testing.T) {
	dec := mustDecoder(t)
	in := sampleJSON(5000)
	for _, a := range Presets() {
		frame := mustEncoder(t, a, WithMinGain(-1)).AppendEncode(nil, in)
		buf := make([]byte, 3, 3+len(in)+100)
		out, err := dec.AppendDecode(buf, frame)
		if err != nil {
			t.Fatalf("%v: %v", a, err)
		}
		if cap(out) != cap(buf) || &out[0] != &buf[0] {
			t.Errorf("%v: result cap %d, want the buffer's %d", a, cap(out), cap(buf))
		}
	}
}

// TestDecoder_SmallLimit: a small max decoded size still reads the frames
// that fit under it (zstd's window limits get headroom).
func TestDecoder_SmallLimit(t *testing.T) {
	dec := mustDecoder(t, WithMaxDecodedSize(512))
	in := sampleJSON(400)
	for _, a := range Presets() {
		frame := mustEncoder(t, a, WithMinGain(-1)).AppendEncode(nil, in)
		if out, err := dec.AppendDecode(nil, frame); err != nil || !bytes.Equal(out, in) {
			t.Errorf("%v: %v", a, err)
		}
	}
	big := mustEncoder(t, DefaultAlgorithm).AppendEncode(nil, sampleJSON(600))
	if _, err := dec.AppendDecode(nil, big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("600-byte value under a 512-byte limit: %v", err)
	}
}

func TestID_AddedLater(t *testing.T) {
	for _, c := range codecs {
		if got, want := c.id.AddedLater(), c.id == IDMinLZ; got != want {
			t.Errorf("%s.AddedLater() = %v, want %v (FORMAT.md section 7 lists the ids added later)", c.name, got, want)
		}
	}
}

// TestBytesAfterStreamCorrupt: a payload is one stream and nothing after it
// (docs/FORMAT.md, section 3), for every codec, as the ports in other
// languages read it too.
func TestBytesAfterStreamCorrupt(t *testing.T) {
	in := goldenInput()
	dec := mustDecoder(t)
	for _, a := range Algorithms() {
		if a.ID == IDNone {
			continue
		}
		enc := mustEncoder(t, a, WithMinGain(-1), WithMinSize(0), WithChecksum(false))
		frame := enc.AppendEncode(nil, in)
		for _, extra := range [][]byte{{0}, {0, 0, 0, 0}, frame[headerLen(t, frame):]} {
			if a.ID == IDXZ && len(extra) == 4 && extra[0] == 0 {
				continue // the xz format's own stream padding, which xz readers accept
			}
			bad := append(bytes.Clone(frame), extra...)
			if got, err := dec.AppendDecode(nil, bad); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%v with %d bytes after the payload: got %d bytes, %v; want ErrCorrupt", a, len(extra), len(got), err)
			}
		}
	}
}

func headerLen(t *testing.T, frame []byte) int {
	t.Helper()
	h, err := ParseHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	return h.Len
}
