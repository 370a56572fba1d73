package testutil

import (
	"net"
	"os/exec"
	"strings"
	"testing"
)

func TestStartRedis(t *testing.T) {
	r := StartRedis(t)
	if err := ping(r.Addr); err != nil {
		t.Fatalf("started server does not answer: %v", err)
	}
	if r.Socket != "" {
		c, err := net.Dial("unix", r.Socket)
		if err != nil {
			t.Fatalf("unix socket %s: %v", r.Socket, err)
		}
		c.Close()
	}
	r.Stop()
	if err := ping(r.Addr); err == nil {
		t.Fatal("server still answers after Stop")
	}
}

func TestStartRedis_BadArgs(t *testing.T) {
	if ServerPath() == "" {
		t.Skip("redis-server not installed")
	}
	if _, err := Start(t.TempDir(), "--no-such-option", "1"); err == nil {
		t.Fatal("Start accepted an invalid redis-server option")
	}
}

// TestStartRedis_ServerEnv: SQUEEZE_REDIS_SERVER picks the binary that
// StartRedis runs, so the whole suite can run against Valkey.
func TestStartRedis_ServerEnv(t *testing.T) {
	if _, err := exec.LookPath("valkey-server"); err != nil {
		t.Skip("valkey-server not installed (bash scripts/setup-valkey.sh)")
	}
	t.Setenv(ServerEnv, "valkey-server")
	r := StartRedis(t)
	info, err := Do(r.Addr, "INFO", "server")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "valkey_version:") || !strings.Contains(info, "executable:"+ServerPath()) {
		t.Fatalf("INFO server of the started server does not name valkey-server:\n%s", info)
	}
	t.Setenv(ServerEnv, "no-such-server")
	if ServerPath() != "" {
		t.Fatal("ServerPath fell back to redis-server although SQUEEZE_REDIS_SERVER names another binary")
	}
}

func TestHasCommand(t *testing.T) {
	r := StartRedis(t)
	if !HasCommand(t, r.Addr, "GET") {
		t.Fatal("GET is not known")
	}
	if HasCommand(t, r.Addr, "NOSUCHCOMMAND") {
		t.Fatal("NOSUCHCOMMAND is known")
	}
	// SET ... IFEQ is what the server's own SET says of it.
	reply, err := Do(r.Addr, "SET", "k", "v", "IFEQ", "v")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := HasSetIf(t, r.Addr), !strings.HasPrefix(reply, "-"); got != want {
		t.Fatalf("HasSetIf = %v, but SET k v IFEQ v replied %q", got, reply)
	}
	if HasSetIf(t, r.Addr) {
		if n, _ := Do(r.Addr, "EXISTS", "squeeze:probe:no-such-key"); n != ":0" {
			t.Fatalf("the probe created its key: EXISTS = %q", n)
		}
	}
}
