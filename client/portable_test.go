package client

import (
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/codec"
)

// TestNewHook_Portable: Config.Portable writes snappy by default and
// refuses a configuration that writes a codec other languages cannot read.
func TestNewHook_Portable(t *testing.T) {
	enc := func(s string) *codec.Encoder {
		e, err := codec.NewEncoder(codec.MustParseAlgorithm(s))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	h, err := NewHook(Config{Portable: true})
	if err != nil || h.enc.Algorithm() != codec.PortableDefault {
		t.Fatalf("Portable with no Algorithm: %v, %v; want %v", h, err, codec.PortableDefault)
	}
	h, err = NewHook(Config{})
	if err != nil || h.enc.Algorithm() != codec.DefaultAlgorithm {
		t.Fatalf("no Portable: %v, want the default %v", err, codec.DefaultAlgorithm)
	}
	if _, err := NewHook(Config{Portable: true, Algorithm: codec.MustParseAlgorithm("zstd:3"),
		Rules: []Rule{{Prefix: "a:", Encoder: enc("lz4")}, {Prefix: "b:", Encoder: enc("none")}}}); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []Config{
		{Portable: true, Algorithm: codec.MustParseAlgorithm("s2")},
		{Portable: true, Encoder: enc("minlz")},
		{Portable: true, Rules: []Rule{{Prefix: "x:", Encoder: enc("s2:better")}}},
		{Portable: true, Algorithm: codec.MustParseAlgorithm("xz")},
	} {
		if _, err := NewHook(cfg); err == nil || !strings.Contains(err.Error(), "Config.Portable") {
			t.Errorf("%+v: %v, want a Config.Portable error", cfg, err)
		}
	}
	// Frames it writes are ones the ports read: snappy's id.
	frame := h2frame(t, Config{Portable: true})
	if hd, err := codec.ParseHeader(frame); err != nil || hd.ID != codec.IDSnappy {
		t.Errorf("portable frame %+v, %v; want snappy", hd, err)
	}
}

func h2frame(t *testing.T, cfg Config) []byte {
	h, err := NewHook(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h.enc.AppendEncode(nil, []byte(strings.Repeat(`{"user":"ada","langs":["go"]},`, 20)))
}
