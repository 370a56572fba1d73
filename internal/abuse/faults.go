package abuse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The phases of the fault part, in the order of one cycle.
const (
	phaseSteady  = iota // Redis up
	phaseKilled         // after kill -9, until the new Redis is launched
	phaseRestart        // from the launch of the new Redis
	phasePaused         // after SIGSTOP
	phaseResumed        // after SIGCONT
	phaseCount
)

var phaseNames = [phaseCount]string{"steady", "killed (kill -9)", "restarted", "paused (SIGSTOP)", "resumed (SIGCONT)"}

// faultWriters is the number of client goroutines of the fault part.
const faultWriters = 8

// opTimeout bounds one command of a fault-part client: longer than a
// pause, so that a paused Redis delays replies rather than failing them.
const opTimeout = 5 * time.Second

// faultCounts are a phase's outcomes, counted by the writers.
type faultCounts struct {
	verified atomic.Int64 // GET returned the value just acknowledged
	errors   atomic.Int64 // error replies, timeouts, lost connections
	wrong    atomic.Int64 // GET returned other bytes than were written
	missing  atomic.Int64 // GET returned nil after an acknowledged SET
}

// faultRun is the shared state of the writers.
type faultRun struct {
	seed   uint64
	addr   string // the proxy
	phase  atomic.Int32
	counts [phaseCount]faultCounts
	// goodAfter is when the current fault ended (the new Redis accepted
	// connections, or SIGCONT was sent), in UnixNano; firstGood, the
	// first verified reply after it (0 until then).
	goodAfter, firstGood atomic.Int64
	mu                   sync.Mutex
	acked                [faultWriters][]int // sequence numbers whose SET was acknowledged
	unsure               [faultWriters][]int // SETs that failed: applied or not
}

// markFaultEnd starts timing the recovery from a fault that ended at t.
func (f *faultRun) markFaultEnd(t time.Time) {
	f.firstGood.Store(0)
	f.goodAfter.Store(t.UnixNano())
}

// recovery waits up to limit for the first verified reply after the last
// fault ended and returns the time to it, or -1.
func (f *faultRun) recovery(limit time.Duration) time.Duration {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if g := f.firstGood.Load(); g != 0 {
			return time.Duration(g - f.goodAfter.Load())
		}
	}
	return -1
}

// good records a verified reply.
func (f *faultRun) good() {
	now := time.Now().UnixNano()
	if after := f.goodAfter.Load(); after != 0 && now > after {
		f.firstGood.CompareAndSwap(0, now)
	}
}

// writer writes distinct values and reads each back until stop closes.
func (f *faultRun) writer(w int, stop <-chan struct{}) {
	var c *conn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		ph := &f.counts[f.phase.Load()]
		if c == nil {
			var err error
			if c, err = dial(f.addr, time.Second, 0); err != nil {
				ph.errors.Add(1)
				c = nil
				time.Sleep(10 * time.Millisecond)
				continue
			}
		}
		key, val := keyFor(w, seq), valueFor(f.seed, w, seq)
		r, err := c.do(opTimeout, "SET", key, string(val))
		if err != nil || r.kind != '+' {
			ph.errors.Add(1)
			f.mu.Lock()
			f.unsure[w] = append(f.unsure[w], seq)
			f.mu.Unlock()
			if err != nil { // the connection's state is unknown: a new one
				c.Close()
				c = nil
				time.Sleep(5 * time.Millisecond)
			}
			continue
		}
		f.mu.Lock()
		f.acked[w] = append(f.acked[w], seq)
		f.mu.Unlock()
		r, err = c.do(opTimeout, "GET", key)
		switch {
		case err != nil:
			ph.errors.Add(1)
			c.Close()
			c = nil
		case r.isError():
			ph.errors.Add(1)
		case r.null:
			ph.missing.Add(1)
		case r.kind != '$' || !bytes.Equal(r.bulk, val):
			ph.wrong.Add(1)
		default:
			ph.verified.Add(1)
			f.good()
		}
	}
}

// runFaults is part a: Redis killed with kill -9 and restarted, then
// paused with SIGSTOP and resumed, under writers that verify every value.
func runFaults(ctx context.Context, w io.Writer, e *environment) ([]string, error) {
	redis, dir, err := e.startRedis(ctx, "faults", true)
	if err != nil {
		return nil, err
	}
	defer func() { redis.kill() }()
	proxy, _, err := e.startProxy(ctx, redis.addr)
	if err != nil {
		return nil, err
	}
	defer proxy.kill()
	f := &faultRun{seed: e.cfg.Seed, addr: proxy.addr}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range faultWriters {
		wg.Add(1)
		go func() { defer wg.Done(); f.writer(i, stop) }()
	}
	stopWriters := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopWriters()

	step, down, pause := time.Second, 500*time.Millisecond, time.Second
	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	var upRec, killRec, pauseRec []time.Duration
	var missed []string
	// One cycle in the short form; in the long form, cycles until
	// Duration has passed, each phase lasting Duration/5 (Redis down or
	// paused half as long).
	deadline := time.Now()
	if e.cfg.long() {
		step = max(e.cfg.Duration/5, time.Second)
		down, pause = step/2, step/2
		deadline = time.Now().Add(e.cfg.Duration)
	}
	for cycle := 0; cycle == 0 || time.Now().Before(deadline); cycle++ {
		f.phase.Store(phaseSteady)
		if err := sleep(step); err != nil {
			return nil, err
		}
		f.phase.Store(phaseKilled)
		redis.cmd.Process.Kill()
		<-redis.done
		if err := sleep(down); err != nil {
			return nil, err
		}
		launched := time.Now()
		f.markFaultEnd(launched)
		f.phase.Store(phaseRestart)
		if redis, err = e.restartRedis(ctx, redis, dir, true); err != nil {
			return nil, fmt.Errorf("restart: %w", err)
		}
		upRec = append(upRec, time.Since(launched))
		killRec = append(killRec, f.recovery(10*time.Second))
		if err := sleep(step); err != nil {
			return nil, err
		}
		f.phase.Store(phasePaused)
		if err := redis.signal(stopSignal); err != nil {
			return nil, err
		}
		if err := sleep(pause); err != nil {
			redis.signal(contSignal)
			return nil, err
		}
		f.markFaultEnd(time.Now())
		if err := redis.signal(contSignal); err != nil {
			return nil, err
		}
		f.phase.Store(phaseResumed)
		pauseRec = append(pauseRec, f.recovery(10*time.Second))
		if err := sleep(step); err != nil {
			return nil, err
		}
	}
	stopWriters()

	fmt.Fprintf(w, "%d clients write distinct values (half compressible, 1-6 kB; half 8-55 random bytes) and read each back;\n", faultWriters)
	fmt.Fprintf(w, "Redis runs with appendonly yes, appendfsync always; each phase %s, killed for %s, paused for %s.\n", step, down, pause)
	fmt.Fprintf(w, "A command counts in the phase it started in.\n")
	fmt.Fprintf(w, "%-20s %10s %8s %6s %8s\n", "phase", "verified", "errors", "wrong", "missing")
	var total faultTotals
	for i := range phaseCount {
		c := &f.counts[i]
		v, er, wr, mi := c.verified.Load(), c.errors.Load(), c.wrong.Load(), c.missing.Load()
		total.add(v, er, wr, mi)
		fmt.Fprintf(w, "%-20s %10d %8d %6d %8d\n", phaseNames[i], v, er, wr, mi)
	}
	fmt.Fprintf(w, "%-20s %10d %8d %6d %8d\n", "all", total.verified, total.errors, total.wrong, total.missing)
	fmt.Fprintf(w, "restart: Redis accepts connections %s after its launch (as polled every 5 ms)\n", durations(upRec))
	fmt.Fprintf(w, "recovery after restart (first verified reply through the proxy, from the launch): %s\n", durations(killRec))
	fmt.Fprintf(w, "recovery after SIGCONT (first verified reply after it): %s\n", durations(pauseRec))

	acked, lost, wrong, applied, err := f.checkStored(proxy.addr)
	if err != nil {
		return nil, fmt.Errorf("final check: %w", err)
	}
	fmt.Fprintf(w, "after the faults: %d acknowledged writes read back, %d lost, %d wrong; %d of %d failed SETs were applied (allowed)\n",
		acked, lost, wrong, applied, f.unsureCount())
	if n := total.wrong + int64(wrong); n > 0 {
		missed = append(missed, fmt.Sprintf("%d wrong values", n))
	}
	if n := total.missing + int64(lost); n > 0 {
		missed = append(missed, fmt.Sprintf("%d acknowledged writes lost", n))
	}
	if slices.Contains(killRec, -1) || slices.Contains(pauseRec, -1) {
		missed = append(missed, "no verified reply within 10s of a fault's end")
	}
	return missed, nil
}

// faultTotals sums the phases' counts.
type faultTotals struct{ verified, errors, wrong, missing int64 }

func (t *faultTotals) add(v, e, w, m int64) {
	t.verified += v
	t.errors += e
	t.wrong += w
	t.missing += m
}

// durations formats recovery times: one, or the median and maximum of
// several; -1 (none within the limit) prints as "none".
func durations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	if slices.Contains(ds, -1) {
		return fmt.Sprintf("none within 10s in %d of %d faults", count(ds, -1), len(ds))
	}
	if len(ds) == 1 {
		return ms(ds[0])
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("median %s, max %s over %d faults", ms(s[len(s)/2]), ms(s[len(s)-1]), len(s))
}

func count[T comparable](s []T, v T) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// ms formats a duration in milliseconds with one decimal.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }

func (f *faultRun) unsureCount() int {
	n := 0
	for _, s := range f.unsure {
		n += len(s)
	}
	return n
}

// checkStored reads back, through the proxy, every value whose SET was
// acknowledged (each must be there, byte for byte) and every value whose
// SET failed (absent, or byte for byte).
func (f *faultRun) checkStored(addr string) (acked, lost, wrong, applied int, err error) {
	c, err := dial(addr, time.Second, 0)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer c.Close()
	check := func(w int, seqs []int, mustExist bool) error {
		for len(seqs) > 0 {
			batch := seqs[:min(len(seqs), 200)]
			seqs = seqs[len(batch):]
			args := []string{"MGET"}
			for _, s := range batch {
				args = append(args, keyFor(w, s))
			}
			r, err := c.do(30*time.Second, args...)
			if err := errReply(r, err); err != nil {
				return err
			}
			if len(r.elems) != len(batch) {
				return fmt.Errorf("MGET of %d keys returned %d elements", len(batch), len(r.elems))
			}
			for i, el := range r.elems {
				switch {
				case el.isError():
					return errors.New(el.text)
				case el.null && mustExist:
					lost++
				case el.null:
				case !bytes.Equal(el.bulk, valueFor(f.seed, w, batch[i])):
					wrong++
				case mustExist:
					acked++
				default:
					applied++
				}
			}
		}
		return nil
	}
	for w := range faultWriters {
		if err := check(w, f.acked[w], true); err != nil {
			return 0, 0, 0, 0, err
		}
		if err := check(w, f.unsure[w], false); err != nil {
			return 0, 0, 0, 0, err
		}
	}
	return acked, lost, wrong, applied, nil
}
