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
func rawRead(fd uintptr, b []byte) (int, syscall.Errno) {
	if len(b) == 0 {
		return 0, 0
	}
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), 0
	}
}

func rawWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	if len(b) == 0 {
		return 0, 0
	}
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
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
	return &rawSock{Conn: nc, rc: rc}
}

func (s *rawSock) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := s.rc.Read(func(fd uintptr) bool {
		n, errno = rawRead(fd, b)
		return errno != syscall.EAGAIN
	})
	if err != nil {
		return 0, &net.OpError{Op: "read", Net: s.LocalAddr().Network(), Source: s.LocalAddr(), Addr: s.RemoteAddr(), Err: err}
	}
	if errno != 0 {
		return 0, &net.OpError{Op: "read", Net: s.LocalAddr().Network(), Source: s.LocalAddr(), Addr: s.RemoteAddr(), Err: errno}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (s *rawSock) Write(b []byte) (int, error) {
	written := 0
	var errno syscall.Errno
	err := s.rc.Write(func(fd uintptr) bool {
		for written < len(b) {
			var n int
			n, errno = rawWrite(fd, b[written:])
			if errno != 0 {
				return errno != syscall.EAGAIN
			}
			written += n
		}
		return true
	})
	if err == nil && errno != 0 {
		err = errno
	}
	if err != nil {
		return written, &net.OpError{Op: "write", Net: s.LocalAddr().Network(), Source: s.LocalAddr(), Addr: s.RemoteAddr(), Err: err}
	}
	return written, nil
}
