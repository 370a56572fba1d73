//go:build !linux

package proxy

// passPipe is Linux only: elsewhere a passed reply is copied (passreply.go).
type passPipe struct{}

func (p *passPipe) close() {}

func (c *upConn) splicePass(o *client, rest int64) (pend []byte, left int64, clientErr, upErr error, ok bool) {
	return nil, rest, nil, nil, false
}
