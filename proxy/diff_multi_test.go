package proxy

import (
	"testing"

	"github.com/squeeze-kv/squeeze/internal/difftest"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestDifferential_MultiClient plays seeded multi-client scenes (blocking
// pops served by another client's push, pub/sub in RESP2 and RESP3,
// client-side caching invalidations, writes to shared keys from a client
// with a private connection and one without) once against Redis and once
// through the proxy, and requires every client to receive the same
// replies and pushes. The proxy compresses everything that pays (min size
// 0).
func TestDifferential_MultiClient(t *testing.T) {
	seed := diffSeedFor(t)
	direct := testutil.StartRedis(t)
	e := startEnv(t)
	scenes := 60
	if testing.Short() {
		scenes = 20
	}
	n, err := difftest.RunMulti(direct.Addr, e.addr, difftest.MultiConfig{Seed: seed, Scenes: scenes})
	if err != nil {
		t.Fatalf("after %d scenes: %v", n, err)
	}
}
