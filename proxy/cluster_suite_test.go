package proxy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// clusterLongEnv names the environment variable that makes the cluster
// suite's load longer and its key spaces and reshard larger
// (scripts/test-cluster.sh sets it for LONG=1).
const clusterLongEnv = "SQUEEZE_CLUSTER_LONG"

// clusterSuiteSize is how much the cluster suite does.
type clusterSuiteSize struct {
	keys    int           // keys in each key space
	slots   int           // slots moved by the reshard
	workers int           // goroutines of each client
	steady  time.Duration // load before the reshard, and between reshard and kill
}

// clusterSuiteSizes returns the long form's sizes when clusterLongEnv is
// set, a smaller form under the race detector, and the short form else.
func clusterSuiteSizes() clusterSuiteSize {
	if os.Getenv(clusterLongEnv) != "" {
		return clusterSuiteSize{keys: 3000, slots: 1000, workers: 8, steady: 10 * time.Second}
	}
	if raceEnabled {
		return clusterSuiteSize{keys: 120, slots: 40, workers: 4, steady: time.Second}
	}
	return clusterSuiteSize{keys: 400, slots: 250, workers: 6, steady: 2 * time.Second}
}

// The phases of the cluster suite, for counting errors.
const (
	phaseSteady = iota
	phaseReshard
	phaseFailover
	phases
)

var phaseNames = [phases]string{"steady load", "reshard", "failover"}

// suiteKey is one key of a load and what it may hold. Only its worker
// touches it while the load runs.
type suiteKey struct {
	name string
	slot int
	body string // the value after the version, the same in every version
	sent int    // the last version written (0: none)
	// acked is the last version a SET of which was acknowledged (0: none),
	// at ackedAt; maybe holds the versions whose SET failed, which Redis
	// may have applied all the same.
	acked   int
	ackedAt time.Time
	maybe   map[int]bool
}

// value returns version v of k's value: its name and version in front
// of a compressible body. The version has a fixed width, so that every
// version of a key has the same length.
func (k *suiteKey) value(v int) string {
	return fmt.Sprintf("%s|%08d|%s", k.name, v, k.body)
}

// suiteKeySize returns the size of the i-th key's value, spread evenly on
// a log scale from 100 B to 200 kB.
func suiteKeySize(i int) int {
	u := float64((i*7919)%1000) / 999
	return int(100 * math.Pow(2000, u))
}

// lostWrite is an acknowledged write a later read did not find.
type lostWrite struct {
	key     string
	slot    int
	ackedAt time.Time // when the lost version was acknowledged
}

// clusterLoad is a verifying load through one go-redis ClusterClient on a
// key space of its own. Each worker owns some keys, so it knows what each
// must hold: every GET is checked against the versions written.
type clusterLoad struct {
	name  string
	cc    *redis.ClusterClient
	keys  []*suiteKey
	phase *atomic.Int32

	verified, wrong atomic.Int64
	asks, moves     atomic.Int64 // redirections the client followed
	ops, errs       [phases]atomic.Int64
	lastErrAt       atomic.Int64 // Unix nanoseconds
	mu              sync.Mutex
	samples         [phases]string // an error of each phase, for the log
	lastErr         string
	lost            []lostWrite
	wrongSample     string
}

// newClusterLoad returns a load of n keys named prefix and a number, for
// a ClusterClient given addrs, that counts its errors in the phase that
// phase holds.
func newClusterLoad(name, prefix string, addrs []string, n int, phase *atomic.Int32) *clusterLoad {
	l := &clusterLoad{
		name: name,
		// go-redis reloads the topology on a redirection, and else every
		// minute: every 2 s here, as in TestProxy_ClusterFailover, so that
		// the load recovers from the failover in a few seconds.
		cc:    redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ClusterStateReloadInterval: 2 * time.Second}),
		phase: phase,
	}
	l.cc.OnNewNode(func(node *redis.Client) { node.AddHook(redirectCounter{l}) })
	bodies := map[int]string{} // keys of one size share their body's memory
	for i := range n {
		k := &suiteKey{name: prefix + strconv.Itoa(i), maybe: map[int]bool{}}
		size := suiteKeySize(i)
		body, ok := bodies[size]
		if !ok {
			body = compressible(size, i)
			bodies[size] = body
		}
		k.body = body[:size-len(k.value(0))]
		l.keys = append(l.keys, k)
	}
	return l
}

// failed counts an error of the current phase.
func (l *clusterLoad) failed(err error) {
	p := l.phase.Load()
	l.errs[p].Add(1)
	l.lastErrAt.Store(time.Now().UnixNano())
	l.mu.Lock()
	if l.samples[p] == "" {
		l.samples[p] = err.Error()
	}
	l.lastErr = err.Error()
	l.mu.Unlock()
}

// wrongValue counts a value that was never written.
func (l *clusterLoad) wrongValue(k *suiteKey, what string) {
	l.wrong.Add(1)
	l.mu.Lock()
	if l.wrongSample == "" {
		l.wrongSample = k.name + ": " + what
	}
	l.mu.Unlock()
}

// set writes k's next version and reports whether it was acknowledged.
func (l *clusterLoad) set(ctx context.Context, k *suiteKey) bool {
	k.sent++
	l.ops[l.phase.Load()].Add(1)
	if err := l.cc.Set(ctx, k.name, k.value(k.sent), 0).Err(); err != nil {
		k.maybe[k.sent] = true
		l.failed(err)
		return false
	}
	k.acked, k.ackedAt = k.sent, time.Now()
	return true
}

// redirectCounter counts the -ASK and -MOVED replies of a cluster
// client's nodes, which the client follows.
type redirectCounter struct{ l *clusterLoad }

func (redirectCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redirectCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil {
			switch msg := err.Error(); {
			case strings.HasPrefix(msg, "ASK "):
				h.l.asks.Add(1)
			case strings.HasPrefix(msg, "MOVED "):
				h.l.moves.Add(1)
			}
		}
		return err
	}
}

func (redirectCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// check compares what a GET of k returned (missing: no such key) with
// the versions written, and counts it verified, wrong (never written) or
// lost (older than the last acknowledged).
func (l *clusterLoad) check(k *suiteKey, got string, missing bool) {
	v := 0
	if !missing {
		head := k.name + "|"
		rest, ok := strings.CutPrefix(got, head)
		if !ok || len(rest) < 9 || rest[8] != '|' || rest[9:] != k.body {
			l.wrongValue(k, fmt.Sprintf("%d bytes, %.40q", len(got), got))
			return
		}
		n, err := strconv.Atoi(rest[:8])
		if err != nil || n < 1 {
			l.wrongValue(k, fmt.Sprintf("version %q", rest[:8]))
			return
		}
		v = n
	}
	switch {
	case v == k.acked || k.maybe[v]:
		k.acked = v
		l.verified.Add(1)
	case v > k.acked:
		l.wrongValue(k, fmt.Sprintf("version %d, never written (last acknowledged %d)", v, k.acked))
	default: // an older version: the acknowledged one is lost
		l.mu.Lock()
		l.lost = append(l.lost, lostWrite{key: k.name, slot: k.slot, ackedAt: k.ackedAt})
		l.mu.Unlock()
		k.acked = v
	}
}

// get reads k and checks what it holds.
func (l *clusterLoad) get(ctx context.Context, k *suiteKey) {
	l.ops[l.phase.Load()].Add(1)
	got, err := l.cc.Get(ctx, k.name).Result()
	switch {
	case errors.Is(err, redis.Nil):
		l.check(k, "", true)
	case err != nil:
		l.failed(err)
	default:
		l.check(k, got, false)
	}
}

// strlen checks STRLEN of k, which the proxy answers with a script of its
// own: the length of every version (a missing key is left to GET).
func (l *clusterLoad) strlen(ctx context.Context, k *suiteKey) {
	l.ops[l.phase.Load()].Add(1)
	n, err := l.cc.StrLen(ctx, k.name).Result()
	switch {
	case err != nil:
		l.failed(err)
	case n != 0 && n != int64(len(k.value(1))):
		l.wrongValue(k, fmt.Sprintf("STRLEN %d, want %d", n, len(k.value(1))))
	}
}

// run writes each of the worker's keys once, says so on ready, then
// writes and reads its keys at random until stop, half of the time those
// of the slot hot names while it is not -1 (the slot being moved).
func (l *clusterLoad) run(ctx context.Context, worker, workers int, ready chan<- error, hot *atomic.Int64, stop *atomic.Bool) {
	var mine []*suiteKey
	bySlot := map[int][]*suiteKey{}
	for i := worker; i < len(l.keys); i += workers {
		mine = append(mine, l.keys[i])
		bySlot[l.keys[i].slot] = append(bySlot[l.keys[i].slot], l.keys[i])
	}
	for _, k := range mine {
		for try := 0; !l.set(ctx, k); try++ {
			if try == 20 || stop.Load() {
				l.mu.Lock()
				sample := l.samples[phaseSteady]
				l.mu.Unlock()
				ready <- fmt.Errorf("%s: no SET of %s acknowledged in 20 tries: %s", l.name, k.name, sample)
				return
			}
		}
	}
	ready <- nil
	rng := rand.New(rand.NewPCG(uint64(worker), 1))
	for !stop.Load() {
		k := mine[rng.IntN(len(mine))]
		if ks := bySlot[int(hot.Load())]; len(ks) > 0 && rng.IntN(2) == 0 {
			k = ks[rng.IntN(len(ks))]
		}
		switch r := rng.IntN(10); {
		case r < 4:
			l.set(ctx, k)
		case r < 9:
			l.get(ctx, k)
		default:
			l.strlen(ctx, k)
		}
	}
}

// recovery returns the time from killedAt to the load's last error, 0
// without an error after it.
func (l *clusterLoad) recovery(killedAt time.Time) time.Duration {
	if last := l.lastErrAt.Load(); last > killedAt.UnixNano() {
		return time.Unix(0, last).Sub(killedAt)
	}
	return 0
}

// verifyAll reads every key once more after the load, retrying errors
// for at most 20 s, and returns how many held what they must.
func (l *clusterLoad) verifyAll(ctx context.Context) (verified int, errs []string) {
	before := l.verified.Load()
	deadline := time.Now().Add(20 * time.Second)
	for _, k := range l.keys {
		for {
			got, err := l.cc.Get(ctx, k.name).Result()
			if err == nil || errors.Is(err, redis.Nil) {
				l.check(k, got, errors.Is(err, redis.Nil))
				break
			}
			if time.Now().After(deadline) {
				errs = append(errs, k.name+": "+err.Error())
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return int(l.verified.Load() - before), errs
}

// setSlots asks the cluster node for the slot of every key of loads.
func setSlots(t *testing.T, node *testutil.Redis, loads ...*clusterLoad) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: node.Addr})
	defer c.Close()
	for _, l := range loads {
		for _, k := range l.keys {
			slot, err := c.ClusterKeySlot(context.Background(), k.name).Result()
			if err != nil {
				t.Fatal(err)
			}
			k.slot = int(slot)
		}
	}
}

// slotsWithKeys returns at most n slots from lo to hi (excluded) that
// hold keys of loads, in order.
func slotsWithKeys(lo, hi, n int, loads ...*clusterLoad) []int {
	held := map[int]bool{}
	for _, l := range loads {
		for _, k := range l.keys {
			held[k.slot] = true
		}
	}
	var slots []int
	for s := lo; s < hi && len(slots) < n; s++ {
		if held[s] {
			slots = append(slots, s)
		}
	}
	return slots
}

// reshard moves slots from node src to node dst as redis-cli --cluster
// reshard does, one slot at a time: IMPORTING on dst, MIGRATING on src,
// MIGRATE of the slot's keys in batches, then SETSLOT NODE on dst, src
// and the other masters.
func reshard(t *testing.T, src, dst *testutil.Redis, others []*testutil.Redis, slots []int, onSlot func(slot int)) (keys int) {
	t.Helper()
	ctx := context.Background()
	client := func(n *testutil.Redis) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: n.Addr, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
		t.Cleanup(func() { c.Close() })
		return c
	}
	s, d := client(src), client(dst)
	var rest []*redis.Client
	for _, o := range others {
		rest = append(rest, client(o))
	}
	srcID, err := s.ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	dstID, err := d.ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(dst.Addr)
	do := func(c *redis.Client, args ...any) {
		t.Helper()
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", args, c.Options().Addr, err)
		}
	}
	for _, slot := range slots {
		onSlot(slot)
		do(d, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
		do(s, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)
		for batch := 0; ; batch++ {
			names, err := s.ClusterGetKeysInSlot(ctx, slot, 50).Result()
			if err != nil {
				t.Fatalf("CLUSTER GETKEYSINSLOT %d: %v", slot, err)
			}
			if len(names) == 0 {
				break
			}
			if batch == 1000 {
				t.Fatalf("slot %d still holds keys after 1000 MIGRATEs", slot)
			}
			args := []any{"MIGRATE", host, port, "", 0, 60000, "KEYS"}
			for _, n := range names {
				args = append(args, n)
			}
			do(s, args...)
			keys += len(names)
		}
		do(d, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
		do(s, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
		for _, o := range rest {
			do(o, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
		}
	}
	return keys
}

// TestProxy_ClusterReshardFailover is the cluster suite: 3 masters and 3
// replicas, a proxy in front of each node, and two verifying go-redis
// ClusterClient loads side by side, one through the proxies and one on
// the nodes directly, each on a key space of its own of values from
// 100 B to 200 kB. Under both loads, slots move from one master to
// another (MIGRATE, as redis-cli --cluster reshard does), then a master
// that received slots is killed (kill -9) and its replica takes over. It
// prints the keys verified, wrong values, errors in each phase and the
// recovery after the kill for each side, and fails on a wrong value, an
// acknowledged write lost other than to the killed master's asynchronous
// replication, or errors and recovery through the proxies far worse than
// directly. scripts/test-cluster.sh runs it; LONG=1 there (clusterLongEnv)
// makes the load longer.
func TestProxy_ClusterReshardFailover(t *testing.T) {
	// go-redis logs every failed dial of its pools: the errors are counted.
	redis.SetLogger(quietRedisLogger{})
	size := clusterSuiteSizes()
	cl := testutil.StartClusterWith(t, testutil.ClusterOptions{Masters: 3, Replicas: 1, NodeTimeout: time.Second})
	var proxies []string
	for _, e := range proxiesFor(t, cl.Nodes()) {
		proxies = append(proxies, e.addr)
	}
	ctx := context.Background()
	var phase atomic.Int32
	through := newClusterLoad("through the proxies", "px:", proxies, size.keys, &phase)
	direct := newClusterLoad("directly", "dx:", []string{cl.Masters[0].Addr}, size.keys, &phase)
	defer through.cc.Close()
	defer direct.cc.Close()

	setSlots(t, cl.Masters[0], through, direct)
	var hot atomic.Int64 // the slot being moved
	hot.Store(-1)
	var stop atomic.Bool
	var wg sync.WaitGroup
	ready := make(chan error, 2*size.workers)
	for _, l := range []*clusterLoad{through, direct} {
		for w := range size.workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.run(ctx, w, size.workers, ready, &hot, &stop)
			}()
		}
	}
	stopLoad := func() {
		stop.Store(true)
		wg.Wait()
	}
	defer stopLoad()
	for range 2 * size.workers {
		select {
		case err := <-ready:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("the first write of every key took over 2 minutes")
		}
	}
	started := time.Now()
	time.Sleep(size.steady)

	// Reshard: slots of master 0 that hold keys move to master 1 (moving
	// an empty slot costs as much, on Valkey 8 35 ms, and tests less).
	slots := slotsWithKeys(0, 16384/3, size.slots, through, direct)
	phase.Store(phaseReshard)
	reshardStart := time.Now()
	movedKeys := reshard(t, cl.Masters[0], cl.Masters[1], cl.Masters[2:], slots, func(s int) { hot.Store(int64(s)) })
	hot.Store(-1)
	reshardTook := time.Since(reshardStart)
	time.Sleep(size.steady)

	// Failover: kill -9 of master 1, which now holds the moved slots too.
	phase.Store(phaseFailover)
	killedAt := time.Now()
	cl.Masters[1].Stop()
	var failover time.Duration
	waitFor(t, 30*time.Second, "replica of the killed master promoted", func() bool {
		info, _ := testutil.Do(cl.Replicas[1].Addr, "INFO", "replication")
		return strings.Contains(info, "role:master")
	})
	failover = time.Since(killedAt)
	// Both loads go on for 2 s after the promotion and until neither has
	// seen an error for 2 s (at most 40 s after the kill): the recovery is
	// the last error's time.
	quiet := func() bool {
		if time.Since(killedAt) < failover+2*time.Second {
			return false
		}
		for _, l := range []*clusterLoad{through, direct} {
			if time.Since(time.Unix(0, l.lastErrAt.Load())) < 2*time.Second {
				return false
			}
		}
		return true
	}
	for deadline := killedAt.Add(40 * time.Second); !quiet() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	stopLoad()
	loadTook := time.Since(started)

	// Every key once more, and the loss the kill explains: writes
	// acknowledged by the killed master in the 2 s before the kill, which
	// its replica may not have had (Redis replicates asynchronously).
	killedSlots := map[int]bool{}
	for s := 16384 / 3; s < 2*16384/3; s++ {
		killedSlots[s] = true
	}
	for _, s := range slots {
		killedSlots[s] = true
	}
	type result struct {
		keys, finalVerified int
		finalErrs           []string
		lostToKill, lost    int
		lostSample          string
	}
	results := map[*clusterLoad]*result{}
	for _, l := range []*clusterLoad{through, direct} {
		r := &result{keys: len(l.keys)}
		r.finalVerified, r.finalErrs = l.verifyAll(ctx)
		for _, w := range l.lost {
			if killedSlots[w.slot] && w.ackedAt.After(killedAt.Add(-2*time.Second)) && w.ackedAt.Before(killedAt.Add(time.Second)) {
				r.lostToKill++
				continue
			}
			r.lost++
			if r.lostSample == "" {
				r.lostSample = fmt.Sprintf("%s acknowledged %v before the kill", w.key, killedAt.Sub(w.ackedAt).Round(time.Millisecond))
			}
		}
		results[l] = r
	}

	// The values the proxies wrote are stored compressed: read a few raw.
	framed, large := 0, 0
	for i, k := range through.keys {
		if suiteKeySize(i) < 10_000 || large == 20 {
			continue
		}
		large++
		if raw, err := direct.cc.Get(ctx, k.name).Result(); err == nil && codec.IsFramed([]byte(raw)) {
			framed++
		}
	}
	if framed != large {
		t.Errorf("%d of %d values over 10 kB written through the proxies are stored compressed", framed, large)
	}

	tp, dr := results[through], results[direct]
	row := func(what string, a, b any) string { return fmt.Sprintf("| %-58s | %19v | %10v |\n", what, a, b) }
	var tb strings.Builder
	tb.WriteString(row("", "through the proxies", "directly"))
	tb.WriteString(row("keys (100 B-200 kB, compressible)", tp.keys, dr.keys))
	tb.WriteString(row("reads verified during the load", through.verified.Load()-int64(tp.finalVerified), direct.verified.Load()-int64(dr.finalVerified)))
	tb.WriteString(row("keys verified after the load", tp.finalVerified, dr.finalVerified))
	tb.WriteString(row("wrong values", through.wrong.Load(), direct.wrong.Load()))
	tb.WriteString(row("acknowledged writes lost, outside the kill", tp.lost, dr.lost))
	tb.WriteString(row("... lost to the kill (async replication)", tp.lostToKill, dr.lostToKill))
	for p := range phases {
		tb.WriteString(row("operations (SET 40%, GET 50%, STRLEN 10%), "+phaseNames[p], through.ops[p].Load(), direct.ops[p].Load()))
		tb.WriteString(row("errors seen by clients, "+phaseNames[p], through.errs[p].Load(), direct.errs[p].Load()))
	}
	tb.WriteString(row("redirections followed: -ASK", through.asks.Load(), direct.asks.Load()))
	tb.WriteString(row("redirections followed: -MOVED", through.moves.Load(), direct.moves.Load()))
	tb.WriteString(row("last error after the kill (recovery)", through.recovery(killedAt).Round(time.Millisecond), direct.recovery(killedAt).Round(time.Millisecond)))
	t.Logf("cluster: 3 masters, 3 replicas, a proxy per node; %d workers per client; load %v; "+
		"reshard of %d slots (%d keys) in %v; replica promoted %v after the kill\n%s",
		size.workers, loadTook.Round(time.Millisecond), len(slots), movedKeys, reshardTook.Round(time.Millisecond),
		failover.Round(time.Millisecond), tb.String())
	for _, l := range []*clusterLoad{through, direct} {
		for p := range phases {
			if l.samples[p] != "" {
				t.Logf("%s, an error in the %s: %s", l.name, phaseNames[p], l.samples[p])
			}
		}
		t.Logf("%s, the last error: %s", l.name, l.lastErr)
	}

	for _, l := range []*clusterLoad{through, direct} {
		r := results[l]
		if n := l.wrong.Load(); n != 0 {
			t.Errorf("%s: %d wrong values (%s)", l.name, n, l.wrongSample)
		}
		if r.lost != 0 {
			t.Errorf("%s: %d acknowledged writes lost outside the kill (%s)", l.name, r.lost, r.lostSample)
		}
		if r.finalVerified != r.keys {
			t.Errorf("%s: %d of %d keys verified after the load (errors: %.3q)", l.name, r.finalVerified, r.keys, r.finalErrs)
		}
	}
	// Side-by-side bounds, generous for a loaded machine: the figures are
	// printed above.
	for _, p := range []int{phaseSteady, phaseReshard} {
		if a, b := through.errs[p].Load(), direct.errs[p].Load(); a > 4*b+50 {
			t.Errorf("%s: %d errors through the proxies, %d directly", phaseNames[p], a, b)
		}
	}
	if a, b := through.errs[phaseFailover].Load(), direct.errs[phaseFailover].Load(); a > 4*b+1000 {
		t.Errorf("failover: %d errors through the proxies, %d directly", a, b)
	}
	if a, b := through.recovery(killedAt), direct.recovery(killedAt); a > b+5*time.Second {
		t.Errorf("recovered %v after the kill through the proxies, %v directly", a, b)
	}
	if !quiet() {
		t.Errorf("errors went on for 40 s after the kill")
	}
}
