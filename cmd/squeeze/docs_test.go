package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the module's root, seen from this package's directory.
const repoRoot = "../.."

// docCommand is one squeeze command line found in a fenced code block.
type docCommand struct {
	where string   // FILE:LINE
	args  []string // the words after "squeeze"
}

// userDocs are the pages whose command lines TestDocs_CommandLines checks.
func userDocs(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob(filepath.Join(repoRoot, "docs", "guide", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, guides...)
}

// TestDocs_CommandLines holds every squeeze command line in the shell
// blocks of README.md and docs/guide/*.md to the CLI: the command exists
// and its flag set accepts the flags as written. Nothing runs.
func TestDocs_CommandLines(t *testing.T) {
	files := userDocs(t)
	if len(files) < 2 {
		t.Fatalf("found only %v: docs/guide/*.md is missing", files)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cmds, err := docCommands(filepath.Base(f), string(b))
		if err != nil {
			t.Error(err)
			continue
		}
		for _, c := range cmds {
			n++
			if err := checkDocCommand(t, c.args); err != nil {
				t.Errorf("%s: squeeze %s: %v", c.where, strings.Join(c.args, " "), err)
			}
		}
	}
	if n < 20 {
		t.Errorf("checked only %d command lines: the extraction misses them", n)
	}
	t.Logf("checked %d command lines", n)
}

// TestDocs_CommandLinesRejectBadFlags shows that the check fails on what
// it is for: an unknown flag (before or after the arguments), a flag of
// another command, an unknown command or subcommand, and a bad value.
func TestDocs_CommandLinesRejectBadFlags(t *testing.T) {
	bad := "Setup:\n\n```sh\n" +
		"./squeeze proxy --listen 127.0.0.1:6380 --no-such-flag &\n" +
		"squeeze compact --redis redis://127.0.0.1:6379 --publish   # dict train's flag\n" +
		"squeeze archive list arc:reports --jsn\n" +
		"squeeze frobnicate\n" +
		"squeeze dict forget 12\n" +
		"squeeze bench codecs --repeat many\n" +
		"squeeze counters get user42 17 --no-such-flag\n" +
		"```\n"
	cmds, err := docCommands("bad.md", bad)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 7 {
		t.Fatalf("found %d command lines, want 7: %v", len(cmds), cmds)
	}
	for _, c := range cmds {
		if err := checkDocCommand(t, c.args); err == nil {
			t.Errorf("%s: squeeze %s: accepted", c.where, strings.Join(c.args, " "))
		} else {
			t.Logf("%s: %v", c.where, err)
		}
	}
	good := "```sh\n" +
		"sudo SQUEEZE_X=1 squeeze bench docs --codecs s2 \\\n    --sizes 1MB   # comment --bad\n" +
		"go run ./cmd/squeeze demo && ./squeeze inspect < doc.sqz | head\n" +
		"./squeeze proxy --config deploy/proxy.conf --check && systemctl reload squeeze-proxy\n" +
		"squeeze counters get user42 17 --redis redis://127.0.0.1:6379\n" +
		"squeeze archive get arc:reports --redis 127.0.0.1:6379 2026/11/summary.html\n" +
		"```\n```sh runnable\nsqueeze demo --write-sample - --seed $i | redis-cli -x SET doc:$i\n" +
		"squeeze --version\n" +
		"```\n```go\nsqueeze.Bad(--flag)\n```\n"
	cmds, err = docCommands("good.md", good)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 8 {
		t.Fatalf("found %d command lines, want 8: %v", len(cmds), cmds)
	}
	for _, c := range cmds {
		if err := checkDocCommand(t, c.args); err != nil {
			t.Errorf("%s: squeeze %s: %v", c.where, strings.Join(c.args, " "), err)
		}
	}
}

// checkDocCommand checks args with checkCommandLine under a cancelled
// context. A --config file is replaced by an empty one: the check is about
// flags, not about files on the reader's machine. A word with a shell
// expansion ("--seed $i", "user:$i") stands for a value the check cannot
// know: it becomes "1", which parses as a number, a string or a path.
func checkDocCommand(t *testing.T, args []string) error {
	args = append([]string(nil), args...)
	for i, a := range args {
		if strings.Contains(a, "$") {
			args[i] = "1"
		}
	}
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			args[i+1] = emptyFile(t)
		} else if strings.HasPrefix(a, "--config=") {
			args[i] = "--config=" + emptyFile(t)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return checkCommandLine(ctx, args)
}

func emptyFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "empty.conf")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// docCommands finds the squeeze command lines in the shell code blocks
// (```sh, bash, shell, console or no language) of a Markdown text: after
// optional sudo and VAR=value words, "squeeze", "./squeeze", a path ending
// in /squeeze, or "go run ./cmd/squeeze". Backslash continuations are
// joined; comments, redirections and the commands after |, &&, || and ;
// are cut off (each of those commands is checked on its own).
func docCommands(name, text string) ([]docCommand, error) {
	var out []docCommand
	inBlock, shell := false, false
	var pending string
	pendingLine := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trim := strings.TrimSpace(line)
		if strings.HasPrefix(trim, "```") {
			if inBlock {
				inBlock = false
				continue
			}
			lang, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(trim, "```")), " ") // "sh runnable" is sh
			inBlock, shell = true, lang == "" || lang == "sh" || lang == "bash" || lang == "shell" || lang == "console"
			continue
		}
		if !inBlock || !shell {
			continue
		}
		if pending == "" {
			pendingLine = n
		}
		if strings.HasSuffix(trim, "\\") {
			pending += strings.TrimSuffix(trim, "\\") + " "
			continue
		}
		full := pending + trim
		pending = ""
		full = strings.TrimPrefix(full, "$ ")
		words, err := shellWords(full)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, pendingLine, err)
		}
		for _, seg := range splitCommands(words) {
			if args, ok := squeezeArgs(seg); ok {
				out = append(out, docCommand{where: fmt.Sprintf("%s:%d", name, pendingLine), args: args})
			}
		}
	}
	if inBlock {
		return nil, fmt.Errorf("%s: a code block is not closed", name)
	}
	return out, nil
}

// opWord marks an operator word (|, &&, ;, <, 2>...) in shellWords' output.
const opWord = "\x00"

// shellWords splits a shell command line into words as sh would for a
// simple command: quotes group and are removed, # starts a comment at the
// start of a word, and the operators | & ; < > come out as their own words
// prefixed with opWord. $(...) stays inside its word.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unbalanced ' in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case c == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				cur.WriteByte(s[j])
			}
			if j == len(s) {
				return nil, fmt.Errorf("unbalanced \" in %q", s)
			}
			inWord, i = true, j
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			depth, j := 0, i+1
			for ; j < len(s); j++ {
				if s[j] == '(' {
					depth++
				} else if s[j] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			if j == len(s) {
				return nil, fmt.Errorf("unbalanced $( in %q", s)
			}
			cur.WriteString(s[i : j+1])
			inWord, i = true, j
		case c == '#' && !inWord:
			flush()
			return words, nil
		case c == ' ' || c == '\t':
			flush()
		case strings.IndexByte("|&;<>", c) >= 0:
			op := string(c)
			if inWord && strings.Trim(cur.String(), "0123456789") == "" && (c == '<' || c == '>') {
				op = cur.String() + op // 2>, 1>
				cur.Reset()
				inWord = false
			}
			flush()
			for i+1 < len(s) && strings.IndexByte("|&<>", s[i+1]) >= 0 && s[i+1] == c {
				op += string(c)
				i++
			}
			words = append(words, opWord+op)
		case c == '\\' && i+1 < len(s):
			cur.WriteByte(s[i+1])
			inWord, i = true, i+1
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words, nil
}

// splitCommands cuts words into simple commands at | & ; (and their doubles),
// dropping redirections and their targets.
func splitCommands(words []string) [][]string {
	var out [][]string
	var cur []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		op, isOp := strings.CutPrefix(w, opWord)
		switch {
		case !isOp:
			cur = append(cur, w)
		case strings.ContainsAny(op, "<>"):
			i++ // the redirection's target
		default:
			out = append(out, cur)
			cur = nil
		}
	}
	return append(out, cur)
}

var envAssign = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// squeezeArgs returns the arguments of a simple command that runs squeeze.
func squeezeArgs(words []string) ([]string, bool) {
	for len(words) > 0 && (words[0] == "sudo" || envAssign.MatchString(words[0])) {
		words = words[1:]
	}
	switch {
	case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/squeeze":
		return words[3:], true
	case len(words) >= 1 && (words[0] == "squeeze" || strings.HasSuffix(words[0], "/squeeze")):
		return words[1:], true
	}
	return nil, false
}

// TestDocs_Links checks that every relative link in README.md, client/README.md
// and docs/**/*.md names a file that exists and, for a #fragment into a
// Markdown file, a heading of that file (as GitHub makes anchors).
func TestDocs_Links(t *testing.T) {
	var files []string
	files = append(files, filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "client", "README.md"), filepath.Join(repoRoot, "CHANGELOG.md"))
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(p string) map[string]bool {
		if a, ok := anchors[p]; ok {
			return a
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		anchors[p] = headingAnchors(string(b))
		return anchors[p]
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(b)) {
			target, frag, _ := strings.Cut(l.target, "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			p := f
			if target != "" {
				p = filepath.Join(filepath.Dir(f), target)
				if _, err := os.Stat(p); err != nil {
					t.Errorf("%s:%d: link to %q: %v", rel(f), l.line, l.target, err)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(p, ".md") && !anchorsOf(p)[frag] {
				t.Errorf("%s:%d: link to %q: %s has no heading with the anchor #%s", rel(f), l.line, l.target, rel(p), frag)
			}
		}
	}
	t.Logf("checked %d relative links in %d files", n, len(files))
}

func rel(p string) string {
	r, err := filepath.Rel(repoRoot, p)
	if err != nil {
		return p
	}
	return r
}

type mdLink struct {
	line   int
	target string
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// markdownLinks returns the targets of the inline links of a Markdown
// text, outside code blocks and code spans.
func markdownLinks(text string) []mdLink {
	var out []mdLink
	inBlock := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			out = append(out, mdLink{line: i + 1, target: m[1]})
		}
	}
	return out
}

func stripCodeSpans(line string) string {
	parts := strings.Split(line, "`")
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 0 {
			b.WriteString(p)
		}
	}
	return b.String()
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text: lower case, punctuation other than - and _ dropped,
// spaces made -, and -1, -2... for repeats.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inBlock := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if k := seen[a]; k > 0 {
			out[fmt.Sprintf("%s-%d", a, k)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestDocs_HeadingAnchors pins the anchor rules on headings of this
// repository's kind.
func TestDocs_HeadingAnchors(t *testing.T) {
	got := headingAnchors("# squeeze\n## The proxy (issue 3)\n```sh\n# not a heading\n```\n### Compact cold keys\n## Results\n## Results\n## `squeeze advise`: codecs, rules\n")
	for _, want := range []string{"squeeze", "the-proxy-issue-3", "compact-cold-keys", "results", "results-1", "squeeze-advise-codecs-rules"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a comment in a code block made an anchor: %v", got)
	}
}

// TestDocs_Shape keeps the README short, with the demo and test commands
// that CI and new users start from, and every guide in the shape it
// promises: the user's goal first, "Check that it worked" with commands
// last.
func TestDocs_Shape(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	if n := strings.Count(readme, "\n"); n > 250 {
		t.Errorf("README.md has %d lines, want at most 250: move details into docs/guide/ or docs/RESULTS.md", n)
	}
	for _, cmd := range []string{
		"\nbash scripts/setup.sh && go run ./cmd/squeeze demo ",
		"\nbash scripts/test.sh ",
	} {
		if !strings.Contains(readme[:min(len(readme), 1500)], cmd) {
			t.Errorf("README.md does not start with the command %q", strings.TrimSpace(cmd))
		}
	}
	guides := userDocs(t)[1:]
	for _, g := range guides {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if !strings.Contains(text[:min(len(text), 600)], "**Goal:**") {
			t.Errorf("%s: does not start from the user's goal (**Goal:** in its first lines)", rel(g))
		}
		i := strings.LastIndex(text, "\n## ")
		if i < 0 || !strings.HasPrefix(text[i+1:], "## Check that it worked\n") || !strings.Contains(text[i:], "```sh") {
			t.Errorf("%s: the last section is not \"## Check that it worked\" with commands", rel(g))
		}
		if !strings.Contains(readme, "docs/guide/"+filepath.Base(g)) {
			t.Errorf("README.md does not link to %s", rel(g))
		}
	}
}

// FuzzDocCommands feeds the command-line extraction arbitrary Markdown: it
// must not panic, and every command line it finds must be checkable.
func FuzzDocCommands(f *testing.F) {
	f.Add("```sh\n./squeeze proxy --listen 127.0.0.1:6380 &\n```\n")
	f.Add("```sh\nsudo X=1 squeeze bench docs \\\n  --sizes 1MB # c\n```\n")
	f.Add("```\nsqueeze x '$(a b)' \"q\\\"\" 2>/dev/null | squeeze decode < f && go run ./cmd/squeeze demo\n```\n")
	f.Add("```sh\nsqueeze 'unbalanced\n```\n")
	f.Fuzz(func(t *testing.T, text string) {
		cmds, err := docCommands("fuzz.md", text)
		if err != nil {
			return
		}
		for _, c := range cmds {
			if len(c.args) > 0 && c.args[0] == "proxy" {
				continue // would bind no port, but reads SQUEEZE_CONFIG files named in args
			}
			_ = checkDocCommand(t, c.args)
		}
	})
}
