//go:build !linux

package proxy

import (
	"errors"
	"net"
)

// poller is Linux only; elsewhere every client is read by its own goroutine.
type poller struct{ rbuf []byte }

// errNoPoller says why: not an error to log.
var errNoPoller = errors.New("no event loop on this system")

func newPoller(*Server) (*poller, error) { return nil, errNoPoller }

func (p *poller) run(c *client, kept bool) readEnd { return endToGoroutine }

func (p *poller) close() {}

func (p *poller) unregisterKept(c *client, fd int32) {}

func (p *poller) keepAway(c *client) {}

func (p *poller) rearm(c *client) {}

func (c *client) readOnce(b []byte) (int, error) {
	return 0, errors.New("no event loop on this system")
}

func (c *client) shutdownSocket(how int) bool { return false }

const (
	shutRead  = 0
	shutWrite = 1
	shutBoth  = 2
)

// newRawSock returns nc: the raw socket is Linux only.
func newRawSock(nc net.Conn) net.Conn { return nc }

// baseConn returns nc: only Linux wraps connections.
func baseConn(nc net.Conn) net.Conn { return nc }

// peerGone is Linux only (see poller_linux.go): elsewhere a reader that
// waits learns that the client left when it reads again.
func (c *client) peerGone() bool { return false }
