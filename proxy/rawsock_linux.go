//go:build linux

package proxy

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// rawRead and rawWrite are read(2) and write(2) on a non-blocking socket
// without telling Go's scheduler: such a call never blocks, so the
// goroutine keeps its processor. With syscall.Read the scheduler's monitor
// thread, seeing a processor in a system call, would wake every 20 µs to
// consider taking it away, which on a busy proxy costs a tenth of its CPU.
func rawRead(fd uintptr, b []byte) (int, syscall.Errno) { return rawIO(syscall.SYS_READ, fd, b) }

func rawWrite(fd uintptr, b []byte) (int, syscall.Errno) { return rawIO(syscall.SYS_WRITE, fd, b) }

// directWrites: a shared connection's reader may write a client's replies
// itself (client.writeDirect) with rawWrite.
const directWrites = true

// rawIO is read(2) or write(2) (trap) of b on fd, retried on EINTR.
func rawIO(trap, fd uintptr, b []byte) (int, syscall.Errno) {
	if len(b) == 0 {
		return 0, 0
	}
	for {
		n, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), 0
	}
}

// rawEpollWait is epoll_wait(2) with a zero timeout, which never blocks,
// likewise without telling the scheduler.
func rawEpollWait(epfd uintptr, events []syscall.EpollEvent) (int, error) {
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, epfd, uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), nil
	}
}

// rawSock is a TCP or Unix connection whose Read and Write use rawRead and
// rawWrite, parking in Go's network poller (deadlines included) only when
// the socket is not ready.
type rawSock struct {
	net.Conn
	rc syscall.RawConn
	// The arguments and results of the calls, for functions made once: a
	// closure made per call would escape to the heap. One goroutine reads
	// and one writes at a time, as with any net.Conn used by the proxy.
	rbuf, wbuf     []byte
	rn, wn         int
	rerrno, werrno syscall.Errno
	readFn         func(fd uintptr) bool
	writeFn        func(fd uintptr) bool
}

// newRawSock wraps nc if it is a plain TCP or Unix connection, and returns
// nc itself otherwise (TLS).
func newRawSock(nc net.Conn) net.Conn {
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return nc
	}
	rc, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		return nc
	}
	s := &rawSock{Conn: nc, rc: rc}
	s.readFn = func(fd uintptr) bool {
		s.rn, s.rerrno = rawRead(fd, s.rbuf)
		return s.rerrno != syscall.EAGAIN
	}
	s.writeFn = func(fd uintptr) bool {
		for s.wn < len(s.wbuf) {
			var n int
			n, s.werrno = rawWrite(fd, s.wbuf[s.wn:])
			if s.werrno != 0 {
				return s.werrno != syscall.EAGAIN
			}
			s.wn += n
		}
		return true
	}
	return s
}

// baseConn returns the connection nc wraps, for io.CopyN to splice
// between two TCP sockets (stream.go).
func baseConn(nc net.Conn) net.Conn {
	if s, ok := nc.(*rawSock); ok {
		return s.Conn
	}
	return nc
}

func (s *rawSock) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: s.LocalAddr().Network(), Source: s.LocalAddr(), Addr: s.RemoteAddr(), Err: err}
}

func (s *rawSock) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	s.rbuf, s.rn, s.rerrno = b, 0, 0
	err := s.rc.Read(s.readFn)
	s.rbuf = nil
	switch {
	case err != nil:
		return 0, s.opError("read", err)
	case s.rerrno != 0:
		return 0, s.opError("read", s.rerrno)
	case s.rn == 0:
		return 0, io.EOF
	}
	return s.rn, nil
}

func (s *rawSock) Write(b []byte) (int, error) {
	s.wbuf, s.wn, s.werrno = b, 0, 0
	err := s.rc.Write(s.writeFn)
	s.wbuf = nil
	if err == nil && s.werrno != 0 {
		err = s.werrno
	}
	if err != nil {
		return s.wn, s.opError("write", err)
	}
	return s.wn, nil
}
