package bench

import (
	"fmt"
	"strings"

	"github.com/squeeze-kv/squeeze/internal/units"
)

// ParseSize parses a byte size such as "0", "512", "16.6kB", "4.2MB",
// "64KiB" or "1M" with units.ParseSize (kB/MB/GB decimal, KiB/MiB/GiB and
// K/M/G binary) and refuses sizes above 1 TiB.
func ParseSize(s string) (int, error) {
	n, err := units.ParseSize(s)
	if err != nil {
		return 0, err
	}
	if n > 1<<40 {
		return 0, fmt.Errorf("invalid size %q: larger than 1 TiB", s)
	}
	return int(n), nil
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
// "16.6 kB", "4.2 MB" (units.FormatSize).
func FormatSize(n int64) string { return units.FormatSize(n) }
