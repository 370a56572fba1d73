package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

func TestFlagsFirst(t *testing.T) {
	newFS := func() *flag.FlagSet {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.String("redis", "", "")
		fs.Bool("json", false, "")
		fs.Int("delta", 0, "")
		return fs
	}
	for _, c := range []struct {
		name     string
		args     []string
		wantArgs []string
		wantErr  string
	}{
		{"flags first", []string{"--redis", "u", "k", "p"}, []string{"k", "p"}, ""},
		{"flags last", []string{"k", "p", "--redis", "u"}, []string{"k", "p"}, ""},
		{"flags between", []string{"k", "--redis", "u", "p", "--json"}, []string{"k", "p"}, ""},
		{"flag=value", []string{"k", "--redis=u", "p"}, []string{"k", "p"}, ""},
		{"bool before an argument", []string{"--json", "k"}, []string{"k"}, ""},
		{"negative numbers are arguments", []string{"user42", "17", "-5", "--redis", "u"}, []string{"user42", "17", "-5"}, ""},
		{"a value that looks like a flag", []string{"k", "--delta", "-3"}, []string{"k"}, ""},
		{"after -- everything is an argument", []string{"k", "--", "--json", "-x"}, []string{"k", "--json", "-x"}, ""},
		{"a lone dash is an argument", []string{"-", "--json"}, []string{"-"}, ""},
		{"unknown flag after the arguments", []string{"k", "--jsn"}, nil, "flag provided but not defined: -jsn"},
		{"missing value", []string{"k", "--redis"}, nil, "flag needs an argument"},
		{"no arguments", []string{"--json"}, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := newFS()
			err := parseFlags(fs, c.args)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fs.Args(); !slices.Equal(got, c.wantArgs) && !(len(got) == 0 && len(c.wantArgs) == 0) {
				t.Fatalf("arguments %q, want %q", got, c.wantArgs)
			}
			if slices.Contains(c.args, "--redis") || slices.Contains(c.args, "--redis=u") {
				if v := fs.Lookup("redis").Value.String(); v != "u" {
					t.Fatalf("--redis = %q", v)
				}
			}
		})
	}
}

// TestFlagsAfterArguments: every command takes its flags after its
// arguments too, as users type them ("archive get KEY --redis URL PATH"
// used to fail with "takes 2 arguments, got 4").
func TestFlagsAfterArguments(t *testing.T) {
	r := testutil.StartRedis(t)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte(strings.Repeat("hello squeeze\n", 50)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"archive", "put", "arc:t", src, "--redis", r.URL(), "--codec", "zstd:3"}, "stored 1 files"},
		{[]string{"archive", "get", "arc:t", "--redis", r.URL(), "a.txt"}, "hello squeeze"},
		{[]string{"archive", "list", "arc:t", "--redis", r.Addr, "--json"}, `"path": "a.txt"`},
		{[]string{"archive", "extract", "arc:t", t.TempDir(), "--redis", r.URL()}, "extracted 1 files"},
		{[]string{"counters", "incr", "user42", "17", "-1", "--redis", r.URL(), "--overflow", "sat"}, "0\n"},
		{[]string{"inspect", "arc:t", "a.txt", "--redis", r.URL(), "--json"}, `"codec": "zstd"`},
		{[]string{"dict", "list", "--redis", r.URL()}, "no dictionaries"},
	} {
		out, errs, code := runCLI(t, nil, c.args...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("squeeze %s: exit %d, want %q in\n%s%s", strings.Join(c.args, " "), code, c.want, out, errs)
		}
	}
}
