//go:build !linux && !windows

package proxy

import "syscall"

// directWrites: a shared connection's reader may write a client's replies
// itself (client.writeDirect) with a non-blocking write(2).
const directWrites = true

// rawWrite is write(2) through the scheduler elsewhere than Linux.
func rawWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), b)
	if errno, ok := err.(syscall.Errno); ok && errno != 0 {
		return 0, errno
	}
	return n, 0
}
