package units

import "testing"

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"64", 64}, {"16.6kB", 16600}, {"47.5 kB", 47500}, {"4.2MB", 4200000},
		{"64KiB", 65536}, {"512MiB", 512 << 20}, {"1g", 1 << 30}, {"10b", 10}, {"1GB", 1e9},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "abc", "-1", "1.5.2MB", "12XB", "nan", "NaN kB", "inf", "-inf", "+Inf", "kB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 16600: "16.6 kB", 4200000: "4.2 MB", 4e6: "4 MB", 3e9: "3 GB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// FuzzParseSize: any string either fails or gives a size in [0, 2^62] that
// formats without panicking.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "16.6kB", "64KiB", "512MiB", "nan", "inf", "-1", "1e400", " 4.2 MB "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		if n < 0 || n > 1<<62 {
			t.Fatalf("ParseSize(%q) = %d, outside [0, 2^62]", s, n)
		}
		_ = FormatSize(n)
	})
}

// TestSizeFlag_String: defaults print as people write them ("512MiB", not
// "536870912") and parse back to the same value.
func TestSizeFlag_String(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 64: "64", 1000: "1000", 16600: "16600", 1 << 10: "1KiB", 64 << 10: "64KiB", 512 << 20: "512MiB", 3 << 30: "3GiB", 1<<20 + 1: "1048577"} {
		f := SizeFlag(n)
		if got := f.String(); got != want {
			t.Errorf("SizeFlag(%d).String() = %q, want %q", n, got, want)
		}
		var back SizeFlag
		if err := back.Set(f.String()); err != nil || back != f {
			t.Errorf("Set(%q) = %d, %v; want %d", f.String(), back, err, n)
		}
	}
}
