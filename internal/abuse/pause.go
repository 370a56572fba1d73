package abuse

import (
	"context"
	"fmt"
	"io"
	"time"
)

// pauseFor is how long the pause part has Redis hold writes (CLIENT
// PAUSE ms WRITE).
const pauseFor = 3 * time.Second

// runPause is the pause part: CLIENT PAUSE WRITE sent straight to Redis,
// then one client's plain SET through the proxy, which Redis holds, while
// other clients PING and GET through the proxy and straight to Redis. A
// proxy that queues all clients' commands behind the held SET on a shared
// connection makes the others wait for the pause too.
func runPause(ctx context.Context, w io.Writer, e *environment) ([]string, error) {
	redis, proxy, stop, err := e.startPair(ctx, "pause")
	if err != nil {
		return nil, err
	}
	defer stop()
	admin, err := dial(redis.addr, time.Second, 0)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	// The values the GETs want: one stored through the proxy (compressed
	// by it), the same bytes straight to Redis.
	value := valueFor(e.cfg.Seed, 200, 0)
	if err := setVia(proxy.addr, "pause:proxy", value); err != nil {
		return nil, fmt.Errorf("SET through the proxy: %w", err)
	}
	if err := setVia(redis.addr, "pause:direct", value); err != nil {
		return nil, fmt.Errorf("SET straight to Redis: %w", err)
	}

	pingP := startProber(proxy.addr, "PING through the proxy", pingOp)
	pingD := startProber(redis.addr, "PING straight to Redis", pingOp)
	getP := startProber(proxy.addr, "GET through the proxy", getOp("pause:proxy", value))
	getD := startProber(redis.addr, "GET straight to Redis", getOp("pause:direct", value))
	all := probers{pingP, pingD, getP, getD}
	defer all.stop()

	// One pause in the short form; in the long form, pauses one after
	// another (with a second between) until Duration has passed.
	var pauses []window
	var held []string
	deadline := time.Now().Add(e.cfg.Duration)
	for len(pauses) == 0 || time.Now().Before(deadline) {
		if err := sleepCtx(ctx, 300*time.Millisecond); err != nil {
			return nil, err
		}
		start := time.Now()
		r, err := admin.do(5*time.Second, "CLIENT", "PAUSE", fmt.Sprint(pauseFor.Milliseconds()), "WRITE")
		if err := errReply(r, err); err != nil {
			return nil, fmt.Errorf("CLIENT PAUSE: %w", err)
		}
		pauses = append(pauses, window{start, start.Add(pauseFor)})
		held = append(held, heldSet(proxy.addr))
		if err := sleepCtx(ctx, time.Until(start.Add(pauseFor+700*time.Millisecond))); err != nil {
			return nil, err
		}
	}
	all.stop()
	if err := proxy.alive(); err != nil {
		return nil, err
	}

	fmt.Fprintf(w, "CLIENT PAUSE %d WRITE straight to Redis, then one client SETs through the proxy (Redis holds it);\n", pauseFor.Milliseconds())
	fmt.Fprintf(w, "meanwhile other clients PING and GET (and verify) every %s, through the proxy and straight to Redis.\n", probeEvery)
	t := newTable(append([]string{fmt.Sprintf("during the pause (%d x %s)", len(pauses), pauseFor)}, latencyHeader...)...)
	pp, pd := pingP.during(pauses...), pingD.during(pauses...)
	t.add(append([]string{"PING through the proxy"}, pp.cells()...)...)
	t.add(append([]string{"PING straight to Redis"}, pd.cells()...)...)
	t.add(append([]string{"GET through the proxy"}, getP.during(pauses...).cells()...)...)
	t.add(append([]string{"GET straight to Redis"}, getD.during(pauses...).cells()...)...)
	t.writeTo(w)
	fmt.Fprintf(w, "the held SET through the proxy: %s\n", summarizeHeld(held))
	line, m := judgePing("pause", e.cfg.PingP99, pp, pd)
	fmt.Fprintln(w, line)
	missed := appendMissed(nil, m)
	failed, first := probers{pingP, getP}.failures()
	fmt.Fprintf(w, "failed round trips of innocent clients through the proxy (PING, GET): %d (target 0)\n", failed)
	return appendMissed(missed, judgeInnocent("pause", failed, first)), nil
}

// setVia stores key's value through a connection of its own to addr.
func setVia(addr, key string, value []byte) error {
	c, err := dial(addr, time.Second, 0)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.do(10*time.Second, "SET", key, string(value))
	return errReply(r, err)
}

// heldSet sends one plain SET through the proxy while Redis holds
// writes and describes its reply and how long it took.
func heldSet(proxyAddr string) string {
	c, err := dial(proxyAddr, time.Second, 0)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer c.Close()
	start := time.Now()
	r, err := c.do(probeTimeout, "SET", "pause:held", "x")
	took := ms(time.Since(start))
	switch {
	case err != nil:
		return fmt.Sprintf("failed after %s: %v", took, err)
	case r.isError():
		return fmt.Sprintf("error reply after %s: %.60s", took, r.text)
	}
	return fmt.Sprintf("%c%s after %s", r.kind, r.text, took)
}

// summarizeHeld prints the held SETs' outcomes: the one, or the first
// and how many there were.
func summarizeHeld(held []string) string {
	if len(held) == 1 {
		return held[0]
	}
	return fmt.Sprintf("%s (the first of %d)", held[0], len(held))
}
