package proxy

import (
	"net"
	"syscall"
	"testing"
)

func TestTakeStream_LimitsSendBuffer(t *testing.T) {
	// A stream's connection asks for a send buffer of streamSendBuffer,
	// through the rawSock that wraps it: left to the kernel's tuning, each
	// piece waited in the socket and went out in Redis's time (stream.go).
	// The shared connections keep the kernel's. (The figure checked is
	// Linux's: it doubles what SO_SNDBUF asks for.)
	e := startEnv(t, withMinSize(64<<20))
	c := dialRaw(t, e.addr)
	if r := c.do("SET", "big", rawValue(streamMinValue+1, 2)); r != "+OK\r\n" {
		t.Fatalf("SET = %q", r)
	}
	sndbuf := func(nc net.Conn) int {
		t.Helper()
		rc, err := baseConn(nc).(syscall.Conn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var n int
		var gerr error
		rc.Control(func(fd uintptr) { n, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF) })
		if gerr != nil {
			t.Fatal(gerr)
		}
		return n
	}
	// The streamed SET's connection, idle again (putStream), or a new one.
	u, err := e.srv.pool.takeStream()
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	if got := sndbuf(u.nc); got != 2*streamSendBuffer {
		t.Errorf("a stream connection's SO_SNDBUF = %d, want %d (twice what was asked)", got, 2*streamSendBuffer)
	}
	shared, err := e.srv.pool.get(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := sndbuf(shared.nc); got == 2*streamSendBuffer {
		t.Errorf("a shared connection's SO_SNDBUF = %d: limited like a stream's", got)
	}
}
