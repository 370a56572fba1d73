package proxy

import (
	"testing"

	"github.com/squeeze-kv/squeeze/internal/bufpool"
)

// Every test of the package runs with the free lists of buffers checked:
// a buffer put back twice panics (bufpool.SetChecks).
func init() { bufpool.SetChecks(true) }

// TestBigCheck_DoublePut: the check is on in this package's tests: it sees
// a buffer put back twice, and not one that was taken out in between.
func TestBigCheck_DoublePut(t *testing.T) {
	b := bufpool.Get(20 << 10)
	bufpool.Put(b)
	again := bufpool.Get(20 << 10) // most likely b; either way, owned
	bufpool.Put(again)
	defer func() {
		if recover() == nil {
			t.Error("a buffer put back twice did not panic")
		}
	}()
	bufpool.Put(again)
}
