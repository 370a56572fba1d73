package proxy

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/codec"
)

// TestProxy_LargeValuesCompressOnEveryCPU: values of codec.ParallelMinSize
// and more are compressed with a thread more than --procs gives Go code
// (policy.encode takes it, as a large decode does), so that an encoder's
// sections run on the CPUs side by side instead of taking turns on one
// thread. Several clients writing such values at once: every value reads
// back whole, Redis holds frames, GOMAXPROCS rises while they compress and
// is back at its setting afterwards.
func TestProxy_LargeValuesCompressOnEveryCPU(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: no thread to add")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	e := startEnv(t, func(s *Server) {
		enc, err := codec.NewEncoder(codec.DefaultAlgorithm, codec.WithConcurrency(runtime.NumCPU()))
		if err != nil {
			t.Fatal(err)
		}
		s.Encoder = enc
	})
	var most atomic.Int64
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if n := int64(runtime.GOMAXPROCS(0)); n > most.Load() {
				most.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Microsecond):
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialRaw(t, e.addr)
			for r := range 5 {
				key := fmt.Sprintf("doc:%d:%d", i, r)
				v := strings.Repeat(fmt.Sprintf(`{"client":%d,"round":%d,"name":"squeeze"},`, i, r), (codec.ParallelMinSize+200<<10)/40)
				c.send([]string{"SET", key, v}, []string{"GET", key})
				if got := c.read(); got != "+OK\r\n" {
					errs <- fmt.Errorf("%s: SET: %.80q", key, got)
					return
				}
				if got := c.read(); got != bulk(v) {
					errs <- fmt.Errorf("%s: GET: %d bytes, want %d", key, len(got), len(bulk(v)))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-watched
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	direct := dialRaw(t, e.redis.Addr)
	if got := direct.do("STRLEN", "doc:0:0"); got == fmt.Sprintf(":%d\r\n", len(strings.Repeat(`{"client":0,"round":0,"name":"squeeze"},`, (codec.ParallelMinSize+200<<10)/40))) {
		t.Errorf("Redis holds doc:0:0 uncompressed (STRLEN %q)", got)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS %d after the SETs, want its setting, 1", got)
	}
	if got := most.Load(); got != 2 {
		t.Errorf("GOMAXPROCS rose to %d while large values were compressed, want 2", got)
	}
}
