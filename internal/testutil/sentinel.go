package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// StartSentinel starts redis-server in Sentinel mode on a free loopback
// port, watching the master at masterAddr under name (quorum 1, a master
// is down after 1 s), and stops it when the test ends.
func StartSentinel(t testing.TB, name, masterAddr string) *Redis {
	t.Helper()
	bin := ServerPath()
	if bin == "" {
		t.Skip("redis-server not installed (apt-get install -y redis-server)")
	}
	host, port, err := net.SplitHostPort(masterAddr)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		p := FreePort(t)
		conf := filepath.Join(dir, "sentinel-"+strconv.Itoa(p)+".conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s %s %s 1\n"+
			"sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 5000\nsentinel parallel-syncs %s 1\n",
			p, dir, name, host, port, name, name, name)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, conf, "--sentinel")
		cmd.Dir = dir
		dieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		r := &Redis{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), Dir: dir, cmd: cmd, exited: exited}
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if lastErr = ping(r.Addr); lastErr == nil {
				t.Cleanup(r.Stop)
				return r
			}
			select {
			case <-exited:
				deadline = time.Now() // try another port
			default:
			}
		}
		r.Stop()
	}
	t.Fatalf("start redis-server --sentinel: %v", lastErr)
	return nil
}
