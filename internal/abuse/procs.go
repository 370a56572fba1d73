package abuse

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// process is a server the suite started: redis-server or the proxy.
type process struct {
	name string // for messages: "redis-server", "proxy"
	addr string // host:port it listens on
	cmd  *exec.Cmd
	log  *bytes.Buffer // its standard error, for a failure message
	done chan struct{} // closed once the process has exited
}

// start runs bin with args and waits until addr accepts connections.
func start(ctx context.Context, name, addr, bin string, args ...string) (*process, error) {
	cmd := exec.Command(bin, args...)
	p := &process{name: name, addr: addr, cmd: cmd, log: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.log
	cmd.Stdout = p.log
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			nc.Close()
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited at start: %s", name, strings.TrimSpace(p.log.String()))
		case <-ctx.Done():
			p.kill()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.kill()
			return nil, fmt.Errorf("%s did not accept connections on %s within 10s", name, addr)
		}
	}
}

// kill ends the process with SIGKILL (after a SIGCONT, should it be
// stopped) and waits for it.
func (p *process) kill() {
	if contSignal != nil {
		p.cmd.Process.Signal(contSignal)
	}
	p.cmd.Process.Kill()
	<-p.done
}

// errNoPause says that this system cannot pause a process (Windows).
var errNoPause = errors.New("abuse: pausing a process needs SIGSTOP and SIGCONT, which this system lacks")

// signal sends sig to the process; a nil sig is a signal this system lacks.
func (p *process) signal(sig os.Signal) error {
	if sig == nil {
		return errNoPause
	}
	return p.cmd.Process.Signal(sig)
}

// memory reads the process's resident set now (VmRSS) and its peak
// (VmHWM) from /proc.
func (p *process) memory() (rss, peak int64, err error) {
	return readMemory(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
}

// readMemory parses VmRSS and VmHWM out of a /proc/PID/status file.
func readMemory(path string) (rss, peak int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	rss, peak = -1, -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		n, err := parseKB(v)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %s: %w", path, name, err)
		}
		if name == "VmRSS" {
			rss = n
		} else {
			peak = n
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if rss < 0 || peak < 0 {
		return 0, 0, fmt.Errorf("%s: no VmRSS or VmHWM line", path)
	}
	return rss, peak, nil
}

// parseKB parses a /proc/PID/status quantity such as "  123456 kB" into bytes.
func parseKB(s string) (int64, error) {
	f := strings.Fields(s)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("want \"N kB\", got %q", strings.TrimSpace(s))
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want \"N kB\", got %q", strings.TrimSpace(s))
	}
	return n << 10, nil
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// redisArgs are redis-server's arguments for a server on addr with its
// files in dir; durable turns on the append-only file with an fsync per
// write, so that every acknowledged write survives kill -9.
func redisArgs(addr, dir string, durable bool) []string {
	_, port, _ := net.SplitHostPort(addr)
	args := []string{"--port", port, "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--loglevel", "warning",
		"--logfile", filepath.Join(dir, "redis.log")}
	if durable {
		return append(args, "--appendonly", "yes", "--appendfsync", "always")
	}
	return append(args, "--appendonly", "no")
}

// environment holds what the parts of the suite start: where redis-server
// and the squeeze binary are, the proxy flags to pass, and a directory
// for the servers' files.
type environment struct {
	cfg Config
	dir string
}

// startRedis starts a redis-server in its own directory under the
// suite's.
func (e *environment) startRedis(ctx context.Context, name string, durable bool) (*process, string, error) {
	dir := filepath.Join(e.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	p, err := start(ctx, "redis-server", addr, e.cfg.RedisServer, redisArgs(addr, dir, durable)...)
	return p, dir, err
}

// restartRedis starts redis-server again on the address and in the
// directory of one that was killed.
func (e *environment) restartRedis(ctx context.Context, old *process, dir string, durable bool) (*process, error) {
	return start(ctx, "redis-server", old.addr, e.cfg.RedisServer, redisArgs(old.addr, dir, durable)...)
}

// startProxy starts "squeeze proxy" in front of upstream, with a metrics
// address and the suite's own flags first, the configured proxy flags
// after them (so that they win).
func (e *environment) startProxy(ctx context.Context, upstream string, extra ...string) (*process, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	metrics, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	args := []string{"proxy", "--listen", addr, "--upstream", "redis://" + upstream, "--metrics", metrics, "--log-level", "error"}
	args = append(append(args, extra...), e.cfg.ProxyFlags...)
	p, err := start(ctx, "proxy", addr, e.cfg.Squeeze, args...)
	return p, metrics, err
}

// alive returns an error with the process's output when it has exited.
func (p *process) alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %s", p.name, strings.TrimSpace(p.log.String()))
	default:
		return nil
	}
}

// startPair starts a throwaway Redis named name and a proxy in front of
// it, for a part that needs nothing else of them; stop kills both.
func (e *environment) startPair(ctx context.Context, name string) (redis, proxy *process, stop func(), err error) {
	redis, _, err = e.startRedis(ctx, name, false)
	if err != nil {
		return nil, nil, nil, err
	}
	proxy, _, err = e.startProxy(ctx, redis.addr)
	if err != nil {
		redis.kill()
		return nil, nil, nil, err
	}
	return redis, proxy, func() { proxy.kill(); redis.kill() }, nil
}
