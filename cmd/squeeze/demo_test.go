package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestDemo_AnswerFirst: the demo's output opens with what to use (write
// codec, compaction, dictionary), measured by this run, then the figures
// it rests on and the report; the targets and the seed study are not in
// it. Two sizes keep it short.
func TestDemo_AnswerFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for about ten seconds")
	}
	srv := testutil.StartRedis(t)
	dir := filepath.Join(t.TempDir(), "report")
	out, stderr, code := runCLI(t, nil, "demo", "--redis", srv.URL(), "--sizes", "1kB,16.6kB", "--report", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "What to use, measured on this machine (generated JSON API documents of 1 kB-16.6 kB, Redis ") {
		t.Fatalf("the output does not open with the answer:\n%s", out)
	}
	if !strings.HasPrefix(lines[1], "  * Write with ") {
		t.Errorf("the answer does not start with the codec to write with:\n%s", out)
	}
	answer := out[:max(0, strings.Index(out, "What it rests on"))]
	for _, want := range []string{"\n  * Compact cold keys to zstd:9", "\n  * Use a dictionary", "\n  Why "} {
		if !strings.Contains(answer, want) {
			t.Errorf("the answer lacks %q:\n%s", want, answer)
		}
	}
	for _, want := range []string{"Memory saved", "Write time, x none", "Read time, x none", "One value end to end", "Report with charts", dir, "squeeze bench redis --targets"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, dev := range []string{"NOT met", "Figures to reach", "Seed", "Ruby"} {
		if strings.Contains(out, dev) {
			t.Errorf("output says %q, which is for squeeze's developers:\n%s", dev, out)
		}
	}
	for _, line := range lines {
		if len([]rune(line)) > textWidth+8 && !strings.Contains(line, dir) || strings.HasSuffix(line, " ") {
			t.Errorf("line too long or with trailing spaces: %q", line)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil || !strings.Contains(string(page), `<section class="answer" id="answer">`) {
		t.Fatalf("report without the answer: %v", err)
	}
}

// TestDemo_BadSizes: sizes squeeze does not compress, or too large for a
// demo, are usage errors before anything starts.
func TestDemo_BadSizes(t *testing.T) {
	for _, tt := range []struct{ sizes, want string }{
		{"0,16.6kB", "under 64 bytes as they are"},
		{"1kB,1GB", "above the 64 MiB"},
		{"1kB,big", "--sizes"},
	} {
		out, stderr, code := runCLI(t, nil, "demo", "--sizes", tt.sizes, "--redis", "redis://127.0.0.1:1")
		if code != 2 || out != "" || !strings.Contains(stderr, tt.want) {
			t.Errorf("--sizes %s: exit %d, stdout %q, stderr %q; want 2 and %q", tt.sizes, code, out, stderr, tt.want)
		}
	}
}

// TestWrap keeps a size and its unit, and a range of sizes, on one line.
func TestWrap(t *testing.T) {
	got := wrap("saves 70-78% of Redis memory on values of 16.6 kB-4.2 MB; writes take 1.7x", "  * ", "    ", 44)
	want := "  * saves 70-78% of Redis memory on values\n    of 16.6 kB-4.2 MB; writes take 1.7x\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
