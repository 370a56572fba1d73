package proxy

import (
	"fmt"
	"sync"
	"testing"
)

// TestProxy_DocumentsUnderPipelines is scripts/bench-proxy.sh's document
// phase as a test, with the free lists of buffers checked (bufpool.SetChecks):
// clients each write JSON documents of 47.5 kB, their own, one at a time
// (read in pieces by the event loop, compressed, queued behind other
// clients' requests), while others pipeline small SETs and GETs; then
// every document reads back whole through the proxy, and Redis holds for
// each a frame that decodes to it.
func TestProxy_DocumentsUnderPipelines(t *testing.T) {
	e := startEnv(t, withMinSize(64))
	const (
		writers, docsEach = 16, 12
		piped, rounds     = 4, 40
		depth             = 16
	)
	doc := func(w int) string { return fmt.Sprintf("{\"writer\":%d,", w) + compressible(47500-16, w) }
	key := func(w, i int) string { return fmt.Sprintf("doc:%d:%d", w, i%4) }
	var wg sync.WaitGroup
	errs := make(chan error, writers+piped)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialRaw(t, e.addr)
			for i := range docsEach {
				if got := c.do("SET", key(w, i), doc(w)); got != "+OK\r\n" {
					errs <- fmt.Errorf("SET %s: %.80q", key(w, i), got)
					return
				}
			}
		}()
	}
	for p := range piped {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialRaw(t, e.addr)
			for r := range rounds {
				var cmds [][]string
				for i := range depth {
					cmds = append(cmds, []string{"SET", fmt.Sprintf("p:%d:%d", p, i), fmt.Sprintf("%d-%d-%d", p, i, r)}, []string{"GET", fmt.Sprintf("p:%d:%d", p, i)})
				}
				c.send(cmds...)
				for i := range depth {
					if got := c.read(); got != "+OK\r\n" {
						errs <- fmt.Errorf("pipelined SET: %.80q", got)
						return
					}
					if got, want := c.read(), bulk(fmt.Sprintf("%d-%d-%d", p, i, r)); got != want {
						errs <- fmt.Errorf("pipelined GET: %.80q, want %q", got, want)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c := dialRaw(t, e.addr)
	for w := range writers {
		for i := range min(docsEach, 4) {
			if got := c.do("GET", key(w, i)); got != bulk(doc(w)) {
				t.Fatalf("GET %s through the proxy: %d bytes, not writer %d's document", key(w, i), len(got), w)
			}
			if v := storedDecoded(t, e, key(w, i)); string(v) != doc(w) {
				t.Fatalf("%s in Redis decodes to %d bytes, not writer %d's document", key(w, i), len(v), w)
			}
		}
	}
}
