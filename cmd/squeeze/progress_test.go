package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// asTerminal makes stderr (and every other stream) count as a terminal
// until the test ends: what a person at a terminal would see.
func asTerminal(t *testing.T) {
	t.Helper()
	old := isTerminal
	isTerminal = func(any) bool { return true }
	t.Cleanup(func() { isTerminal = old })
}

// TestProgress_Helper: nothing on a stream that is not a terminal or when
// quiet; on a terminal, one line per phase redrawn in place (the time
// spent moving while a step takes long), a spinner for a phase of unknown
// length, and the line cleared at the end.
func TestProgress_Helper(t *testing.T) {
	var w syncBuffer
	e := env{Stderr: &w}
	p := newProgress(e, false) // a buffer: not a terminal
	p.update("reading", 1, 10)
	p.finish()
	asTerminal(t)
	q := newProgress(e, true) // --json
	q.update("reading", 1, 10)
	q.step(2, 0)
	q.finish()
	if w.String() != "" {
		t.Fatalf("drawn in a pipe or quiet: %q", w.String())
	}

	// Each state lasts a while: updates closer together than the redraws
	// are drawn by the next one.
	p = newProgress(e, false)
	p.update("reading values", 0, 10)
	p.update("reading values", 5, 10)
	time.Sleep(2 * progressTick)
	p.update("relabelled", 6, 10) // the same phase, another name
	time.Sleep(2 * progressTick)
	p.update("training", 0, 0)
	time.Sleep(3 * progressTick) // nothing reported: redrawn anyway
	p.finish()
	p.finish() // twice: harmless
	out := w.String()
	for _, want := range []string{"reading values", "(5/10)", "relabelled", "(6/10)", "training"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal does not show %q:\n%q", want, out)
		}
	}
	if n := strings.Count(out, "training"); n < 2 {
		t.Errorf("a phase of unknown length was drawn %d times in %v: it must be redrawn while it lasts", n, 3*progressTick)
	}
	if !strings.HasSuffix(out, "\r") || strings.Contains(out, "\n") {
		t.Errorf("the progress line is not cleared at the end, or it spans lines: %q", out)
	}
}

// digits hides what changes from run to run (times, rates), so that two
// runs' outputs compare.
var digits = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

// TestProgress_OutputUnchanged runs advise, compact and dict train three
// ways: in a pipe (as CI and scripts run them), at a terminal, and at a
// terminal with --json. The progress goes to the terminal's stderr only:
// stdout is the same in all runs without --json (times and rates aside),
// stderr in a pipe has none of it, and with --json stderr stays empty and
// stdout is one JSON document.
func TestProgress_OutputUnchanged(t *testing.T) {
	r := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	fillDocs(t, rdb, "user:", 300, 1500)
	fillDocs(t, rdb, "cart:", 100, 800)
	ctx := context.Background()

	for _, c := range []struct {
		args  []string
		phase string // a phase the terminal shows
	}{
		{[]string{"advise", "--redis", r.URL(), "--codecs", "s2"}, "measuring codecs on"}, // one codec: the same advice whatever the timings
		{[]string{"compact", "--redis", r.URL(), "--min-idle", "0", "--include-raw", "--dry-run"}, "dry run: scanning keys"},
		{[]string{"dict", "train", "--redis", r.URL(), "--pattern", "user:*", "--size", "4KiB"}, "training the dictionary"},
	} {
		name := strings.Join(c.args[:1], " ")
		runAs := func(terminal bool, extra ...string) (stdout, stderr string) {
			t.Helper()
			old := isTerminal
			if terminal {
				isTerminal = func(any) bool { return true }
			}
			defer func() { isTerminal = old }()
			var out, errb syncBuffer
			args := append(append([]string{}, c.args...), extra...)
			if code := run(ctx, env{Stdout: &out, Stderr: &errb}, args); code != 0 {
				t.Fatalf("squeeze %s: exit %d\n%s", strings.Join(args, " "), code, errb.String())
			}
			return out.String(), errb.String()
		}

		pipeOut, pipeErr := runAs(false)
		termOut, termErr := runAs(true)
		if strings.Contains(pipeErr, c.phase) || strings.ContainsAny(pipeErr, "\r\x1b") {
			t.Errorf("%s in a pipe: progress on stderr:\n%q", name, pipeErr)
		}
		if !strings.Contains(termErr, c.phase) {
			t.Errorf("%s at a terminal: stderr does not show %q:\n%q", name, c.phase, termErr)
		}
		if strings.ContainsAny(termOut, "\r\x1b") || strings.Contains(termOut, c.phase) {
			t.Errorf("%s at a terminal: progress on stdout:\n%q", name, termOut)
		}
		if got, want := digits.ReplaceAllString(termOut, "N"), digits.ReplaceAllString(pipeOut, "N"); got != want {
			t.Errorf("%s: stdout at a terminal differs from stdout in a pipe:\n%s\n---\n%s", name, termOut, pipeOut)
		}

		jsonOut, jsonErr := runAs(true, "--json")
		if jsonErr != "" {
			t.Errorf("%s --json at a terminal: stderr %q, want nothing", name, jsonErr)
		}
		var v any
		if err := json.Unmarshal([]byte(jsonOut), &v); err != nil {
			t.Errorf("%s --json at a terminal: stdout is not one JSON document (%v):\n%q", name, err, jsonOut)
		}
		pipeJSON, _ := runAs(false, "--json")
		if got, want := digits.ReplaceAllString(jsonOut, "N"), digits.ReplaceAllString(pipeJSON, "N"); got != want {
			t.Errorf("%s --json: stdout at a terminal differs from stdout in a pipe:\n%s\n---\n%s", name, jsonOut, pipeJSON)
		}
	}
}
