// Package abuse is the proxy's fault and abuse suite: it starts real
// redis-server processes and the built "squeeze proxy" binary as separate
// processes, then
//
//   - kills Redis with kill -9 and restarts it, and pauses it with
//     SIGSTOP/SIGCONT, under clients that write distinct values and read
//     them back: verified replies, errors, wrong values, acknowledged
//     writes lost, and the time to the first good reply after each fault;
//   - holds a client that pipelines GETs of an 8 MiB value and never reads,
//     and a client that reads a 13 kB frame that decodes to 400 MiB, while
//     another client PINGs every 10 ms: the proxy's peak RSS and the
//     PINGs' p99 and maximum latency;
//   - floods the proxy with clients that pipeline 1 MiB SETs and read
//     late, has Redis hold one client's SET (CLIENT PAUSE WRITE), and
//     sends hostile input (HTTP lines, SYNC, garbage, oversized lengths),
//     while other clients PING through the proxy and straight to Redis
//     side by side and innocent clients verify their own values: the
//     others' latencies and failed round trips, the proxy's RSS against
//     its --max-memory, and whether it closes hostile senders as Redis
//     does;
//   - sends mutated HELLO 3 / SUBSCRIBE / UNSUBSCRIBE / MULTI sequences
//     from many short connections: goroutines, upstream connections and
//     open files after them, against their idle values.
//
// "squeeze abuse" runs it (scripts/abuse.sh builds and runs it). The
// short form (CI) bounds each part to a few seconds; Config.Duration
// makes the long form.
package abuse

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Config says what to run and against what.
type Config struct {
	Squeeze     string   // the squeeze binary that runs "squeeze proxy"
	RedisServer string   // the redis-server binary
	ProxyFlags  []string // passed to every proxy after the suite's own
	Parts       []string // of PartNames; empty: all
	// Duration makes the long form: the fault part repeats its cycle of
	// kill -9 and SIGSTOP for this long (each phase Duration/5), each
	// memory case holds its client this long, the flood's 200 clients
	// send 50 MiB each and read nothing this long, the pause part pauses
	// Redis again and again this long, the hostile senders send this
	// long, and the leak part opens connections this long. 0 is the short
	// form: one fault cycle of about 5 s, 3 s per memory case, 20 flood
	// clients of 10 MiB, one pause, 3 s of hostile input, 400
	// connections.
	Duration time.Duration
	// RSSLimit, when > 0, fails the run when the proxy's peak RSS in a
	// memory case or the flood exceeds it. PingP99, when > 0, fails it
	// when other clients' PING p99 through the proxy (memory, flood,
	// pause, hostile) exceeds the larger of PingP99 and 3 times the p99
	// of PINGs straight to Redis in the same case.
	RSSLimit int64
	PingP99  time.Duration
	Seed     uint64 // of the random values and mutations
	// FloodClients, FloodSets and FloodHold, when > 0, replace the form's
	// flood: its clients, the SETs of 1 MiB each pipelines, and how long
	// they read nothing.
	FloodClients, FloodSets int
	FloodHold               time.Duration
}

// PartNames are the parts of the suite, in the order they run.
var PartNames = []string{"faults", "memory", "flood", "pause", "hostile", "leaks"}

// long reports whether the long form was asked for.
func (c Config) long() bool { return c.Duration > 0 }

// phase is the load time of one phase: Duration, or short's value.
func (c Config) phase(short time.Duration) time.Duration {
	if c.long() {
		return c.Duration
	}
	return short
}

// Run runs the parts of the suite that cfg names and prints their
// figures to w. It returns an error naming every target missed (wrong or
// lost values, a leak, a bound exceeded) or the first failure to run.
func Run(ctx context.Context, w io.Writer, cfg Config) error {
	parts := cfg.Parts
	if len(parts) == 0 {
		parts = PartNames
	}
	run := map[string]func(context.Context, io.Writer, *environment) ([]string, error){
		"faults": runFaults, "memory": runMemory, "flood": runFlood,
		"pause": runPause, "hostile": runHostile, "leaks": runLeaks,
	}
	for _, p := range parts {
		if run[p] == nil {
			return fmt.Errorf("unknown part %q (want %s)", p, strings.Join(PartNames, ", "))
		}
	}
	dir, err := os.MkdirTemp("", "squeeze-abuse-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	e := &environment{cfg: cfg, dir: dir}
	form := "short form"
	if cfg.long() {
		form = "long form, --duration " + cfg.Duration.String()
	}
	fmt.Fprintf(w, "squeeze abuse suite (%s), %s\n", form, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	if len(cfg.ProxyFlags) > 0 {
		fmt.Fprintf(w, "proxy flags: %s\n", strings.Join(cfg.ProxyFlags, " "))
	}
	var missed []string
	for _, p := range parts {
		fmt.Fprintf(w, "\n== %s\n", p)
		m, err := run[p](ctx, w, e)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		missed = append(missed, m...)
	}
	if len(missed) > 0 {
		fmt.Fprintf(w, "\nFAIL: %s\n", strings.Join(missed, "; "))
		return fmt.Errorf("%d targets missed (the FAIL line above)", len(missed))
	}
	fmt.Fprintf(w, "\nPASS\n")
	return nil
}
