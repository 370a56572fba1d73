package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/compact"
	"github.com/squeeze-kv/squeeze/dictstore"
	"github.com/squeeze-kv/squeeze/internal/units"
)

func init() {
	register(command{Name: "compact", Summary: "recompress cold keys with a stronger codec, online, safe against concurrent writes", Run: runCompact})
}

const compactUsage = `
Usage: squeeze compact [--redis URL] [flags]

Writes want a fast codec (s2, zstd:1): every SET pays for compression. Keys
that nobody has touched for a while can afford a strong one (zstd:9,
zstd:19, brotli:9, zstd with a trained dictionary) that saves more memory.
compact walks the keys matching --pattern (SCAN, in batches) and rewrites
each cold string value with --codec, in place. Readers notice nothing: every
squeeze frame names its codec, and the proxy and the client library decode
whichever codec a key holds. The Redis is --redis, else the environment
variable SQUEEZE_REDIS (redis://host:port/db, host:port, unix:///path.sock).

What is safe and why:
  - A key is rewritten only if it still holds the bytes compact read: the
    write is one Lua script (GET, compare, SET ... KEEPTTL) that Redis runs
    atomically. A value written by your application in the meantime is kept,
    and counted as "changed-concurrently". TTLs are kept.
  - The new form is decoded and compared with the value before it is
    written: what readers get never changes.
  - Keys used less than --min-idle ago (OBJECT IDLETIME) are left alone: hot
    keys are rewritten often anyway, and compacting them costs your writers.
    Under an LFU maxmemory-policy Redis does not track idle time: use
    --min-idle 0 to compact regardless of use.
  - Strings, hash field values and list elements are compacted (a hash
    field by field, a list element by element, each by its own
    compare-and-set; squeeze proxy finds compacted list elements by value).
    Sets, sorted sets and streams are skipped ("not-a-string"), as are
    squeeze's own keys (squeeze:dict*),
    corrupt frames ("decode-error", left as they are) and values stored
    without a frame unless --include-raw: a writer may have stored them raw
    on purpose, and applications reading them without squeeze would not
    understand a frame.
  - A value is rewritten only when the new form is at least --min-gain
    smaller, so running compact again rewrites nothing new.
  - --rate bounds the keys per second; --dry-run reads and measures and
    writes nothing.

--from turns compaction into a migration off codecs: only frames written
with those codecs are rewritten, into --codec, whatever that gains or costs
(--min-gain does not apply; a value --codec would leave raw is written raw).
Before going back to a squeeze release that does not read a codec you have
been writing (minlz came later than the others), or to move keys off a
codec that is slow to read. Other frames count as "other-codec".

--portable refuses a --codec that other languages cannot read (s2, minlz,
xz; docs/FORMAT.md, the portable profile). With --from s2,minlz it moves
what the proxy wrote with its default codec into the profile, so that the
Python and Node readers in ports/ read every key.

As a sidecar, --every runs a pass at that interval until SIGINT or SIGTERM
(which ends the pass under way cleanly: what it rewrote stays rewritten);
each pass prints its summary (--json: one JSON object per line), and keys
written since the last pass are compacted once they are --min-idle cold.

Reading a value (GET) counts as using it: compacted keys look freshly used to
an LRU eviction policy.

In a Redis Cluster, name any node with --cluster: compact walks every
master in turn (one compact covers the cluster). Given a cluster node
without --cluster it refuses, as the node holds its own slots' keys only.

Examples:
  squeeze compact --redis redis://127.0.0.1:6379 --dry-run
  squeeze compact --redis redis://127.0.0.1:6379 --pattern 'doc:*' --codec zstd:19 --min-idle 1h
  squeeze compact --redis redis://127.0.0.1:6379 --pattern 'user:*' --dict 1690163204 --codec zstd:9
  squeeze compact --redis unix:///run/redis.sock --codec brotli:9 --rate 1000 --json
  squeeze compact --redis redis://127.0.0.1:6379 --every 1h --min-idle 6h --rate 500
  squeeze compact --cluster --redis redis://10.0.0.5:7000 --min-idle 1h
  squeeze compact --redis redis://127.0.0.1:6379 --from minlz --codec s2 --min-idle 0
  squeeze compact --redis redis://127.0.0.1:6379 --portable --from s2,minlz --codec zstd:3 --min-idle 0
`

func runCompact(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "compact", compactUsage)
	url := addRedisFlag(fs, "Redis server `URL` holding the data", "none: required")
	pattern := fs.String("pattern", compact.DefaultPattern, "SCAN `GLOB` of the keys to compact")
	codecName := fs.String("codec", "zstd:9", "target `codec`: zstd:9, zstd:19, brotli:9, ... (all codecs: squeeze encode --help)")
	dictID := fs.String("dict", "", "compress with the published dictionary `ID` (squeeze dict list; zstd codecs only)")
	minIdle := fs.Duration("min-idle", 10*time.Minute, "skip keys used less than this long ago; 0 ignores idleness (needed under an LFU policy)")
	rate := fs.Float64("rate", 5000, "most keys scanned per second; 0 for no limit")
	byteRate := units.SizeFlag(0)
	fs.Var(&byteRate, "byte-rate", "most bytes of values read per second (e.g. 50MB); 0 for no limit")
	minGain := fs.Float64("min-gain", 100*compact.DefaultMinGain, "rewrite only values whose stored size shrinks by at least this `percent`")
	includeRaw := fs.Bool("include-raw", false, "also compact values stored without a squeeze frame")
	fromList := fs.String("from", "", "migrate: rewrite only frames of these comma-separated `codecs` (e.g. minlz), whatever the gain")
	count := fs.Int64("count", compact.DefaultScanCount, "SCAN COUNT: keys per batch")
	workers := fs.Int("workers", 1, "encode on this many CPUs")
	dryRun := fs.Bool("dry-run", false, "read and measure what compaction would save, write nothing")
	asJSON := fs.Bool("json", false, "print the result as JSON for machines")
	cluster := fs.Bool("cluster", false, "--redis names a node of a Redis Cluster: compact the keys of every master")
	every := fs.Duration("every", 0, "run a pass at this interval until interrupted (as a sidecar); 0 runs one pass")
	passes := fs.Int("passes", 0, "with --every, stop after this many passes; 0 runs until interrupted")
	portable := fs.Bool("portable", false, "write only codecs other languages read (docs/FORMAT.md, the portable profile): a --codec outside it is an error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("compact takes no arguments (got %q); the keys come from --pattern", fs.Args())
	}
	u, err := resolveRedis(*url, "")
	if err != nil {
		return err
	}
	if *url = u; *url == "" {
		return needRedisError("compact", "the Redis whose keys to recompress; there is no throwaway server here")
	}
	alg, err := codec.ParseAlgorithm(*codecName)
	if err != nil {
		return usageError("--codec: %v", err)
	}
	if alg.ID == codec.IDNone {
		return usageError("--codec none would decompress values; pick a compressing codec such as zstd:9")
	}
	if *portable {
		if err := codec.CheckPortable(alg); err != nil {
			return usageError("--codec with --portable: %v", err)
		}
	}
	var from []codec.ID
	if *fromList != "" {
		for _, name := range strings.Split(*fromList, ",") {
			a, err := codec.ParseAlgorithm(name)
			if err != nil {
				return usageError("--from: %v", err)
			}
			if a.ID == codec.IDNone {
				return usageError("--from none: raw values are not frames; --include-raw compacts them")
			}
			if a.ID == alg.ID {
				return usageError("--from %s names the target codec (--codec %s): a migration goes to another codec", a.ID, alg)
			}
			from = append(from, a.ID)
		}
		if *includeRaw {
			return usageError("--from migrates frames of given codecs; --include-raw would add raw values: use one")
		}
	}
	var id uint64
	if *dictID != "" {
		id, err = strconv.ParseUint(*dictID, 10, 32)
		if err != nil || id == 0 || id > dictstore.MaxID {
			return usageError("--dict %q is not a dictionary id in 1..2147483647", *dictID)
		}
		if alg.ID != codec.IDZstd {
			return usageError("--dict works with zstd codecs only, not %s", alg)
		}
	}
	switch {
	case *minIdle < 0:
		return usageError("--min-idle must not be negative, got %v", *minIdle)
	case *rate < 0:
		return usageError("--rate must not be negative, got %v", *rate)
	case *minGain < 0 || *minGain >= 100:
		return usageError("--min-gain is a percentage in [0, 100), got %v", *minGain)
	case *count <= 0:
		return usageError("--count must be positive, got %d", *count)
	case *workers <= 0:
		return usageError("--workers must be positive, got %d", *workers)
	case *every < 0:
		return usageError("--every must not be negative, got %v", *every)
	case *passes < 0:
		return usageError("--passes must not be negative, got %d", *passes)
	case *passes > 0 && *every == 0:
		return usageError("--passes counts the passes of --every; without --every compact runs one pass")
	}
	rdb, err := openClusterOr(ctx, *url, *cluster)
	if err != nil {
		return err
	}
	defer rdb.Close()
	res, err := dictstore.NewResolver(rdb)
	if err != nil {
		return err
	}
	var encOpts []codec.EncoderOption
	if id != 0 {
		d, err := res.Dictionary(ctx, uint32(id))
		if err != nil {
			return fmt.Errorf("--dict %d: %w", id, err)
		}
		encOpts = append(encOpts, codec.WithDictionary(d))
	}
	enc, err := codec.NewEncoder(alg, encOpts...)
	if err != nil {
		return err
	}
	gain := *minGain / 100
	if gain == 0 {
		gain = -1 // any gain of a byte
	}
	target := alg.String()
	if id != 0 {
		target += "+dict " + strconv.FormatUint(id, 10)
	}
	opts := compact.Options{
		Encoder: enc, Resolver: res, Pattern: *pattern, ScanCount: *count, MinIdle: *minIdle,
		IncludeRaw: *includeRaw, MinGain: gain, KeysPerSecond: *rate, BytesPerSecond: float64(byteRate),
		Workers: *workers, DryRun: *dryRun, From: from,
	}
	for pass := 1; ; pass++ {
		total, _ := rdb.DBSize(ctx).Result() // an estimate: the pattern may match fewer
		desc := "compacting keys"
		if *dryRun {
			desc = "dry run: scanning keys"
		}
		b := newProgress(e, *asJSON)
		opts.Progress = func(s compact.Stats) { b.update(desc, int(min(s.Scanned, total)), int(total)) }
		st, err := compact.Run(ctx, rdb, opts)
		b.finish()
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		n := 0 // one pass: no pass number in the output
		if *every > 0 {
			n = pass
		}
		if *asJSON {
			if jerr := printCompactJSON(e, st, target, *pattern, n); jerr != nil {
				return jerr
			}
		} else {
			printCompact(e, st, target, *pattern, n, *minIdle)
		}
		if err != nil || *every == 0 || pass == *passes {
			return err
		}
		select {
		case <-ctx.Done():
			return nil // interrupted between passes: nothing under way
		case <-time.After(*every):
		}
	}
}

// printCompactJSON prints one pass; the passes of --every (pass above 0)
// print one object per line, with their number.
func printCompactJSON(e env, st compact.Stats, target, pattern string, pass int) error {
	enc := json.NewEncoder(e.Stdout)
	if pass == 0 {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(struct {
		Pass int `json:"pass,omitempty"`
		compact.Stats
		Codec          string  `json:"codec"`
		Pattern        string  `json:"pattern"`
		MemorySaved    int64   `json:"memory_saved_bytes"`
		MemorySavedPct float64 `json:"memory_saved_pct"`
		Seconds        float64 `json:"elapsed_s"`
	}{pass, st, target, pattern, st.MemorySaved(), round1(st.SavedPct()), st.Elapsed.Seconds()})
}

func printCompact(e env, st compact.Stats, target, pattern string, pass int, minIdle time.Duration) {
	w := e.Stdout
	if pass > 0 {
		fmt.Fprintf(w, "pass %d, %s: ", pass, time.Now().Format(time.DateTime))
	}
	verb := "rewrote"
	if st.DryRun {
		verb = "dry run: would rewrite"
	}
	secs := max(st.Elapsed.Seconds(), 1e-9)
	fmt.Fprintf(w, "%s %d of %d keys matching %s with %s in %s (%.0f keys/s scanned, %s/s read)\n\n",
		verb, st.Rewritten, st.Scanned, pattern, target, st.Elapsed.Round(time.Millisecond),
		float64(st.Scanned)/secs, units.FormatSize(int64(float64(st.BytesRead)/secs)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "keys scanned\t%d\t\n", st.Scanned)
	fmt.Fprintf(tw, "read and re-encoded\t%d\t\n", st.Eligible)
	fmt.Fprintf(tw, "rewritten\t%d\t\n", st.Rewritten)
	reasons := make([]string, 0, len(st.Skipped))
	for r := range st.Skipped {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(tw, "skipped: %s\t%d\t\n", r, st.Skipped[r])
	}
	tw.Flush()
	// The reasons a first run on fresh keys meets: say what to do about them.
	if n := st.Skipped[compact.SkipHot]; n > 0 {
		fmt.Fprintf(w, "\n%d keys were used less than --min-idle (%v) ago: compact leaves hot keys alone; --min-idle 0 takes them too\n", n, minIdle)
	}
	if n := st.Skipped[compact.SkipRaw]; n > 0 {
		fmt.Fprintf(w, "\n%d values are stored without a squeeze frame: --include-raw compacts them too, once every reader of those keys decodes frames\n", n)
	}
	if st.Rewritten == 0 {
		return
	}
	memNote := "MEMORY USAGE"
	if st.DryRun {
		memNote = "MEMORY USAGE (after: estimated)"
	}
	fmt.Fprintf(w, "\nof the %d keys rewritten:\n", st.Rewritten)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tbefore\tafter\tsaved\t\n")
	fmt.Fprintf(tw, "stored bytes\t%s\t%s\t%s\t\n", units.FormatSize(st.BytesBefore), units.FormatSize(st.BytesAfter), pct(st.BytesBefore, st.BytesAfter))
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", memNote, units.FormatSize(st.MemoryBefore), units.FormatSize(st.MemoryAfter), pct(st.MemoryBefore, st.MemoryAfter))
	tw.Flush()
}

func pct(before, after int64) string {
	if before == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(before-after)/float64(before))
}
