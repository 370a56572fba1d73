package main

import (
	"strings"
	"testing"
)

// TestAbuse_Hidden: the maintainers' suite is not in "squeeze help", but
// "squeeze abuse --help" explains it.
func TestAbuse_Hidden(t *testing.T) {
	help, _, _ := runCLI(t, nil, "help")
	if strings.Contains(help, "abuse") {
		t.Errorf("squeeze help lists the abuse suite:\n%s", help)
	}
	usage, _, code := runCLI(t, nil, "abuse", "--help")
	if code != 0 || !strings.Contains(usage, "kill -9") {
		t.Errorf("abuse --help: exit %d\n%s", code, usage)
	}
}

// TestAbuse_BadFlags: bad use is a usage error (exit 2) that names the
// problem, before anything starts.
func TestAbuse_BadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--part", "faults,nope"}, `unknown part "nope"`},
		{[]string{"--duration", "-1s"}, "--duration must not be negative"},
		{[]string{"--rss-limit", "lots"}, "rss-limit"},
		{[]string{"extra"}, "abuse takes no arguments"},
		{[]string{"--flood-sets", "-1"}, "must not be negative"},
		{[]string{"--flood-hold", "-2s"}, "must not be negative"},
		{[]string{"--redis-server", "/nonexistent/redis-server"}, "not found"},
	} {
		_, stderr, code := runCLI(t, nil, append([]string{"abuse"}, tc.args...)...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("abuse %q: exit %d, stderr %q, want %q", tc.args, code, stderr, tc.want)
		}
	}
}
