package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemo_WriteSample: the sample data the guides start from is valid
// JSON of the size asked, the same for the same seed, another for another,
// and needs no Redis.
func TestDemo_WriteSample(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "doc.json")
	_, errs, code := runCLI(t, nil, "demo", "--write-sample", p, "--redis", "127.0.0.1:1")
	if code != 0 || !strings.Contains(errs, "221.9 kB") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	doc, err := os.ReadFile(p)
	if err != nil || len(doc) != demoDocSize || !json.Valid(doc) {
		t.Fatalf("%d bytes, valid JSON %v, %v", len(doc), json.Valid(doc), err)
	}
	small, _, code := runCLI(t, nil, "demo", "--write-sample", "-", "--sample-size", "4KB", "--seed", "7")
	again, _, _ := runCLI(t, nil, "demo", "--write-sample", "-", "--sample-size", "4KB", "--seed", "7")
	other, _, _ := runCLI(t, nil, "demo", "--write-sample", "-", "--sample-size", "4KB", "--seed", "8")
	if code != 0 || len(small) != 4000 || !json.Valid([]byte(small)) || small != again || small == other {
		t.Fatalf("exit %d, %d bytes, same seed equal %v, other seed equal %v", code, len(small), small == again, small == other)
	}
	for _, args := range [][]string{
		{"demo", "--seed", "3"},
		{"demo", "--write-sample", "-", "--sample-size", "10"},
	} {
		if _, errs, code := runCLI(t, nil, args...); code != 2 {
			t.Errorf("squeeze %s: exit %d, %s", strings.Join(args, " "), code, errs)
		}
	}
}
