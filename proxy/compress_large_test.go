package proxy

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/squeeze-kv/squeeze/codec"
)

// TestProxy_LargeValuesCompressOnEveryCPU: values of codec.ParallelMinSize
// and more are compressed with a thread more than --procs gives Go code
// (policy.encode takes it, as a large streamed decode does), so that an
// encoder's sections run on the CPUs side by side instead of taking turns
// on one thread; frames of 256 KiB and more that a client's writer decodes
// whole get it too (client.writeLoop). Several clients writing, then
// reading, such values at once: every value reads back whole, Redis holds
// frames, every value takes the extra thread in both phases (extraGrants)
// and GOMAXPROCS is back at its setting
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
	// checking its reply, and returns how many times the extra thread was
	// granted meanwhile (extraGrants: a sampler of GOMAXPROCS missed
	// decodes that ended between two samples on a busy machine).
	clients := func(cmd func(i, r int) ([]string, string)) int64 {
		before := extraGrants.Load()
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
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		return extraGrants.Load() - before
	}
	key := func(i, r int) string { return fmt.Sprintf("doc:%d:%d", i, r) }
	setGrants := clients(func(i, r int) ([]string, string) { return []string{"SET", key(i, r), value(i, r)}, "+OK\r\n" })
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS %d after the SETs, want its setting, 1", got)
	}
	getGrants := clients(func(i, r int) ([]string, string) { return []string{"GET", key(i, r)}, bulk(value(i, r)) })
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS %d after the GETs, want its setting, 1", got)
	}
	// Every one of the 20 SETs compresses a value of ParallelMinSize and
	// more, and every one of the 20 GETs decodes a frame of 256 KiB or
	// more whole or as it is written: each takes the thread.
	if setGrants < 20 || getGrants < 20 {
		t.Errorf("the extra thread was taken %d times for 20 large SETs and %d times for 20 large GETs, want 20 or more each", setGrants, getGrants)
	}
	direct := dialRaw(t, e.redis.Addr)
	if got := direct.do("STRLEN", "doc:0:0"); got == fmt.Sprintf(":%d\r\n", len(value(0, 0))) {
		t.Errorf("Redis holds doc:0:0 uncompressed (STRLEN %q)", got)
	}
}
