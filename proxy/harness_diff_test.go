package proxy

import (
	"os"
	"strconv"
	"testing"

	"github.com/squeeze-kv/squeeze/internal/difftest"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestHarnessDifferential runs internal/difftest's seeded sequence against
// Redis directly and through the proxy with min size 0, so that every value
// that compresses is compressed, in RESP2 and RESP3.
func TestHarnessDifferential(t *testing.T) {
	for _, resp3 := range []bool{false, true} {
		direct := testutil.StartRedis(t)
		e := startEnv(t, withMinSize(0))
		res, err := difftest.Run(direct.Addr, e.addr, difftest.Config{Seed: 1, Steps: harnessSteps(), RESP3: resp3, MaxValue: 1 << 20})
		if err != nil {
			t.Fatalf("resp3=%v: %v", resp3, err)
		}
		t.Logf("resp3=%v: %d steps, %d commands, %d kinds", resp3, res.Steps, res.Commands, len(res.ByCommand))
	}
}

// harnessSteps is 1500 by default and the value of SQUEEZE_DIFF_STEPS when
// set, for long runs: SQUEEZE_DIFF_STEPS=200000 go test ./proxy -run Harness
func harnessSteps() int {
	if n, err := strconv.Atoi(os.Getenv("SQUEEZE_DIFF_STEPS")); err == nil && n > 0 {
		return n
	}
	return 1500
}
