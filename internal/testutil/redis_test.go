package testutil

import (
	"net"
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
