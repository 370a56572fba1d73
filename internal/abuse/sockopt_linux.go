package abuse

import "syscall"

// setReceiveBuffer returns a net.Dialer Control function that sets
// SO_RCVBUF to n bytes (the kernel doubles it and applies its minimum).
func setReceiveBuffer(n int) func(network, address string, rc syscall.RawConn) error {
	return func(network, address string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
		}); err != nil {
			return err
		}
		return serr
	}
}
