package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

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

// BenchmarkListSearch measures LPOS of a value the list does not hold (the
// whole list is searched) and of its first element, through the proxy with
// the exact list search (the default) and with StoredListSearch, on lists
// of 10 to 10,000 JSON elements of about 100 bytes, stored compressed. One
// client, one command at a time: ns/op is the round trip, including the
// time Redis spends in the script.
//
//	go test ./proxy -run '^$' -bench ListSearch -count 3
func BenchmarkListSearch(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		for _, search := range []string{"exact", "stored"} {
			for _, find := range []string{"absent", "first"} {
				b.Run(fmt.Sprintf("len=%d/%s/%s", n, search, find), func(b *testing.B) {
					e := startEnv(b, withMinSize(64), func(s *Server) { s.StoredListSearch = search == "stored" })
					c := dialRaw(b, e.addr)
					var req []byte
					elem := func(i int) []byte {
						return fmt.Appendf(nil, `{"id":%d,"name":"squeeze user number %d","tags":["redis","proxy","list"]}`, i, i)
					}
					for i := range n {
						req = resp.AppendCommand(req, []byte("RPUSH"), []byte("l"), elem(i))
					}
					c.write(req)
					for range n {
						c.read()
					}
					target, want := []byte("absent"), "$-1\r\n"
					if find == "first" {
						target, want = elem(0), ":0\r\n"
					}
					cmd := resp.AppendCommand(nil, []byte("LPOS"), []byte("l"), target)
					b.ResetTimer()
					for range b.N {
						c.write(cmd)
						if got := c.read(); got != want {
							b.Fatalf("LPOS: %q, want %q", got, want)
						}
					}
				})
			}
		}
	}
}

// BenchmarkLargeValue measures one client's SET and GET of a 10 MB document
// directly to Redis and through the proxy, with compression off and with
// s2: the proxy's cost on the large documents of seed 001, side by side
// with Redis's own.
//
//	go test ./proxy -run '^$' -bench LargeValue -count 6
func BenchmarkLargeValue(b *testing.B) {
	const size = 10 << 20
	val := []byte(compressible(size, 1))
	for _, c := range []struct {
		name string
		opts []envOpt
	}{{"direct", nil}, {"proxy-off", []envOpt{withMinSize(1 << 30)}}, {"proxy-s2", nil}} {
		e := startEnv(b, c.opts...)
		addr := e.addr
		if c.name == "direct" {
			addr = e.redis.Addr
		}
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		set := resp.AppendCommand(nil, []byte("SET"), []byte("doc"), val)
		get := resp.AppendCommand(nil, []byte("GET"), []byte("doc"))
		reply := make([]byte, len(resp.AppendBulk(nil, val)))
		// The document exists before either sub-benchmark runs (-bench may
		// select GET alone).
		if _, err := nc.Write(set); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(nc, reply[:5]); err != nil || string(reply[:5]) != "+OK\r\n" {
			b.Fatalf("SET: %q %v", reply[:5], err)
		}
		nc.SetDeadline(time.Now().Add(10 * time.Minute)) // a wrong reply fails, never hangs
		for _, op := range []string{"SET", "GET"} {
			b.Run(fmt.Sprintf("%s/%s", op, c.name), func(b *testing.B) {
				b.SetBytes(size)
				for b.Loop() {
					if op == "SET" {
						if _, err := nc.Write(set); err != nil {
							b.Fatal(err)
						}
						if _, err := io.ReadFull(nc, reply[:5]); err != nil || string(reply[:5]) != "+OK\r\n" {
							b.Fatalf("SET: %q %v", reply[:5], err)
						}
						continue
					}
					if _, err := nc.Write(get); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(nc, reply); err != nil || !bytes.Equal(reply[len(reply)-len(val)-2:len(reply)-2], val) {
						b.Fatalf("GET: %v", err)
					}
				}
			})
		}
		nc.Close()
	}
}
