package proxy

import (
	"testing"

	"github.com/squeeze-kv/squeeze/internal/difftest"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestDifferential_Scripts plays seeded script scenes (client-side
// caching, CLIENT PAUSE WRITE, ACL users with few rights, scripts by
// SHA-1, function libraries valid and not) once against Redis and once
// through the proxy, which compresses everything that pays, and requires
// every client to receive the same replies and pushes (issue 32).
func TestDifferential_Scripts(t *testing.T) {
	seed := diffSeedFor(t)
	direct := testutil.StartRedis(t)
	e := startEnv(t)
	scenes := 60
	if testing.Short() {
		scenes = 20
	}
	n, err := difftest.RunScripts(direct.Addr, e.addr, difftest.MultiConfig{Seed: seed, Scenes: scenes})
	if err != nil {
		t.Fatalf("after %d scenes: %v", n, err)
	}
}
