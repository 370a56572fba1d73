package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionLine covers what "squeeze version" prints for the builds a
// user meets: a release build, a go install of a tagged module, a build
// from a modified checkout, and go run (no VCS information).
func TestVersionLine(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	tests := []struct {
		name    string
		release string
		commit  string
		bi      *debug.BuildInfo
		ok      bool
		want    string
	}{
		{"release build", "v0.1.0", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs("6f2e696a1b2c3d4e5f60718293a4b5c6d7e8f901", "false")},
			true, "squeeze v0.1.0 (commit 6f2e696a1b2c) go1.26.0"},
		{"modified checkout", "v0.1.0", "", &debug.BuildInfo{GoVersion: "go1.26.0", Settings: vcs("6f2e696a1b2c3d4e5f60718293a4b5c6d7e8f901", "true")},
			true, "squeeze v0.1.0 (commit 6f2e696a1b2c, modified) go1.26.0"},
		{"go install of a tag, no release variable", "", "", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v0.2.0"}},
			true, "squeeze v0.2.0 (commit unknown) go1.26.1"},
		{"no release, devel module", "", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			true, "squeeze devel (commit unknown) go1.26.0"},
		{"no build info", "", "", nil, false, "squeeze devel (commit unknown)"},
		{"-X main.Commit without VCS information", "v0.1.0", "1ca26394f2af0123", &debug.BuildInfo{GoVersion: "go1.26.0"}, true, "squeeze v0.1.0 (commit 1ca26394f2af) go1.26.0"},
		{"recorded revision wins over -X main.Commit", "v0.1.0", "1ca26394f2af0123", &debug.BuildInfo{Settings: vcs("6f2e696a1b2c3d4e", "false")}, true, "squeeze v0.1.0 (commit 6f2e696a1b2c)"},
		{"release script, uncommitted changes", "v0.2.0", "1ca26394f2af0123+modified", &debug.BuildInfo{GoVersion: "go1.26.0"}, true, "squeeze v0.2.0 (commit 1ca26394f2af, modified) go1.26.0"},
		{"short revision", "v0.1.0", "", &debug.BuildInfo{Settings: vcs("abc", "false")}, true, "squeeze v0.1.0 (commit abc)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := versionLine(tt.release, tt.commit, tt.bi, tt.ok); got != tt.want {
				t.Errorf("versionLine = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestVersionCommand runs "squeeze version" and "squeeze --version": the
// same one line, naming the release, and "version" listed by "squeeze help".
func TestVersionCommand(t *testing.T) {
	var outs []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}, args); code != 0 {
			t.Fatalf("squeeze %s: exit %d, stderr %q", args[0], code, stderr.String())
		}
		outs = append(outs, stdout.String())
	}
	if outs[0] != outs[1] {
		t.Errorf("version printed %q, --version %q", outs[0], outs[1])
	}
	if !regexp.MustCompile(`^squeeze \S+ \(commit [^)]+\)( go\S+)?\n$`).MatchString(outs[0]) || !strings.Contains(outs[0], Version) {
		t.Errorf("squeeze version printed %q", outs[0])
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), env{Stdout: &stdout, Stderr: &stderr}, []string{"version", "extra"}); code != 2 {
		t.Errorf("squeeze version extra: exit %d, want 2", code)
	}
	stdout.Reset()
	run(context.Background(), env{Stdout: &stdout, Stderr: &stderr}, []string{"help"})
	if !regexp.MustCompile(`(?m)^  version `).MatchString(stdout.String()) {
		t.Errorf("squeeze help does not list version:\n%s", stdout.String())
	}
}

// TestVersion_MatchesChangelog keeps the default release name equal to the
// newest release in CHANGELOG.md.
func TestVersion_MatchesChangelog(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[?(v\d+\.\d+\.\d+)\]?`).FindSubmatch(b)
	if m == nil {
		t.Fatal("CHANGELOG.md names no release (## v1.2.3 ...)")
	}
	if string(m[1]) != Version {
		t.Errorf("CHANGELOG.md's newest release is %s, main.Version defaults to %s", m[1], Version)
	}
}
