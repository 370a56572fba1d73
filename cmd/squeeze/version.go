package main

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
)

// Version is the release this build is. A release build sets it:
//
//	go build -ldflags "-X main.Version=v0.1.0" ./cmd/squeeze
//
// Without that it names the latest release in CHANGELOG.md (a test keeps
// the two equal), and the commit that "squeeze version" prints says which
// build between releases this is.
var Version = "v0.1.0"

// Commit names the commit of a build whose toolchain recorded none (go
// build -buildvcs=false, or a git worktree, where Go does not look for
// the repository): go build -ldflags "-X main.Commit=$(git rev-parse HEAD)".
// A "+modified" suffix says the checkout had uncommitted changes
// (scripts/release.sh with ALLOW_DIRTY=1). The commit that Go records wins
// over it.
var Commit = ""

func init() {
	register(command{Name: "version", Summary: "print the version, the commit it was built from and the Go version (also: squeeze --version)", Run: runVersion})
}

const versionUsage = `
Usage: squeeze version

Prints the release (set at build time with -ldflags "-X main.Version=..."),
the commit the binary was built from, "modified" when the checkout had
uncommitted changes, and the Go version, e.g.:

  squeeze v0.1.0 (commit 6f2e696a1b2c, modified) go1.26.0

Go records the commit for binaries built by "go build" or "go install" in
a git checkout, not for "go run", a git worktree or -buildvcs=false; there
-ldflags "-X main.Commit=$(git rev-parse HEAD)" names it, or the line says
"commit unknown". The release binaries (scripts/release.sh) and the
container image name both.

Examples:
  squeeze version
  squeeze --version
`

func runVersion(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "version", versionUsage)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("version takes no arguments, got %q", fs.Args())
	}
	bi, ok := debug.ReadBuildInfo()
	fmt.Fprintln(e.Stdout, versionLine(Version, Commit, bi, ok))
	return nil
}

// versionLine formats what "squeeze version" prints from the release and
// commit variables and the build information the Go toolchain recorded (bi,
// when ok). A module version from "go install ...@vX.Y.Z" wins over an
// unset release variable; without either the release is "devel". A
// recorded vcs.revision wins over the commit variable.
func versionLine(release, commit string, bi *debug.BuildInfo, ok bool) string {
	if release == "" && ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		release = bi.Main.Version
	}
	if release == "" {
		release = "devel"
	}
	commit, modified := strings.CutSuffix(commit, "+modified")
	goVersion := ""
	if ok {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	var b strings.Builder
	b.WriteString("squeeze " + release + " (")
	if commit == "" {
		b.WriteString("commit unknown")
	} else {
		b.WriteString("commit " + commit[:min(12, len(commit))])
		if modified {
			b.WriteString(", modified")
		}
	}
	b.WriteString(")")
	if goVersion != "" {
		b.WriteString(" " + goVersion)
	}
	return b.String()
}
