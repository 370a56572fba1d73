package abuse

import (
	"bytes"
	"fmt"
	"math/rand/v2"
)

// valueFor is the value a fault-part writer stores under key number seq of
// writer w: a function of (seed, w, seq) alone, so that the final check
// can rebuild it. Even numbers get a compressible JSON-like value of
// 1-6 kB (compressed by the proxy), odd ones a short random one (stored
// raw), so that both paths are read back.
func valueFor(seed uint64, w, seq int) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(w)<<32|uint64(seq)))
	if seq%2 == 1 {
		b := make([]byte, 8+r.IntN(48))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		return b
	}
	n := 1000 + r.IntN(5000)
	var buf bytes.Buffer
	for i := 0; buf.Len() < n; i++ {
		fmt.Fprintf(&buf, `{"writer":%d,"seq":%d,"i":%d,"name":"squeeze user","tags":["redis","proxy"]},`, w, seq, i)
	}
	return buf.Bytes()[:n]
}

// keyFor is the key of value number seq of writer w.
func keyFor(w, seq int) string { return fmt.Sprintf("abuse:%d:%d", w, seq) }

// randomBytes returns n bytes that do not compress.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 8))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}
