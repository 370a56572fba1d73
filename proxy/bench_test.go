package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/squeeze-kv/squeeze/resp"
)

// BenchmarkProxy measures GETs through the proxy in-process, against a real
// redis-server, with compression off: 8 clients, each sending pipelines of
// depth GETs and reading their replies. ns/op is per GET; the proxy, Redis
// and the clients share the machine, so compare runs side by side
// (benchstat), not with other machines.
//
//	go test ./proxy -run '^$' -bench Proxy -count 6
func BenchmarkProxy(b *testing.B) {
	for _, depth := range []int{1, 16} {
		b.Run(fmt.Sprintf("GET/depth=%d", depth), func(b *testing.B) {
			e := startEnv(b, withMinSize(1<<30))
			setup := dialRaw(b, e.addr)
			if got := setup.do("SET", "k", "v"); got != "+OK\r\n" {
				b.Fatal(got)
			}
			const clients = 8
			req := bytes.Repeat(resp.AppendCommand(nil, []byte("GET"), []byte("k")), depth)
			want := bytes.Repeat([]byte("$1\r\nv\r\n"), depth)
			conns := make([]net.Conn, clients)
			for i := range conns {
				nc, err := net.Dial("tcp", e.addr)
				if err != nil {
					b.Fatal(err)
				}
				defer nc.Close()
				conns[i] = nc
			}
			rounds := b.N/(clients*depth) + 1
			b.ResetTimer()
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			for _, nc := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got := make([]byte, len(want))
					for range rounds {
						if _, err := nc.Write(req); err != nil {
							errs <- err
							return
						}
						if _, err := io.ReadFull(nc, got); err != nil || !bytes.Equal(got, want) {
							errs <- fmt.Errorf("reply %q, %v", got, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
		})
	}
}
