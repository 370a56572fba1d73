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
// (policy.encode takes it, as a large streamed decode does), so that an
// encoder's sections run on the CPUs side by side instead of taking turns
// on one thread; frames of 256 KiB and more that a client's writer decodes
// whole get it too (client.writeLoop). Several clients writing, then
// reading, such values at once: every value reads back whole, Redis holds
// frames, GOMAXPROCS rises in both phases and is back at its setting
// after each.
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
	value := func(i, r int) string {
		return strings.Repeat(fmt.Sprintf(`{"client":%d,"round":%d,"name":"squeeze"},`, i, r), (codec.ParallelMinSize+200<<10)/40)
	}
	// clients runs four clients, each sending one command per round and
	// checking its reply, and returns the most GOMAXPROCS seen meanwhile.
	clients := func(cmd func(i, r int) ([]string, string)) int64 {
		var most atomic.Int64
		stop, watched := make(chan struct{}), make(chan struct{})
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
					args, want := cmd(i, r)
					c.send(args)
					if got := c.read(); got != want {
						errs <- fmt.Errorf("%s %s: %.80q (%d bytes), want %d bytes", args[0], args[1], got, len(got), len(want))
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
		return most.Load()
	}
	key := func(i, r int) string { return fmt.Sprintf("doc:%d:%d", i, r) }
	setMost := clients(func(i, r int) ([]string, string) { return []string{"SET", key(i, r), value(i, r)}, "+OK\r\n" })
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS %d after the SETs, want its setting, 1", got)
	}
	getMost := clients(func(i, r int) ([]string, string) { return []string{"GET", key(i, r)}, bulk(value(i, r)) })
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS %d after the GETs, want its setting, 1", got)
	}
	if setMost != 2 || getMost != 2 {
		t.Errorf("GOMAXPROCS rose to %d while large values were compressed and to %d while they were decoded, want 2 both times", setMost, getMost)
	}
	direct := dialRaw(t, e.redis.Addr)
	if got := direct.do("STRLEN", "doc:0:0"); got == fmt.Sprintf(":%d\r\n", len(value(0, 0))) {
		t.Errorf("Redis holds doc:0:0 uncompressed (STRLEN %q)", got)
	}
}
