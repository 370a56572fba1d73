package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestArchive_CLI stores a directory with "squeeze archive put", reads one
// file back with get, lists it (table and --json) and extracts it, as a
// new user would.
func TestArchive_CLI(t *testing.T) {
	r := testutil.StartRedis(t)
	src := t.TempDir()
	files := map[string]string{}
	for i := range 30 {
		p := fmt.Sprintf("reports/2026-11-%02d.txt", i+1)
		files[p] = strings.Repeat(fmt.Sprintf("day %d: all systems nominal, %d requests\n", i+1, i*1000), 80)
		os.MkdirAll(filepath.Join(src, "reports"), 0o755)
		os.WriteFile(filepath.Join(src, filepath.FromSlash(p)), []byte(files[p]), 0o644)
	}
	out, errs, code := runCLI(t, nil, "archive", "put", "--redis", r.URL(), "arc:reports", src)
	if code != 0 || !strings.Contains(out, "stored 30 files") || !strings.Contains(out, "saved") {
		t.Fatalf("put: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = runCLI(t, nil, "archive", "get", "--redis", r.URL(), "arc:reports", "reports/2026-11-07.txt")
	if code != 0 || out != files["reports/2026-11-07.txt"] {
		t.Fatalf("get: exit %d, %d bytes\n%s", code, len(out), errs)
	}
	out, errs, code = runCLI(t, nil, "archive", "list", "--redis", r.URL(), "arc:reports")
	if code != 0 || !strings.Contains(out, "reports/2026-11-30.txt") || !strings.Contains(out, "zstd") || !strings.Contains(out, "30 files") {
		t.Fatalf("list: exit %d\n%s%s", code, out, errs)
	}
	out, _, code = runCLI(t, nil, "archive", "list", "--json", "--redis", r.URL(), "arc:reports")
	var list []struct {
		Path   string `json:"path"`
		Size   int64  `json:"size"`
		Stored int64  `json:"stored"`
	}
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list) != 30 || list[0].Size != int64(len(files[list[0].Path])) || list[0].Stored >= list[0].Size {
		t.Fatalf("list --json: exit %d, %v: %.200s", code, err, out)
	}
	dst := t.TempDir()
	out, errs, code = runCLI(t, nil, "archive", "extract", "--redis", r.URL(), "arc:reports", dst)
	if code != 0 || !strings.Contains(out, "extracted 30 files") {
		t.Fatalf("extract: exit %d\n%s%s", code, out, errs)
	}
	for p, want := range files {
		if got, err := os.ReadFile(filepath.Join(dst, filepath.FromSlash(p))); err != nil || string(got) != want {
			t.Fatalf("extracted %s: %v", p, err)
		}
	}
	_, errs, code = runCLI(t, nil, "archive", "get", "--redis", r.URL(), "arc:reports", "nope.txt")
	if code != 1 || !strings.Contains(errs, "no such file") || !strings.Contains(errs, "squeeze archive list arc:reports") {
		t.Fatalf("get of a missing file: exit %d, %q", code, errs)
	}
	for _, bad := range [][]string{
		{"archive"}, {"archive", "zip"}, {"archive", "put", "k"},
		{"archive", "put", "--redis", r.URL(), "k", filepath.Join(src, "missing")},
		{"archive", "put", "--codec", "bogus", "k", src},
	} {
		if _, errs, code := runCLI(t, nil, bad...); code != 2 || errs == "" {
			t.Errorf("%q: exit %d, stderr %q; want a usage error", bad, code, errs)
		}
	}
}

// TestBenchArchive_CLI: "squeeze bench archive" on a throwaway server
// prints JSON rows for every layout and size.
func TestBenchArchive_CLI(t *testing.T) {
	if testutil.ServerPath() == "" {
		t.Skip("redis-server not installed")
	}
	out, errs, code := runCLI(t, nil, "bench", "archive", "--json", "--files", "3,9", "--reads", "5", "--file-size", "2000")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rows []struct {
		Layout string  `json:"layout"`
		Files  int     `json:"files"`
		ReadUs float64 `json:"read_us"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 7 {
		t.Fatalf("%v: %s", err, out)
	}
	for _, bad := range [][]string{{"bench", "archive", "--files", "0"}, {"bench", "archive", "--codec", "none"}, {"bench", "archive", "--reads", "-1"}} {
		if _, errs, code := runCLI(t, nil, bad...); code != 2 || errs == "" {
			t.Errorf("%q: exit %d, %q", bad, code, errs)
		}
	}
}
