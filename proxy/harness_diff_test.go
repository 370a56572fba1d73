package proxy

import (
	"os"
	"strconv"
	"testing"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/difftest"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestHarnessDifferential runs internal/difftest's seeded sequence against
// Redis directly and through the proxy with min size 0, so that every value
// that compresses is compressed, in RESP2 and RESP3.
// The third run reads clients from their goroutines instead of the event
// loops; the fourth has RequireAuth (a Redis without a password: every
// client on a private connection from its first command); the RESP3 run
// writes under per-prefix rules (some string keys raw, hashes in zstd,
// lists in lz4).
func TestHarnessDifferential(t *testing.T) {
	for _, tc := range []struct {
		resp3, goroutines, requireAuth bool
	}{{false, false, false}, {true, false, false}, {false, true, false}, {false, false, true}} {
		direct := testutil.StartRedis(t)
		e := startEnv(t, withMinSize(0), func(s *Server) {
			s.GoroutineReads = tc.goroutines
			s.RequireAuth = tc.requireAuth // every client on a private connection
			if tc.resp3 {
				s.Rules = []Rule{
					{Prefix: "s:1", Encoder: mustEnc(t, "none")},
					{Prefix: "h:", Encoder: mustEnc(t, "zstd:1", codec.WithMinSize(0))},
					{Prefix: "l:", Encoder: mustEnc(t, "lz4", codec.WithMinSize(0))},
				}
			}
		})
		cfg := difftest.Config{Seed: harnessSeed(), Steps: harnessSteps(), RESP3: tc.resp3, MaxValue: 1 << 20,
			HashFieldExpiry: testutil.HasCommand(t, direct.Addr, "HSETEX"),  // Redis 8
			SetIf:           testutil.HasSetIf(t, direct.Addr),              // Valkey 8.1, Redis 8.4
			DelIfEq:         testutil.HasCommand(t, direct.Addr, "DELIFEQ"), // Valkey 9
			Msetex:          testutil.HasCommand(t, direct.Addr, "MSETEX"),  // Valkey 9.1, Redis 8.4
			Delex:           testutil.HasCommand(t, direct.Addr, "DIGEST"),  // Redis 8.4
			XaddRef:         testutil.HasXaddRef(t, direct.Addr)}            // Redis 8.2
		res, err := difftest.Run(direct.Addr, e.addr, cfg)
		if err != nil {
			t.Fatalf("resp3=%v goroutine reads=%v require auth=%v: %v", tc.resp3, tc.goroutines, tc.requireAuth, err)
		}
		t.Logf("resp3=%v goroutine reads=%v require auth=%v: %d steps, %d commands, %d kinds (DELIFEQ %d, MSETEX %d, DELEX %d, DIGEST %d)", tc.resp3, tc.goroutines, tc.requireAuth,
			res.Steps, res.Commands, len(res.ByCommand), res.ByCommand["DELIFEQ"], res.ByCommand["MSETEX"], res.ByCommand["DELEX"], res.ByCommand["DIGEST"])
	}
}

// harnessSeed is 1 by default and the value of SQUEEZE_DIFF_SEED when set:
// SQUEEZE_DIFF_SEED=$RANDOM SQUEEZE_DIFF_STEPS=20000 go test ./proxy -run Harness
func harnessSeed() uint64 {
	if n, err := strconv.ParseUint(os.Getenv("SQUEEZE_DIFF_SEED"), 10, 64); err == nil && n > 0 {
		return n
	}
	return 1
}

// harnessSteps is 1500 by default and the value of SQUEEZE_DIFF_STEPS when
// set, for long runs: SQUEEZE_DIFF_STEPS=200000 go test ./proxy -run Harness
func harnessSteps() int {
	if n, err := strconv.Atoi(os.Getenv("SQUEEZE_DIFF_STEPS")); err == nil && n > 0 {
		return n
	}
	return 1500
}
