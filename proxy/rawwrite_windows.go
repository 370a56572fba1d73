//go:build windows

package proxy

import "syscall"

// directWrites is false on Windows: its sockets are overlapped handles, with
// no non-blocking write(2) that a shared connection's reader could make
// through syscall.RawConn, so every client's replies are written by its
// writer goroutine through net.Conn.
const directWrites = false

// rawWrite is never called on Windows (directWrites).
func rawWrite(fd uintptr, b []byte) (int, syscall.Errno) { return 0, syscall.EWINDOWS }
