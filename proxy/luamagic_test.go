package proxy

import (
	"testing"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
	"github.com/squeeze-kv/squeeze/resp"
)

// TestLuaMagic: luaMagic, in a quoted Lua string, is codec.Magic as Redis's
// Lua reads it, and the markers the scripts spell with it are those the
// proxy looks for.
func TestLuaMagic(t *testing.T) {
	r := testutil.StartRedis(t)
	c := dialRaw(t, r.Addr)
	got := c.do("EVAL", "return {'"+luaMagic+"', '"+luaMagic+"B', '"+luaMagic+"W', '"+luaMagic+"\\1\\0\\0'}", "0")
	want := string(resp.AppendArray(nil, 4)) + bulk(codec.Magic) + bulk(string(bitfieldMagic)) + bulk(string(recompressMagic)) + bulk(codec.Magic+"\x01\x00\x00")
	if got != want {
		t.Fatalf("Lua reads the magic as %q, want %q", got, want)
	}
	if string(magic) != codec.Magic || string(bitfieldMagic) != codec.Magic+"B" || string(recompressMagic) != codec.Magic+"W" {
		t.Fatalf("magic %q, bitfieldMagic %q, recompressMagic %q; codec.Magic is %q", magic, bitfieldMagic, recompressMagic, codec.Magic)
	}
}
