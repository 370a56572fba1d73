package proxy

import (
	"bytes"
	"context"
	"errors"
	"net"
	"time"

	"github.com/squeeze-kv/squeeze/resp"
)

// watchSentinels follows the Sentinels' +switch-master channel until the
// server closes. When the master of s.up.Master switches, it closes every
// upstream connection (shared and private), as Sentinel itself makes
// Redis close its clients: the next command dials the new master at once,
// instead of writing to the old one until it is reconfigured.
func (s *Server) watchSentinels() {
	u := s.up
	for i := 0; ; i++ {
		select {
		case <-s.done:
			return
		default:
		}
		addr := u.Sentinels[i%len(u.Sentinels)]
		err := s.watchSentinel(addr)
		select {
		case <-s.done:
			return
		case <-time.After(time.Second): // then the next Sentinel
		}
		s.logger().Warn("sentinel watch lost; retrying", "sentinel", addr, "err", err)
	}
}

// watchSentinel subscribes to +switch-master on one Sentinel and handles
// its messages until the connection fails or the server closes.
func (s *Server) watchSentinel(addr string) error {
	u := s.up
	ctx, cancel := context.WithTimeout(context.Background(), s.dialTimeout())
	d := net.Dialer{Timeout: s.dialTimeout(), KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	cancel()
	if err != nil {
		return err
	}
	defer nc.Close()
	stopped := make(chan struct{})
	defer close(stopped)
	go func() { // the server closing ends the watch
		select {
		case <-s.done:
			nc.Close()
		case <-stopped:
		}
	}()
	var req []byte
	if u.SentinelPassword != "" {
		req = resp.AppendCommand(req, []byte("AUTH"), []byte(u.SentinelPassword))
	}
	req = resp.AppendCommand(req, []byte("SUBSCRIBE"), []byte("+switch-master"))
	if _, err := nc.Write(req); err != nil {
		return err
	}
	var buf []byte
	tmp := make([]byte, 4096)
	for {
		v, rest, err := resp.ReadValue(buf)
		if errors.Is(err, resp.ErrIncomplete) {
			n, rerr := nc.Read(tmp)
			if rerr != nil {
				return rerr
			}
			buf = append(buf, tmp[:n]...)
			continue
		}
		if err != nil {
			return err
		}
		if v.Type == resp.Error {
			return errors.New(string(v.Str)) // a copy, before buf is reused
		}
		s.sentinelEvent(v)
		// v lies in buf: only now, with v used, may the rest move over it
		// (an error read after the rest had moved was the next reply's
		// text over the end of its own).
		buf = append(buf[:0], rest...)
	}
}

// sentinelEvent handles one reply or message of the +switch-master
// subscription.
func (s *Server) sentinelEvent(v resp.Value) {
	// ["message", "+switch-master", "<master> <old ip> <old port> <new ip> <new port>"]
	it := v.Elements()
	kind, _ := it.Next()
	_, _ = it.Next()
	payload, _ := it.Next()
	if bytes.Equal(kind.Str, []byte("subscribe")) {
		// Subscribed: a switch while the proxy was not (at start,
		// while it reconnected to a Sentinel) sent no message for it
		// to hear, so ask where the master is now.
		ctx, cancel := context.WithTimeout(context.Background(), s.dialTimeout())
		addr, err := s.masterAddr(ctx)
		cancel()
		if err == nil {
			s.switchMaster(addr)
		}
		return
	}
	if !bytes.Equal(kind.Str, []byte("message")) {
		return
	}
	fields := bytes.Fields(payload.Str)
	if len(fields) == 5 && string(fields[0]) == s.up.Master {
		s.switchMaster(net.JoinHostPort(string(fields[3]), string(fields[4])))
	}
}

// switchMaster closes every upstream connection after a failover, when
// addr is not where the connections go already (nor is any dialed yet).
func (s *Server) switchMaster(addr string) {
	if old, _ := s.sentinelMaster.Swap(addr).(string); old == "" || old == addr {
		return
	}
	s.logger().Warn("sentinel: the master switched; reconnecting", "master", s.up.Master, "addr", addr)
	s.metrics.failover()
	s.pool.failAll(errFailover)
	s.mu.Lock()
	for c := range s.clients {
		c.closePinned()
	}
	s.mu.Unlock()
}
