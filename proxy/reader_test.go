package proxy

import (
	"bytes"
	"errors"
	"testing"

	"github.com/squeeze-kv/squeeze/internal/bufpool"
	"github.com/squeeze-kv/squeeze/resp"
)

// TestReader_KeepTail: process keeps the unparsed tail at the start of
// the read buffer, and moves a short tail out of a buffer a huge command
// grew into one of the usual size.
func TestReader_KeepTail(t *testing.T) {
	c := &client{}
	c.in.rbuf = append(make([]byte, 0, 64), "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI"...)
	c.keepTail(len("*1\r\n$4\r\nPING\r\n"))
	if got := string(c.in.rbuf); got != "*1\r\n$4\r\nPI" || cap(c.in.rbuf) != 64 {
		t.Fatalf("tail %q in a buffer of %d", got, cap(c.in.rbuf))
	}
	c.keepTail(len(c.in.rbuf))
	if len(c.in.rbuf) != 0 || cap(c.in.rbuf) != 64 {
		t.Fatalf("all handled: %q in a buffer of %d", c.in.rbuf, cap(c.in.rbuf))
	}

	big := bufpool.Get(2 << 20)[:2<<20]
	copy(big[len(big)-3:], "abc")
	c.in.rbuf = big
	c.keepTail(len(big) - 3)
	// The usual size is a buffer of readBufSize's class from the free
	// lists, which may hold one a little larger that another test put back
	// (a capacity of 21,760 was seen): below the next class, not 2 MiB.
	if got := string(c.in.rbuf); got != "abc" || cap(c.in.rbuf) < readBufSize || cap(c.in.rbuf) >= 2*readBufSize {
		t.Fatalf("after a huge command: tail %q in a buffer of %d, want %d to %d", got, cap(c.in.rbuf), readBufSize, 2*readBufSize-1)
	}
}

// TestReader_ReadCommand: a client that has not authenticated yet, where
// the proxy requires it, is held to Redis's limits for such clients; the
// others to maxBulk.
func TestReader_ReadCommand(t *testing.T) {
	s := newTestServer(t)
	c := &client{s: s}
	value := bytes.Repeat([]byte("v"), unauthMaxBulk+1)
	cmd := resp.AppendCommand(nil, []byte("SET"), []byte("k"), value)
	args, n, err := c.readCommand(cmd, 1<<20)
	if err != nil || n != len(cmd) || len(args) != 3 || !bytes.Equal(args[2], value) {
		t.Fatalf("authenticated: %d args, %d bytes, %v", len(args), n, err)
	}
	if _, _, err := c.readCommand(cmd, 1024); !errors.Is(err, resp.ErrInvalidBulkLength) {
		t.Fatalf("over maxBulk: %v", err)
	}
	s.RequireAuth = true
	if _, _, err := c.readCommand(cmd, 1<<20); err != errUnauthBulk {
		t.Fatalf("unauthenticated: %v, want %v", err, errUnauthBulk)
	}
	c.sess.authed = true
	if _, _, err := c.readCommand(cmd, 1<<20); err != nil {
		t.Fatalf("authenticated with RequireAuth: %v", err)
	}
}
