package main

import (
	"archive/tar"
	"compress/gzip"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestReleaseScript runs scripts/release.sh as a release is made, for this
// machine's target only, into a temporary directory: the binary is static
// and names the version and the commit, the archive holds it, and
// SHA256SUMS verifies.
func TestReleaseScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds squeeze once more (minutes on a cold build cache)")
	}
	if runtime.GOOS != "linux" {
		t.Skip("scripts/release.sh runs on Linux (GNU tar and touch)")
	}
	for _, tool := range []string{"bash", "git", "tar", "gzip", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): the release script names the commit", err)
	}
	script := filepath.Join(root, "scripts", "release.sh")
	release := func(dist string, args ...string) (string, error) {
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), "DIST="+dist, "ALLOW_DIRTY=1") // the tests run on work in progress too
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	if out, err := release(t.TempDir(), "1.2.3", "linux/amd64"); err == nil || !strings.Contains(out, "not v MAJOR.MINOR.PATCH") {
		t.Errorf("release.sh 1.2.3: %v\n%s", err, out)
	}
	if out, err := release(t.TempDir(), "v1.2.3", "plan9/386"); err == nil || !strings.Contains(out, "target plan9/386") {
		t.Errorf("release.sh v1.2.3 plan9/386: %v\n%s", err, out)
	}

	const version = "v0.0.0-test.1"
	target := runtime.GOOS + "/" + runtime.GOARCH
	dist := t.TempDir()
	if out, err := release(dist, version, target); err != nil {
		t.Fatalf("release.sh %s %s: %v\n%s", version, target, err, out)
	}
	name := "squeeze_" + version + "_" + runtime.GOOS + "_" + runtime.GOARCH
	bin := filepath.Join(dist, name)

	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", name, err, out)
	}
	want := "squeeze " + version + " (commit " + string(head[:12])
	if !strings.HasPrefix(string(out), want) {
		t.Errorf("%s version printed %q, want it to begin %q", name, out, want)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a dynamic loader: not a static binary", name)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s links %v: not a static binary", name, libs)
	}

	check := exec.Command("sha256sum", "-c", "SHA256SUMS")
	check.Dir = dist
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
	} else if got := strings.Count(string(out), ": OK"); got != 2 {
		t.Errorf("SHA256SUMS checks %d files, want the binary and the archive:\n%s", got, out)
	}

	members := tarMembers(t, filepath.Join(dist, name+".tar.gz"))
	for _, m := range []string{name + "/squeeze", name + "/README.md", name + "/CHANGELOG.md"} {
		if !members[m] {
			t.Errorf("%s.tar.gz lacks %s (has %v)", name, m, members)
		}
	}
}

func tarMembers(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	members := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return members
		}
		if err != nil {
			t.Fatal(err)
		}
		members[strings.TrimSuffix(h.Name, "/")] = true
	}
}
