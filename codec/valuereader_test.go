package codec

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestValueReader: a zstd frame read in pieces gives what AppendDecode
// gives, at every size, allocating little for a huge value; a frame whose
// payload, length or checksum is wrong gives an error at the end, after
// the bytes before; what does not stream is refused at once.
func TestValueReader(t *testing.T) {
	dec, err := NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	enc, err := NewEncoder(Algorithm{ID: IDZstd, Level: 3}, WithMinSize(0), WithMinGain(-1))
	if err != nil {
		t.Fatal(err)
	}
	readAll := func(frame []byte, piece int) ([]byte, error) {
		vr, err := dec.NewValueReader(frame)
		if err != nil {
			return nil, err
		}
		defer vr.Close()
		var out []byte
		buf := make([]byte, piece)
		for {
			n, err := vr.Read(buf)
			out = append(out, buf[:n]...)
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return out, err
			}
		}
	}
	for _, size := range []int{0, 1, 1000, 3 << 20, 20<<20 + 7} {
		val := sampleJSON(size)
		if size > 1<<20 {
			val = bytes.Repeat([]byte("squeeze "), size/8+1)[:size]
		}
		frame := enc.AppendEncode(nil, val)
		for _, piece := range []int{1 << 20, 4096, 7} {
			if piece < 4096 && size > 1<<20 {
				continue
			}
			got, err := readAll(frame, piece)
			if err != nil || !bytes.Equal(got, val) {
				t.Fatalf("%d bytes in pieces of %d: %d bytes, %v", size, piece, len(got), err)
			}
		}
	}

	val := bytes.Repeat([]byte("squeeze "), 1<<17) // 1 MiB
	frame := enc.AppendEncode(nil, val)
	h, _ := ParseHeader(frame)
	for _, tt := range []struct {
		name  string
		frame func() []byte
		want  error
	}{
		{"checksum", func() []byte {
			h2 := h
			h2.Checksum ^= 1
			return append(AppendHeader(nil, h2), frame[h.Len:]...)
		}, ErrChecksum},
		{"longer than the header says", func() []byte {
			h2 := h
			h2.OriginalLen--
			return append(AppendHeader(nil, h2), frame[h.Len:]...)
		}, ErrCorrupt},
		{"shorter than the header says", func() []byte {
			h2 := h
			h2.OriginalLen++
			return append(AppendHeader(nil, h2), frame[h.Len:]...)
		}, ErrTruncated},
		{"payload cut", func() []byte { return frame[:len(frame)-10] }, ErrTruncated},
	} {
		got, err := readAll(tt.frame(), 64<<10)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
		if len(got) > len(val) || !bytes.Equal(got, val[:len(got)]) {
			t.Errorf("%s: %d bytes before the error, not a prefix of the value", tt.name, len(got))
		}
		// AppendDecode refuses the same frames.
		if _, err := dec.AppendDecode(nil, tt.frame()); err == nil {
			t.Errorf("%s: AppendDecode took it", tt.name)
		}
	}

	s2, err := NewEncoder(DefaultAlgorithm, WithMinSize(0))
	if err != nil || DefaultAlgorithm.ID == IDZstd {
		t.Fatalf("the default codec for the test: %v %v", DefaultAlgorithm, err)
	}
	if _, err := dec.NewValueReader(s2.AppendEncode(nil, val)); err == nil {
		t.Error("an s2 frame streamed")
	}
	small, _ := NewDecoder(WithMaxDecodedSize(1000))
	if _, err := small.NewValueReader(frame); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the maximum: %v", err)
	}
	if _, err := dec.NewValueReader([]byte("plain")); !errors.Is(err, ErrCorrupt) {
		t.Errorf("not a frame: %v", err)
	}

	// A 400 MiB value from a 20 kB frame, read in 1 MiB pieces, allocates
	// about the decoder's window, not the value.
	bomb := enc.AppendEncode(nil, make([]byte, 400<<20))
	buf := make([]byte, 1<<20)
	allocs := testing.AllocsPerRun(1, func() {
		vr, err := dec.NewValueReader(bomb)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{vr}, buf)
		vr.Close()
		if err != nil || n != 400<<20 {
			t.Fatalf("bomb: %d bytes, %v", n, err)
		}
	})
	if allocs > 1000 {
		t.Errorf("reading a 400 MiB value allocated %v times", allocs)
	}
}
