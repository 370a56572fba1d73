//go:build linux

package proxy

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// The bytes of a passed reply (passreply.go) go from Redis's socket to the
// client's through a pipe with splice(2), so they never enter the proxy's
// memory: Go's io.Copy does the same between two TCP sockets, but it
// loses what is in its pipe when a write times out, and a pass must be
// able to stop at a timeout and keep every byte.

// passPipe is a pipe of the shared connection's reader, kept for its passes.
type passPipe struct{ r, w int }

// f_SETPIPE_SZ is fcntl's F_SETPIPE_SZ (Linux 2.6.35).
const f_SETPIPE_SZ = 1031

// passPipeSize is the pipe's size asked for. One splice from Redis's
// socket moves at most upReadMax (upstream.go), as a read takes: moving up
// to the pipe's size, a 10 MB GET cost Redis 7600 us against 7400 (4.2 MB:
// 1017 against 983; twemproxy 7467 and 1050; medians of 7 interleaved
// runs), for 3-7% more of the proxy's own CPU, half of twemproxy's.
const passPipeSize = 1 << 20

func newPassPipe() (*passPipe, error) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		return nil, err
	}
	// A larger pipe moves more per call; the default (64 KiB) also works.
	syscall.Syscall(syscall.SYS_FCNTL, uintptr(fds[1]), f_SETPIPE_SZ, passPipeSize)
	return &passPipe{r: fds[0], w: fds[1]}, nil
}

func (p *passPipe) close() {
	syscall.Close(p.r)
	syscall.Close(p.w)
}

// rawConnOf returns the syscall.RawConn of a plain TCP or Unix socket.
func rawConnOf(nc net.Conn) (syscall.RawConn, bool) {
	switch s := baseConn(nc).(type) {
	case *net.TCPConn:
		rc, err := s.SyscallConn()
		return rc, err == nil
	case *net.UnixConn:
		rc, err := s.SyscallConn()
		return rc, err == nil
	}
	return nil, false
}

// splicePass moves rest bytes from the connection's socket to client o's
// (whose output the caller owns) through the pipe. ok is false when it
// cannot (a TLS upstream, no pipe): nothing moved. Otherwise either all
// moved (clientErr and upErr nil), or the client's write failed or timed
// out (clientErr): pend holds the bytes taken back out of the pipe, left
// those still on Redis's socket; or reading from Redis failed (upErr).
func (c *upConn) splicePass(o *client, rest int64) (pend []byte, left int64, clientErr, upErr error, ok bool) {
	up, ok1 := rawConnOf(c.nc)
	cli, ok2 := rawConnOf(o.nc)
	if !ok1 || !ok2 {
		return nil, rest, nil, nil, false
	}
	if c.pipe == nil {
		p, err := newPassPipe()
		if err != nil {
			return nil, rest, nil, nil, false
		}
		c.pipe = p
	}
	p := c.pipe
	var inPipe int
	var serr error
	fill := func(fd uintptr) bool {
		n, err := rawSplice(fd, uintptr(p.w), int(min(rest, upReadMax)))
		switch {
		case err == syscall.EAGAIN:
			return false // nothing to read yet (the pipe is empty: it has room)
		case err != nil:
			serr = err
		case n == 0:
			serr = errors.New("upstream closed the connection")
		default:
			inPipe += int(n)
			rest -= n
		}
		return true
	}
	drain := func(fd uintptr) bool {
		for inPipe > 0 {
			n, err := rawSplice(uintptr(p.r), fd, inPipe)
			switch {
			case err == syscall.EAGAIN:
				return false
			case err != nil:
				serr = err
				return true
			}
			inPipe -= int(n)
		}
		return true
	}
	for rest > 0 {
		c.flushQueued()
		serr = nil
		if err := up.Read(fill); err != nil || serr != nil {
			return nil, rest, nil, upstreamReadErr(errors.Join(err, serr)), true
		}
		o.nc.SetWriteDeadline(time.Now().Add(passStall))
		err := cli.Write(drain)
		if err == nil && serr != nil {
			err = serr
		}
		if err != nil {
			// Take back what the client did not get.
			pend = make([]byte, inPipe)
			for got := 0; got < inPipe; {
				n, rerr := syscall.Read(p.r, pend[got:])
				if rerr != nil || n <= 0 {
					// The pipe cannot give back its bytes: no way to go on.
					return nil, rest, nil, errors.New("read back from the pass pipe failed"), true
				}
				got += n
			}
			return pend, rest, err, nil, true
		}
	}
	return nil, 0, nil, nil, true
}

const spliceFlags = 0x1 | 0x2 // SPLICE_F_MOVE | SPLICE_F_NONBLOCK

// rawSplice is splice(2) of up to n bytes from in to out, retried on
// EINTR, without telling Go's scheduler, as rawIO: with SPLICE_F_NONBLOCK
// on non-blocking sockets and a non-blocking pipe it never blocks. Through
// syscall.Splice each call woke the scheduler's monitor thread, whose
// sleeps and wake-ups were a twentieth of the proxy's CPU under 100 kB
// GETs.
func rawSplice(in, out uintptr, n int) (int64, error) {
	for {
		r, _, e := syscall.RawSyscall6(syscall.SYS_SPLICE, in, 0, out, 0, uintptr(n), spliceFlags)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int64(r), nil
	}
}
