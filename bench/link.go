package bench

import (
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

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// LinkOptions describe the constrained link of the docs study.
type LinkOptions struct {
	// Rate is the bandwidth in tc syntax ("1gbit", "100mbit"); default 1gbit.
	Rate string
	// RTT is the round-trip time added by netem (half on each side); default
	// 0.5ms.
	RTT time.Duration
	// RedisServer is the server binary; default redis-server from PATH (or
	// the one SQUEEZE_REDIS_SERVER names).
	RedisServer string
	// Burst is tbf's bucket in bytes, when tbf shapes the link (netem has
	// none); default DefaultBurst. It must hold a full-size Ethernet frame
	// (at least 2 KiB).
	Burst int
}

// DefaultBurst is the bucket of the tbf shaper: 64 KiB, the smallest that
// holds one GSO/TSO packet of the veth (up to 64 KiB), so tbf never splits
// packets in software, and the smallest that still reached the configured
// rate on the development machine: a 20 MB SET over "1gbit" ran at 942
// Mbit/s of payload with 64 KiB (the ceiling is about 956 with TCP/IP and
// Ethernet headers), 938 with 16 KiB and 798 with 4 KiB. A transfer of n
// bytes may cross the first Burst bytes at the veth's own speed, so it
// takes at least (n - Burst) * 8 / rate; with the earlier 512 KiB bucket a
// 1 MB document crossed a "1gbit" link at 1.8 Gbit/s.
const DefaultBurst = 64 << 10

// ShapedLink is a network namespace joined to the host by a veth pair whose
// both ends are shaped with tc, with a redis-server inside the namespace.
// Close removes all of it.
type ShapedLink struct {
	// Addr is the redis-server's host:port, reachable from the host.
	Addr string
	// Name describes the link for result rows, e.g. "1gbit 0.5ms RTT".
	Name string
	// Shaper is "netem" (rate and delay) or "tbf" (rate only, when the
	// kernel has no netem).
	Shaper string
	// Burst is the tbf bucket in bytes (0 with netem, which has none).
	Burst  int
	ns     string
	hostIf string
	dir    string
	srv    *exec.Cmd
}

// ErrNotRoot is returned by StartShapedLink when the process cannot create
// network namespaces.
var ErrNotRoot = errors.New("the shaped link needs root (network namespaces and tc); run as root or use loopback only")

// StartShapedLink sets up the link: "ip netns add", a veth pair with
// 10.231.N.1 on the host and 10.231.N.2 in the namespace, tc netem with the
// rate and half the RTT on both ends (or tbf with the rate alone and a
// Burst-byte bucket when netem is missing from the kernel), and redis-server listening inside the
// namespace. It needs root and the ip and tc commands (Debian: iproute2).
func StartShapedLink(ctx context.Context, o LinkOptions) (*ShapedLink, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if o.Rate == "" {
		o.Rate = "1gbit"
	}
	if o.RTT < 0 {
		return nil, fmt.Errorf("link RTT %v is negative", o.RTT)
	}
	if o.RTT == 0 {
		o.RTT = 500 * time.Microsecond
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	if o.Burst < 2048 {
		return nil, fmt.Errorf("link burst %d bytes cannot hold a full-size Ethernet frame; want at least 2048", o.Burst)
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("the shaped link needs %q (Debian: apt-get install -y iproute2): %w", tool, err)
		}
	}
	if o.RedisServer == "" {
		o.RedisServer = testutil.ServerPath() // redis-server, or what SQUEEZE_REDIS_SERVER names
		if o.RedisServer == "" {
			return nil, fmt.Errorf("redis-server not found (Debian: apt-get install -y redis-server), or %s names no installed server", testutil.ServerEnv)
		}
	}
	id := os.Getpid() % 50000
	n := id % 250
	l := &ShapedLink{
		ns:     fmt.Sprintf("squeeze-%d", id),
		hostIf: fmt.Sprintf("sqzh%d", id),
	}
	nsIf := fmt.Sprintf("sqzn%d", id)
	hostIP, nsIP := fmt.Sprintf("10.231.%d.1", n), fmt.Sprintf("10.231.%d.2", n)
	ok := false
	defer func() {
		if !ok {
			l.Close()
		}
	}()
	steps := [][]string{
		{"ip", "netns", "add", l.ns},
		{"ip", "link", "add", l.hostIf, "type", "veth", "peer", "name", nsIf},
		{"ip", "link", "set", nsIf, "netns", l.ns},
		{"ip", "addr", "add", hostIP + "/30", "dev", l.hostIf},
		{"ip", "link", "set", l.hostIf, "up"},
		{"ip", "netns", "exec", l.ns, "ip", "addr", "add", nsIP + "/30", "dev", nsIf},
		{"ip", "netns", "exec", l.ns, "ip", "link", "set", nsIf, "up"},
		{"ip", "netns", "exec", l.ns, "ip", "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := run(ctx, s...); err != nil {
			return nil, err
		}
	}
	half := strconv.FormatInt(int64(o.RTT/2/time.Microsecond), 10) + "us"
	netem := []string{"root", "netem", "delay", half, "rate", o.Rate, "limit", "100000"}
	err := run(ctx, append([]string{"tc", "qdisc", "add", "dev", l.hostIf}, netem...)...)
	switch {
	case err == nil:
		if err := run(ctx, append([]string{"ip", "netns", "exec", l.ns, "tc", "qdisc", "add", "dev", nsIf}, netem...)...); err != nil {
			return nil, err
		}
		l.Shaper = "netem"
		l.Name = fmt.Sprintf("%s %s RTT (netem)", o.Rate, o.RTT)
	case strings.Contains(err.Error(), "qdisc kind is unknown"):
		// Kernels without sch_netem (some VMs; there is no other qdisc
		// that delays packets without netem or fq) still have tbf: shape
		// the rate, and say that no delay is added. The bucket is kept
		// small (see DefaultBurst) so that the rate holds from the first
		// megabyte.
		tbf := []string{"root", "tbf", "rate", o.Rate, "burst", strconv.Itoa(o.Burst), "latency", "50ms"}
		if err := run(ctx, append([]string{"tc", "qdisc", "add", "dev", l.hostIf}, tbf...)...); err != nil {
			return nil, fmt.Errorf("neither netem nor tbf is available: %w", err)
		}
		if err := run(ctx, append([]string{"ip", "netns", "exec", l.ns, "tc", "qdisc", "add", "dev", nsIf}, tbf...)...); err != nil {
			return nil, err
		}
		l.Shaper, l.Burst = "tbf", o.Burst
		l.Name = fmt.Sprintf("%s (tbf, %s burst, no added delay: kernel lacks netem)", o.Rate, burstText(o.Burst))
	default:
		return nil, err
	}
	dir, err := os.MkdirTemp("", "squeeze-link-")
	if err != nil {
		return nil, err
	}
	l.dir = dir
	l.Addr = net.JoinHostPort(nsIP, "6379")
	l.srv = exec.Command("ip", "netns", "exec", l.ns, o.RedisServer,
		"--bind", nsIP, "--port", "6379", "--dir", dir, "--save", "", "--appendonly", "no",
		"--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning")
	logf, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		return nil, err
	}
	l.srv.Stdout, l.srv.Stderr = logf, logf
	dieWithParent(l.srv)
	err = l.srv.Start()
	logf.Close()
	if err != nil {
		return nil, fmt.Errorf("start redis-server in %s: %w", l.ns, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", l.Addr, 500*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			return nil, fmt.Errorf("redis-server in %s did not listen on %s within 10s: %s", l.ns, l.Addr, bytes.TrimSpace(log))
		}
		time.Sleep(50 * time.Millisecond)
	}
	ok = true
	return l, nil
}

// Close stops the server and deletes the namespace (which removes the veth
// pair and its qdiscs). It is safe to call more than once.
func (l *ShapedLink) Close() error {
	if l == nil {
		return nil
	}
	if l.srv != nil && l.srv.Process != nil {
		l.srv.Process.Kill()
		l.srv.Wait()
		l.srv = nil
	}
	var errs []error
	if l.ns != "" {
		// Deleting the namespace deletes the peer inside it and with it the
		// host end; delete the host end too in case the peer never moved.
		exec.Command("ip", "link", "del", l.hostIf).Run()
		if err := exec.Command("ip", "netns", "del", l.ns).Run(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns del %s: %w", l.ns, err))
		}
		l.ns = ""
	}
	if l.dir != "" {
		os.RemoveAll(l.dir)
		l.dir = ""
	}
	return errors.Join(errs...)
}

// burstText is a tbf bucket as people write it: "64 KiB" or "3000 B".
func burstText(n int) string {
	if n%1024 == 0 {
		return strconv.Itoa(n/1024) + " KiB"
	}
	return strconv.Itoa(n) + " B"
}

func run(ctx context.Context, argv ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
