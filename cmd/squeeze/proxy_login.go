package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/squeeze-kv/squeeze/proxy"
)

// loginCheckTimeout bounds the start-up login check: an upstream that does
// not answer in that time is left to the warning of probeUpstream.
const loginCheckTimeout = 3 * time.Second

// checkUpstreamLogin sends PING over a connection made as the proxy makes
// them (TLS, AUTH, SELECT) before the proxy starts, and returns an error
// when Redis answers but refuses the login: a wrong password or user, a
// password Redis does not want, a database it does not have, or, with
// --client-auth pass, no password where Redis wants one. Every client's
// command would fail the same way, and nothing in the proxy's lifetime
// would change that, so the proxy does not start. An upstream that does
// not answer (yet) is not an error here: a sidecar may start before its
// Redis, and the start-up warning says so.
func checkUpstreamLogin(ctx context.Context, p *proxyFlags, srv *proxy.Server) error {
	ctx, cancel := context.WithTimeout(ctx, loginCheckTimeout)
	defer cancel()
	err := srv.Ready(ctx)
	if err == nil {
		return nil
	}
	msg := err.Error()
	refused := strings.Contains(msg, "refused AUTH/SELECT") || strings.Contains(msg, "WRONGPASS") ||
		strings.Contains(msg, "invalid password") || strings.Contains(msg, "invalid username-password")
	if strings.Contains(msg, "NOAUTH") && p.clientAuth != "require" {
		refused = true // with require, clients log in themselves
	}
	if !refused {
		return nil
	}
	return fmt.Errorf("upstream %s refuses the proxy's login (check the user and password of --upstream, or SQUEEZE_UPSTREAM): %w", redactURL(p.upstream), err)
}
