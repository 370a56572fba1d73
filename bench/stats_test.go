package bench

import (
	"math"
	"strings"
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

func TestCheckTargets(t *testing.T) {
	row := func(c, wl string, n int, slow float64) RedisRow {
		return RedisRow{Path: PathLibrary, Codec: c, Workload: wl, SizeBytes: 16600, Iterations: n, SlowdownPct: slow}
	}
	res := RedisResult{
		Rows: []RedisRow{
			row("zstd:1", WorkloadRead, 10, 50), row("zlib:6", WorkloadRead, 10, 90), // at x10: fails
			row("zstd:1", WorkloadRead, 100, 10), row("zlib:6", WorkloadRead, 100, 60), // at x100: passes (10 <= 20)
			row("zstd:1", WorkloadWrite, 100, 30), row("zlib:6", WorkloadWrite, 100, 100), // 30 > 20: fails
			row("zstd:1", WorkloadWrite, 1000, 5), // zlib:6 not at x1000: ignored
		},
		Memory: []MemoryRow{
			{Codec: "zstd:1", SizeBytes: 16600, SavedPct: 85}, {Codec: "zstd:1", SizeBytes: 0},
			{Codec: "zstd:1->zstd:9", WrittenWith: "zstd:1", SizeBytes: 16600, SavedPct: 79.9},       // at rest: fails
			{Codec: "s2:default->zstd:9", WrittenWith: "s2:default", SizeBytes: 16600, SavedPct: 90}, // another codec: ignored
		},
	}
	got := CheckTargets(res, "zstd:1")
	if len(got) != 4 {
		t.Fatalf("%d checks, want 4: %+v", len(got), got)
	}
	if !strings.Contains(got[1].Target, "at rest, zstd:1->zstd:9") {
		t.Errorf("check 1 is %q, want the one at rest", got[1].Target)
	}
	got = append(got[:1], got[2:]...)
	want := []bool{true, true, false}
	for i, c := range got {
		if c.Pass != want[i] {
			t.Errorf("check %d %+v: pass %v, want %v", i, c, c.Pass, want[i])
		}
	}
	if got[2].Limit != 20 {
		t.Errorf("write limit %v, want 100/5", got[2].Limit)
	}
}

func TestCheckDocTargets(t *testing.T) {
	rows := []DocRow{
		{Codec: "none", Link: "loopback", SizeBytes: 2e6, UploadMs: 10, DownloadMs: 10}, // loopback: ignored
		{Codec: "a", Link: "loopback", SizeBytes: 2e6, UploadMs: 1, DownloadMs: 1},
		{Codec: "none", Link: "1gbit", SizeBytes: 500e3, UploadMs: 10, DownloadMs: 10}, // below 1 MB: ignored
		{Codec: "a", Link: "1gbit", SizeBytes: 500e3, UploadMs: 1, DownloadMs: 1},
		{Codec: "none", Link: "1gbit", SizeBytes: 2e6, UploadMs: 10, DownloadMs: 10},
		{Codec: "a", Link: "1gbit", SizeBytes: 2e6, UploadMs: 4, DownloadMs: 8},
		{Codec: "b", Link: "1gbit", SizeBytes: 2e6, UploadMs: 6, DownloadMs: 6},
	}
	got := CheckDocTargets(rows)
	if len(got) != 2 {
		t.Fatalf("%d checks, want 2: %+v", len(got), got)
	}
	if !got[0].Pass || got[0].Value != 2.5 || !strings.Contains(got[0].Measured, "with a") {
		t.Errorf("upload check %+v, want 2.5x with a", got[0])
	}
	if got[1].Pass || !strings.Contains(got[1].Measured, "with b") {
		t.Errorf("download check %+v, want 1.67x with b, not met", got[1])
	}
}

// TestFillRelative_NoBaseline: a codec cell whose "none" cell was skipped by
// the budget used to get slowdown_pct 0 ("+0.0%"), indistinguishable from
// "as fast as no compression"; it is now marked no_baseline.
func TestFillRelative_NoBaseline(t *testing.T) {
	res := RedisResult{Rows: []RedisRow{
		{Path: PathLibrary, Codec: "none", Workload: "read", SizeBytes: 100, Iterations: 10, NsPerOp: 1000},
		{Path: PathLibrary, Codec: "zstd:1", Workload: "read", SizeBytes: 100, Iterations: 10, NsPerOp: 1500},
		{Path: PathLibrary, Codec: "zstd:1", Workload: "read", SizeBytes: 100, Iterations: 100, NsPerOp: 1400},
	}}
	fillRelative(&res)
	if r := res.Rows[1]; r.NoBaseline || r.SlowdownPct != 50 {
		t.Errorf("with baseline: %+v", r)
	}
	if r := res.Rows[2]; !r.NoBaseline || r.SlowdownPct != 0 {
		t.Errorf("without baseline: %+v", r)
	}
}

// TestCheckTargets_NoBaseline: cells without a "none" baseline carry a
// slowdown of 0 that means "unknown"; a target compared there (0 <= 0/3)
// used to pass. They are now left out, so the check falls back to the
// largest count where all three were measured.
func TestMemoryContext(t *testing.T) {
	mem := func(c, written string, size int, saved float64) MemoryRow {
		return MemoryRow{Codec: c, WrittenWith: written, SizeBytes: size, SavedPct: saved}
	}
	missed := RedisResult{Memory: []MemoryRow{
		mem("s2:default", "", 0, 0), mem("zlib:6", "", 0, 0), // below 16.6 kB: ignored
		mem("s2:default", "", 16600, 70), mem("zlib:6", "", 16600, 80.8), mem("zstd:1", "", 16600, 79),
		mem("s2:default->zstd:9", "s2:default", 16600, 81.1),
		mem("s2:default", "", 47500, 69.9), mem("zlib:6", "", 47500, 79.5),
		mem("s2:default->zstd:9", "s2:default", 47500, 80.1),
	}}
	want := "Memory saved from 16.6 kB up, MEMORY USAGE, this run: s2:default as written 69.9-70.0%; " +
		"zlib:6 (the seed's approach) as written 79.5-80.8%; s2:default->zstd:9 at rest (squeeze compact) 80.1-81.1%."
	if got := MemoryContext(missed, "s2:default"); got != want {
		t.Errorf("MemoryContext:\n got %q\nwant %q", got, want)
	}
	met := RedisResult{Memory: []MemoryRow{mem("zstd:1", "", 16600, 80), mem("zlib:6", "", 16600, 79)}}
	if got := MemoryContext(met, "zstd:1"); got != "" {
		t.Errorf("codec met 80%%: %q, want nothing", got)
	}
	if got := MemoryContext(RedisResult{}, "s2:default"); got != "" {
		t.Errorf("nothing measured: %q", got)
	}
}

func TestCheckTargets_NoBaseline(t *testing.T) {
	row := func(c string, n int, slow float64, noBase bool) RedisRow {
		return RedisRow{Path: PathLibrary, Codec: c, Workload: WorkloadRead, SizeBytes: 16600, Iterations: n, SlowdownPct: slow, NoBaseline: noBase}
	}
	res := RedisResult{Rows: []RedisRow{
		row("zstd:1", 10, 50, false), row("zlib:6", 10, 90, false), // at x10: fails (50 > 30)
		row("zstd:1", 100, 0, true), row("zlib:6", 100, 0, true), // no baseline at x100
	}}
	got := CheckTargets(res, "zstd:1")
	if len(got) != 1 || got[0].Pass || !strings.Contains(got[0].Measured, "(x10)") {
		t.Fatalf("checks %+v; want one, failed, at x10", got)
	}
}
