package codec

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

const fuzzMax = 1 << 20

// FuzzAppendDecode feeds arbitrary bytes to the decoder: it must never panic,
// never return more than the limit, and either fail with one of the
// documented errors or return bytes whose checksum (if any) matched.
func FuzzAppendDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "frames", "v1", "*.bin"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("plain value"))
	f.Add([]byte(Magic))
	f.Add(AppendHeader(nil, Header{ID: IDZstd, OriginalLen: 100 << 30}))
	f.Add(minlzFrame(16, minlzChunks(f, []byte("squeeze "), []byte("squeeze ")))) // two chunks
	dec, err := NewDecoder(WithMaxDecodedSize(fuzzMax))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// A frame that streams reads to the same value, or fails too.
		if vr, verr := dec.NewValueReader(in); verr == nil {
			got, rerr := io.ReadAll(io.LimitReader(vr, fuzzMax+1))
			vr.Close()
			want, werr := dec.AppendDecode(nil, in)
			if (rerr == nil) != (werr == nil) || (rerr == nil && !bytes.Equal(got, want)) {
				t.Fatalf("ValueReader: %d bytes, %v; AppendDecode: %d bytes, %v", len(got), rerr, len(want), werr)
			}
		}
		out, err := dec.AppendDecode(nil, in)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnknownCodec) &&
				!errors.Is(err, ErrUnsupportedVersion) && !errors.Is(err, ErrUnknownDictionary) {
				t.Fatalf("undocumented error: %v", err)
			}
			if len(out) != 0 {
				t.Fatalf("output on error: %d bytes", len(out))
			}
			return
		}
		if cap(out) > fuzzMax+len(in) {
			t.Fatalf("decoder allocated %d bytes, limit %d", cap(out), fuzzMax)
		}
		if !IsFramed(in) && !bytes.Equal(out, in) {
			t.Fatal("unframed input changed")
		}
		if IsFramed(in) {
			h, _ := ParseHeader(in)
			if uint64(len(out)) != h.OriginalLen {
				t.Fatalf("decoded %d bytes, header says %d", len(out), h.OriginalLen)
			}
		}
	})
}

// FuzzRoundTrip encodes arbitrary values with every codec family and checks
// that they read back exactly.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte(""), uint8(0))
	f.Add([]byte(Magic+"payload"), uint8(1))
	f.Add(sampleJSON(500), uint8(2))
	f.Add(bytes.Repeat([]byte{0}, 1000), uint8(5))
	algs := Presets()
	encs := make([]*Encoder, len(algs))
	for i, a := range algs {
		if a.Slow() {
			a = Algorithm{ID: a.ID, Level: 1} // keep the fuzzer fast
			if a.ID == IDXZ {
				a.Level = 0
			}
			if a.ID == IDZstd {
				a.Level = 3
			}
		}
		e, err := NewEncoder(a, WithMinSize(0))
		if err != nil {
			f.Fatal(err)
		}
		encs[i] = e
	}
	dec, _ := NewDecoder()
	f.Fuzz(func(t *testing.T, in []byte, which uint8) {
		enc := encs[int(which)%len(encs)]
		frame := enc.AppendEncode(nil, in)
		out, err := dec.AppendDecode(nil, frame)
		if err != nil {
			t.Fatalf("%v: %v", enc.Algorithm(), err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("%v: round trip changed the value", enc.Algorithm())
		}
	})
}
