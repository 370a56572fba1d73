package bench

import (
	"math"
	"slices"
)

// Median returns the median of xs (the mean of the two middle values for an
// even count), or 0 for no values. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Summary describes repeated measurements of one quantity.
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
	Stddev float64 `json:"stddev"` // sample standard deviation; 0 for fewer than 2 values
}

// Summarize returns the summary of xs; the zero Summary for no values.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := Summary{N: len(xs), Median: Median(xs), Min: xs[0], Max: xs[0]}
	var sum float64
	for _, x := range xs {
		sum += x
		s.Min = min(s.Min, x)
		s.Max = max(s.Max, x)
	}
	s.Mean = sum / float64(len(xs))
	if len(xs) > 1 {
		var ss float64
		for _, x := range xs {
			ss += (x - s.Mean) * (x - s.Mean)
		}
		s.Stddev = math.Sqrt(ss / float64(len(xs)-1))
	}
	return s
}

// ChangePct returns how much slower (positive) or faster (negative) value
// is than base, in percent: +100 means twice the time. It returns 0 when
// base is not positive.
func ChangePct(value, base float64) float64 {
	if base <= 0 {
		return 0
	}
	return 100 * (value - base) / base
}

// SavedPct returns the share of base that value saves, in percent: storing
// 20 bytes instead of 100 saves 80%. It returns 0 when base is not positive.
func SavedPct(value, base float64) float64 {
	if base <= 0 {
		return 0
	}
	return 100 * (1 - value/base)
}
