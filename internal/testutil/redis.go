// Package testutil starts real redis-server processes for tests.
//
// Tests that need Redis call StartRedis; it launches Debian's redis-server on a
// free loopback port in a temporary directory and stops it when the test ends.
// When redis-server is not installed the test is skipped, except under CI
// (CI=true), where a missing server is a failure: .ci/run installs it.
package testutil

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Redis is a running redis-server owned by a test.
type Redis struct {
	Addr   string // host:port on loopback
	Socket string // unix socket path
	Dir    string // working directory
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited
}

// URL returns a redis:// URL for the server's TCP address.
func (r *Redis) URL() string { return "redis://" + r.Addr }

// ServerEnv names the environment variable that picks another server
// binary than redis-server, such as valkey-server (a name in PATH or a
// path): the tests, the demo and the benchmarks then run against it.
const ServerEnv = "SQUEEZE_REDIS_SERVER"

// ServerPath returns the redis-server binary (or the one ServerEnv names),
// or "" when none is installed.
func ServerPath() string {
	if name := os.Getenv(ServerEnv); name != "" {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		return ""
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/bin/redis-server", "/usr/local/bin/redis-server"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// StartRedis starts a throwaway redis-server with persistence off and returns
// it; extra args are appended to the command line (e.g. "--maxmemory", "1gb").
// The server is stopped in t.Cleanup.
func StartRedis(t testing.TB, args ...string) *Redis {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping redis integration test in -short mode")
	}
	bin := ServerPath()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not found (or the server %s names); .ci/run must install it (apt-get install -y redis-server)", ServerEnv)
		}
		t.Skip("redis-server not installed (apt-get install -y redis-server)")
	}
	dir := t.TempDir()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		r, err := startOnce(bin, dir, FreePort(t), args)
		if err == nil {
			t.Cleanup(func() {
				r.logIfExited(t)
				r.Stop()
			})
			return r
		}
		lastErr = err
	}
	t.Fatalf("start redis-server: %v", lastErr)
	return nil
}

// Start starts a throwaway redis-server outside of a test (for the CLI demo and
// benchmarks). The caller must call Stop.
func Start(dir string, args ...string) (*Redis, error) {
	bin := ServerPath()
	if bin == "" {
		return nil, fmt.Errorf("redis-server not found in PATH: install it (Debian: apt-get install -y redis-server) or pass --redis URL")
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		r, err := startOnce(bin, dir, port, args)
		if err == nil {
			return r, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startOnce(bin, dir string, port int, args []string) (*Redis, error) {
	sock := filepath.Join(dir, "redis-"+strconv.Itoa(port)+".sock")
	if len(sock) > 100 { // sun_path limit
		sock = ""
	}
	argv := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--protected-mode", "no",
		"--loglevel", "warning",
	}
	if sock != "" {
		argv = append(argv, "--unixsocket", sock, "--unixsocketperm", "700")
	}
	argv = append(argv, args...)
	cmd := exec.Command(bin, argv...)
	cmd.Dir = dir
	dieWithParent(cmd)
	logf, err := os.Create(filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	logf.Close()
	exited := make(chan struct{})
	r := &Redis{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Socket: sock, Dir: dir, cmd: cmd, exited: exited}
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log"))
			return nil, fmt.Errorf("redis-server exited at start: %s", strings.TrimSpace(string(log)))
		default:
		}
		if ping(r.Addr) == nil {
			return r, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	return nil, fmt.Errorf("redis-server on port %d did not answer PING within 10s", port)
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected PING reply %q", line)
	}
	return nil
}

// logIfExited logs the end of the server's log when the server exited
// before the test stopped it, so that a server that crashed (a bug report,
// an assertion) says why in the failures its clients then report.
func (r *Redis) logIfExited(t testing.TB) {
	if r.cmd == nil {
		return // stopped by the test itself
	}
	select {
	case <-r.exited:
	default:
		return
	}
	log, _ := os.ReadFile(filepath.Join(r.Dir, "redis-"+r.port()+".log"))
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	t.Logf("redis-server on %s exited during the test (%s); the end of its log:\n%s", r.Addr, r.cmd.ProcessState, strings.Join(lines, "\n"))
}

func (r *Redis) port() string {
	_, port, _ := net.SplitHostPort(r.Addr)
	return port
}

// Stop kills the server and waits for it to exit.
func (r *Redis) Stop() {
	if r == nil || r.cmd == nil || r.cmd.Process == nil {
		return
	}
	r.cmd.Process.Kill()
	select {
	case <-r.exited:
	case <-time.After(5 * time.Second):
	}
	r.cmd = nil
}
