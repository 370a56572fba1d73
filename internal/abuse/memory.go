package abuse

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/units"
)

const (
	bigValueSize = 8 << 20               // the value the non-reading client asks for
	bigGets      = 300                   // GETs it pipelines
	bombSize     = 400 << 20             // what the bomb decodes to
	bombGets     = 6                     // GETs of the bomb, pipelined
	smallRcvbuf  = 4096                  // SO_RCVBUF of the clients that read slowly or never
	pingEvery    = probeEvery            // the pinger is a prober (probe.go)
	pingTarget   = 50 * time.Millisecond // issue 20's target for other clients' p99
)

// memoryCase is one hostile client of the memory part.
type memoryCase struct {
	name string
	// prepare stores what the client asks for and describes it; client
	// runs the client
	// for about hold and describes what it saw.
	prepare func(ctx context.Context, redisAddr, proxyAddr string) (string, error)
	client  func(ctx context.Context, proxyAddr string, hold time.Duration, long bool) (string, error)
}

// runMemory is part b: the proxy's peak RSS under a client that never
// reads its replies and under a decompression bomb, and the latency of
// another client's PINGs meanwhile, beside PINGs straight to Redis
// (judged as in the other parts: judgePing). Each case gets a proxy of
// its own, so that its VmHWM is that case's peak.
func runMemory(ctx context.Context, w io.Writer, e *environment) ([]string, error) {
	redis, _, err := e.startRedis(ctx, "memory", false)
	if err != nil {
		return nil, err
	}
	defer redis.kill()
	limit, limitFrom := e.cfg.RSSLimit, "--rss-limit"
	if limit <= 0 {
		if v, ok := flagValue(e.cfg.ProxyFlags, "max-memory"); ok {
			if n, err := units.ParseSize(v); err == nil && n > 0 {
				limit, limitFrom = n, "the proxy's --max-memory"
			}
		}
	}
	if limit > 0 {
		fmt.Fprintf(w, "RSS bound: %s (%s)\n", iec(limit), limitFrom)
	} else {
		fmt.Fprintf(w, "RSS bound: none given (--rss-limit, or --max-memory among the proxy flags): peaks are printed, not judged\n")
	}
	cases := []memoryCase{
		{name: fmt.Sprintf("non-reader: %d pipelined GETs of an %s random value, SO_RCVBUF %d, never reads", bigGets, iec(bigValueSize), smallRcvbuf),
			prepare: prepareBig, client: nonReader},
		{name: fmt.Sprintf("bomb: %d pipelined GETs of a zstd frame that decodes to %s, read as they come", bombGets, iec(bombSize)),
			prepare: prepareBomb, client: bombReader},
	}
	hold := e.cfg.phase(3 * time.Second)
	var missed []string
	for _, mc := range cases {
		proxy, _, err := e.startProxy(ctx, redis.addr)
		if err != nil {
			return nil, err
		}
		m, err := runMemoryCase(ctx, w, mc, redis.addr, proxy, hold, e.cfg.long(), limit, e.cfg.PingP99)
		proxy.kill()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", mc.name, err)
		}
		missed = append(missed, m...)
	}
	return missed, nil
}

// runMemoryCase runs one case against a fresh proxy and prints its figures.
func runMemoryCase(ctx context.Context, w io.Writer, mc memoryCase, redisAddr string, proxy *process, hold time.Duration, long bool, limit int64, pingLimit time.Duration) ([]string, error) {
	fmt.Fprintf(w, "\n%s\n", mc.name)
	stored, err := mc.prepare(ctx, redisAddr, proxy.addr)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	fmt.Fprintf(w, "  stored: %s\n", stored)
	idle, _, err := proxy.memory()
	if err != nil {
		return nil, err
	}
	pings := startPinger(proxy.addr)
	direct := startPinger(redisAddr)
	// Let the pinger take a few idle samples first.
	time.Sleep(100 * time.Millisecond)
	sampler := startSampler(proxy)
	outcome, cerr := mc.client(ctx, proxy.addr, hold, long)
	// The PING in flight may wait for the proxy to catch up; the proxy's
	// memory may still grow meanwhile.
	lat, pingErrs := pings.stop()
	directLat, _ := direct.stop()
	time.Sleep(500 * time.Millisecond)
	sampled := sampler.stop()
	_, peak, err := proxy.memory()
	if err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, cerr
	}
	fmt.Fprintf(w, "  client: %s\n", outcome)
	fmt.Fprintf(w, "  proxy RSS: %s idle before, peak %s (VmHWM; sampled VmRSS peak %s)\n",
		iec(idle), iec(peak), iec(sampled))
	p99, worst := percentile(lat, 0.99), percentile(lat, 1)
	fmt.Fprintf(w, "  other client's PING every %s: %d replies, %d errors, p99 %s, max %s (target p99 < %s)\n",
		pingEvery, len(lat), pingErrs, ms(p99), ms(worst), ms(pingTarget))
	fmt.Fprintf(w, "  PING straight to Redis meanwhile: %d replies, p99 %s, max %s\n",
		len(directLat), ms(percentile(directLat, 0.99)), ms(percentile(directLat, 1)))
	var missed []string
	if limit > 0 {
		under := peak <= limit
		fmt.Fprintf(w, "  peak under the bound %s: %s\n", iec(limit), map[bool]string{true: "yes", false: "NO"}[under])
		if !under {
			missed = append(missed, fmt.Sprintf("%s: peak RSS %s over the bound %s", shortName(mc.name), iec(peak), iec(limit)))
		}
	}
	line, m := judgePing(shortName(mc.name), pingLimit, summarize(lat, pingErrs), summarize(directLat, 0))
	fmt.Fprintf(w, "  %s\n", line)
	missed = appendMissed(missed, m)
	if pingLimit > 0 && pingErrs > 0 {
		missed = append(missed, fmt.Sprintf("%s: %d PINGs through the proxy failed", shortName(mc.name), pingErrs))
	}
	return missed, nil
}

// shortName is a case's name up to its colon.
func shortName(s string) string { n, _, _ := strings.Cut(s, ":"); return n }

// prepareBig stores the 8 MiB random value through the proxy.
func prepareBig(ctx context.Context, redisAddr, proxyAddr string) (string, error) {
	c, err := dial(proxyAddr, time.Second, 0)
	if err != nil {
		return "", err
	}
	defer c.Close()
	r, err := c.do(30*time.Second, "SET", "abuse:big", string(randomBytes(1, bigValueSize)))
	return "abuse:big, " + iec(bigValueSize) + " of random bytes, through the proxy", errReply(r, err)
}

// nonReader pipelines the GETs on a socket with a small receive buffer
// and reads nothing for hold; then it checks whether the proxy closed it.
func nonReader(ctx context.Context, proxyAddr string, hold time.Duration, long bool) (string, error) {
	c, err := dial(proxyAddr, time.Second, smallRcvbuf)
	if err != nil {
		return "", err
	}
	defer c.Close()
	cmds := make([][]string, bigGets)
	for i := range cmds {
		cmds[i] = []string{"GET", "abuse:big"}
	}
	c.nc.SetWriteDeadline(time.Now().Add(hold))
	werr := c.send(cmds...)
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(hold):
	}
	// One short read: data means the connection is open (the proxy waits
	// for the client to read); an end or a reset means the proxy closed it.
	c.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, rerr := c.br.ReadByte()
	state := "still open after " + hold.String()
	if rerr != nil && !isTimeout(rerr) {
		state = "closed by the proxy (" + rerr.Error() + ")"
	} else if rerr != nil {
		state += ", no reply byte had reached it"
	}
	sent := "all commands sent"
	if werr != nil {
		sent = "sending the commands stopped: " + werr.Error()
	}
	return sent + "; connection " + state, nil
}

// prepareBomb writes a frame that decodes to 400 MiB of zeros straight
// to Redis, as a bad actor with access to Redis could.
func prepareBomb(ctx context.Context, redisAddr, proxyAddr string) (string, error) {
	enc, err := codec.NewEncoder(codec.Algorithm{ID: codec.IDZstd, Level: 19})
	if err != nil {
		return "", err
	}
	zeros := make([]byte, bombSize)
	frame := enc.AppendEncode(nil, zeros)
	if len(frame) >= len(zeros)/1000 {
		return "", fmt.Errorf("the bomb frame is %d bytes, not a bomb", len(frame))
	}
	c, err := dial(redisAddr, time.Second, 0)
	if err != nil {
		return "", err
	}
	defer c.Close()
	r, err := c.do(10*time.Second, "SET", "abuse:bomb", string(frame))
	return fmt.Sprintf("abuse:bomb, a %d-byte zstd frame that decodes to %s, straight to Redis", len(frame), iec(bombSize)), errReply(r, err)
}

// bombReader pipelines the GETs of the bomb and reads the replies,
// checking each value as it streams in: all of them in the long form
// (within a minute), for hold in the short form, which then closes.
func bombReader(ctx context.Context, proxyAddr string, hold time.Duration, long bool) (string, error) {
	c, err := dial(proxyAddr, time.Second, 0)
	if err != nil {
		return "", err
	}
	defer c.Close()
	cmds := make([][]string, bombGets)
	for i := range cmds {
		cmds[i] = []string{"GET", "abuse:bomb"}
	}
	start := time.Now()
	limit := hold
	if long {
		limit = time.Minute + hold
	}
	c.nc.SetDeadline(start.Add(limit))
	if err := c.send(cmds...); err != nil {
		return "", err
	}
	var values, refused, bad int
	var firstErr, ended string
	for range bombGets {
		n, errText, zero, err := c.readZeroBulk()
		if err != nil {
			ended = fmt.Sprintf(", then stopped after %s: %v", time.Since(start).Round(time.Millisecond), err)
			if isTimeout(err) && !long {
				ended = fmt.Sprintf(", then closed after %s (short form)", time.Since(start).Round(time.Millisecond))
			}
			break
		}
		switch {
		case errText != "":
			refused++
			if firstErr == "" {
				firstErr = errText
			}
		case n == bombSize && zero:
			values++
		default:
			bad++
		}
	}
	s := fmt.Sprintf("%d of %d values of %s read back in %s, %d refused, %d wrong%s", values, bombGets, iec(bombSize), time.Since(start).Round(time.Millisecond), refused, bad, ended)
	if firstErr != "" {
		s += fmt.Sprintf(" (%q)", firstErr)
	}
	if bad > 0 {
		return "", fmt.Errorf("%s", s)
	}
	return s, nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// pinger is the memory part's PING client: a prober of pingOp, whose
// stop gives the latencies of every round trip, failed ones included.
type pinger struct{ *prober }

func startPinger(addr string) *pinger {
	return &pinger{startProber(addr, "PING", pingOp)}
}

// stop ends the pinger and returns its latencies and error count.
func (p *pinger) stop() ([]time.Duration, int) {
	p.prober.stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	ds := make([]time.Duration, 0, len(p.samples))
	for _, s := range p.samples {
		ds = append(ds, s.d) // a failed PING's wait counts too
	}
	return ds, p.failed
}

// sampler reads the proxy's VmRSS every 20 ms and keeps the largest.
type sampler struct {
	done chan struct{}
	peak chan int64
}

func startSampler(p *process) *sampler {
	s := &sampler{done: make(chan struct{}), peak: make(chan int64, 1)}
	go func() {
		var peak int64
		for {
			if rss, _, err := p.memory(); err == nil {
				peak = max(peak, rss)
			}
			select {
			case <-s.done:
				s.peak <- peak
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *sampler) stop() int64 { close(s.done); return <-s.peak }

// percentile returns the q-quantile (0 < q <= 1) of ds by the nearest
// rank, or 0 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*q+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// flagValue finds the value of flag name in a list of command-line
// flags: "--name V", "--name=V", with one dash or two.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}
