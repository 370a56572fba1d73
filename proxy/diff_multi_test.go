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

// TestDifferential_Order plays seeded order scenes: clients SELECT (the
// same database as others or another), run CLIENT SETNAME and HELLO 3,
// subscribe, unsubscribe and subscribe again while others PUBLISH, block
// in BRPOPLPUSH while others LPUSH, and write and read keys the others
// read and write, each sending without waiting for its replies. Redis
// plays each scene settled (each command run before the next is sent);
// the proxy gets it as sent and must run the commands in the order they
// reached it (docs/design/ordering.md), so that every client receives the
// same replies and messages.
func TestDifferential_Order(t *testing.T) {
	seed := diffSeedFor(t)
	direct := testutil.StartRedis(t)
	e := startEnv(t)
	scenes := 80
	if testing.Short() {
		scenes = 25
	}
	n, err := difftest.RunOrder(direct.Addr, e.addr, difftest.MultiConfig{Seed: seed, Scenes: scenes})
	if err != nil {
		t.Fatalf("after %d scenes: %v", n, err)
	}
}
