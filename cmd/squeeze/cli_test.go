package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// everyCommand lists every command and subcommand line of squeeze.
var everyCommand = [][]string{
	{"encode"}, {"decode"}, {"inspect"}, {"demo"}, {"proxy"}, {"compact"}, {"advise"}, {"abuse"},
	{"archive", "put"}, {"archive", "get"}, {"archive", "list"}, {"archive", "extract"},
	{"counters", "get"}, {"counters", "incr"}, {"counters", "migrate"},
	{"bench", "codecs"}, {"bench", "redis"}, {"bench", "docs"}, {"bench", "counters"}, {"bench", "compact"}, {"bench", "archive"},
}

// TestCLI_HelpOnStdout: --help of every command teaches (usage, examples,
// flags) on stdout, writes nothing on stderr and exits 0.
func TestCLI_HelpOnStdout(t *testing.T) {
	for _, cmd := range everyCommand {
		for _, h := range []string{"--help", "-h"} {
			t.Run(strings.Join(cmd, "_")+h, func(t *testing.T) {
				stdout, stderr, code := runCLI(t, nil, append(append([]string(nil), cmd...), h)...)
				if code != 0 || stderr != "" {
					t.Fatalf("exit %d, stderr %q", code, stderr)
				}
				for _, want := range []string{"Usage:", "Example", "Flags:\n"} {
					if !strings.Contains(stdout, want) {
						t.Errorf("help lacks %q:\n%s", want, stdout)
					}
				}
			})
		}
	}
}

// TestCLI_BadFlagOneLine: an unknown flag gives exactly one line on stderr,
// naming the flag and where help is, nothing on stdout, and exit status 2.
func TestCLI_BadFlagOneLine(t *testing.T) {
	for _, cmd := range everyCommand {
		t.Run(strings.Join(cmd, "_"), func(t *testing.T) {
			stdout, stderr, code := runCLI(t, nil, append(append([]string(nil), cmd...), "--no-such-flag")...)
			if code != 2 || stdout != "" {
				t.Fatalf("exit %d, stdout %q", code, stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "-no-such-flag") || !strings.Contains(stderr, "--help") {
				t.Fatalf("want one line naming the flag and --help, got %q", stderr)
			}
		})
	}
}

// TestCLI_HelpCommand: "squeeze help CMD [SUB]" shows the help of that
// command or subcommand; an unknown name is an error (it used to print the
// general help and exit 0).
func TestCLI_HelpCommand(t *testing.T) {
	for _, cmd := range everyCommand {
		want, _, _ := runCLI(t, nil, append(append([]string(nil), cmd...), "--help")...)
		got, stderr, code := runCLI(t, nil, append([]string{"help"}, cmd...)...)
		if code != 0 || stderr != "" || got != want {
			t.Errorf("help %v: exit %d, stderr %q, same text as --help: %v", cmd, code, stderr, got == want)
		}
	}
	stdout, stderr, code := runCLI(t, nil, "help", "nosuch")
	if code != 2 || stdout != "" || !strings.Contains(stderr, `unknown command "nosuch"`) {
		t.Errorf("help nosuch: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestCLI_GroupWithoutSubcommand: "squeeze bench" and "squeeze counters"
// alone are errors (exit 2) whose usage goes to stderr with the error, not
// to stdout where a script would take it for output; with --help the same
// text goes to stdout and the exit status is 0.
func TestCLI_GroupWithoutSubcommand(t *testing.T) {
	for _, group := range []string{"bench", "counters"} {
		stdout, stderr, code := runCLI(t, nil, group)
		if code != 2 || stdout != "" || !strings.Contains(stderr, "Usage:") || !strings.Contains(stderr, "Examples:") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", group, code, stdout, stderr)
		}
		if lines := strings.Split(strings.TrimSpace(stderr), "\n"); !strings.HasPrefix(lines[len(lines)-1], "squeeze: ") {
			t.Errorf("%s: the error is not the last line: %q", group, stderr)
		}
		stdout, stderr, code = runCLI(t, nil, group, "--help")
		if code != 0 || stderr != "" || !strings.Contains(stdout, "Examples:") {
			t.Errorf("%s --help: exit %d, stdout %q, stderr %q", group, code, stdout, stderr)
		}
	}
}

// TestCLI_Interrupted: a command stopped by Ctrl-C (its context canceled)
// says "interrupted" and exits 130, as shells expect, instead of a bare
// "GET: context canceled" with status 1.
func TestCLI_Interrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	code := run(ctx, env{Stdin: bytes.NewReader(nil), Stdout: &out, Stderr: &errb},
		[]string{"bench", "codecs", "--codecs", "zstd:1", "--time", "1ms"})
	if code != 130 || errb.String() != "corpus built-in: 20 values, 1.4 MB\nsqueeze: interrupted\n" {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
