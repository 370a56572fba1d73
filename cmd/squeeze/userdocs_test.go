package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// internalRefs match what only squeeze's developers can look up: issue
// numbers, the numbers of the published studies squeeze started from, and
// test functions.
var (
	issueRefRE = regexp.MustCompile(`(?i)\b(?:issues?|PR) #?\d+|\(#\d+\)|\bseed 0\d\d\b`)
	testNameRE = regexp.MustCompile(`\bTest[A-Z]\w*`)
	runFlagRE  = regexp.MustCompile(`-run[ =]['"^]*$`)
)

// internalRefs returns the internal references in text.
// A test named as what to run (`go test ./proxy -run TestX`) is a command
// a user can type, not an explanation, and is left alone.
func internalRefs(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		out = append(out, issueRefRE.FindAllString(line, -1)...)
		for _, loc := range testNameRE.FindAllStringIndex(line, -1) {
			if runFlagRE.MatchString(line[:loc[0]]) {
				continue
			}
			out = append(out, line[loc[0]:loc[1]])
		}
	}
	return out
}

// TestDocs_NoInternalReferences keeps the text users read (README.md,
// CHANGELOG.md, docs/guide/*.md, docs/RESULTS.md, client/README.md and
// every command's --help) free of issue numbers, seed numbers and test names given as
// explanations: a user cannot look them up. Design pages for developers
// (docs/design/, docs/ARCHITECTURE.md) may name tests.
func TestDocs_NoInternalReferences(t *testing.T) {
	files := append(userDocs(t), filepath.Join(repoRoot, "CHANGELOG.md"), filepath.Join(repoRoot, "docs", "RESULTS.md"), filepath.Join(repoRoot, "client", "README.md"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if refs := internalRefs(string(b)); len(refs) > 0 {
			t.Errorf("%s names %q: say what changed or what to run in the user's terms", rel(f), refs)
		}
	}
	for _, cmd := range append([][]string{{}}, everyCommand...) {
		stdout, _, _ := runCLI(t, nil, append(append([]string(nil), cmd...), "--help")...)
		if refs := internalRefs(stdout); len(refs) > 0 {
			t.Errorf("squeeze %s --help names %q", strings.Join(cmd, " "), refs)
		}
	}
}

// TestDocs_InternalRefs pins what the check above finds and leaves alone.
func TestDocs_InternalRefs(t *testing.T) {
	for text, want := range map[string]int{
		"fixed in issue 31":            1,
		"(#35)":                        1,
		"the study (seed 000)":         1,
		"`TestProxy_Cluster` holds it": 1,
		"`go test ./proxy -run TestProxy_AppendHeavy -v`":   0,
		"`go test ./client -run '^TestScripts_'`":           0,
		"BITFIELD cnt:user42 INCRBY u16 #17 1; --seed 2":    0,
		"a Testament; [link](RESULTS.md#packed-counters-2)": 0,
	} {
		if got := internalRefs(text); len(got) != want {
			t.Errorf("internalRefs(%q) = %q, want %d", text, got, want)
		}
	}
}
