package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/advise"
	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/units"
)

func init() {
	register(command{Name: "advise", Summary: "sample a live Redis and recommend codec, min size, compaction and dictionaries per key prefix", Run: runAdvise})
}

const adviseUsage = `
Usage: squeeze advise [--redis URL] [flags]

Reads a sample of your keys (read-only: SCAN, TYPE, MEMORY USAGE, GET,
HSCAN, LRANGE, XRANGE; nothing is written), groups them by key prefix (user:,
session:, ...), and compresses every sampled value with every candidate
codec on this machine. The sample is the same on every run over the same
data (the first --keys keys SCAN returns, the first --per-key fields,
elements or entries of each), and so is the advice. For each prefix it
says:

  write      the codec for writes (squeeze proxy --codec, the library's
             codec): s2, the default (snappy with --portable), unless
             another of the fast codecs here (at least half the fastest
             one's speed) saves at least 3 points more memory; "raw"
             when even that saves less than --min-gain (images,
             archives)
  min-size   the size from which every size class of values gains at least
             --min-gain (squeeze proxy --min-size)
  at rest    a stronger codec for cold keys (squeeze compact), when it
             saves at least 3 points more
  dict       whether a zstd dictionary trained on the prefix (squeeze dict
             train) saves at least 5 points more for its small values

The portable profile (codecs that Python, Node and other languages read:
snappy, lz4, zstd, brotli, gzip, deflate, zlib; not s2 or minlz) has a
table of its own: per prefix and for all of them, the write codec advised
over every codec beside the one advised within the profile (snappy stands
in for s2), with the memory each saves, their encode and decode speeds on
this machine, and what the profile costs (points of memory, speed as a
ratio). --portable advises within the profile, for keys that programs
without squeeze read: the write and at-rest codecs are portable ones, and
the commands that apply it carry --portable.

minlz came later than the other codecs: squeeze readers built before it
cannot read its frames. The default candidates measure it but leave it out
of the advice; name it in --codecs once every reader of your keys is
upgraded, and the advice may pick it.

"memory now" is MEMORY USAGE of the sampled keys as they are stored (keys
and overhead included); "raw values" and the savings are estimated as Redis
allocates string values (header and allocator size class), values only. Values squeeze already
stores are decoded first, so the advice is about the original data; --json
counts them per prefix by the codec that wrote them ("stored_codecs": what
every reader of those keys must know). Frames this build cannot read (a
codec from a newer squeeze, a dictionary not published in Redis) are left
out, with a warning. The last lines print the commands that apply the
advice; with --cluster, a proxy beside each node of the cluster (with
--cluster-port-offset) and compact and dict train with --cluster.

A node of a Redis Cluster holds the keys of its own slots only: given one
without --cluster, advise (as compact and dict) refuses, and says so.

The Redis is --redis, else the environment variable SQUEEZE_REDIS
(redis://host:port/db, host:port, unix:///path.sock, ...).

Examples:
  squeeze advise --redis redis://127.0.0.1:6379
  squeeze advise --redis redis://10.0.0.5:6379/2 --keys 5000 --depth 2
  squeeze advise --redis redis://127.0.0.1:6379 --codecs s2,zstd:1,zstd:19 --json
  squeeze advise --redis redis://127.0.0.1:6379 --portable   # values read outside squeeze too
  squeeze advise --cluster --redis redis://10.0.0.5:7000   # every master of a cluster
`

func runAdvise(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "advise", adviseUsage)
	url := addRedisFlag(fs, "Redis server `URL` to sample", "none: required")
	keys := fs.Int("keys", advise.DefaultKeys, "most keys to sample")
	perKey := fs.Int("per-key", advise.DefaultPerKey, "most hash fields, list elements or stream entries read per key")
	depth := fs.Int("depth", advise.DefaultDepth, "a prefix is this many leading segments of a key (user:42:cart with 2: user:42:)")
	sep := fs.String("separator", advise.DefaultSeparator, "the separator of key segments")
	codecs := fs.String("codecs", advise.DefaultCodecs, "candidate codecs, comma-separated NAME or NAME:LEVEL; given, every one of them may be advised, minlz included")
	minGain := fs.Float64("min-gain", 0.1, "the fraction of memory a codec must save to be worth it (as the proxy's --min-gain)")
	noDict := fs.Bool("no-dict", false, "do not train dictionaries")
	asJSON := fs.Bool("json", false, "print the report as JSON for machines")
	cluster := fs.Bool("cluster", false, "--redis names a node of a Redis Cluster: sample every master")
	portable := fs.Bool("portable", false, "advise only codecs other languages read (the portable profile: "+strings.Join(codec.PortableNames()[1:], ", ")+"), and print the commands with --portable")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	u, err := resolveRedis(*url, "")
	if err != nil {
		return err
	}
	*url = u
	switch {
	case fs.NArg() > 0:
		return usageError("advise takes no arguments, got %q", fs.Args())
	case *url == "":
		return needRedisError("advise", "the Redis whose keys to sample")
	case *keys <= 0 || *perKey <= 0 || *depth <= 0:
		return usageError("--keys, --per-key and --depth must be positive")
	case *sep == "":
		return usageError("--separator must not be empty")
	case *minGain <= 0 || *minGain >= 1:
		return usageError("--min-gain is a fraction in (0, 1), got %v", *minGain)
	}
	algs, err := bench.ParseAlgorithms(*codecs)
	if err != nil {
		return usageError("--codecs: %v", err)
	}
	rdb, err := openClusterOr(ctx, *url, *cluster)
	if err != nil {
		return err
	}
	defer rdb.Close()
	o := advise.Options{Keys: *keys, PerKey: *perKey, Depth: *depth, Separator: *sep, Codecs: algs, MinGain: *minGain,
		LaterCodecs: flagsSet(fs)["codecs"], // codecs named by the user may be advised, minlz too
		Portable:    *portable}
	if *noDict {
		o.DictMin = -1
	}
	b := newProgress(e, *asJSON)
	o.Progress = b.update
	start := time.Now()
	rep, err := advise.Run(ctx, rdb, o)
	b.finish()
	if err != nil {
		if strings.Contains(err.Error(), "none is not") || strings.Contains(err.Error(), "no candidate codec is in the portable profile") {
			return usageError("--codecs: %v", err)
		}
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	var nodes []clusterNode
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		if nodes, err = clusterNodes(ctx, cc); err != nil {
			return err
		}
	}
	printAdvice(e, rep, redactURL(*url), time.Since(start), nodes, *portable)
	return nil
}

// clusterNode is a node of a Redis Cluster as CLUSTER NODES names it: the
// address it announces (host:port, an IPv6 host without brackets, as
// --cluster-map keys on it) and its bus port.
type clusterNode struct {
	addr string
	bus  int
}

// hostPort splits the node's address at its last colon.
func (n clusterNode) hostPort() (string, int) {
	i := strings.LastIndexByte(n.addr, ':')
	if i < 0 {
		return n.addr, 0
	}
	port, _ := strconv.Atoi(n.addr[i+1:])
	return n.addr[:i], port
}

// clusterNodes returns the nodes of cc's cluster that have an address and
// have not failed, masters and replicas, by address.
func clusterNodes(ctx context.Context, cc *redis.ClusterClient) ([]clusterNode, error) {
	text, err := cc.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES: %w", err)
	}
	return parseClusterNodes(text), nil
}

// parseClusterNodes parses CLUSTER NODES as clusterNodes describes.
func parseClusterNodes(text string) []clusterNode {
	var nodes []clusterNode
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.Contains(f[2], "noaddr") || strings.Contains(f[2], "handshake") || slices.Contains(strings.Split(f[2], ","), "fail") {
			continue
		}
		addr, rest, _ := strings.Cut(f[1], "@")
		bus, _, _ := strings.Cut(rest, ",")
		n := clusterNode{addr: addr}
		n.bus, _ = strconv.Atoi(bus)
		if _, port := n.hostPort(); port <= 0 {
			continue
		}
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b clusterNode) int { return strings.Compare(a.addr, b.addr) })
	return nodes
}

// clusterPortOffset picks a --cluster-port-offset for the proxies beside
// nodes: the least multiple of 1000 that puts no proxy on a node's port or
// bus port, or past 65535.
func clusterPortOffset(nodes []clusterNode) int {
	taken := map[int]bool{}
	for _, n := range nodes {
		_, port := n.hostPort()
		taken[port], taken[n.bus] = true, true
	}
	for off := 1000; off < 65535; off += 1000 {
		ok := true
		for _, n := range nodes {
			_, port := n.hostPort()
			if port+off > 65535 || taken[port+off] {
				ok = false
				break
			}
		}
		if ok {
			return off
		}
	}
	return 1000
}

// nodeURL is url with its host and port replaced by a cluster node's.
func nodeURL(url string, n clusterNode) string {
	host, port := n.hostPort()
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	norm, err := normalizeRedisURL(url)
	sch := strings.Index(norm, "://")
	if err != nil || sch < 0 {
		return "redis://" + addr
	}
	// The authority (user:password@host:port) runs to the path or query;
	// the password may be redacted (***), so the URL is not re-encoded.
	rest := norm[sch+3:]
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	userinfo := ""
	if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
		userinfo = rest[:at+1]
	}
	return norm[:sch+3] + userinfo + addr + rest[end:]
}

// printAdvice prints the report; nodes, for a cluster (advise --cluster),
// are its nodes, each to get a proxy beside it; portable: the advice is
// within the portable profile (advise --portable).
func printAdvice(e env, rep advise.Report, url string, took time.Duration, nodes []clusterNode, portable bool) {
	w := e.Stdout
	fmt.Fprintf(w, "sampled %d keys of %s (%d with values), %d values, %s, in %s\n\n",
		rep.KeysScanned, url, rep.KeysSampled, rep.Values, units.FormatSize(rep.Bytes), took.Round(time.Millisecond))
	if rep.Values == 0 {
		fmt.Fprintln(w, "no string, hash, list or stream values found: nothing to advise")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "prefix\tkeys\tvalues\tmedian\tmemory now\traw values\twrite\tmin-size\tsaved\tat rest\tdict")
	row := func(p advise.Prefix) {
		name := p.Prefix
		if name == "" {
			name = "(no separator)"
		}
		a := p.Advice
		write, minSize, saved, atRest, dict := "raw", "-", "-", "-", "-"
		if a.Compress {
			write, minSize, saved = a.Write, units.FormatSize(int64(a.MinSize)), fmt.Sprintf("%.1f%%", a.SavedPct)
		}
		if a.AtRest != "" {
			atRest = fmt.Sprintf("%s %.1f%%", a.AtRest, a.AtRestSaved)
		}
		if p.Dict != nil {
			dict = fmt.Sprintf("no (%.1f%% -> %.1f%%)", p.Dict.SavedPctWithout, p.Dict.SavedPctWith)
			if a.Dict {
				dict = fmt.Sprintf("yes (%.1f%% -> %.1f%%)", p.Dict.SavedPctWithout, p.Dict.SavedPctWith)
			}
		}
		median := "-"
		if p.Values > 0 {
			median = units.FormatSize(int64(p.Median))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, p.Keys, p.Values, median,
			units.FormatSize(p.MemoryUsage), units.FormatSize(p.MemoryRaw), write, minSize, saved, atRest, dict)
	}
	for _, p := range rep.Prefixes {
		row(p)
	}
	tw.Flush()
	for _, p := range rep.Prefixes {
		if p.Undecodable > 0 {
			fmt.Fprintf(w, "\nwarning: %d sampled values under %q are frames this build cannot read (stored codecs %v), left out of the advice; first: %s\n",
				p.Undecodable, p.Prefix, p.StoredCodecs, p.UndecodableWhy)
		}
	}

	if len(rep.ScriptPrefixes) > 0 {
		fmt.Fprintf(w, "\nscripts use these prefixes (%s): squeeze proxy stores their values uncompressed, whatever the advice,\n"+
			"until no script has used them for its --script-prefix-ttl, and squeeze compact skips them:\n", advise.ScriptPrefixesKey)
		for _, sp := range rep.ScriptPrefixes {
			if t, ok := rep.ScriptPrefixesLastUsed[sp]; ok {
				fmt.Fprintf(w, "  %s (last used by a script %s)\n", sp, t.Format(time.DateTime+" MST"))
			} else {
				fmt.Fprintf(w, "  %s\n", sp)
			}
		}
		for _, p := range rep.Prefixes {
			if p.ScriptUsed && p.Advice.Compress {
				fmt.Fprintf(w, "  prefix %q: %s of values would save %.1f%% compressed, but scripts use it\n", p.Prefix, units.FormatSize(p.MemoryRaw), p.Advice.SavedPct)
			}
		}
	}

	o := rep.Overall
	fmt.Fprintf(w, "\n%s\n", "codecs over the sampled values of the prefixes that compress (memory saved; encode and decode speed on this machine):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "codec\tsaved\tencode\tdecode\tfast\t")
	for _, c := range o.Codecs {
		fast := ""
		if c.Fast {
			fast = "yes"
		}
		fmt.Fprintf(tw, "%s\t%.1f%%\t%.0f MB/s\t%.0f MB/s\t%s\t\n", c.Codec, c.SavedPct, c.EncodeMBs, c.DecodeMBs, fast)
	}
	tw.Flush()

	printProfileCost(w, rep, portable)

	fmt.Fprintf(w, "\nadvice: %s\n", o.Advice.Why)
	if left := leftOutCodecs(o); len(left) > 0 && !portable { // later codecs are not portable either
		fmt.Fprintf(w, "\n%s would save %.0f points or more beyond the write codec, but came later than the other codecs: squeeze\n"+
			"readers built before it cannot read its frames, so the advice leaves it out; name it in --codecs once every reader\n"+
			"is upgraded\n", strings.Join(left, ", "), advise.WriteMargin)
	}
	if later := laterCodecs(&rep); len(later) > 0 {
		fmt.Fprintf(w, "\nnote: %s came later than the other codecs: squeeze readers (proxies, Go programs) built before it\n"+
			"cannot read its frames, so switch writers to it once every reader is upgraded; squeeze compact --from\n"+
			"%s --codec s2 moves keys back if you must return to an older release\n", strings.Join(later, ", "), strings.Join(later, ","))
	}
	fmt.Fprintf(w, "\nto apply it:\n")
	base := "none"
	if o.Advice.Compress {
		base = fmt.Sprintf("%s --min-size %d", o.Advice.Write, o.Advice.MinSize)
	}
	rules := func() {
		for _, r := range rep.ProxyRules {
			fmt.Fprintf(w, " \\\n      --rule %s", shellQuote(r))
		}
		fmt.Fprintln(w)
	}
	clusterFlag, portableFlag := "", ""
	if portable {
		portableFlag = " --portable"
	}
	if nodes == nil {
		fmt.Fprintf(w, "  squeeze proxy --upstream %s%s --codec %s", url, portableFlag, base)
		rules()
	} else {
		// A proxy beside each node, masters and replicas (a replica
		// becomes a master on failover), each at its node's address plus
		// the offset, which tells every proxy where the others listen.
		clusterFlag = " --cluster"
		off := clusterPortOffset(nodes)
		fmt.Fprintf(w, "  # a proxy beside each node of the cluster, listening at the node's port + %d (--cluster-port-offset;\n"+
			"  # --cluster-map NODE=PROXY,... names other addresses), each on the node's own host:\n", off)
		for _, n := range nodes {
			host, port := n.hostPort()
			listen := net.JoinHostPort(host, strconv.Itoa(port+off))
			auth := ""
			if listenReachable(listen) {
				auth = " --client-auth require" // a proxy clients reach from other hosts: each logs in itself
			}
			fmt.Fprintf(w, "  squeeze proxy --listen %s --upstream %s --cluster-port-offset %d%s%s --codec %s",
				listen, nodeURL(url, n), off, auth, portableFlag, base)
			rules()
		}
	}
	if !o.Advice.Compress && len(rep.ProxyRules) == 0 {
		fmt.Fprintf(w, "  (values compress too little to be worth it: run squeeze without compressing, or not at all)\n")
	}
	// Keys without a prefix have no SCAN pattern of their own: '*' takes
	// every key, those of the other prefixes too. Their command is printed
	// only when they are all there is.
	unprefixed := func(p advise.Prefix) bool { return p.Prefix == "" && len(rep.Prefixes) > 1 }
	for _, p := range rep.Prefixes {
		switch {
		case p.Advice.AtRest == "":
		case p.ScriptUsed:
			// compact skips the keys under prefixes scripts use: a
			// command for them would rewrite none.
			fmt.Fprintf(w, "  # %s: %s would save %.1f%% at rest, but scripts use %s, whose keys squeeze compact skips\n",
				prefixKeys(p.Prefix), p.Advice.AtRest, p.Advice.AtRestSaved, strings.Join(advise.ScriptPrefixesOver(p.Prefix, rep.ScriptPrefixes), ", "))
		case unprefixed(p):
			fmt.Fprintf(w, "  # keys without a prefix: %s would save %.1f%% of them at rest, but no pattern selects them alone\n"+
				"  # ('*' takes every key): give squeeze compact a --pattern that matches their names only\n",
				p.Advice.AtRest, p.Advice.AtRestSaved)
		default:
			fmt.Fprintf(w, "  squeeze compact%s --redis %s%s --pattern %s --codec %s   # cold %s: %.1f%% saved\n",
				clusterFlag, url, portableFlag, shellQuote(p.Pattern()), p.Advice.AtRest, prefixKeys(p.Prefix), p.Advice.AtRestSaved)
		}
	}
	for _, p := range rep.Prefixes {
		switch {
		case !p.Advice.Dict:
		case p.ScriptUsed:
			fmt.Fprintf(w, "  # %s: a dictionary would help them, but scripts use %s, whose values squeeze proxy stores uncompressed\n",
				prefixKeys(p.Prefix), strings.Join(advise.ScriptPrefixesOver(p.Prefix, rep.ScriptPrefixes), ", "))
		case p.Prefix == "":
			// A rule cannot name the empty prefix either (advise.ProxyRules).
			fmt.Fprintf(w, "  # keys without a prefix: a dictionary would help them, but neither a pattern nor a proxy rule selects them alone\n")
		default:
			// zstd:1: the level advise measured the dictionary with.
			fmt.Fprintf(w, "  squeeze dict train%s --redis %s --pattern %s --codec zstd:1 --publish   # then on the proxy: --rule %s, in place of any rule for it above\n",
				clusterFlag, url, shellQuote(p.Pattern()), shellQuote(p.Prefix+"=zstd:1,dict=ID"))
		}
	}
}

// printProfileCost prints, per prefix and for all of them, the write
// advice over every codec beside the one within the portable profile, and
// what the profile costs; portable says which of the two is the advice.
func printProfileCost(w io.Writer, rep advise.Report, portable bool) {
	rows := append(slices.Clone(rep.Prefixes), rep.Overall)
	if !slices.ContainsFunc(rows, func(p advise.Prefix) bool { return p.Profile != nil }) {
		return // no portable candidate measured
	}
	which := "the advice is over every codec; squeeze advise --portable advises within the profile"
	if portable {
		which = "the advice is within the profile (--portable)"
	}
	fmt.Fprintf(w, "\nthe portable profile (codecs other languages read) against every codec, for writes (%s):\n", which)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "prefix\tany codec\tsaved\tencode\tdecode\tportable\tsaved\tencode\tdecode\tportable saves\tportable speed (encode, decode)")
	choice := func(c advise.WriteChoice) string {
		if !c.Compress {
			return "raw\t-\t-\t-"
		}
		return fmt.Sprintf("%s\t%.1f%%\t%.0f MB/s\t%.0f MB/s", c.Codec, c.SavedPct, c.EncodeMBs, c.DecodeMBs)
	}
	for i, p := range rows {
		if p.Profile == nil {
			continue
		}
		name := p.Prefix
		switch {
		case i == len(rows)-1:
			name = "(all)"
		case name == "":
			name = "(no separator)"
		}
		pc := p.Profile
		speed := "-"
		if pc.EncodeRatio > 0 {
			speed = fmt.Sprintf("%.2fx, %.2fx", pc.EncodeRatio, pc.DecodeRatio)
		}
		mem := fmt.Sprintf("%.1f points less", pc.SavedPoints)
		if pc.SavedPoints < 0 {
			mem = fmt.Sprintf("%.1f points more", -pc.SavedPoints)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, choice(pc.Any), choice(pc.Portable), mem, speed)
	}
	tw.Flush()
}

// prefixKeys names the keys of a prefix in a comment.
func prefixKeys(prefix string) string {
	if prefix == "" {
		return "keys"
	}
	return prefix + " keys"
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// leftOutCodecs returns the codecs that came later (minlz) which the
// advice measured and left out although, fast, they save enough more than
// the write codec it names to have replaced it: what the reader of the
// advice should know.
func leftOutCodecs(o advise.Prefix) []string {
	if !o.Advice.Compress {
		return nil
	}
	i := slices.IndexFunc(o.Codecs, func(c advise.CodecFit) bool { return c.Codec == o.Advice.Write })
	if i < 0 {
		return nil
	}
	var names []string
	for _, c := range o.Codecs {
		a, err := codec.ParseAlgorithm(c.Codec)
		if err != nil || !a.ID.AddedLater() || c.Codec == o.Advice.Write || c.Codec == o.Advice.AtRest {
			continue
		}
		if c.Fast && c.SavedPct >= o.Codecs[i].SavedPct+advise.WriteMargin && !slices.Contains(names, c.Codec) {
			names = append(names, c.Codec)
		}
	}
	return names
}

// laterCodecs returns the codecs the advice writes with (for writes or at
// rest, overall or by prefix) that older squeeze readers do not know.
func laterCodecs(rep *advise.Report) []string {
	var names []string
	add := func(s string) {
		if a, err := codec.ParseAlgorithm(s); err == nil && a.ID.AddedLater() && !slices.Contains(names, a.ID.String()) {
			names = append(names, a.ID.String())
		}
	}
	add(rep.Overall.Advice.Write)
	add(rep.Overall.Advice.AtRest)
	for _, p := range rep.Prefixes {
		if p.Advice.Compress {
			add(p.Advice.Write)
		}
		add(p.Advice.AtRest)
	}
	return names
}
