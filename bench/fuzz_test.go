package bench

import (
	"strings"
	"testing"
)

// FuzzParseSize checks that size parsing never panics, never returns a
// negative or huge size, and that every accepted size prints and parses back
// to the same value within the 5% that one printed decimal allows.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "512", "16.6kB", "4.2MB", "64KiB", "1M", " 2 GiB", "1e3", "-1", "NaN", "", "kb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if n != 0 {
				t.Fatalf("ParseSize(%q) = %d with error %v", s, n, err)
			}
			return
		}
		if n < 0 || n > 1<<40 {
			t.Fatalf("ParseSize(%q) = %d out of range", s, n)
		}
		p := strings.ReplaceAll(FormatSize(int64(n)), " ", "")
		m, err := ParseSize(p)
		if err != nil {
			t.Fatalf("FormatSize(%d) = %q does not parse: %v", n, p, err)
		}
		if d := m - n; d > n/20+1 || -d > n/20+1 { // one decimal: within 5%
			t.Fatalf("ParseSize(FormatSize(%d)) = %d", n, m)
		}
	})
}
