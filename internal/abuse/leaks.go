package abuse

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/squeeze-kv/squeeze/resp"
)

// suiteClientName is the name the suite's own connection to Redis takes,
// so that counting the proxy's upstream connections leaves it out.
const suiteClientName = "squeeze-abuse"

// stateCommands are what the leak part's clients send, before mutation:
// the commands that change a connection's state (protocol, subscriptions,
// transactions), and a few ordinary ones.
var stateCommands = [][]string{{"HELLO", "3"}, {"HELLO", "2"}, {"HELLO", "9"}, {"SUBSCRIBE", "a"}, {"SUBSCRIBE", "a", "b"},
	{"UNSUBSCRIBE"}, {"UNSUBSCRIBE", "a"}, {"PSUBSCRIBE", "x*"}, {"PUNSUBSCRIBE"}, {"SSUBSCRIBE", "s"},
	{"MULTI"}, {"EXEC"}, {"DISCARD"}, {"PING"}, {"GET", "k"}, {"RESET"}, {"BLPOP", "l", "0"}, {"QUIT"}}

// mutatedSequence returns one to six state commands as RESP, each byte of
// it possibly changed, cut short, or split by a stray CRLF.
func mutatedSequence(r *rand.Rand) []byte {
	var raw []byte
	for range 1 + r.IntN(6) {
		var args [][]byte
		for _, a := range stateCommands[r.IntN(len(stateCommands))] {
			args = append(args, []byte(a))
		}
		raw = resp.AppendCommand(raw, args...)
	}
	for m := r.IntN(3); m > 0 && len(raw) > 1; m-- {
		switch r.IntN(3) {
		case 0:
			raw[r.IntN(len(raw))] = byte(r.IntN(256))
		case 1:
			raw = raw[:1+r.IntN(len(raw)-1)]
		default:
			i := r.IntN(len(raw))
			raw = append(raw[:i], append([]byte("\r\n"), raw[i:]...)...)
		}
	}
	return raw
}

// resources are what a leak would leave behind in the proxy.
type resources struct {
	goroutines, upstream, fds, clients int64
}

func (r resources) String() string {
	return fmt.Sprintf("goroutines %d, upstream connections %d, open files %d, client connections %d", r.goroutines, r.upstream, r.fds, r.clients)
}

// leaked is what after holds more than idle, per resource.
func (r resources) leaked(idle resources) resources {
	return resources{r.goroutines - idle.goroutines, r.upstream - idle.upstream, r.fds - idle.fds, r.clients - idle.clients}
}

func (r resources) any() bool {
	return r.goroutines > 0 || r.upstream > 0 || r.fds > 0 || r.clients > 0
}

// runLeaks is part c: many short connections send mutated state
// sequences and leave; the proxy must come back to its idle goroutines,
// upstream connections and open files.
func runLeaks(ctx context.Context, w io.Writer, e *environment) ([]string, error) {
	redis, _, err := e.startRedis(ctx, "leaks", false)
	if err != nil {
		return nil, err
	}
	defer redis.kill()
	proxy, metrics, err := e.startProxy(ctx, redis.addr)
	if err != nil {
		return nil, err
	}
	defer proxy.kill()
	direct, err := dial(redis.addr, time.Second, 0)
	if err != nil {
		return nil, err
	}
	defer direct.Close()
	if err := errReply(direct.do(5*time.Second, "CLIENT", "SETNAME", suiteClientName)); err != nil {
		return nil, err
	}
	measure := func() (resources, error) { return measureResources(metrics, direct) }
	// One client first, so that the shared upstream connection exists
	// before the idle values are taken.
	c0, err := dial(proxy.addr, time.Second, 0)
	if err != nil {
		return nil, err
	}
	if err := errReply(c0.do(5*time.Second, "PING")); err != nil {
		return nil, err
	}
	c0.Close()
	// The idle values: the smallest of a few readings, for a reading may
	// still see the goroutine that served the one before it.
	var idle resources
	for i := range 4 {
		time.Sleep(100 * time.Millisecond)
		m, err := measure()
		if err != nil {
			return nil, err
		}
		if i == 0 {
			idle = m
		}
		idle = resources{min(idle.goroutines, m.goroutines), min(idle.upstream, m.upstream), min(idle.fds, m.fds), min(idle.clients, m.clients)}
	}
	r := rand.New(rand.NewPCG(e.cfg.Seed, 20))
	n, deadline := 0, time.Now().Add(e.cfg.Duration)
	for ; n < 400 || (e.cfg.long() && time.Now().Before(deadline) && n < 1_000_000); n++ {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c, err := dial(proxy.addr, time.Second, 0)
		if err != nil {
			return nil, err
		}
		c.nc.Write(mutatedSequence(r))
		if r.IntN(2) == 0 {
			time.Sleep(time.Millisecond)
		}
		c.Close()
	}
	// The proxy ends what the clients left behind asynchronously: give it
	// up to 5 s to come back to its idle values.
	var after resources
	for settle := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if after, err = measure(); err != nil {
			return nil, err
		}
		if !after.leaked(idle).any() || time.Now().After(settle) {
			break
		}
	}
	leak := after.leaked(idle)
	fmt.Fprintf(w, "%d short connections sent mutated HELLO 3 / SUBSCRIBE / UNSUBSCRIBE / MULTI sequences and left\n", n)
	fmt.Fprintf(w, "idle:   %s\n", idle)
	fmt.Fprintf(w, "after:  %s\n", after)
	fmt.Fprintf(w, "leaked: %s\n", leak)
	if leak.any() {
		return []string{"leak after the mutated sequences: " + leak.String()}, nil
	}
	return nil, nil
}

// measureResources scrapes the proxy's metrics (goroutines, open files,
// client connections) and counts its connections to Redis with CLIENT
// LIST on direct (every client but the suite's own).
func measureResources(metricsAddr string, direct *conn) (resources, error) {
	m, err := scrape("http://" + metricsAddr + "/metrics")
	if err != nil {
		return resources{}, err
	}
	var r resources
	for name, dst := range map[string]*int64{"go_goroutines": &r.goroutines, "process_open_fds": &r.fds, "squeeze_proxy_connections": &r.clients} {
		v, ok := m[name]
		if !ok {
			return resources{}, fmt.Errorf("the proxy's metrics have no %s", name)
		}
		*dst = int64(v)
	}
	list, err := direct.do(5*time.Second, "CLIENT", "LIST")
	if err := errReply(list, err); err != nil {
		return resources{}, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(list.bulk)), "\n") {
		if line != "" && !strings.Contains(line, " name="+suiteClientName+" ") {
			r.upstream++
		}
	}
	return r, nil
}

// scrape reads the unlabelled samples of a Prometheus text exposition.
func scrape(url string) (map[string]float64, error) {
	client := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return parseSamples(res.Body)
}

// parseSamples returns the samples without labels of a Prometheus text
// exposition, by metric name.
func parseSamples(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || strings.Contains(f[0], "{") {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: bad value %q", f[0], f[1])
		}
		out[f[0]] = v
	}
	return out, sc.Err()
}
