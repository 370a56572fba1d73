package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// A guide marks the code blocks that run as written with the word
// "runnable" after the language of the opening fence:
//
//	```sh runnable
//
// (GitHub shows the block as any sh block.) TestGuides_Runnable runs them;
// blocks that need a second host, root, a browser, a long run or the
// network stay unmarked, and TestDocs_CommandLines still checks their
// squeeze command lines.
const runnableMarker = "runnable"

// guideBlock is one runnable code block of a guide.
type guideBlock struct {
	line int    // of the opening fence
	lang string // sh or go
	text string
}

// runnableBlocks returns the blocks of a Markdown text marked runnable, in
// order.
func runnableBlocks(text string) ([]guideBlock, error) {
	var out []guideBlock
	var cur *guideBlock
	var body strings.Builder
	inBlock := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trim := strings.TrimSpace(line)
		if !strings.HasPrefix(trim, "```") {
			if cur != nil {
				body.WriteString(line + "\n")
			}
			continue
		}
		if inBlock {
			if cur != nil {
				cur.text = body.String()
				out = append(out, *cur)
				cur = nil
				body.Reset()
			}
			inBlock = false
			continue
		}
		inBlock = true
		info := strings.Fields(strings.TrimPrefix(trim, "```"))
		if len(info) >= 2 && info[1] == runnableMarker {
			if info[0] != "sh" && info[0] != "go" {
				return nil, fmt.Errorf("line %d: a runnable block must be sh or go, not %q", n, info[0])
			}
			cur = &guideBlock{line: n, lang: info[0]}
		} else if slices.Contains(info, runnableMarker) {
			return nil, fmt.Errorf("line %d: %q: the marker goes right after the language (```sh runnable)", n, trim)
		}
	}
	if inBlock {
		return nil, fmt.Errorf("a code block is not closed")
	}
	return out, nil
}

// guideBudget bounds one block: the guides must run in well under two
// minutes all together, on a 2-core machine.
const guideBudget = 60 * time.Second

// TestGuides_Runnable runs the runnable blocks of every guide in
// docs/guide/, top to bottom, each guide in a directory of its own against
// a redis-server of its own, as a reader would: with squeeze (built by the
// test) on PATH, SQUEEZE_REDIS naming that server, and redis-cli. Each sh
// block runs in bash with errexit, so that any failing command fails the
// guide; a go block is the guide's program, written to main.go of a module
// that requires squeeze (the module is this checkout, where a reader's "go
// get" would fetch it; nothing is fetched).
func TestGuides_Runnable(t *testing.T) {
	guides, err := filepath.Glob(filepath.Join(repoRoot, "docs", "guide", "*.md"))
	if err != nil || len(guides) == 0 {
		t.Fatalf("no guides: %v", err)
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-cli not found; the guides use it (apt-get install -y redis-tools)")
		}
		t.Skip("redis-cli not installed: the guides use it")
	}
	type guide struct {
		path   string
		blocks []guideBlock
	}
	var todo []guide
	for _, g := range guides {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := runnableBlocks(string(b))
		if err != nil {
			t.Fatalf("%s: %v", rel(g), err)
		}
		if len(blocks) == 0 {
			t.Errorf("%s: no block is marked runnable (```sh %s)", rel(g), runnableMarker)
			continue
		}
		for _, b := range blocks {
			if err := checkErrexit(b); err != nil {
				t.Errorf("%s:%d: %v", rel(g), b.line, err)
			}
		}
		todo = append(todo, guide{g, blocks})
	}
	if testing.Short() {
		t.Skip("skipping the guides in -short mode: they start redis-server and build squeeze")
	}
	if testutil.ServerPath() == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server not found; the guides need it (apt-get install -y redis-server)")
		}
		t.Skip("redis-server not installed (apt-get install -y redis-server)")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "squeeze"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, g := range todo {
		t.Run(strings.TrimSuffix(filepath.Base(g.path), ".md"), func(t *testing.T) {
			runGuide(t, rel(g.path), g.blocks, bin, root)
		})
	}
	t.Logf("all guides ran in %v", time.Since(start).Round(time.Millisecond))
}

// runGuide runs the blocks of one guide in order.
func runGuide(t *testing.T, name string, blocks []guideBlock, bin, root string) {
	r := testutil.StartRedis(t)
	dir := t.TempDir()
	env := guideEnv(bin, r.URL())
	for _, b := range blocks {
		where := fmt.Sprintf("%s:%d", name, b.line)
		if b.lang == "go" {
			if err := writeGoProgram(dir, root, b.text); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), guideBudget)
		cmd := exec.CommandContext(ctx, "bash", "-e", "-c", b.text)
		cmd.Dir, cmd.Env, cmd.WaitDelay = dir, env, 5*time.Second
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
		cancel()
		took := time.Since(t0).Round(time.Millisecond)
		if err != nil {
			if timedOut {
				err = fmt.Errorf("still running after %v", guideBudget)
			}
			t.Fatalf("%s: the block fails (%v) after %v:\n%s\noutput:\n%s", where, err, took, indent(b.text), indent(string(out)))
		}
		t.Logf("%s: ran in %v", where, took)
	}
}

// guideEnv is the environment of a reader who followed "Before you start":
// squeeze on PATH and SQUEEZE_REDIS set, and none of the other SQUEEZE_
// variables of the shell that runs the tests.
func guideEnv(bin, redisURL string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SQUEEZE_") || strings.HasPrefix(kv, "REDISCLI_") || strings.HasPrefix(kv, "PATH=") ||
			strings.HasPrefix(kv, "GOFLAGS=") || strings.HasPrefix(kv, "GOPROXY=") || strings.HasPrefix(kv, "GOWORK=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"SQUEEZE_REDIS="+redisURL,
		// The guide's Go program builds from this checkout and the module
		// cache, never from the network.
		"GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off",
	)
}

var moduleLine = regexp.MustCompile(`(?m)^module .*$`)

// writeGoProgram writes a guide's program as main.go of a module in dir
// that requires squeeze, resolved to the checkout at root with the
// checkout's own requirements and sums, as "go get" would have set it up.
func writeGoProgram(dir, root, src string) error {
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return err
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		return err
	}
	gomod := moduleLine.ReplaceAllString(string(mod), "module example.com/guide") +
		"\nrequire github.com/squeeze-kv/squeeze v0.0.0\n\nreplace github.com/squeeze-kv/squeeze => " + root + "\n"
	for name, data := range map[string]string{"go.mod": gomod, "go.sum": string(sum), "main.go": src} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// checkErrexit refuses a block whose failures errexit would not see: bash
// -e stops at a failing command, but not at one before && or || (a check
// written "cmp a b && echo same" fails silently), unless it ends the block,
// whose status is then the block's.
func checkErrexit(b guideBlock) error {
	if b.lang != "sh" {
		return nil
	}
	var lines []string
	for _, l := range strings.Split(b.text, "\n") {
		if code, _, _ := strings.Cut(l, " #"); strings.TrimSpace(code) != "" && !strings.HasPrefix(strings.TrimSpace(code), "#") {
			lines = append(lines, code)
		}
	}
	for i, l := range lines {
		if i < len(lines)-1 && (strings.Contains(l, "&&") || strings.Contains(l, "||")) {
			return fmt.Errorf("%q: under errexit a command that fails before && or || stops nothing; end the block with it, or split it", strings.TrimSpace(l))
		}
	}
	return nil
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// TestRunnableBlocks: the marker is found after the language only, blocks
// keep their order and text, and a misplaced marker is an error rather
// than a block silently left out.
func TestRunnableBlocks(t *testing.T) {
	text := "# G\n\n```sh\nnot me\n```\n\n```sh runnable\necho one\necho two\n```\n\n```go runnable\npackage main\n```\n\n```sh runnable\n```\n"
	blocks, err := runnableBlocks(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 || blocks[0].text != "echo one\necho two\n" || blocks[0].line != 7 || blocks[1].lang != "go" || blocks[2].text != "" {
		t.Fatalf("%+v", blocks)
	}
	for _, bad := range []string{"```runnable sh\nx\n```\n", "```python runnable\nx\n```\n", "```sh runnable\nx\n"} {
		if _, err := runnableBlocks(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	for text, ok := range map[string]bool{
		"cmp a b && echo same\n":                   true,
		"cmp a b && echo same\necho next\n":        false,
		"test -f x || exit 1\necho next\n":         false,
		"echo a   # a && b in a comment\necho b\n": true,
		"echo a\n\n# done && gone\n":               true,
	} {
		if err := checkErrexit(guideBlock{lang: "sh", text: text}); (err == nil) != ok {
			t.Errorf("%q: %v", text, err)
		}
	}
}
