//go:build linux

package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestRawSock checks that the wrapped socket reads, writes (more than the
// socket buffer, so Write must wait for the reader), honours deadlines and
// reports the peer's close and its own like a net.Conn.
func TestRawSock(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	defer peer.Close()
	s := newRawSock(dialed)
	if _, ok := s.(*rawSock); !ok {
		t.Fatalf("newRawSock(%T) = %T, want *rawSock", dialed, s)
	}
	defer s.Close()

	// A write larger than the socket buffers completes once the peer reads.
	big := bytes.Repeat([]byte("squeeze "), 1<<20) // 8 MiB
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(peer, int64(len(big))))
		got <- b
	}()
	if n, err := s.Write(big); err != nil || n != len(big) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(big))
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("peer read %d bytes, not what was written", len(b))
	}

	// Read returns what the peer wrote.
	if _, err := peer.Write([]byte("+OK\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := s.Read(buf); err != nil || string(buf[:n]) != "+OK\r\n" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}

	// A read deadline ends a Read that would wait.
	s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := s.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past deadline: %v, want deadline exceeded", err)
	}
	s.SetReadDeadline(time.Time{})

	// The peer's close is io.EOF; reading after our own close is net.ErrClosed.
	peer.Close()
	if _, err := s.Read(buf); err != io.EOF {
		t.Fatalf("Read after peer closed: %v, want EOF", err)
	}
	s.Close()
	if _, err := s.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after close: %v, want net.ErrClosed", err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after close: %v, want net.ErrClosed", err)
	}
}

// TestRawSock_OthersUnwrapped: only plain TCP and Unix sockets are wrapped (TLS, pipes are not).
func TestRawSock_OthersUnwrapped(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if s := newRawSock(a); s != a {
		t.Fatalf("newRawSock(pipe) = %T, want the pipe itself", s)
	}
}

// TestRawSock_Allocs: a write and a read on a ready socket allocate
// nothing (the functions handed to syscall.RawConn are made once).
func TestRawSock_Allocs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(c, c) // echo
			c.Close()
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := newRawSock(nc)
	defer s.Close()
	msg, buf := []byte("+PONG\r\n"), make([]byte, 64)
	roundtrip := func() {
		if _, err := s.Write(msg); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < len(msg); {
			n, err := s.Read(buf[got:])
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	}
	roundtrip() // the first read may park and set up the poller
	if n := testing.AllocsPerRun(200, roundtrip); n != 0 {
		t.Fatalf("%v allocations per write and read, want 0", n)
	}
}
