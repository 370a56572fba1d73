package main

import (
	"bufio"
	"io"
	"regexp"
	"strings"
	"testing"
)

// exampleLine matches a command line of the help: squeeze proxy, after
// VAR=value words.
var exampleLine = regexp.MustCompile(`^([A-Z_]+=\S*\s+)*squeeze proxy\b`)

// TestProxyHelp_ExamplesStart: every squeeze proxy command line in
// "squeeze proxy --help" passes the checks a start makes before it touches
// the network: its flags parse (with the VAR=value words before it as its
// environment), and a --listen address other hosts reach comes with
// --client-auth require or --allow-remote-clients. Two examples used to
// exit 2 ("reachable from other hosts").
func TestProxyHelp_ExamplesStart(t *testing.T) {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(proxyUsage))
	var pending string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasSuffix(line, "\\") {
			pending += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		line, pending = pending+line, ""
		if !exampleLine.MatchString(line) {
			continue
		}
		words, err := shellWords(line)
		if err != nil {
			t.Fatal(err)
		}
		for _, seg := range splitCommands(words) {
			envs := map[string]string{}
			for len(seg) > 0 && envAssign.MatchString(seg[0]) {
				k, v, _ := strings.Cut(seg[0], "=")
				envs[k], seg = v, seg[1:]
			}
			if len(seg) < 2 || seg[0] != "squeeze" || seg[1] != "proxy" {
				continue
			}
			n++
			args := append([]string(nil), seg[2:]...)
			for i := range args { // the check is about flags, not the reader's files
				if args[i] == "--config" && i+1 < len(args) {
					args[i+1] = emptyFile(t)
				}
			}
			fs, p, _ := newProxyFlags(env{Stdout: io.Discard, Stderr: io.Discard})
			if err := applySettings(fs, args, func(k string) string { return envs[k] }); err != nil {
				t.Errorf("%s: %v", line, err)
				continue
			}
			if err := parseFlags(fs, args); err != nil {
				t.Errorf("%s: %v", line, err)
				continue
			}
			if w := p.remoteClientsWarning(); w != "" && !p.check && !p.allowRemote {
				t.Errorf("%s: the proxy refuses to start so: %s", line, w)
			}
		}
	}
	if n < 10 {
		t.Fatalf("found %d squeeze proxy examples in the help, want 10 or more", n)
	}
}
