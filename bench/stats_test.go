package bench

import (
	"math"
	"testing"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want float64
	}{
		{"empty", nil, 0},
		{"one", []float64{7}, 7},
		{"odd unsorted", []float64{5, 1, 3}, 3},
		{"even", []float64{4, 1, 3, 2}, 2.5},
		{"outlier", []float64{1, 1, 1, 1000}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]float64(nil), tt.in...)
			if got := Median(in); got != tt.want {
				t.Fatalf("Median(%v) = %v, want %v", tt.in, got, tt.want)
			}
			for i := range in {
				if in[i] != tt.in[i] {
					t.Fatal("Median modified its input")
				}
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	if s.N != 8 || s.Median != 4.5 || s.Min != 2 || s.Max != 9 || s.Mean != 5 {
		t.Fatalf("summary %+v", s)
	}
	if want := math.Sqrt(32.0 / 7); math.Abs(s.Stddev-want) > 1e-12 {
		t.Fatalf("stddev %v, want %v", s.Stddev, want)
	}
	if (Summarize(nil) != Summary{}) {
		t.Fatal("empty summary not zero")
	}
	if s := Summarize([]float64{3}); s.Stddev != 0 || s.Median != 3 {
		t.Fatalf("single value summary %+v", s)
	}
}

func TestChangeAndSaved(t *testing.T) {
	tests := []struct {
		name        string
		f           func(v, b float64) float64
		value, base float64
		want        float64
	}{
		{"twice as slow", ChangePct, 200, 100, 100},
		{"seed small read", ChangePct, 126, 100, 26},
		{"faster", ChangePct, 50, 100, -50},
		{"zero base", ChangePct, 5, 0, 0},
		{"saved 80%", SavedPct, 20, 100, 80},
		{"grew", SavedPct, 110, 100, -10},
		{"saved zero base", SavedPct, 1, 0, 0},
	}
	for _, tt := range tests {
		if got := tt.f(tt.value, tt.base); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
