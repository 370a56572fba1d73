package codec

import (
	"strings"
	"testing"
)

func TestPortableProfile(t *testing.T) {
	want := "none zstd lz4 snappy brotli gzip deflate zlib"
	if got := strings.Join(PortableNames(), " "); got != want {
		t.Fatalf("portable codecs %q, want %q (docs/FORMAT.md, section 8)", got, want)
	}
	for _, a := range Algorithms() {
		err := CheckPortable(a)
		if (err == nil) != a.ID.Portable() {
			t.Errorf("CheckPortable(%v) = %v", a, err)
		}
	}
	if err := CheckPortable(DefaultAlgorithm); err == nil || !strings.Contains(err.Error(), "Go-only") {
		t.Errorf("the default s2 is Go-only, CheckPortable says %v", err)
	}
	if err := CheckPortable(PortableDefault); err != nil {
		t.Error(err)
	}
}
