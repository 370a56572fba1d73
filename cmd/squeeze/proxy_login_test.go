package main

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestProxyCommand_LoginCheckedAtStart: a proxy whose upstream refuses its
// login does not start (it used to log "listening" and fail every client's
// command): exit 1 at once, with an error that says so, names the upstream
// and hides the password. An upstream that does not answer yet only gets
// the warning, as before; --client-auth require without credentials
// starts, since clients log in themselves.
func TestProxyCommand_LoginCheckedAtStart(t *testing.T) {
	r := startRedisWithPassword(t, "s3cret")
	open := testutil.StartRedis(t) // wants no password
	for _, c := range []struct {
		name, upstream string
		extra          []string
		want           string // besides the upstream, its password hidden
	}{
		{"wrong password", "redis://:wrong@" + r.Addr, nil, "WRONGPASS"},
		{"wrong user", "redis://bob:s3cret@" + r.Addr, nil, "WRONGPASS"},
		{"no password", "redis://" + r.Addr, nil, "NOAUTH"},
		{"password Redis does not want", "redis://:x@" + open.Addr, nil, "without any password configured"},
		{"database out of range", open.URL() + "/99", nil, "DB index is out of range"},
		{"wrong password, client-auth require", "redis://:wrong@" + r.Addr, []string{"--client-auth", "require"}, "WRONGPASS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var stderr bytes.Buffer
			start := time.Now()
			code := run(ctx, env{Stdout: io.Discard, Stderr: &stderr},
				append([]string{"proxy", "--listen", "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t)), "--upstream", c.upstream}, c.extra...))
			got := stderr.String()
			if code != 1 || !strings.Contains(got, "refuses the proxy's login") || !strings.Contains(got, c.want) ||
				!strings.Contains(got, "upstream "+redactURL(c.upstream)+" refuses") {
				t.Fatalf("exit %d after %v, want 1 and an error about the login (%q):\n%s", code, time.Since(start), c.want, got)
			}
			if strings.Contains(got, "listening") || strings.Contains(got, "wrong@") || time.Since(start) > 5*time.Second {
				t.Fatalf("started, showed the password, or took %v:\n%s", time.Since(start), got)
			}
		})
	}
	t.Run("right password starts", func(t *testing.T) {
		startProxyCommand(t, "--upstream", "redis://:s3cret@"+r.Addr)
	})
	t.Run("client-auth require without credentials starts", func(t *testing.T) {
		startProxyCommand(t, "--upstream", "redis://"+r.Addr, "--client-auth", "require")
	})
	t.Run("unreachable upstream starts with a warning", func(t *testing.T) {
		_, log := startProxyCommand(t, "--upstream", "redis://127.0.0.1:1")
		for i := 0; !strings.Contains(log.String(), "upstream not reachable yet"); i++ {
			if i > 100 {
				t.Fatalf("no warning: %s", log.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}
