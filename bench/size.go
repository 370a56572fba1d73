package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits maps suffixes to multipliers: decimal kB/MB/GB as the seed
// articles use them ("16.6 kB"), binary KiB/MiB/GiB, and bare K/M/G as
// binary.
var sizeUnits = []struct {
	suffix string
	mult   float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30},
	{"b", 1},
}

// ParseSize parses a byte size such as "0", "512", "16.6kB", "4.2MB",
// "64KiB" or "1M". kB/MB/GB are decimal, KiB/MiB/GiB and K/M/G binary.
func ParseSize(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1.0
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t = strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			mult = u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || t == "" || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("invalid size %q (examples: 0, 512, 16.6kB, 4.2MB, 64KiB)", s)
	}
	v := f * mult
	if v < 0 {
		return 0, fmt.Errorf("invalid size %q: negative", s)
	}
	if v > 1<<40 {
		return 0, fmt.Errorf("invalid size %q: larger than 1 TiB", s)
	}
	return int(math.Round(v)), nil
}

// ParseSizes parses a comma-separated list of sizes.
func ParseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		n, err := ParseSize(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty size list %q", s)
	}
	return out, nil
}

// FormatSize prints n in the seed articles' decimal style: "0 B", "980 B",
// "16.6 kB", "4.2 MB".
func FormatSize(n int64) string {
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10) + " B"
	case n < 1e6:
		return trimZero(float64(n)/1e3) + " kB"
	case n < 1e9:
		return trimZero(float64(n)/1e6) + " MB"
	default:
		return trimZero(float64(n)/1e9) + " GB"
	}
}

func trimZero(f float64) string {
	s := strconv.FormatFloat(f, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0")
}
