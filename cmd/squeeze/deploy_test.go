package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// The files in deploy/ are what people copy into production; these tests
// run the proxy the way each of them says.

const deployDir = "../../deploy"

// runDeployed runs "squeeze" with args (the first being "proxy") until the
// test ends, and returns a client of the proxy at listen once it answers.
func runDeployed(t *testing.T, args []string, listen string) *redis.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr syncBuffer
	go func() { done <- run(ctx, env{Stdout: io.Discard, Stderr: &stderr}, args) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("squeeze %s exited with %d:\n%s", strings.Join(args, " "), code, stderr.String())
		}
	})
	rdb := redis.NewClient(&redis.Options{Addr: listen})
	t.Cleanup(func() { rdb.Close() })
	for i := 0; rdb.Ping(context.Background()).Err() != nil; i++ {
		if i > 250 {
			t.Fatalf("the proxy did not answer at %s:\n%s", listen, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return rdb
}

// roundTrip writes a JSON document through the proxy and checks that it
// reads back whole while Redis holds a frame of codec id.
func roundTrip(t *testing.T, rdb *redis.Client, r *testutil.Redis, key string, id codec.ID) {
	t.Helper()
	ctx := context.Background()
	doc := strings.Repeat(`{"user":"squeeze","tags":["deploy","redis"],"n":12345},`, 200)
	if err := rdb.Set(ctx, key, doc, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := rdb.Get(ctx, key).Result(); err != nil || got != doc {
		t.Fatalf("GET %s through the proxy: %d bytes, %v", key, len(got), err)
	}
	raw, err := testutil.Do(r.Addr, "GET", key)
	if err != nil {
		t.Fatal(err)
	}
	h, err := codec.ParseHeader([]byte(raw))
	if err != nil || h.ID != id {
		t.Fatalf("Redis holds %s as %.40q (%v), want a %s frame", key, raw, err, id)
	}
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDeploy_ConfigFile: deploy/proxy.conf parses, and a proxy started
// from it (with the test's addresses on the command line, which beat the
// file) compresses with its codec and serves metrics.
func TestDeploy_ConfigFile(t *testing.T) {
	conf := filepath.Join(deployDir, "proxy.conf")
	p := proxySettings(t, nil, []string{"--config", conf})
	if p.listen != "127.0.0.1:6380" || p.upstream != "redis://127.0.0.1:6379" || p.codecName != "s2" || p.metrics != "127.0.0.1:9121" {
		t.Fatalf("%s: listen %q, upstream %q, codec %q, metrics %q", conf, p.listen, p.upstream, p.codecName, p.metrics)
	}
	r := testutil.StartRedis(t)
	listen := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	metrics := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	rdb := runDeployed(t, []string{"proxy", "--config", conf, "--listen", listen, "--upstream", r.URL(), "--metrics", metrics}, listen)
	roundTrip(t, rdb, r, "conf:doc", codec.IDS2)
	if code := httpStatus(t, "http://"+metrics+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz: %d", code)
	}
}

// TestDeploy_Systemd: the unit's ExecStart is a proxy command that runs
// with the config file, ExecReload sends the SIGHUP that reloads it, and
// systemd-analyze (where installed) finds nothing wrong with the unit.
func TestDeploy_Systemd(t *testing.T) {
	unit := filepath.Join(deployDir, "squeeze-proxy.service")
	f, err := os.Open(unit)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string]string{} // the last line of each key
	var reloads []string        // every ExecReload line, in order
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			keys[k] = v
			if k == "ExecReload" {
				reloads = append(reloads, v)
			}
		}
	}
	start := strings.Fields(keys["ExecStart"])
	if len(start) < 2 || filepath.Base(start[0]) != "squeeze" || start[1] != "proxy" {
		t.Fatalf("ExecStart=%s: want squeeze proxy ...", keys["ExecStart"])
	}
	if keys["ExecReload"] != "/bin/kill -HUP $MAINPID" || keys["KillSignal"] != "SIGTERM" {
		t.Fatalf("ExecReload=%s KillSignal=%s: the proxy reloads on SIGHUP and drains on SIGTERM", keys["ExecReload"], keys["KillSignal"])
	}
	localArgs := func(cmd []string) []string {
		args := append([]string(nil), cmd[1:]...)
		for i, a := range args {
			if a == "/etc/squeeze/proxy.conf" {
				args[i] = filepath.Join(deployDir, "proxy.conf") // what the unit's comment installs there
			}
		}
		return args
	}
	args := localArgs(start)
	r := testutil.StartRedis(t)
	listen := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	t.Setenv("SQUEEZE_UPSTREAM", r.URL()) // as from /etc/squeeze/proxy.env
	args = append(args, "--listen", listen, "--metrics", "")
	rdb := runDeployed(t, args, listen)
	roundTrip(t, rdb, r, "systemd:doc", codec.IDS2)
	// The reload's first step, squeeze proxy --check, passes on the
	// installed config beside the running proxy.
	if len(reloads) != 2 {
		t.Fatalf("ExecReload lines %q: want the check, then the SIGHUP", reloads)
	}
	check := strings.Fields(reloads[0])
	if filepath.Base(check[0]) != "squeeze" || !slices.Contains(check, "--check") {
		t.Fatalf("ExecReload=%s: want squeeze proxy ... --check first", reloads[0])
	}
	out, stderr, code := runCLI(t, nil, localArgs(check)...)
	if code != 0 || !strings.HasPrefix(out, "squeeze proxy --check: ok") {
		t.Fatalf("%s: exit %d\n%s%s", reloads[0], code, out, stderr)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: the unit file's syntax is not checked")
		return
	}
	// verify wants the binary to exist: point the unit at this test binary.
	text, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "squeeze-proxy.service")
	os.WriteFile(copyPath, []byte(strings.ReplaceAll(string(text), start[0], self)), 0o644)
	if out, err := exec.Command(analyze, "verify", copyPath).CombinedOutput(); err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestDeploy_KubernetesSidecar: the sidecar container's args and
// environment start a proxy where the application's REDIS_URL points,
// with metrics on the port the probes name, and /readyz and /healthz
// answer there.
func TestDeploy_KubernetesSidecar(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(deployDir, "kubernetes-sidecar.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type envVar struct {
		Name      string
		Value     string
		ValueFrom any `yaml:"valueFrom"`
	}
	type probe struct {
		HTTPGet struct {
			Path string
			Port string
		} `yaml:"httpGet"`
	}
	type container struct {
		Name  string
		Args  []string
		Env   []envVar
		Ports []struct {
			Name          string
			ContainerPort int `yaml:"containerPort"`
		}
		ReadinessProbe probe `yaml:"readinessProbe"`
		LivenessProbe  probe `yaml:"livenessProbe"`
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec struct{ Containers []container }
			}
		}
	}
	if err := yaml.Unmarshal(text, &d); err != nil {
		t.Fatal(err)
	}
	var app, sidecar *container
	for i, c := range d.Spec.Template.Spec.Containers {
		switch c.Name {
		case "app":
			app = &d.Spec.Template.Spec.Containers[i]
		case "squeeze":
			sidecar = &d.Spec.Template.Spec.Containers[i]
		}
	}
	if app == nil || sidecar == nil || len(sidecar.Args) == 0 || sidecar.Args[0] != "proxy" {
		t.Fatalf("want containers app and squeeze (args proxy ...), got %+v", d.Spec.Template.Spec.Containers)
	}

	// The flags the sidecar runs with, at this test's free ports.
	fs, p, _ := newProxyFlags(env{Stdout: io.Discard, Stderr: io.Discard})
	if err := parseFlags(fs, sidecar.Args[1:]); err != nil {
		t.Fatal(err)
	}
	var appURL string
	for _, e := range app.Env {
		if e.Name == "REDIS_URL" {
			appURL = e.Value
		}
	}
	if appURL != "redis://"+p.listen {
		t.Fatalf("the application connects to %q, the sidecar listens on %q", appURL, p.listen)
	}
	_, metricsPort, _ := strings.Cut(p.metrics, ":")
	for _, pr := range []probe{sidecar.ReadinessProbe, sidecar.LivenessProbe} {
		found := false
		for _, port := range sidecar.Ports {
			found = found || port.Name == pr.HTTPGet.Port && strconv.Itoa(port.ContainerPort) == metricsPort
		}
		if !found {
			t.Fatalf("probe %s on port %q: not the --metrics port %s", pr.HTTPGet.Path, pr.HTTPGet.Port, metricsPort)
		}
	}
	r := testutil.StartRedis(t)
	listen := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	metrics := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	args := append([]string{}, sidecar.Args...)
	for i, a := range args {
		switch a {
		case p.listen:
			args[i] = listen
		case p.metrics:
			args[i] = metrics
		}
	}
	for _, e := range sidecar.Env {
		v := e.Value
		if e.ValueFrom != nil { // the secret
			v = r.URL()
		}
		t.Setenv(e.Name, v)
	}
	rdb := runDeployed(t, args, listen)
	roundTrip(t, rdb, r, "session:1", codec.IDZstd) // SQUEEZE_RULE's session: prefix
	roundTrip(t, rdb, r, "cart:1", codec.IDS2)
	for _, pr := range []probe{sidecar.ReadinessProbe, sidecar.LivenessProbe} {
		if code := httpStatus(t, "http://"+metrics+pr.HTTPGet.Path); code != http.StatusOK {
			t.Fatalf("%s: %d", pr.HTTPGet.Path, code)
		}
	}
}
