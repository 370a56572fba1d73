package abuse

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/squeeze-kv/squeeze/internal/units"
)

// floodLoad is the flood part's load: clients that each pipeline
// commands SETs of size bytes and read no reply for hold.
type floodLoad struct {
	clients, commands, size int
	hold                    time.Duration // before the flooders read their replies
	settle                  time.Duration // after the load, before the RSS is read again
	// maxMemory is the proxy's --max-memory in this part, unless the
	// proxy flags give one: less than the load sends.
	maxMemory int64
}

// total is the bytes of values the load sends.
func (l floodLoad) total() int64 { return int64(l.clients) * int64(l.commands) * int64(l.size) }

// floodLoad is the short form's load (200 MiB, under 300 MB in all), or
// the long form's (10 GiB, flooders holding for Duration).
func (c Config) floodLoad() floodLoad {
	l := floodLoad{clients: 20, commands: 10, size: 1 << 20, hold: time.Second, settle: 2 * time.Second, maxMemory: 128 << 20}
	if c.long() {
		l = floodLoad{clients: 200, commands: 50, size: 1 << 20, hold: c.Duration, settle: 10 * time.Second, maxMemory: 1 << 30}
	}
	if c.FloodClients > 0 {
		l.clients = c.FloodClients
	}
	if c.FloodSets > 0 {
		l.commands = c.FloodSets
	}
	if c.FloodHold > 0 {
		l.hold = c.FloodHold
	}
	return l
}

// floodReplyWait bounds the flooders' reading of their replies after the
// hold.
const floodReplyWait = 2 * time.Minute

// floodOutcome is what the flooders saw.
type floodOutcome struct {
	mu                  sync.Mutex
	sent, ok, errs, cut int
	firstErr, firstCut  string
}

func (o *floodOutcome) add(sent, ok, errs int, firstErr string, cut error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sent += sent
	o.ok += ok
	o.errs += errs
	if o.firstErr == "" {
		o.firstErr = firstErr
	}
	if cut != nil {
		o.cut++
		if o.firstCut == "" {
			o.firstCut = cut.Error()
		}
	}
}

func (o *floodOutcome) String() string {
	s := fmt.Sprintf("%d SETs sent, %d +OK read, %d error replies, %d connections ended before all their replies", o.sent, o.ok, o.errs, o.cut)
	if o.firstErr != "" {
		s += fmt.Sprintf(" (first error %q)", o.firstErr)
	}
	if o.firstCut != "" {
		s += fmt.Sprintf(" (first ended: %s)", o.firstCut)
	}
	return s
}

// flood runs the flooders against addr and returns when each has read
// its replies (or lost its connection) and closed.
func flood(ctx context.Context, addr string, l floodLoad, value []byte) *floodOutcome {
	o := &floodOutcome{}
	var wg sync.WaitGroup
	for i := range l.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent, ok, errs, firstErr, cut := flooder(ctx, addr, fmt.Sprintf("flood:%d", i), l, value)
			o.add(sent, ok, errs, firstErr, cut)
		}()
	}
	wg.Wait()
	return o
}

// flooder is one flooding client: it writes its SETs (all of them
// pipelined, each value written from the one shared buffer), reads
// nothing for the hold, then reads the replies and closes. cut is the
// error that ended the connection before all replies were read.
func flooder(ctx context.Context, addr, key string, l floodLoad, value []byte) (sent, ok, errs int, firstErr string, cut error) {
	c, err := dial(addr, time.Second, 0)
	if err != nil {
		return 0, 0, 0, "", err
	}
	defer c.Close()
	deadline := time.Now().Add(l.hold + floodReplyWait)
	c.nc.SetDeadline(deadline)
	header := fmt.Appendf(nil, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n", len(key), key, len(value))
	wrote := make(chan int, 1)
	go func() {
		n := 0
		for ; n < l.commands; n++ {
			bufs := net.Buffers{header, value, []byte("\r\n")}
			if _, err := bufs.WriteTo(c.nc); err != nil {
				break
			}
		}
		wrote <- n
	}()
	select {
	case <-ctx.Done():
	case <-time.After(l.hold):
	}
	for range l.commands {
		r, err := c.read()
		if err != nil {
			cut = err
			break
		}
		switch {
		case r.kind == '+':
			ok++
		case r.isError():
			errs++
			if firstErr == "" {
				firstErr = r.text
			}
		}
	}
	c.Close() // ends a write still blocked
	return <-wrote, ok, errs, firstErr, cut
}

// runFlood is the flood part: many clients pipeline large SETs and read
// no reply for a while, while other clients PING through the proxy and
// straight to Redis and innocent clients SET and GET their own values
// through the proxy. It prints the others' latencies, the proxy's peak
// RSS against its --max-memory and its RSS after the load.
func runFlood(ctx context.Context, w io.Writer, e *environment) ([]string, error) {
	l := e.cfg.floodLoad()
	redis, _, err := e.startRedis(ctx, "flood", false)
	if err != nil {
		return nil, err
	}
	defer redis.kill()
	maxMemory, from := l.maxMemory, "the suite's, below the load"
	if v, ok := flagValue(e.cfg.ProxyFlags, "max-memory"); ok {
		n, err := units.ParseSize(v)
		if err != nil {
			return nil, fmt.Errorf("the proxy flags' --max-memory %q: %w", v, err)
		}
		maxMemory, from = n, "from the proxy flags"
	}
	proxy, _, err := e.startProxy(ctx, redis.addr, "--max-memory", fmt.Sprintf("%dMiB", l.maxMemory>>20))
	if err != nil {
		return nil, err
	}
	defer proxy.kill()
	limit, limitFrom := rssBound(e.cfg)

	fmt.Fprintf(w, "%d clients each pipeline %d SETs of %s (random bytes, one key each; %s in all), read no reply for %s, then read them and close;\n",
		l.clients, l.commands, iec(int64(l.size)), iec(l.total()), l.hold)
	fmt.Fprintf(w, "meanwhile one client PINGs through the proxy and one straight to Redis every %s, and %d innocent clients SET and GET their own values through the proxy.\n",
		probeEvery, innocentWriters)
	fmt.Fprintf(w, "proxy --max-memory %s (%s)\n", iec(maxMemory), from)

	idle, _, err := proxy.memory()
	if err != nil {
		return nil, err
	}
	ping := startProber(proxy.addr, "PING through the proxy", pingOp)
	direct := startProber(redis.addr, "PING straight to Redis", pingOp)
	innocents := startInnocents(proxy.addr, e.cfg.Seed)
	dialP := startDialProber(proxy.addr, "new connection and PING through the proxy", pingOp)
	dialD := startDialProber(redis.addr, "new connection and PING straight to Redis", pingOp)
	all := append(probers{ping, direct, dialP, dialD}, innocents...)
	defer all.stop()
	sampler := startSampler(proxy)
	start := time.Now()
	outcome := flood(ctx, proxy.addr, l, randomBytes(e.cfg.Seed, l.size))
	end := time.Now()
	all.stop()
	sampled := sampler.stop()
	_, peak, err := proxy.memory()
	if err != nil {
		return nil, err
	}
	if err := sleepCtx(ctx, time.Until(end.Add(l.settle))); err != nil {
		return nil, err
	}
	after, _, err := proxy.memory()
	if err != nil {
		return nil, err
	}
	if err := proxy.alive(); err != nil {
		return nil, err
	}

	load := window{start, end}
	t := newTable(append([]string{fmt.Sprintf("during the load (%s)", end.Sub(start).Round(time.Millisecond))}, latencyHeader...)...)
	pl, dl := ping.during(load), direct.during(load)
	t.add(append([]string{"PING through the proxy"}, pl.cells()...)...)
	t.add(append([]string{"PING straight to Redis"}, dl.cells()...)...)
	t.add(append([]string{"innocent SET+GET, proxy"}, innocents.all().cells()...)...)
	t.add(append([]string{"connect+PING, proxy"}, dialP.during(load).cells()...)...)
	t.add(append([]string{"connect+PING, Redis"}, dialD.during(load).cells()...)...)
	t.writeTo(w)
	fmt.Fprintf(w, "flood clients: %s\n", outcome)
	against := "no --max-memory bound (0)"
	if maxMemory > 0 {
		against = map[bool]string{true: "OVER", false: "under"}[peak > maxMemory] + " its --max-memory " + iec(maxMemory)
	}
	fmt.Fprintf(w, "proxy RSS: idle %s; peak %s (VmHWM; sampled VmRSS peak %s), %s\n", iec(idle), iec(peak), iec(sampled), against)
	settled := "long form"
	if !e.cfg.long() {
		settled = "short form; the long form waits 10s"
	}
	fmt.Fprintf(w, "proxy RSS %s after the load ended: %s (%s)\n", l.settle, iec(after), settled)

	var missed []string
	line, m := judgePing("flood", e.cfg.PingP99, pl, dl)
	fmt.Fprintln(w, line)
	missed = appendMissed(missed, m)
	if limit > 0 {
		fmt.Fprintf(w, "peak under the bound %s (%s): %s\n", iec(limit), limitFrom, map[bool]string{true: "yes", false: "NO"}[peak <= limit])
		if peak > limit {
			missed = append(missed, fmt.Sprintf("flood: proxy peak RSS %s over the bound %s (%s)", iec(peak), iec(limit), limitFrom))
		}
	}
	failed, first := append(probers{ping, dialP}, innocents...).failures()
	fmt.Fprintf(w, "failed round trips of innocent clients through the proxy (PING, SET+GET, connect+PING): %d (target 0)\n", failed)
	return appendMissed(missed, judgeInnocent("flood", failed, first)), nil
}

// rssBound is the bound on the proxy's peak RSS given on the command
// line: --rss-limit, else --max-memory among the proxy flags; 0 if none.
func rssBound(cfg Config) (int64, string) {
	if cfg.RSSLimit > 0 {
		return cfg.RSSLimit, "--rss-limit"
	}
	if v, ok := flagValue(cfg.ProxyFlags, "max-memory"); ok {
		if n, err := units.ParseSize(v); err == nil && n > 0 {
			return n, "the proxy flags' --max-memory"
		}
	}
	return 0, ""
}

// appendMissed appends m to missed unless it is empty.
func appendMissed(missed []string, m string) []string {
	if m == "" {
		return missed
	}
	return append(missed, m)
}

// sleepCtx waits d, or less if ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
