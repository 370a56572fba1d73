// Package units parses and formats the byte sizes that squeeze's flags take,
// such as "64", "16.6kB", "64KiB" or "512MiB".
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var suffixes = []struct {
	s string
	m float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1},
}

// ParseSize parses a byte count: a plain number, or a number with a decimal
// (kB, MB, GB) or binary (KiB, MiB, GiB; also K, M, G) suffix, any case.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1.0
	for _, suf := range suffixes {
		if strings.HasSuffix(t, suf.s) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, suf.s)), suf.m
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f*mult > 1<<62 {
		return 0, fmt.Errorf("invalid size %q (examples: 64, 16.6kB, 64KiB, 512MiB)", s)
	}
	return int64(f*mult + 0.5), nil
}

// FormatSize formats n bytes in decimal units with one decimal, as the seed
// articles do: "980 B", "16.6 kB", "4.2 MB", "4 MB", "3 GB".
func FormatSize(n int64) string {
	switch {
	case n >= 1e9:
		return oneDecimal(float64(n)/1e9) + " GB"
	case n >= 1e6:
		return oneDecimal(float64(n)/1e6) + " MB"
	case n >= 1e3:
		return oneDecimal(float64(n)/1e3) + " kB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

func oneDecimal(f float64) string {
	return strings.TrimSuffix(strconv.FormatFloat(f, 'f', 1, 64), ".0")
}

// SizeFlag is a flag.Value holding a byte count parsed with ParseSize.
type SizeFlag int64

// String returns the size as Set accepts it: in the largest binary unit
// that divides it exactly ("512MiB", "64KiB"), else in bytes ("64", "1000").
func (f *SizeFlag) String() string {
	n := int64(*f)
	for _, u := range []struct {
		s string
		m int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}

// Set parses s with ParseSize.
func (f *SizeFlag) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	*f = SizeFlag(n)
	return nil
}
