package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/squeeze-kv/squeeze/internal/abuse"
	"github.com/squeeze-kv/squeeze/internal/units"
)

func init() {
	// A maintainer's command: not in "squeeze help" (scripts/abuse.sh runs it).
	register(command{Name: "abuse", Summary: "the proxy's fault and abuse suite (maintainers)", Hidden: true, Run: runAbuse})
}

const abuseUsage = `Usage:
  squeeze abuse [--part faults,memory,flood,pause,hostile,leaks] [--duration D] [--proxy-flag F]...

The proxy's fault and abuse suite. It starts redis-server and this binary's
"squeeze proxy" as separate processes and prints:
  faults   verified replies, errors, wrong values and lost acknowledged writes
           while Redis is killed with kill -9 and restarted (appendonly yes,
           appendfsync always) and paused with SIGSTOP/SIGCONT; recovery times
  memory   the proxy's peak RSS while a client with a small receive buffer
           pipelines 300 GETs of an 8 MiB value and never reads, and while a
           13 kB frame that decodes to 400 MiB is read six times; another
           client's PING p99 and maximum meanwhile
  flood    20 clients (long form: 200) each pipeline 10 (50) SETs of 1 MiB
           and read no reply for a while: other clients' PING latency through
           the proxy and straight to Redis (on connections made before the
           load, and a new connection's first PING), the proxy's peak RSS
           against its --max-memory (128MiB here, 1GiB in the long form,
           unless the proxy flags set one) and its RSS after the load, failed
           round trips of innocent clients that SET and GET their own values
  pause    CLIENT PAUSE 3000 WRITE straight to Redis, then one SET through the
           proxy that Redis holds: other clients' PING and GET latency
           through the proxy and straight to Redis during the pause
  hostile  HTTP lines, SYNC, PSYNC, garbage and oversized lengths sent through
           the proxy under innocent clients: their failed round trips, and
           whether the proxy closes each sender as Redis does
  leaks    goroutines, upstream connections and open files after many short
           connections sent mutated HELLO 3 / SUBSCRIBE / MULTI sequences,
           against their idle values
It exits 1 when a value was wrong or lost, an innocent client's round trip
failed, or something leaked, and when a bound given is exceeded: the peak RSS
over --rss-limit (or the proxy's --max-memory among the proxy flags), or other
clients' PING p99 through the proxy over the larger of --ping-p99 and 3 times
the p99 of PINGs straight to Redis in the same run. Without --duration each
part takes a few seconds.

PROXY_FLAGS (split at spaces) and --proxy-flag add flags to every proxy.

Examples:
  squeeze abuse                                    # short form, under a minute
  squeeze abuse --duration 30s --part faults       # long form of one part
  squeeze abuse --part flood,pause --ping-p99 50ms
  PROXY_FLAGS="--client-buffer 1MiB --max-memory 512MiB" squeeze abuse --ping-p99 50ms
`

// stringsFlag is a repeatable flag whose values may also be several
// flags in one, split at spaces ("--client-buffer 1MiB").
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, " ") }
func (s *stringsFlag) Set(v string) error {
	*s = append(*s, strings.Fields(v)...)
	return nil
}

func runAbuse(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "abuse", abuseUsage)
	parts := fs.String("part", strings.Join(abuse.PartNames, ","), "the parts to run, comma-separated: "+strings.Join(abuse.PartNames, ", "))
	duration := fs.Duration("duration", 0, "long form: repeat the fault cycle and the pause, hold each memory case, the flood's clients and the hostile senders, and open leak-part connections this long (e.g. 2m); 0: the short form")
	var proxyFlags stringsFlag
	fs.Var(&proxyFlags, "proxy-flag", "a flag for every proxy the suite starts (repeat it); after PROXY_FLAGS")
	var rssLimit units.SizeFlag
	fs.Var(&rssLimit, "rss-limit", "fail when the proxy's peak RSS in a memory case or the flood is over this `SIZE` (default: the proxy flags' --max-memory, if given)")
	pingP99 := fs.Duration("ping-p99", 0, "fail when other clients' PING p99 through the proxy (memory, flood, pause, hostile) is over this or 3 x the p99 straight to Redis in the same run, whichever is larger (e.g. 50ms); 0: print only")
	squeeze := fs.String("squeeze", "", "the squeeze binary to run as the proxy (default: this one)")
	server := fs.String("redis-server", "", "the redis-server binary (default: $SQUEEZE_REDIS_SERVER, or redis-server in PATH)")
	seed := fs.Uint64("seed", 0, "seed of the values and mutations; 0: a new one each run (printed, to repeat it)")
	floodClients := fs.Int("flood-clients", 0, "the flood's clients (default: 20, long form 200)")
	floodSets := fs.Int("flood-sets", 0, "the SETs of 1 MiB each flood client pipelines (default: 10, long form 50)")
	floodHold := fs.Duration("flood-hold", 0, "how long the flood's clients read no reply (default: 1s, long form --duration)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("abuse takes no arguments, got %q", fs.Args())
	}
	if *duration < 0 {
		return usageError("--duration must not be negative, got %s", *duration)
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	if *floodClients < 0 || *floodSets < 0 || *floodHold < 0 {
		return usageError("--flood-clients, --flood-sets and --flood-hold must not be negative")
	}
	cfg := abuse.Config{Duration: *duration, RSSLimit: int64(rssLimit), PingP99: *pingP99, Seed: *seed,
		ProxyFlags:   append(strings.Fields(os.Getenv("PROXY_FLAGS")), proxyFlags...),
		FloodClients: *floodClients, FloodSets: *floodSets, FloodHold: *floodHold}
	for _, p := range strings.Split(*parts, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		} else if !slices.Contains(abuse.PartNames, p) {
			return usageError("--part: unknown part %q (want %s)", p, strings.Join(abuse.PartNames, ", "))
		}
		cfg.Parts = append(cfg.Parts, p)
	}
	var err error
	if cfg.Squeeze = *squeeze; cfg.Squeeze == "" {
		if cfg.Squeeze, err = os.Executable(); err != nil {
			return fmt.Errorf("find this binary: %w", err)
		}
	}
	if cfg.RedisServer, err = redisServerBinary(*server); err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "seed %d (--seed to repeat)\n", cfg.Seed)
	return abuse.Run(ctx, e.Stdout, cfg)
}

// redisServerBinary finds the redis-server to start: name if given, else
// the one SQUEEZE_REDIS_SERVER names, else redis-server in PATH.
func redisServerBinary(name string) (string, error) {
	if name == "" {
		name = os.Getenv("SQUEEZE_REDIS_SERVER")
	}
	if name == "" {
		name = "redis-server"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not found (Debian: apt-get install -y redis-server; or --redis-server PATH): %w", name, err)
	}
	return p, nil
}
