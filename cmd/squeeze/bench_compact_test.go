package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

func TestBenchCompact_CLI(t *testing.T) {
	r := testutil.StartRedis(t)
	out, errs, code := runCLI(t, nil, "bench", "compact", "--redis", r.URL(), "--sizes", "16.6kB,47.5kB", "--keys", "4",
		"--codecs", "zstd:3,brotli:5,zstd:3+dict", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rows []struct {
		Size      int     `json:"size_bytes"`
		Keys      int     `json:"keys"`
		Write     string  `json:"write_codec"`
		Codec     string  `json:"codec"`
		Raw       float64 `json:"memory_raw_bytes"`
		Before    float64 `json:"memory_before_bytes"`
		After     float64 `json:"memory_after_bytes"`
		Saved     float64 `json:"compaction_saved_pct"`
		KeysPerS  float64 `json:"keys_per_s"`
		MBPerS    float64 `json:"mb_per_s"`
		SavedComp float64 `json:"memory_saved_pct_compacted"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6:\n%s", len(rows), out)
	}
	for _, row := range rows {
		// Every row must have measured something real: s2 saves memory
		// against raw, a strong codec saves more.
		if row.Keys != 4 || row.Write != "s2:default" || !(row.Raw > row.Before && row.Before > row.After) ||
			row.Saved <= 0 || row.KeysPerS <= 0 || row.MBPerS <= 0 || row.SavedComp <= 0 {
			t.Fatalf("row %+v", row)
		}
	}
	if rows[2].Codec != "zstd:3+dict" || rows[3].Size != 47500 {
		t.Fatalf("rows out of order: %+v", rows)
	}
	// The table.
	dir := t.TempDir()
	out, errs, code = runCLI(t, nil, "bench", "compact", "--redis", r.URL(), "--sizes", "16.6kB", "--keys", "4", "--codecs", "zstd:9", "--report", dir)
	if code != 0 || !strings.Contains(out, "compacted to") || !strings.Contains(out, "zstd:9") {
		t.Fatalf("exit %d:\n%s%s", code, out, errs)
	}
	checkReport(t, dir, "compact.csv", "charts/compact-memory.png", "charts/compact-memory.svg")

	for _, bad := range [][]string{
		{"--codecs", "lz4+dict"}, {"--codecs", "none"}, {"--codecs", "zip"}, {"--sizes", "0"}, {"--write", "x"}, {"--keys", "-1"}, {"extra"},
	} {
		_, errs, code := runCLI(t, nil, append([]string{"bench", "compact", "--redis", r.URL()}, bad...)...)
		if code != 2 || !strings.Contains(errs, "bench compact") {
			t.Errorf("%v: exit %d, stderr %q", bad, code, errs)
		}
	}
}

// checkReport checks that a --report directory has index.html, results.json
// and the given files, none empty.
func checkReport(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range append([]string{"index.html", "results.json"}, files...) {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("report %s: %v", f, err)
		}
	}
}
