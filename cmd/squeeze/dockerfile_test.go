package main

import (
	"bufio"
	"debug/elf"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// No container engine runs where the tests run, so these tests check what
// can be checked without one: the Dockerfile's shape, its build command run
// on the files .dockerignore lets into the build context, and that
// deploy/ runs the image it builds as the user it sets.

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	Cmd  string // upper case: FROM, RUN...
	Args string
}

func readDockerfile(t *testing.T) []instruction {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []instruction
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" && cur.Len() == 0 {
			continue
		}
		cont := strings.HasSuffix(line, `\`)
		cur.WriteString(strings.TrimSuffix(line, `\`))
		if cont {
			cur.WriteString(" ")
			continue
		}
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDockerfile_Shape: a golang builder of go.mod's Go version, a final
// stage on a static base with CA certificates, squeeze as the entry point,
// a numeric non-root user, and the proxy's and metrics' ports exposed.
func TestDockerfile_Shape(t *testing.T) {
	ins := readDockerfile(t)
	var froms []string
	args := map[string]string{} // ARG defaults
	var user, entrypoint, cmd, copied string
	var exposed []string
	for _, in := range ins {
		switch in.Cmd {
		case "FROM":
			froms = append(froms, in.Args)
		case "ARG":
			if k, v, ok := strings.Cut(in.Args, "="); ok {
				args[k] = strings.Trim(v, `"`)
			}
		case "USER":
			user = in.Args
		case "ENTRYPOINT":
			entrypoint = in.Args
		case "CMD":
			cmd = in.Args
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in.Args)...)
		case "COPY":
			if strings.HasPrefix(in.Args, "--from=") {
				copied = in.Args
			}
		}
	}

	gomod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	if args["GO_VERSION"] != string(m[1]) {
		t.Errorf("Dockerfile ARG GO_VERSION=%s, go.mod says go %s", args["GO_VERSION"], m[1])
	}
	if len(froms) != 2 || !strings.Contains(froms[0], "golang:${GO_VERSION}") || !strings.HasSuffix(froms[0], " AS build") {
		t.Fatalf("FROM %q: want a golang:${GO_VERSION} builder named build, then the final stage", froms)
	}
	if base := froms[1]; !strings.HasPrefix(base, "gcr.io/distroless/static") && base != "scratch" {
		t.Errorf("final stage FROM %s: want distroless static (CA certificates, no shell)", base)
	}
	uid, gid, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %q: want a numeric non-root user (runAsNonRoot checks numbers)", user)
	} else if _, err := strconv.Atoi(gid); gid != "" && err != nil {
		t.Errorf("USER %q: want a numeric group", user)
	}
	bin := ""
	if f := strings.Fields(copied); len(f) == 3 {
		bin = f[2]
	}
	if entrypoint != `["`+bin+`"]` || filepath.Base(bin) != "squeeze" {
		t.Errorf("ENTRYPOINT %s, COPY --from %q: want the exec form of the squeeze binary copied from the builder", entrypoint, copied)
	}
	if !strings.HasPrefix(cmd, `["proxy"`) {
		t.Errorf("CMD %s: want a proxy command", cmd)
	}
	fs, p, _ := newProxyFlags(env{Stdout: io.Discard, Stderr: io.Discard})
	if err := parseFlags(fs, nil); err != nil {
		t.Fatal(err)
	}
	_, listenPort, _ := strings.Cut(p.listen, ":")
	for _, want := range []string{listenPort, "9121"} {
		found := false
		for _, e := range exposed {
			found = found || e == want || e == want+"/tcp"
		}
		if !found {
			t.Errorf("EXPOSE %v lacks %s", exposed, want)
		}
	}
}

// dockerignored reports whether .dockerignore's patterns leave path (slash
// separated, relative to the context) out of the build context: as Docker
// does, "**" matches any number of directories, "*" and "?" stay within
// one, and a path is out when it or a directory above it matches.
func dockerignored(patterns []*regexp.Regexp, path string) bool {
	for p := path; p != "."; p = filepath.Dir(p) {
		for _, re := range patterns {
			if re.MatchString(p) {
				return true
			}
		}
	}
	return false
}

func dockerignorePatterns(t *testing.T) []*regexp.Regexp {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*regexp.Regexp
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			t.Fatalf(".dockerignore: %q: exceptions are not understood by this test; teach dockerignored", line)
		}
		line = strings.Trim(filepath.ToSlash(filepath.Clean(line)), "/")
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(line); i++ {
			switch c := line[i]; {
			case strings.HasPrefix(line[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(line[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		re.WriteString("$")
		out = append(out, regexp.MustCompile(re.String()))
	}
	return out
}

func TestDockerignore_Matcher(t *testing.T) {
	pats := []*regexp.Regexp{}
	for _, p := range []string{`^\.git$`, `^(.*/)?node_modules$`, `^[^/]*\.md$`} {
		pats = append(pats, regexp.MustCompile(p))
	}
	for path, want := range map[string]bool{
		".git/HEAD": true, ".gitignore": false, "scripts/bullmq/node_modules/x/y.js": true,
		"README.md": true, "docs/guide/x.md": false, "cmd/squeeze/main.go": false,
	} {
		if got := dockerignored(pats, path); got != want {
			t.Errorf("dockerignored(%s) = %v, want %v", path, got, want)
		}
	}
}

// TestDockerfile_Build runs the builder stage's commands, as the Dockerfile
// has them, on a copy of what .dockerignore lets into the build context:
// the build needs nothing left out, and gives a static binary whose
// version line names VERSION and COMMIT.
func TestDockerfile_Build(t *testing.T) {
	if testing.Short() {
		t.Skip("builds squeeze once more")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to run the Dockerfile's RUN lines")
	}
	var runs []string
	for _, in := range readDockerfile(t) {
		if in.Cmd == "FROM" && len(runs) > 0 {
			break // the final stage runs nothing
		}
		if in.Cmd == "RUN" {
			runs = append(runs, in.Args)
		}
	}
	if len(runs) == 0 || !strings.Contains(runs[len(runs)-1], "-o /out/squeeze") || !strings.Contains(runs[len(runs)-1], "CGO_ENABLED=0") {
		t.Fatalf("builder RUN lines %q: want the last to be a CGO_ENABLED=0 build -o /out/squeeze", runs)
	}

	pats := dockerignorePatterns(t)
	ctxDir := t.TempDir()
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		if rel == "." {
			return nil
		}
		if dockerignored(pats, filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(ctxDir, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(ctxDir, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{".git", "dist", "docs", "README.md"} {
		if _, err := os.Stat(filepath.Join(ctxDir, gone)); err == nil {
			t.Errorf("%s is in the build context", gone)
		}
	}

	out := t.TempDir()
	const version, commit = "v0.0.0-docker.1", "0123456789abcdef0123456789abcdef01234567"
	for _, run := range runs {
		sh := exec.Command("sh", "-c", strings.ReplaceAll(run, "/out/", out+"/"))
		sh.Dir = ctxDir
		// ARG values reach RUN as environment variables; TARGETOS and
		// TARGETARCH are empty outside buildx: this machine's platform.
		sh.Env = append(os.Environ(), "VERSION="+version, "COMMIT="+commit, "TARGETOS=", "TARGETARCH=")
		if b, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("RUN %s: %v\n%s", run, err, b)
		}
	}
	bin := filepath.Join(out, "squeeze")
	b, err := exec.Command(bin, "version").CombinedOutput()
	if want := "squeeze " + version + " (commit " + commit[:12] + ")"; err != nil || !strings.HasPrefix(string(b), want) {
		t.Errorf("squeeze version: %v, printed %q, want %q", err, b, want)
	}
	if f, err := elf.Open(bin); err == nil { // Linux
		defer f.Close()
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("the image's binary has a dynamic loader: the distroless static base has no libc")
			}
		}
	}
}

// TestDeploy_KubernetesImage: the sidecar runs the image the Dockerfile
// builds, tagged with this release (README's Install section builds it so),
// as the Dockerfile's user, which runAsNonRoot accepts.
func TestDeploy_KubernetesImage(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(deployDir, "kubernetes-sidecar.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name            string
						Image           string
						SecurityContext struct {
							RunAsNonRoot bool `yaml:"runAsNonRoot"`
							RunAsUser    int  `yaml:"runAsUser"`
						} `yaml:"securityContext"`
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(text, &d); err != nil {
		t.Fatal(err)
	}
	var user string
	for _, in := range readDockerfile(t) {
		if in.Cmd == "USER" {
			user, _, _ = strings.Cut(in.Args, ":")
		}
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "squeeze" {
			continue
		}
		found = true
		if want := "squeeze:" + Version; c.Image != want {
			t.Errorf("the squeeze container runs image %q, want %q (the Dockerfile's, tagged with this release)", c.Image, want)
		}
		if !strings.Contains(string(readme), "docker build -t "+c.Image+" ") {
			t.Errorf("README.md does not build image %s", c.Image)
		}
		if sc := c.SecurityContext; !sc.RunAsNonRoot || strconv.Itoa(sc.RunAsUser) != user {
			t.Errorf("securityContext runAsNonRoot %v runAsUser %d; the Dockerfile's USER is %s", sc.RunAsNonRoot, sc.RunAsUser, user)
		}
	}
	if !found {
		t.Fatal("no squeeze container")
	}
}
