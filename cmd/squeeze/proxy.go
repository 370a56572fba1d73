package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/dictstore"
	"github.com/squeeze-kv/squeeze/internal/bufpool"
	"github.com/squeeze-kv/squeeze/internal/units"
	"github.com/squeeze-kv/squeeze/proxy"
)

func init() {
	register(command{Name: "proxy", Summary: "run a compressing Redis proxy: point any client at it instead of Redis", Run: runProxy})
}

const proxyUsage = `
Usage: squeeze proxy [--listen ADDR] [--upstream URL] [flags]

Runs a transparent RESP proxy in front of Redis. Clients in any language
(redis-cli, Ruby, Node, Python, Go ...) connect to --listen as if it were
Redis; values they write are compressed before they reach Redis and
decompressed in every reply, so Redis holds several times more data while
the clients see exactly what they stored.

Upstream URLs:
  redis://[user:password@]host[:port][/db]
  rediss://[user:password@]host[:port][/db]     (TLS)
  unix://[user:password@]/path/to/redis.sock[?db=N]
  sentinel://[user:password@]host:port[,host:port...]/MASTER[/db][?sentinel_password=P]
      Redis Sentinel: the proxy asks the Sentinels for MASTER's address at
      every dial, and on their +switch-master event (or a -READONLY from a
      master that became a replica) closes its connections, so it follows
      a failover.
  A URL takes no other parameters than these (db, sentinel_password): an
  unknown one is an error. Logs, errors and /debug/pprof/cmdline show the
  URL's passwords and parameter values (but db) as ***.

Every flag can also come from an environment variable, SQUEEZE_ plus the
flag name in upper case with _ for - (SQUEEZE_UPSTREAM, SQUEEZE_MIN_SIZE), or
from a config file (--config, or SQUEEZE_CONFIG) of "name = value" lines with
the flag names; # starts a comment. Flags beat environment, environment
beats the file.

SQUEEZE_CHECK_BUFFERS=1 (environment only, no flag) checks the proxy's free
lists of large buffers: a buffer put back while the lists hold it, two
owners of one buffer, panics. It is for load runs such as
SQUEEZE_CHECK_BUFFERS=1 bash scripts/bench-proxy.sh, and costs a map
operation per buffer.

At start the proxy logs in to Redis once: if Redis refuses the login (a
wrong user or password, a database it does not have) it exits with an
error instead of serving clients that would all get it; an upstream that
does not answer yet only gets a warning, since a sidecar may start first.

On SIGTERM or Ctrl-C the proxy stops accepting, writes the replies of the
commands it has already read, and exits; a second signal exits at once.
On SIGHUP it reads its settings again and puts a new write policy in
force (--codec, --min-size, --min-gain, --dict, --rule: edit the config
file, then kill -HUP), without dropping a connection; values already
stored keep reading back. In front of a cluster node it also takes the
new --cluster-map and --cluster-port-offset (a node joined or left the
cluster). Other settings take a restart.

Examples:
  squeeze proxy --listen 127.0.0.1:6380 --upstream redis://127.0.0.1:6379
  squeeze proxy --upstream unix:///run/redis.sock --codec zstd:3 --metrics 127.0.0.1:9121
  SQUEEZE_UPSTREAM=redis://:secret@10.0.0.5/2 squeeze proxy --listen 127.0.0.1:6380
  squeeze proxy --upstream rediss://redis.internal:6380 --upstream-ca /etc/ssl/redis-ca.pem
  squeeze proxy --upstream redis://127.0.0.1:6379 --dict 1690163204   # see "squeeze dict"
  redis-cli -p 6380 -x SET greeting < big.json    # stored compressed

Redis Cluster: run one proxy beside each node, each with --upstream its
own node, and tell every proxy where the others listen, so that cluster
clients (redis-cli -c, go-redis ClusterClient, ioredis Cluster ...) are
redirected from proxy to proxy and never to a node directly:
  squeeze proxy --listen 10.0.0.5:7379 --upstream redis://10.0.0.5:6379 --cluster-port-offset 1000 \
      --client-auth require
  squeeze proxy --listen 10.0.0.5:6380 --upstream redis://10.0.0.5:6379 --client-auth require \
      --cluster-map 10.0.0.5:6379=10.0.0.5:6380,10.0.0.6:6379=10.0.0.6:6380
Cluster clients reach the proxies from other hosts, so each logs in with
its own ACL user (--client-auth require, below).
Without either flag, CLUSTER SLOTS/SHARDS/NODES and -MOVED/-ASK become
errors that say so.

Dictionaries: values that name a zstd dictionary are decoded with it,
whatever --dict says; the proxy loads each one from the upstream
(squeeze:dict:<id>) the first time a value names it. --dict ID compresses
new values with that published dictionary ("squeeze dict train --publish"
makes one); it must exist when the proxy starts (or reloads).

TLS for clients: with --tls-cert and --tls-key the proxy accepts clients
over TLS only (rediss:// URLs, redis-cli --tls), as redis-server's tls-port
does; --tls-client-ca also requires each client to present a certificate
that CA signed. SIGHUP reads the certificate files again, so a renewed
certificate takes effect without a restart. (TLS to Redis is the
--upstream rediss:// URL's business, independent of this.)
  squeeze proxy --listen 0.0.0.0:6380 --tls-cert /etc/squeeze/tls.crt \
      --tls-key /etc/squeeze/tls.key --client-auth require --upstream redis://10.0.0.5:6379

Authentication: by default the proxy's connections log in with the
--upstream URL's credentials, and every client that reaches --listen acts
with them; keep such a proxy on loopback or a unix socket. With
--client-auth require each client gets a private connection that logs in
as nobody: Redis answers -NOAUTH until the client's own AUTH (or HELLO ...
AUTH) succeeds, and then applies that user's ACL rules, exactly as without
the proxy (the URL's database is selected after the login). It costs the
shared pipelined connections: one upstream connection per client.
  squeeze proxy --listen 0.0.0.0:6380 --client-auth require \
      --upstream redis://:secret@10.0.0.5:6379
A --listen address other than loopback or a unix socket with the default
--client-auth pass would give every host that reaches it the URL's rights
(CONFIG GET requirepass included), so the proxy refuses to start that way
unless --allow-remote-clients says it is meant (a network only trusted
clients reach); --check warns about it.

Checking settings: --check reads the settings as a start would, loads the
dictionaries they name, checks the certificates' dates, sends PING to the
upstream over a connection made as the proxy makes them (TLS, AUTH,
SELECT), prints the settings in force (--json: as one object) and exits
(0: all is well, 1: the error). It listens on nothing, so it also checks
an edited config file before the running proxy reloads it:
  squeeze proxy --config /etc/squeeze/proxy.conf --check && systemctl reload squeeze-proxy

Scripts: a Lua script runs inside Redis and reads stored bytes, so the
proxy decodes the keys a script declares before it runs, and a compressed
value a script reads without declaring it is an error, never a frame
(--scripts reject refuses every script instead). Once a script has run
with a declared key that holds a value, that key's prefix (up to its last
":", or to an id segment: session:5 gives session:) is stored
uncompressed, so later scripts read its values as written without a
decoding round trip. The proxy logs each such prefix once, counts it in
squeeze_proxy_script_prefix_last_use_seconds, keeps it in Redis
(squeeze:script-prefixes, with the last use in
squeeze:script-prefixes:used) and announces it to the other proxies at once;
"squeeze proxy --check" and "squeeze advise" list them. A prefix no script
declared a key of for --script-prefix-ttl (default 168h) is compressed
again; 0 keeps prefixes for ever.
  squeeze proxy --script-prefix-ttl 24h

Rules: --rule gives the keys that begin with a prefix their own codec and
options; keys no rule matches use --codec, --min-size, --min-gain, --dict.
The longest prefix wins; MSET values follow their own keys. Reads need no
rules (every stored value names its codec), so rules can change at any
restart or SIGHUP. "squeeze advise" prints the rules that fit your data.
  squeeze proxy --rule 'session:=zstd:3' --rule 'img:=none' \
      --rule 'event:=zstd:1,dict=1690163204,min-size=32'
  SQUEEZE_RULE='session:=zstd:3;img:=none' squeeze proxy   # several, with ;
A rule's options are min-size, min-gain and dict; the prefix cannot hold
"=" or ";". Rules from the command line replace those of the
environment, which replace those of the config file ("rule = ..." lines).
`

// proxyFlags are the settings of squeeze proxy.
type proxyFlags struct {
	listen, upstream, upstreamCA, codecName, metrics, scripts, listSearch, logLevel, logFormat string
	clientAuth                                                                                 string
	tlsCert, tlsKey, tlsClientCA, upstreamCert, upstreamKey                                    string
	clusterMap                                                                                 string
	clusterPortOffset                                                                          int
	minSize, maxValue, maxBulk, clientBuffer, clientBufferLimit, maxMemory                     units.SizeFlag
	minGain                                                                                    float64
	shared, procs, maxInFlight                                                                 int
	pprof, check, jsonOut, allowRemote                                                         bool
	scriptPrefixTTL                                                                            time.Duration
	portable                                                                                   bool // --portable: write only codecs every language reads

	dict  string   // --dict: a published dictionary id, or "none"
	rules ruleFlag // --rule, repeatable
}

func newProxyFlags(e env) (*flag.FlagSet, *proxyFlags, *string) {
	fs := newFlagSet(e, "proxy", proxyUsage)
	p := &proxyFlags{minSize: units.SizeFlag(codec.DefaultMinSize), maxValue: units.SizeFlag(codec.DefaultMaxDecodedSize)}
	fs.StringVar(&p.listen, "listen", "127.0.0.1:6380", "address to accept clients on (host:port, or a unix socket path)")
	fs.StringVar(&p.upstream, "upstream", "redis://127.0.0.1:6379", "the Redis server: redis://, rediss://, unix:// or sentinel:// URL")
	fs.StringVar(&p.tlsCert, "tls-cert", "", "PEM `file` of the certificate clients see: accept clients over TLS (rediss://, redis-cli --tls); read again on SIGHUP")
	fs.StringVar(&p.tlsKey, "tls-key", "", "PEM `file` of the private key of --tls-cert")
	fs.StringVar(&p.tlsClientCA, "tls-client-ca", "", "PEM `file` of the CA that must have signed every client's certificate (mutual TLS); default: clients need none")
	fs.StringVar(&p.upstreamCA, "upstream-ca", "", "PEM file of the CA that signed a rediss:// upstream's certificate (default: the system's roots)")
	fs.StringVar(&p.upstreamCert, "upstream-cert", "", "PEM `file` of the client certificate the proxy shows a rediss:// upstream (Redis's tls-auth-clients yes, its default, requires one)")
	fs.StringVar(&p.upstreamKey, "upstream-key", "", "PEM `file` of the private key of --upstream-cert")
	fs.StringVar(&p.codecName, "codec", "", "codec and level for new values (s2, zstd:1, lz4, brotli:5 ..., none; default "+codec.DefaultAlgorithm.String()+", or zstd:1 with --dict)")
	fs.Var(&p.minSize, "min-size", "store values shorter than this raw (e.g. 64, 1KiB)")
	fs.Float64Var(&p.minGain, "min-gain", codec.DefaultMinGain, "store raw when compression saves less than this fraction")
	fs.Var(&p.maxValue, "max-value", "refuse to decode values larger than this (e.g. 512MiB)")
	fs.Var(&p.maxBulk, "max-bulk", "the longest bulk string (value or argument) a client may send, a `SIZE` such as 1GiB; 0, the default: Redis's proto-max-bulk-len, asked on each new upstream connection (512MiB until Redis answers, or if it refuses CONFIG)")
	p.clientBuffer = 64 << 20
	fs.Var(&p.clientBuffer, "client-buffer", "stop reading a client's commands while it holds this much: requests in flight, replies not yet written (a slow reader)")
	fs.Var(&p.clientBufferLimit, "client-buffer-limit", "close a client's connection when it holds more than this and more than one reply, as Redis's client-output-buffer-limit does (a client that asks and never reads); 0: 4 x --client-buffer, at least 256MiB")
	p.maxMemory = units.SizeFlag(proxy.DefaultMaxMemory())
	fs.Var(&p.maxMemory, "max-memory", "bound the bytes held for all clients: past half, each client gets one command in flight; past all, the client holding the most is closed; also the Go runtime's memory limit. Default: a quarter of this machine's (or cgroup's) memory; 0: no bound")
	fs.IntVar(&p.maxInFlight, "max-in-flight", 256, "stop reading a client's commands while this many await their replies")
	fs.StringVar(&p.metrics, "metrics", "", "serve Prometheus metrics on this address at /metrics (e.g. 127.0.0.1:9121), with /healthz (the process runs) and /readyz (Redis answers, not shutting down) for probes")
	fs.StringVar(&p.clientAuth, "client-auth", "pass", "pass (clients act with the --upstream URL's credentials) or require (each client must AUTH to Redis itself, and Redis's ACLs apply to it)")
	fs.StringVar(&p.scripts, "scripts", "pass", "EVAL/EVALSHA/FCALL: pass (scripts run on values as written: declared keys are decoded first, prefixes scripts use stay uncompressed, a compressed value a script reads is an error) or reject")
	fs.DurationVar(&p.scriptPrefixTTL, "script-prefix-ttl", proxy.DefaultScriptPrefixTTL, "a key prefix a script used (a key it declared held a value) is stored uncompressed, so scripts read its values as written, until no script has declared a key of it for this long; then its values are compressed again (0: never)")
	fs.StringVar(&p.listSearch, "list-search", "exact", "LREM/LPOS/LINSERT: exact (find elements by value, whatever codec or settings stored them) or stored (Redis's own byte comparison: faster, misses elements written with other settings)")
	fs.StringVar(&p.clusterMap, "cluster-map", "", "Redis Cluster: `NODE=PROXY,...`, each node's address as the cluster announces it and the address of the squeeze proxy in front of it, so redirections and CLUSTER SLOTS/SHARDS/NODES name proxies")
	fs.IntVar(&p.clusterPortOffset, "cluster-port-offset", 0, "Redis Cluster: the proxy in front of node host:port listens at host:port+`N` (for nodes not in --cluster-map)")
	fs.IntVar(&p.shared, "shared-conns", 1, "pipelined upstream connections shared by all clients (more than 1 lets commands of clients on different connections reach Redis out of the order they came in)")
	fs.IntVar(&p.procs, "procs", 0, "CPU threads running the proxy (GOMAXPROCS); 0: half the machine's CPUs, at least 1, or $GOMAXPROCS when set")
	fs.BoolVar(&p.pprof, "pprof", false, "also serve Go's profiler at /debug/pprof/ on the --metrics address")
	fs.Var(&p.rules, "rule", "`PREFIX=CODEC[,min-size=N][,min-gain=F][,dict=ID]`: the values of keys that begin with PREFIX get this codec and options (repeat the flag, or separate rules with ;); the longest prefix wins")
	fs.BoolVar(&p.portable, "portable", false, "write only codecs that other languages read (docs/FORMAT.md, the portable profile: zstd, lz4, snappy, brotli, gzip, deflate, zlib): the default codec becomes "+codec.PortableDefault.String()+", and a --codec or --rule naming s2, minlz or xz is an error")
	fs.StringVar(&p.dict, "dict", "none", "compress new values with this published zstd dictionary `ID` (squeeze dict list), or none")
	fs.StringVar(&p.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&p.logFormat, "log-format", "text", "text or json")
	fs.BoolVar(&p.allowRemote, "allow-remote-clients", false, "start although --listen is reachable from other hosts and clients act with the --upstream URL's credentials (--client-auth pass): for networks only trusted clients reach")
	fs.BoolVar(&p.check, "check", false, "check the settings and the upstream (PING over a connection made as the proxy makes them), name the server and its version, print the settings in force and exit: 0 if all is well, 1 if not")
	fs.BoolVar(&p.jsonOut, "json", false, "with --check: print the settings in force and the warnings as one JSON object")
	config := fs.String("config", "", "read settings from this file (name = value lines)")
	return fs, p, config
}

// envCheckBuffers, set to 1, checks the free lists of buffers for a buffer
// put back twice (bufpool.SetChecks), for load runs the tests do not match.
const envCheckBuffers = "SQUEEZE_CHECK_BUFFERS"

// commandLineOnly are the flags that neither the config file nor the
// environment may set: they say what to do with the settings.
var commandLineOnly = map[string]bool{"config": true, "check": true, "json": true}

// applySettings sets flags from the config file, then the environment; the
// command line is parsed afterwards and wins.
func applySettings(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	path := getenv("SQUEEZE_CONFIG")
	for i, a := range args { // find --config before parsing
		a = strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, "config="); ok {
			path = v
		} else if a == "config" && i+1 < len(args) {
			path = args[i+1]
		}
	}
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("config file: %w", err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = strings.TrimSpace(line[:i])
			}
			if line == "" {
				continue
			}
			name, value, ok := strings.Cut(line, "=")
			name, value = strings.TrimSpace(name), strings.Trim(strings.TrimSpace(value), `"`)
			if !ok || fs.Lookup(name) == nil || commandLineOnly[name] {
				return usageError("%s:%d: want \"name = value\" with a flag name, got %q", path, n, line)
			}
			if err := fs.Set(name, value); err != nil {
				return usageError("%s:%d: %s: %v", path, n, name, err)
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("config file: %w", err)
		}
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		env := "SQUEEZE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(env); v != "" && err == nil && !commandLineOnly[f.Name] {
			if o, ok := f.Value.(overrider); ok {
				o.override() // the environment replaces the file's rules
			}
			if serr := fs.Set(f.Name, v); serr != nil {
				err = usageError("%s: %v", env, serr)
			}
		}
	})
	fs.VisitAll(func(f *flag.Flag) { // the command line replaces, not adds to, repeatable flags
		if o, ok := f.Value.(overrider); ok {
			o.override()
		}
	})
	return err
}

// proxyProcs decides how many threads run Go code in the proxy. A sidecar
// shares its machine with Redis and the clients, and most of its work is
// system calls: with more threads than it can keep busy, Go's scheduler
// hands goroutines between sleeping threads and the proxy spends more CPU
// on context switches than on commands. Half the CPUs (at least one) is the
// default; --procs, then $GOMAXPROCS, override it.
func proxyProcs(flagValue int, envValue string, cpus int) (int, error) {
	switch {
	case flagValue < 0:
		return 0, usageError("--procs must be 0 (automatic) or more, got %d", flagValue)
	case flagValue > 0:
		return flagValue, nil
	case envValue != "":
		n, err := strconv.Atoi(envValue)
		if err != nil || n < 1 {
			return 0, usageError("GOMAXPROCS must be a positive number, got %q", envValue)
		}
		return n, nil
	}
	return max(1, cpus/2), nil
}

// codecLabel names the codec of new values, for logs.
func codecLabel(enc *codec.Encoder) string {
	if enc == nil {
		return "none"
	}
	return enc.Algorithm().String()
}

// algorithm is --codec, or the default: squeeze's, or zstd:1 with --dict
// (dictionaries are zstd's).
func (p *proxyFlags) algorithm() (codec.Algorithm, error) {
	if p.codecName == "" {
		if id, err := p.dictID(); err == nil && id != 0 {
			return codec.MustParseAlgorithm("zstd:1"), nil
		}
		if p.portable {
			return codec.PortableDefault, nil
		}
		return codec.DefaultAlgorithm, nil
	}
	alg, err := codec.ParseAlgorithm(p.codecName)
	if err != nil {
		return alg, usageError("--codec: %v", err)
	}
	if p.portable {
		if err := codec.CheckPortable(alg); err != nil {
			return alg, usageError("--codec with --portable: %v", err)
		}
	}
	return alg, nil
}

// dictLoader loads a published dictionary by id.
type dictLoader func(context.Context, uint32) (codec.Dictionary, error)

// errNeedDicts: the write policy names dictionaries and no loader was given.
var errNeedDicts = errors.New("the write policy names dictionaries: load them first")

// writePolicy builds the proxy's write policy from the settings: the
// encoder for keys no rule matches (nil for --codec none) and the rules,
// with the dictionaries they name loaded by load. With load nil and a
// dictionary named, it checks the settings and returns errNeedDicts.
func (p *proxyFlags) writePolicy(ctx context.Context, load dictLoader) (*codec.Encoder, []proxy.Rule, error) {
	alg, err := p.algorithm()
	if err != nil {
		return nil, nil, err
	}
	if p.minGain < 0 || p.minGain >= 1 {
		return nil, nil, usageError("--min-gain must be in [0, 1), got %v", p.minGain)
	}
	dictID, err := p.dictID()
	if err != nil {
		return nil, nil, err
	}
	if dictID != 0 && alg.ID != codec.IDZstd {
		return nil, nil, usageError("--dict needs a zstd --codec (dictionaries are zstd's), got %s", alg)
	}
	if p.portable {
		for _, r := range p.rules.specs {
			if err := codec.CheckPortable(r.alg); err != nil {
				return nil, nil, usageError("--rule %s with --portable: %v", r.prefix, err)
			}
		}
	}
	if load == nil && (dictID != 0 || p.rules.needDicts()) {
		return nil, nil, errNeedDicts
	}
	var enc *codec.Encoder
	if alg.ID != codec.IDNone {
		opts := []codec.EncoderOption{codec.WithMinSize(int(p.minSize)), codec.WithMinGain(p.minGain), proxyConcurrency()}
		if dictID != 0 {
			d, err := load(ctx, dictID)
			if err != nil {
				return nil, nil, fmt.Errorf("--dict %d: %w", dictID, err)
			}
			opts = append(opts, codec.WithDictionary(d))
		}
		if enc, err = codec.NewEncoder(alg, opts...); err != nil {
			return nil, nil, usageError("codec: %v", err)
		}
	}
	rules, err := p.buildRules(ctx, load)
	if err != nil {
		return nil, nil, err
	}
	return enc, rules, nil
}

// proxyConcurrency lets the proxy's encoders compress one large value on
// every CPU of the machine, not only the --procs threads Go code runs on
// (GOMAXPROCS is set before the encoders are built): the proxy takes one
// thread more while it compresses such a value (proxy.policy.encode).
func proxyConcurrency() codec.EncoderOption { return codec.WithConcurrency(runtime.NumCPU()) }

// buildServer turns settings into a proxy.Server.
func (p *proxyFlags) buildServer(logger *slog.Logger, reg prometheus.Registerer) (*proxy.Server, error) {
	if _, err := proxy.ParseUpstream(p.upstream); err != nil {
		return nil, usageError("--upstream: %v", err)
	}
	// The write policy; one that names dictionaries is built by
	// setupDictionaries, which loads them.
	enc, rules, err := p.writePolicy(context.Background(), nil)
	if err != nil && !errors.Is(err, errNeedDicts) {
		return nil, err
	}
	dec, err := codec.NewDecoder(codec.WithMaxDecodedSize(int64(p.maxValue)))
	if err != nil {
		return nil, usageError("--max-value: %v", err)
	}
	if p.maxInFlight < 1 || p.clientBuffer < 1 {
		return nil, usageError("--max-in-flight and --client-buffer must be positive")
	}
	if p.maxBulk != 0 && p.maxBulk < 1<<20 {
		return nil, usageError("--max-bulk %s is below 1MiB, the least proto-max-bulk-len Redis takes (0: Redis's own)", p.maxBulk.String())
	}
	s := &proxy.Server{Upstream: p.upstream, Encoder: enc, Decoder: dec, SharedConns: p.shared, Logger: logger,
		MaxInFlight: p.maxInFlight, MaxReplyBytes: int64(p.clientBuffer), MaxBulk: int64(p.maxBulk),
		ClientBufferLimit: int64(p.clientBufferLimit), MaxMemory: int64(p.maxMemory)}
	if p.clientBufferLimit != 0 && p.clientBufferLimit < p.clientBuffer {
		return nil, usageError("--client-buffer-limit %s is below --client-buffer %s", p.clientBufferLimit.String(), p.clientBuffer.String())
	}
	s.Rules = rules
	s.TLSConfig, err = clientTLS(p.upstreamCA, p.upstreamCert, p.upstreamKey,
		[3]string{"--upstream-ca", "--upstream-cert", "--upstream-key"})
	if err != nil {
		return nil, err
	}
	switch p.scripts {
	case "pass":
	case "reject":
		s.RejectScripts = true
	default:
		return nil, usageError("--scripts must be pass or reject, got %q", p.scripts)
	}
	switch {
	case p.scriptPrefixTTL < 0:
		return nil, usageError("--script-prefix-ttl must not be negative, got %s", p.scriptPrefixTTL)
	case p.scriptPrefixTTL == 0:
		s.ScriptPrefixTTL = -1 // for ever
	default:
		s.ScriptPrefixTTL = p.scriptPrefixTTL
	}
	switch p.clientAuth {
	case "pass":
	case "require":
		s.RequireAuth = true
	default:
		return nil, usageError("--client-auth must be pass or require, got %q", p.clientAuth)
	}
	switch p.listSearch {
	case "exact":
	case "stored":
		s.StoredListSearch = true
	default:
		return nil, usageError("--list-search must be exact or stored, got %q", p.listSearch)
	}
	if s.Cluster, err = p.cluster(); err != nil {
		return nil, err
	}
	if reg != nil {
		alg, _ := p.algorithm()
		s.Metrics = proxy.NewMetrics(reg, alg)
	}
	return s, nil
}

// cluster returns the ClusterMap of --cluster-map and
// --cluster-port-offset, nil without either.
func (p *proxyFlags) cluster() (*proxy.ClusterMap, error) {
	if p.clusterMap == "" && p.clusterPortOffset == 0 {
		return nil, nil
	}
	m := &proxy.ClusterMap{PortOffset: p.clusterPortOffset}
	if p.clusterMap != "" {
		var err error
		if m.Nodes, err = proxy.ParseClusterNodes(p.clusterMap); err != nil {
			return nil, usageError("--cluster-map: %v", err)
		}
	}
	if p.clusterPortOffset <= -65535 || p.clusterPortOffset >= 65535 {
		return nil, usageError("--cluster-port-offset %d is out of range", p.clusterPortOffset)
	}
	return m, nil
}

func newLogger(w interface{ Write([]byte) (int, error) }, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError("--log-level: %v", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError("--log-format must be text or json, got %q", format)
}

func runProxy(ctx context.Context, e env, args []string) error {
	fs, p, _ := newProxyFlags(e)
	if err := applySettings(fs, args, os.Getenv); err != nil {
		return err
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("proxy takes no arguments, got %q", fs.Args())
	}
	if p.jsonOut && !p.check {
		return usageError("--json goes with --check: the proxy itself logs with --log-format json")
	}
	if p.pprof && p.metrics == "" {
		return usageError("--pprof needs --metrics: the profiler is served on the metrics address")
	}
	if w := p.remoteClientsWarning(); w != "" && !p.check && !p.allowRemote {
		return usageError("%s; use --client-auth require (each client logs in to Redis itself), listen on loopback or a unix socket, or pass --allow-remote-clients if only trusted clients reach this address", w)
	}
	procs, err := proxyProcs(p.procs, os.Getenv("GOMAXPROCS"), runtime.NumCPU())
	if err != nil {
		return err
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	if os.Getenv(envCheckBuffers) == "1" {
		bufpool.SetChecks(true) // before the proxy takes a buffer
	}
	if p.maxMemory > 0 && !p.check {
		// Collect garbage before the heap reaches the bound (memory.go).
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(int64(p.maxMemory)))
	}
	logger, err := newLogger(e.Stderr, p.logLevel, p.logFormat)
	if err != nil {
		return err
	}
	var reg *prometheus.Registry
	if p.metrics != "" {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	var regr prometheus.Registerer
	if reg != nil {
		regr = reg
	}
	srv, err := p.buildServer(logger, regr)
	if err != nil {
		return err
	}
	tlsConfig, certs, err := newListenTLS(p)
	if err != nil {
		return err
	}
	closeDicts, err := p.setupDictionaries(ctx, srv)
	if err != nil {
		return err
	}
	defer closeDicts()
	if p.check {
		return checkProxy(ctx, e.Stdout, p, srv, tlsConfig, certs, procs, time.Now())
	}
	if err := checkUpstreamLogin(ctx, p, srv); err != nil {
		srv.Close()
		return err
	}
	// SIGHUP reloads the write policy from the config file.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if certs != nil {
					if err := certs.reload(); err != nil {
						logger.Error("SIGHUP: TLS certificate not reloaded; the one in use stays", "err", err)
					} else {
						logger.Info("SIGHUP: TLS certificate reloaded", "cert", certs.certFile)
					}
				}
				err := reloadWritePolicy(ctx, e, args, fs, srv, logger)
				if err != nil {
					logger.Error("SIGHUP: settings not reloaded; the write policy is unchanged", "err", err)
				}
				srv.Metrics.Reloaded(err == nil)
			}
		}
	}()
	network := "tcp"
	if strings.Contains(p.listen, "/") {
		network = "unix"
	}
	ln, err := net.Listen(network, p.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	if reg != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			if err := srv.Ready(ctx); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
			io.WriteString(w, "ready\n")
		})
		if p.pprof {
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/cmdline", cmdlineHandler(os.Args))
		}
		mln, err := net.Listen("tcp", p.metrics)
		if err != nil {
			ln.Close()
			return fmt.Errorf("metrics listen: %w", err)
		}
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go hs.Serve(mln)
		defer hs.Close()
		logger.Info("metrics", "addr", mln.Addr().String())
	}
	logger.Info("squeeze proxy listening", "addr", ln.Addr().String(), "tls", tlsConfig != nil, "procs", procs, "upstream", redactURL(p.upstream), "codec", codecLabel(srv.Encoder), "dict", p.dict, "min_size", int64(p.minSize), "rules", p.rules.String())
	warnLaterCodecs(logger, srv.Encoder, srv.Rules)
	if err := probeUpstream(p.upstream); err != nil {
		// Not fatal: a sidecar may start before its Redis. Commands get a
		// clear error until the upstream answers, and the proxy keeps trying.
		logger.Warn("upstream not reachable yet; commands will fail until it is", "upstream", redactURL(p.upstream), "err", err)
	} else {
		logged := make(chan struct{})
		go func() { defer close(logged); logUpstreamServer(ctx, logger, p, srv) }()
		defer func() { <-logged }() // nothing logs after the proxy has stopped
	}
	go func() { // a second signal aborts the drain
		<-ctx.Done()
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(ch)
		<-ch
		logger.Warn("second signal: closing now")
		srv.Close()
	}()
	err = srv.Serve(ctx, ln)
	if errors.Is(err, proxy.ErrServerClosed) {
		logger.Info("squeeze proxy stopped")
		return nil
	}
	return err
}

// writeFlags are the settings a SIGHUP reloads: the write policy, and
// the map of the proxies in front of a cluster's nodes.
var writeFlags = map[string]bool{"codec": true, "min-size": true, "min-gain": true, "dict": true, "rule": true, "config": true, "portable": true,
	"cluster-map": true, "cluster-port-offset": true}

// reloadWritePolicy reads the settings again as at start (the config
// file, the environment, then args) and puts the new write policy in
// force; values written from then on follow it. A proxy in front of a
// cluster node also takes the new --cluster-map and --cluster-port-offset
// (a node joined or left the cluster). Other settings need a restart: a
// change to them is logged, not applied. On an error nothing changes.
func reloadWritePolicy(ctx context.Context, e env, args []string, running *flag.FlagSet, srv *proxy.Server, logger *slog.Logger) error {
	fs, p, _ := newProxyFlags(e)
	if err := applySettings(fs, args, os.Getenv); err != nil {
		return err
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var load dictLoader
	if r, ok := srv.Dictionaries.(*dictstore.Resolver); ok {
		load = r.Dictionary
	}
	enc, rules, err := p.writePolicy(ctx, load)
	if err != nil {
		return err
	}
	cluster, err := p.cluster()
	if err != nil {
		return err
	}
	switch {
	case cluster == nil && srv.Cluster != nil:
		return errors.New("--cluster-map and --cluster-port-offset are gone: a proxy in front of a cluster node keeps one until a restart")
	case cluster != nil && srv.Cluster == nil:
		return errors.New("--cluster-map or --cluster-port-offset is new: putting the proxy in front of a cluster node takes a restart")
	}
	if err := srv.SetWritePolicy(enc, rules); err != nil {
		return err
	}
	logger.Info("SIGHUP: write policy reloaded", "codec", codecLabel(enc), "dict", p.dict, "min_size", int64(p.minSize), "min_gain", p.minGain, "rules", p.rules.String())
	if cluster != nil {
		if err := srv.SetClusterMap(cluster); err != nil {
			return err // not reached: checked above
		}
		logger.Info("SIGHUP: cluster map reloaded", "nodes", len(cluster.Nodes), "port_offset", cluster.PortOffset)
	}
	warnLaterCodecs(logger, enc, rules)
	var stale []string
	fs.VisitAll(func(f *flag.Flag) {
		if old := running.Lookup(f.Name); !writeFlags[f.Name] && old != nil && old.Value.String() != f.Value.String() {
			stale = append(stale, f.Name)
		}
	})
	if len(stale) > 0 {
		logger.Warn("SIGHUP: these settings changed but take a restart", "settings", strings.Join(stale, ","))
	}
	return nil
}

// remoteClientsWarning says why the settings give other hosts the upstream
// URL's rights (--listen reachable from them, --client-auth pass), or "".
func (p *proxyFlags) remoteClientsWarning() string {
	if p.clientAuth == "require" || !listenReachable(p.listen) {
		return ""
	}
	return fmt.Sprintf("--listen %s is reachable from other hosts, and with --client-auth pass every client that reaches it acts with the --upstream URL's credentials", p.listen)
}

// listenReachable reports whether a --listen address accepts connections
// from other hosts: all interfaces (":6380", "0.0.0.0:6380", "[::]:6380"),
// an address that is not loopback, or a host name other than localhost.
// Unix socket paths and loopback addresses are not.
func listenReachable(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false // a unix socket path
	}
	if host == "" {
		return true
	}
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// cmdlineHandler serves /debug/pprof/cmdline as net/http/pprof does (the
// arguments, separated by NUL bytes), with the secrets of every URL among
// them redacted as in the logs (redactURL: passwords, sentinel_password):
// --upstream redis://:secret@host would otherwise hand the upstream's
// password to whoever reaches the metrics address.
func cmdlineHandler(args []string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		out := make([]string, len(args))
		for i, a := range args {
			out[i] = redactURL(a)
		}
		io.WriteString(w, strings.Join(out, "\x00"))
	}
}

// redactURL hides the secrets of a Redis URL for logs, errors and the
// profiler's command line: its password and the values of its parameters
// but db (proxy.RedactURL).
func redactURL(s string) string { return proxy.RedactURL(s) }

// logUpstreamServer logs which server the upstream is (INFO server), with
// a warning for one older than squeeze is tested with. A server that
// refuses INFO is logged at debug level: it is not a fault.
func logUpstreamServer(ctx context.Context, logger *slog.Logger, p *proxyFlags, srv *proxy.Server) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	s, err := upstreamServer(ctx, p, srv)
	if err != nil {
		logger.Debug("upstream server unknown", "err", err)
		return
	}
	logger.Info("upstream server", "server", s.String())
	srv.Metrics.UpstreamServer(s.Name, s.Version)
	if w := s.untested(); w != "" {
		logger.Warn(w)
	}
}

// probeUpstream dials the upstream once (TCP or unix socket only, no TLS or
// AUTH), to warn at start-up when nothing listens there.
func probeUpstream(rawURL string) error {
	u, err := proxy.ParseUpstream(rawURL)
	if err != nil {
		return err
	}
	addr := u.Addr
	if len(u.Sentinels) > 0 {
		addr = u.Sentinels[0] // at least one Sentinel should answer
	}
	c, err := net.DialTimeout(u.Network, addr, 2*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// dictID parses --dict: 0 for none.
func (p *proxyFlags) dictID() (uint32, error) {
	if p.dict == "" || p.dict == "none" {
		return 0, nil
	}
	id, err := strconv.ParseUint(p.dict, 10, 32)
	if err != nil || id == 0 || id > dictstore.MaxID {
		return 0, usageError("--dict must be a dictionary id in 1..2147483647 or none, got %q (see squeeze dict list)", p.dict)
	}
	return uint32(id), nil
}

// setupDictionaries gives srv a resolver that loads the dictionaries values
// name from the upstream, over a client of its own (upstreamClient), and
// with --dict compresses new values with that dictionary, which must be
// published. The returned func releases them.
func (p *proxyFlags) setupDictionaries(ctx context.Context, srv *proxy.Server) (func(), error) {
	rdb, err := p.upstreamClient(srv)
	if err != nil {
		return nil, err
	}
	res, err := dictstore.NewResolver(rdb, codec.WithMaxDecodedSize(int64(p.maxValue)))
	if err != nil {
		rdb.Close()
		return nil, err
	}
	srv.Encoder, srv.Rules, err = p.writePolicy(ctx, res.Dictionary)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	srv.Dictionaries = res
	return func() { rdb.Close() }, nil
}

// upstreamClient is a go-redis client of the upstream, apart from the data
// path's connections, for the proxy's own reads (dictionaries, --check):
// a Sentinel failover client for sentinel://, a cluster client in front of
// a Redis Cluster node (--cluster-map or --cluster-port-offset; a
// dictionary's key may live on any node), else a plain one. srv gives the
// upstream TLS settings (--upstream-ca ...).
func (p *proxyFlags) upstreamClient(srv *proxy.Server) (redis.UniversalClient, error) {
	u, err := proxy.ParseUpstream(p.upstream)
	if err != nil {
		return nil, usageError("--upstream: %v", err)
	}
	opt := &redis.Options{Network: u.Network, Addr: u.Addr, Username: u.Username, Password: u.Password, DB: u.DB,
		PoolSize: 2, DialTimeout: 5 * time.Second}
	if u.TLS != nil {
		opt.TLSConfig = u.TLS
		if srv.TLSConfig != nil { // --upstream-ca
			c := srv.TLSConfig.Clone()
			if c.ServerName == "" {
				c.ServerName = u.TLS.ServerName
			}
			opt.TLSConfig = c
		}
	}
	var rdb redis.UniversalClient = redis.NewClient(opt)
	if len(u.Sentinels) > 0 {
		rdb.Close()
		rdb = redis.NewFailoverClient(&redis.FailoverOptions{MasterName: u.Master, SentinelAddrs: u.Sentinels,
			SentinelPassword: u.SentinelPassword, Username: u.Username, Password: u.Password, DB: u.DB,
			TLSConfig: opt.TLSConfig, PoolSize: 2, DialTimeout: opt.DialTimeout})
	} else if srv.Cluster != nil && u.Network == "tcp" {
		rdb.Close()
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{u.Addr}, Username: u.Username, Password: u.Password,
			TLSConfig: opt.TLSConfig, PoolSize: 2, DialTimeout: opt.DialTimeout})
	}
	return rdb, nil
}

// warnLaterCodecs warns when the write policy uses a codec that squeeze
// readers built before it cannot read (codec.ID.AddedLater).
func warnLaterCodecs(logger *slog.Logger, enc *codec.Encoder, rules []proxy.Rule) {
	if name := laterCodec(enc, rules); name != "" {
		logger.Warn(laterCodecWarning, "codec", name)
	}
}

const laterCodecWarning = "writing a codec that squeeze readers built before it cannot read: upgrade every reader first; squeeze compact --from moves keys back"

// laterCodec names the first codec of the write policy that came later
// than the first release's (codec.ID.AddedLater), or returns "".
func laterCodec(enc *codec.Encoder, rules []proxy.Rule) string {
	encs := []*codec.Encoder{enc}
	for _, r := range rules {
		encs = append(encs, r.Encoder)
	}
	for _, e := range encs {
		if e != nil && e.Algorithm().ID.AddedLater() {
			return e.Algorithm().String()
		}
	}
	return ""
}
