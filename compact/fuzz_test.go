package compact

import (
	"bytes"
	"context"
	"testing"

	"github.com/squeeze-kv/squeeze/codec"
)

// FuzzEncode feeds arbitrary stored bytes to the decision Run makes for one
// value: it must never panic, and whenever it decides to rewrite, the new
// form must be smaller by MinGain and read back as the same value as the
// old one (raw bytes read back as themselves).
func FuzzEncode(f *testing.F) {
	s2, _ := codec.NewEncoder(codec.MustParseAlgorithm("s2"))
	doc := jsonDoc(1, 200)
	f.Add(s2.AppendEncode(nil, doc))
	f.Add(doc)
	f.Add([]byte(codec.Magic + "\x01\x03\x00\x90\x4e garbage"))
	f.Add([]byte("short"))
	f.Add([]byte{})
	enc, _ := codec.NewEncoder(codec.MustParseAlgorithm("zstd:3"))
	dec, _ := codec.NewDecoder(codec.WithMaxDecodedSize(1 << 20))
	r := &runner{o: &Options{Encoder: enc, Decoder: dec, MinGain: DefaultMinGain}}
	f.Fuzz(func(t *testing.T, stored []byte) {
		it := &item{key: "k", old: stored}
		r.encode(context.Background(), it, nil, nil)
		if it.reason != "" {
			return
		}
		if float64(len(it.new)) > float64(len(stored))*(1-DefaultMinGain) {
			t.Fatalf("rewrite of %d bytes to %d: below the minimum gain", len(stored), len(it.new))
		}
		was, err := dec.AppendDecode(nil, stored)
		if err != nil {
			t.Fatalf("rewrite decided for an undecodable value: %v", err)
		}
		now, err := dec.AppendDecode(nil, it.new)
		if err != nil || !bytes.Equal(was, now) {
			t.Fatalf("rewrite changes the value (%v)", err)
		}
	})
}
