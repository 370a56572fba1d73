//go:build !linux

package abuse

import (
	"errors"
	"syscall"
)

// setReceiveBuffer: the suite sets SO_RCVBUF on Linux only.
func setReceiveBuffer(n int) func(network, address string, rc syscall.RawConn) error {
	return func(string, string, syscall.RawConn) error {
		return errors.New("the abuse suite's slow client needs Linux (SO_RCVBUF)")
	}
}
