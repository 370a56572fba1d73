package proxy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// failoverLoad is what a cluster client saw while a master was killed.
type failoverLoad struct {
	ops, errs, wrong int64
	before           int64 // operations in the moment before the kill
	// recovery is the time from the kill to the last error (0 without
	// errors); failover the time until the replica was master.
	recovery, failover time.Duration
	sample             string // an error, for the log
}

func (f failoverLoad) String() string {
	return fmt.Sprintf("%d operations (%d in the 0.7 s before the kill), %d errors, %d wrong values, failover after %v, last error %v after the kill (%s)",
		f.ops, f.before, f.errs, f.wrong, f.failover.Round(time.Millisecond), f.recovery.Round(time.Millisecond), f.sample)
}

// failoverValue is the value the load writes to key in its round i.
func failoverValue(key string, i int) string {
	return key + "|" + strconv.Itoa(i) + "|" + compressible(600, i)
}

// loadThroughFailover runs a verifying load of SETs and GETs through a
// go-redis ClusterClient given addrs, kills master (kill -9) after a
// moment, and goes on until the replica has taken over and no client has
// seen an error for a while (at most 20 s in all).
func loadThroughFailover(t *testing.T, addrs []string, master, replica *testutil.Redis, reloadEvery time.Duration) failoverLoad {
	t.Helper()
	ctx := context.Background()
	// go-redis reloads the topology on a redirection, and else every
	// minute: every 2 s here, so that the load recovers in a few seconds.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ClusterStateReloadInterval: reloadEvery})
	defer cc.Close()
	if err := cc.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var (
		f         failoverLoad
		mu        sync.Mutex
		killedAt  time.Time
		lastErrAt atomic.Int64 // Unix nanoseconds
		stop      atomic.Bool
		wg        sync.WaitGroup
	)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				key := "fo:" + strconv.Itoa(g) + ":" + strconv.Itoa(i%64)
				err := cc.Set(ctx, key, failoverValue(key, i), 0).Err()
				var got string
				if err == nil {
					got, err = cc.Get(ctx, key).Result()
				}
				mu.Lock()
				f.ops++
				switch {
				case errors.Is(err, redis.Nil):
				case err != nil:
					f.errs++
					if f.sample == "" {
						f.sample = err.Error()
					}
					lastErrAt.Store(time.Now().UnixNano())
				default:
					// A write lost in the failover may leave an older
					// round's value: any round's, but exactly.
					head, _, _ := strings.Cut(got, "|"+compressible(600, 0)[:1])
					if n, ok := strings.CutPrefix(head, key+"|"); !ok || got != failoverValue(key, atoi(n)) {
						f.wrong++
					}
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(700 * time.Millisecond)
	mu.Lock()
	f.before, f.errs, f.sample = f.ops, 0, ""
	mu.Unlock()
	killedAt = time.Now()
	master.Stop()
	for deadline := killedAt.Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if f.failover == 0 {
			if info, _ := testutil.Do(replica.Addr, "INFO", "replication"); strings.Contains(info, "role:master") {
				f.failover = time.Since(killedAt)
			}
			continue
		}
		last := time.Unix(0, lastErrAt.Load())
		if time.Since(killedAt) > f.failover+time.Second && time.Since(last) > 1500*time.Millisecond {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	if last := lastErrAt.Load(); last > killedAt.UnixNano() {
		f.recovery = time.Unix(0, last).Sub(killedAt)
	}
	return f
}

// quietRedisLogger drops go-redis's own log lines.
type quietRedisLogger struct{}

func (quietRedisLogger) Printf(context.Context, string, ...any) {}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestProxy_ClusterFailover: kill -9 of a master with a replica, under a
// verifying go-redis ClusterClient load, once through the proxies and once
// against the nodes directly. Through the proxies the client must recover
// no later than directly, and see about as many errors: the dead node's
// proxy ends its clients' connections, as the dead node did, where it
// answered every command with an error that cluster clients take for the
// command's own and never leave the node for (7,057 errors against 186).
// About a third more errors remain (192-252 against 137-200 in five
// runs): against the node go-redis retries a refused dial five times,
// with pauses, before an attempt fails, where the proxy accepts the
// connection and ends it at once.
func TestProxy_ClusterFailover(t *testing.T) {
	// go-redis logs every failed dial of its pools: the errors are counted.
	redis.SetLogger(quietRedisLogger{})
	cl := testutil.StartClusterWith(t, testutil.ClusterOptions{Masters: 3, Replicas: 1, NodeTimeout: time.Second})
	nodes := cl.Nodes()
	var proxies []string
	for _, e := range proxiesFor(t, nodes) {
		proxies = append(proxies, e.addr)
	}

	through := loadThroughFailover(t, proxies, cl.Masters[1], cl.Replicas[1], 2*time.Second)
	t.Logf("through the proxies: %v", through)
	direct := loadThroughFailover(t, []string{cl.Masters[0].Addr}, cl.Masters[2], cl.Replicas[2], 2*time.Second)
	t.Logf("directly:            %v", direct)
	if through.wrong != 0 || direct.wrong != 0 {
		t.Errorf("wrong values: %d through the proxies, %d directly", through.wrong, direct.wrong)
	}
	// Bounds that hold on a loaded machine (under the race detector one
	// run saw 35 errors directly and 250 through the proxies, recovery at
	// 1.3 s and 3.3 s): before the dead node's proxy ended its clients'
	// connections, go-redis saw thousands of errors through the proxies
	// (7,057 in one run) and kept routing to it. The side-by-side figures
	// are logged above, and compared in docs/design/cluster.md.
	if through.errs > 4*direct.errs+1000 {
		t.Errorf("%d errors through the proxies, %d directly", through.errs, direct.errs)
	}
	if through.recovery > direct.recovery+5*time.Second {
		t.Errorf("recovered %v after the kill through the proxies, %v directly", through.recovery, direct.recovery)
	}
}

// TestProxy_ClusterDeadNode: the proxy of a node that is down ends each
// client's connection without a reply, in the middle of a pipeline, on a
// connection of its own (after ASKING) and on a new connection alike, as
// the dead node does; before, it answered every command, PING included,
// with -ERR squeeze: upstream: dial upstream ...: connection refused.
func TestProxy_ClusterDeadNode(t *testing.T) {
	nodes, proxies := startClusterProxies(t)
	shared, private := dialRaw(t, proxies[0].addr), dialRaw(t, proxies[0].addr)
	if r := shared.do("PING"); r != "+PONG\r\n" {
		t.Fatalf("PING: %q", r)
	}
	if r := private.do("ASKING"); r != "+OK\r\n" {
		t.Fatalf("ASKING: %q", r)
	}
	nodes[0].Stop() // kill -9
	for name, c := range map[string]*rawConn{"shared": shared, "private": private, "new": dialRaw(t, proxies[0].addr)} {
		c.send([]string{"PING"}, []string{"GET", "k"})
		if r := c.read(); r != "" {
			t.Errorf("%s connection to the dead node's proxy: %q, want the connection closed", name, r)
		}
	}
	// The proxies of live nodes answer as before.
	if r := dialRaw(t, proxies[1].addr).do("PING"); r != "+PONG\r\n" {
		t.Errorf("PING through a live node's proxy: %q", r)
	}
}
