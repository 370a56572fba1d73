package proxy

import "testing"

// Every test of the package runs with the free lists of buffers checked:
// a buffer put back twice panics (bigCheck).
func init() { bigCheck = true }

// TestBigCheck_DoublePut: the check sees a buffer put back twice, and
// not one that was taken out in between.
func TestBigCheck_DoublePut(t *testing.T) {
	b := getBig(20 << 10)
	putBig(b)
	again := getBig(20 << 10) // most likely b; either way, owned
	putBig(again)
	defer func() {
		if recover() == nil {
			t.Error("a buffer put back twice did not panic")
		}
	}()
	putBig(again)
}
