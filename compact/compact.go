// Package compact recompresses cold values in place, online: values written
// with a fast codec on the hot path (s2, zstd:1) are rewritten, once nobody
// has touched them for a while, with a strong one (zstd:19, brotli:9, zstd
// with a trained dictionary) that saves more memory but would cost too much
// on every write. squeeze frames are self-describing (docs/FORMAT.md), so
// every reader (the proxy, the client library) decodes whichever codec a key
// ends up in, and no reader needs to know compaction happened.
//
// Run walks the keyspace with SCAN and, for each key, in pipelined batches:
//
//  1. TYPE, OBJECT IDLETIME and STRLEN (none of them touches the key's
//     access time). Keys that are not strings, are squeeze's own
//     (dictstore.IsStoreKey), or were used less than MinIdle ago are
//     skipped.
//  2. GET the value. A frame is decoded (with a dictstore.Resolver when
//     dictionaries are in use); a raw value is taken as it is only with
//     IncludeRaw, since the writer may have stored it raw on purpose.
//  3. Encode it with the target Encoder, decode the result and compare it
//     with the original (a rewrite never changes what readers see), and keep
//     it only when the new stored form is smaller than the old by at least
//     MinGain. This is also what "already compacted" means: a frame records
//     its codec but not its level, so instead of guessing, a value is
//     re-encoded and left alone when that gains too little. A second run
//     over the same keys therefore rewrites nothing. (Options.From turns
//     this into a migration: only frames of the listed codecs, whatever
//     the size.)
//  4. Write back with an atomic compare-and-set, the Lua script CASScript:
//     the new bytes are SET (with KEEPTTL) only if the key still holds
//     exactly the bytes read in step 2.
//
// # Safety against concurrent writes
//
// Redis runs a script atomically: no command of another client runs between
// its GET and its SET. If any client wrote the key after step 2 (SET, APPEND,
// DEL, a new type), the script sees other bytes, or no string, and does
// nothing; the key is counted as changed concurrently and keeps the newer
// value. If the key still holds the bytes read, the value it holds is the
// value compaction decoded, and the rewrite replaces it with an encoding of
// the same bytes (verified in step 3), so every reader before and after
// sees the same value. A writer that stored the very same bytes again in
// between loses nothing either: the value is the same. KEEPTTL keeps the
// key's expiry, whatever it was at the time of the SET. The script is sent
// by EVALSHA, and by EVAL when the server does not know it (after SCRIPT
// FLUSH or a failover).
//
// # What is skipped
//
// String values, hash field values and list elements are compacted. A
// hash is read with HSCAN and its fields are written back by
// HashCASScript, which sets each field only if it still holds the bytes
// read (HSET keeps the key's TTL, and the script sets again the field's own
// expiry, which HSET clears), so a field written meanwhile keeps its
// newer value; a list is read with LRANGE, 512 elements at a time, and
// written back by ListCASScript, which sets each element by index only if
// that index still holds the bytes read. The key counts as rewritten when
// at least one field or element was. Sets, sorted sets and streams are
// counted as SkipNotString: set and sorted-set members are never
// compressed, and a stream's entries are immutable.
//
// Keys under a prefix of ScriptPrefixesKey (those scripts use) are
// skipped as SkipScript: a script compares and copies their stored bytes.
//
// Compacted list elements hold their values in new bytes. squeeze proxy
// finds list elements by value (LREM, LPOS, LINSERT), whatever their form;
// a client that searches a list by stored bytes, such as a proxy run with
// --list-search stored, no longer finds compacted elements: leave such
// lists out with Pattern.
//
// GET updates the key's access time, so a compacted key looks freshly used
// to an LRU eviction policy and to a second run within MinIdle. OBJECT
// IDLETIME fails under an LFU maxmemory-policy (Redis then does not track
// idle time); Run returns ErrIdleUnavailable, and MinIdle 0 compacts
// without looking at idleness.
package compact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/dictstore"
	"github.com/squeeze-kv/squeeze/internal/luaguard"
	"github.com/squeeze-kv/squeeze/internal/rediscluster"
)

// CASScript is the compare-and-set that writes a compacted value: it sets
// KEYS[1] to ARGV[2], keeping its TTL, only if it still holds ARGV[1], and
// returns 1 if it did. redis.pcall makes a key that became another type a
// mismatch (0), not a script error.
const CASScript = `local v = redis.pcall('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
  return 1
end
return 0`

var casScript = redis.NewScript(CASScript)

// Defaults of Options' zero fields.
const (
	DefaultPattern    = "*"
	DefaultScanCount  = 100
	DefaultBatchBytes = 16 << 20
	DefaultMinGain    = 0.03
)

// ErrIdleUnavailable is returned by Run when MinIdle is set but the server
// does not track idle time (an LFU maxmemory-policy is selected).
var ErrIdleUnavailable = errors.New("compact: OBJECT IDLETIME is unavailable: the server uses an LFU maxmemory-policy and does not track idle time; compact without the idleness check (MinIdle 0, --min-idle 0) or switch to an LRU policy")

// Options configures Run. Zero fields have the defaults documented on each.
type Options struct {
	// scriptPrefixes, when set, are the members of ScriptPrefixesKey read
	// already (a cluster's, read through the cluster client).
	scriptPrefixes *[]string

	// Encoder writes the compacted values (the target codec, and its
	// dictionary if any). Required. Its minimum size and gain apply: a value
	// it would store raw is not rewritten.
	Encoder *codec.Encoder
	// Resolver, if set, decodes the values read and loads from Redis the
	// dictionaries that frames name. Otherwise Decoder is used.
	Resolver *dictstore.Resolver
	// Decoder decodes the values read when Resolver is nil; nil means
	// codec.NewDecoder() with its defaults.
	Decoder *codec.Decoder
	// Pattern is the SCAN MATCH glob; default DefaultPattern ("*").
	Pattern string
	// ScanCount is the SCAN COUNT hint, which is also about the number of
	// keys per pipelined batch; default DefaultScanCount.
	ScanCount int64
	// BatchBytes bounds the bytes of the values read in one pipeline; a
	// single larger value is read alone. Default DefaultBatchBytes.
	BatchBytes int64
	// MinIdle skips keys used less than this long ago (OBJECT IDLETIME,
	// whole seconds). 0 compacts every key, without asking idleness.
	MinIdle time.Duration
	// IncludeRaw also compacts values stored without a frame. Off by
	// default: a writer may have stored them raw on purpose (too small, or
	// not worth compressing), and values not written by squeeze are read
	// raw by readers that do not decode (only squeeze readers understand
	// frames).
	IncludeRaw bool
	// MinGain is the least fraction of the stored size a rewrite must save
	// (0.03: at least 3% smaller); default DefaultMinGain. Negative means
	// any gain of at least one byte.
	MinGain float64
	// From, when not empty, turns compaction into a migration off these
	// codecs: only frames written with one of them are rewritten (others
	// are skipped as "other-codec", raw values as "raw"), each into what
	// Encoder stores for its value, whatever that gains or costs; MinGain
	// does not apply, and a value the Encoder stores raw is written raw. For
	// moving keys off a codec that some reader does not know (before going
	// back to an older release) or that is slow to read. The Encoder's codec
	// must not be among them, and IncludeRaw must be off.
	From []codec.ID
	// KeysPerSecond and BytesPerSecond (of values read) bound the pace;
	// 0 means unbounded.
	KeysPerSecond  float64
	BytesPerSecond float64
	// Workers encode in parallel; default 1 (compaction is background work
	// and should leave CPUs to the applications).
	Workers int
	// DryRun reads, encodes and counts, and writes nothing.
	DryRun bool
	// Progress, if set, is called after each batch with the totals so far.
	Progress func(Stats)
	// Logger gets a debug line per decode error; nil is slog.Default().
	Logger *slog.Logger

	// beforeWrite, in tests, runs between the reads and the writes of each
	// batch.
	beforeWrite func()
}

// Skip reasons, the keys of Stats.Skipped.
const (
	SkipHot         = "hot"                  // used less than MinIdle ago
	SkipNotString   = "not-a-string"         // set, zset, stream (strings, hashes and lists are compacted)
	SkipReserved    = "squeeze-key"          // squeeze's own keys (dictionaries)
	SkipScript      = "script-prefix"        // under a prefix scripts use (ScriptPrefixesKey)
	SkipRaw         = "raw"                  // not a frame, and IncludeRaw is off
	SkipNoGain      = "no-gain"              // the new form saves less than MinGain
	SkipChanged     = "changed-concurrently" // written, deleted or expired after the read
	SkipDecodeError = "decode-error"         // a corrupt frame, or one naming an unknown dictionary
	SkipGone        = "gone"                 // deleted or expired between SCAN and GET
	SkipEncodeError = "verify-failed"        // BUG guard: the new form did not decode to the value
	SkipOtherCodec  = "other-codec"          // with From: a frame of a codec not listed
)

// Stats counts what Run did. Byte and memory figures cover the rewritten
// keys only (in a dry run, the keys that would have been rewritten).
type Stats struct {
	DryRun    bool           `json:"dry_run"`
	Scanned   int64          `json:"keys_scanned"`
	Eligible  int64          `json:"keys_eligible"` // read and re-encoded
	Rewritten int64          `json:"keys_rewritten"`
	Skipped   map[string]int `json:"keys_skipped"`
	// BytesRead is the size of every value read (eligible keys).
	BytesRead int64 `json:"bytes_read"`
	// BytesBefore and BytesAfter are the stored sizes of the rewritten
	// values before and after.
	BytesBefore int64 `json:"stored_bytes_before"`
	BytesAfter  int64 `json:"stored_bytes_after"`
	// MemoryBefore and MemoryAfter are the sum of MEMORY USAGE of the
	// rewritten keys before and after the rewrite; in a dry run, after is
	// estimated from the allocator's size classes (dictstore.ValueMemory).
	MemoryBefore int64         `json:"memory_usage_before"`
	MemoryAfter  int64         `json:"memory_usage_after"`
	Elapsed      time.Duration `json:"elapsed_ns"`
}

// MemorySaved is MemoryBefore - MemoryAfter.
func (s Stats) MemorySaved() int64 { return s.MemoryBefore - s.MemoryAfter }

// SavedPct is the percentage of the rewritten keys' memory saved.
func (s Stats) SavedPct() float64 {
	if s.MemoryBefore == 0 {
		return 0
	}
	return 100 * float64(s.MemorySaved()) / float64(s.MemoryBefore)
}

// SkippedTotal is the number of scanned keys that were not rewritten.
func (s Stats) SkippedTotal() int64 {
	var n int64
	for _, v := range s.Skipped {
		n += int64(v)
	}
	return n
}

func (s *Stats) skip(reason string) {
	if s.Skipped == nil {
		s.Skipped = map[string]int{}
	}
	s.Skipped[reason]++
}

// item is one key through a batch.
type item struct {
	key      string
	old      []byte
	memOld   int64
	new      []byte
	decodeOK bool
	reason   string // skip reason after encoding, "" to write
}

// runCluster runs Run on each master of a cluster, one after another (so
// that the rate limits hold for the whole run), and adds up the totals. A
// node's keys are its own: its SCAN returns the keys of its slots, and the
// compare-and-set scripts run where those keys live. A slot that migrates
// during the run makes its scripts fail with MOVED, which ends the run with
// that error; run again afterwards.
func runCluster(ctx context.Context, cc *redis.ClusterClient, opts Options) (Stats, error) {
	masters, err := rediscluster.Masters(ctx, cc)
	if err != nil {
		return Stats{DryRun: opts.DryRun}, fmt.Errorf("compact: cluster masters: %w", err)
	}
	total := Stats{DryRun: opts.DryRun, Skipped: map[string]int{}}
	progress := opts.Progress
	prefixes, err := cc.SMembers(ctx, ScriptPrefixesKey).Result()
	if err != nil && err != redis.Nil {
		return total, fmt.Errorf("compact: SMEMBERS %s: %w", ScriptPrefixesKey, err)
	}
	opts.scriptPrefixes = &prefixes
	for _, node := range masters {
		done := total
		if progress != nil {
			opts.Progress = func(s Stats) { progress(addStats(done, s)) }
		}
		st, err := Run(ctx, node, opts)
		total = addStats(total, st)
		if err != nil {
			return total, fmt.Errorf("compact: node %s: %w", node.Options().Addr, err)
		}
	}
	return total, nil
}

// addStats returns the sum of two runs' totals.
func addStats(a, b Stats) Stats {
	sum := Stats{DryRun: a.DryRun || b.DryRun, Skipped: map[string]int{},
		Scanned: a.Scanned + b.Scanned, Eligible: a.Eligible + b.Eligible, Rewritten: a.Rewritten + b.Rewritten,
		BytesRead: a.BytesRead + b.BytesRead, BytesBefore: a.BytesBefore + b.BytesBefore, BytesAfter: a.BytesAfter + b.BytesAfter,
		MemoryBefore: a.MemoryBefore + b.MemoryBefore, MemoryAfter: a.MemoryAfter + b.MemoryAfter, Elapsed: a.Elapsed + b.Elapsed}
	for _, m := range []map[string]int{a.Skipped, b.Skipped} {
		for k, v := range m {
			sum.Skipped[k] += v
		}
	}
	return sum
}

// Run compacts the keys matching opts.Pattern, as the package comment
// describes, and returns what it did. It stops at the end of the keyspace,
// when ctx is canceled (returning ctx's error with the totals so far), or at
// the first Redis error other than a per-key one. It is safe to run while
// applications read and write the same keys, and to run several times.
func Run(ctx context.Context, rdb redis.UniversalClient, opts Options) (Stats, error) {
	start := time.Now()
	st := Stats{DryRun: opts.DryRun, Skipped: map[string]int{}}
	if opts.Encoder == nil {
		return st, errors.New("compact: Options.Encoder is nil")
	}
	if slices.Contains(opts.From, opts.Encoder.Algorithm().ID) {
		return st, fmt.Errorf("compact: the target codec %s is among the codecs to migrate from", opts.Encoder.Algorithm().ID)
	}
	if len(opts.From) > 0 && opts.IncludeRaw {
		return st, errors.New("compact: From migrates frames of given codecs; IncludeRaw would add raw values")
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		// A cluster client's SCAN walks one node only: run on each master.
		return runCluster(ctx, cc, opts)
	}
	if opts.Pattern == "" {
		opts.Pattern = DefaultPattern
	}
	if opts.ScanCount <= 0 {
		opts.ScanCount = DefaultScanCount
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = DefaultBatchBytes
	}
	if opts.MinGain == 0 {
		opts.MinGain = DefaultMinGain
	}
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Resolver == nil && opts.Decoder == nil {
		d, err := codec.NewDecoder()
		if err != nil {
			return st, err
		}
		opts.Decoder = d
	}
	if !opts.DryRun {
		if err := casScript.Load(ctx, rdb).Err(); err != nil {
			return st, fmt.Errorf("compact: SCRIPT LOAD: %w", err)
		}
	}
	r := &runner{rdb: rdb, o: &opts, st: &st, start: start}
	// Keys scripts use stay as written: a script compares and copies
	// their bytes (see ScriptPrefixesKey).
	var prefixes []string
	var err error
	if opts.scriptPrefixes != nil {
		prefixes = *opts.scriptPrefixes
	} else if prefixes, err = rdb.SMembers(ctx, ScriptPrefixesKey).Result(); err != nil && err != redis.Nil {
		return st, fmt.Errorf("compact: SMEMBERS %s: %w", ScriptPrefixesKey, err)
	}
	r.scriptPrefixes = map[string]bool{}
	for _, p := range prefixes {
		r.scriptPrefixes[p] = true
	}
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, opts.Pattern, opts.ScanCount).Result()
		if err != nil {
			st.Elapsed = time.Since(start)
			return st, fmt.Errorf("compact: SCAN: %w", err)
		}
		if err := r.batch(ctx, keys); err != nil {
			st.Elapsed = time.Since(start)
			return st, err
		}
		st.Elapsed = time.Since(start)
		if opts.Progress != nil {
			opts.Progress(st)
		}
		cursor = next
		if cursor == 0 {
			return st, nil
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
	}
}

type runner struct {
	rdb   redis.UniversalClient
	o     *Options
	st    *Stats
	start time.Time
	// scriptPrefixes: the members of ScriptPrefixesKey when the run began.
	scriptPrefixes map[string]bool
}

// ScriptPrefixesKey is the set in which squeeze proxy and the go-redis
// hook keep the key prefixes scripts use (a key's prefix: up to and
// including its last ':', or up to a segment that is an id: the
// proxy's luaguard.Prefix). Their values stay as written,
// so Run skips them (SkipScript), and so does the set itself, with the
// hash of their last uses (ScriptPrefixesKey + ":used").
const ScriptPrefixesKey = "squeeze:script-prefixes"

// scriptKey reports whether key falls under a prefix scripts use.
func (r *runner) scriptKey(k string) bool {
	if k == ScriptPrefixesKey || k == ScriptPrefixesKey+":used" {
		return true
	}
	if len(r.scriptPrefixes) == 0 {
		return false
	}
	return r.scriptPrefixes[string(luaguard.Prefix([]byte(k)))]
}

// batch handles the keys of one SCAN reply.
func (r *runner) batch(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	r.st.Scanned += int64(len(keys))
	// Step 1: type, idleness, length; none of them touches the key.
	types := make([]*redis.StatusCmd, len(keys))
	idles := make([]*redis.DurationCmd, len(keys))
	lens := make([]*redis.IntCmd, len(keys))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			types[i] = p.Type(ctx, k)
			if r.o.MinIdle > 0 {
				idles[i] = p.ObjectIdleTime(ctx, k)
			}
			lens[i] = p.StrLen(ctx, k)
		}
		return nil
	})
	if err != nil && !isPerKey(err) {
		return fmt.Errorf("compact: TYPE/OBJECT IDLETIME: %w", err)
	}
	var cands, containers, kinds []string
	var candLens []int64
	for i, k := range keys {
		if dictstore.IsStoreKey(k) {
			r.st.skip(SkipReserved)
			continue
		}
		if r.scriptKey(k) {
			r.st.skip(SkipScript)
			continue
		}
		t := types[i].Val()
		switch t {
		case "string", "hash", "list":
		case "none":
			r.st.skip(SkipGone)
			continue
		default:
			r.st.skip(SkipNotString)
			continue
		}
		if idles[i] != nil {
			idle, err := idles[i].Result()
			switch {
			case err == redis.Nil:
				r.st.skip(SkipGone)
				continue
			case err != nil && strings.Contains(err.Error(), "LFU"):
				return ErrIdleUnavailable
			case err != nil:
				return fmt.Errorf("compact: OBJECT IDLETIME %q: %w", k, err)
			case idle < r.o.MinIdle:
				r.st.skip(SkipHot)
				continue
			}
		}
		if t == "hash" || t == "list" {
			containers = append(containers, k)
			kinds = append(kinds, t)
			continue
		}
		cands = append(cands, k)
		candLens = append(candLens, lens[i].Val())
	}
	for i, k := range containers {
		read, cas := r.hashReader(k), hashCASScript
		if kinds[i] == "list" {
			read, cas = r.listReader(k), listCASScript
		}
		if err := r.elements(ctx, k, read, cas); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	// Steps 2-4 in chunks of at most BatchBytes of values.
	for len(cands) > 0 {
		n, sum := 0, int64(0)
		for n < len(cands) && (n == 0 || sum+candLens[n] <= r.o.BatchBytes) {
			sum += candLens[n]
			n++
		}
		if err := r.chunk(ctx, cands[:n]); err != nil {
			return err
		}
		cands, candLens = cands[n:], candLens[n:]
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	r.pace(ctx)
	return nil
}

// isPerKey reports whether a pipeline's first error is one that belongs to
// a key (a wrong type, a key gone), not to the connection.
func isPerKey(err error) bool {
	if err == redis.Nil {
		return true
	}
	var re redis.Error
	return errors.As(err, &re)
}

// chunk reads, re-encodes and writes back keys.
func (r *runner) chunk(ctx context.Context, keys []string) error {
	gets := make([]*redis.StringCmd, len(keys))
	mems := make([]*redis.IntCmd, len(keys))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			gets[i] = p.Get(ctx, k)
			mems[i] = p.MemoryUsage(ctx, k, 0)
		}
		return nil
	})
	if err != nil && !isPerKey(err) {
		return fmt.Errorf("compact: GET: %w", err)
	}
	items := make([]*item, 0, len(keys))
	var read int64
	for i, k := range keys {
		v, err := gets[i].Bytes()
		if err != nil {
			if err == redis.Nil {
				r.st.skip(SkipGone)
			} else {
				r.st.skip(SkipChanged) // became another type after step 1
			}
			continue
		}
		if !codec.IsFramed(v) && !r.o.IncludeRaw {
			r.st.skip(SkipRaw)
			continue
		}
		read += int64(len(v))
		items = append(items, &item{key: k, old: v, memOld: mems[i].Val()})
	}
	r.st.Eligible += int64(len(items))
	r.st.BytesRead += read
	r.encodeAll(ctx, items)

	var writes []*item
	for _, it := range items {
		if it.reason != "" {
			if it.reason == SkipDecodeError {
				r.o.Logger.Debug("compact: value not decodable, left as it is", "key", it.key)
			}
			r.st.skip(it.reason)
			continue
		}
		writes = append(writes, it)
	}
	if r.o.beforeWrite != nil {
		r.o.beforeWrite()
	}
	if err := r.write(ctx, writes); err != nil {
		return err
	}
	r.pace(ctx)
	return nil
}

// encodeAll decodes and re-encodes items with Workers goroutines.
func (r *runner) encodeAll(ctx context.Context, items []*item) {
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(r.o.Workers, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var val, check []byte
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(items) {
					return
				}
				val, check = r.encode(ctx, items[i], val[:0], check[:0])
			}
		}()
	}
	wg.Wait()
}

// encode sets it.new or it.reason. val and check are scratch buffers.
func (r *runner) encode(ctx context.Context, it *item, val, check []byte) ([]byte, []byte) {
	var err error
	if len(r.o.From) > 0 && !slices.Contains(r.o.From, frameCodec(it.old)) {
		it.reason = SkipOtherCodec
		return val, check
	}
	if r.o.Resolver != nil {
		val, err = r.o.Resolver.AppendDecode(ctx, val, it.old)
	} else {
		val, err = r.o.Decoder.AppendDecode(val, it.old)
	}
	if err != nil {
		it.reason = SkipDecodeError
		return val, check
	}
	it.new = r.o.Encoder.AppendEncode(nil, val)
	limit := len(it.old) - 1
	if r.o.MinGain > 0 {
		limit = int(float64(len(it.old)) * (1 - r.o.MinGain))
	}
	if len(r.o.From) > 0 {
		limit = math.MaxInt // a migration rewrites whatever the size
	}
	if len(it.new) > limit || bytes.Equal(it.new, it.old) {
		it.reason = SkipNoGain
		return val, check
	}
	// A rewrite must never change what readers see.
	dec := r.o.Decoder
	if r.o.Resolver != nil {
		check, err = r.o.Resolver.AppendDecode(ctx, check, it.new)
	} else {
		check, err = dec.AppendDecode(check, it.new)
	}
	if err != nil || !bytes.Equal(check, val) {
		r.o.Logger.Error("BUG: compacted value does not decode to the original; left as it is", "key", it.key, "err", err)
		it.reason = SkipEncodeError
	}
	return val, check
}

// write compare-and-sets the items (or, in a dry run, counts them).
func (r *runner) write(ctx context.Context, items []*item) error {
	if len(items) == 0 {
		return nil
	}
	if r.o.DryRun {
		for _, it := range items {
			r.count(it, it.memOld-(dictstore.ValueMemory(len(it.old))-dictstore.ValueMemory(len(it.new))))
		}
		return nil
	}
	res := make([]*redis.Cmd, len(items))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, it := range items {
			res[i] = casScript.EvalSha(ctx, p, []string{it.key}, it.old, it.new)
		}
		return nil
	})
	if err != nil && !isPerKey(err) {
		return fmt.Errorf("compact: EVALSHA: %w", err)
	}
	var done []*item
	for i, it := range items {
		n, err := res[i].Int()
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			// The server forgot the script (SCRIPT FLUSH, failover): EVAL
			// sends it again.
			n, err = casScript.Eval(ctx, r.rdb, []string{it.key}, it.old, it.new).Int()
		}
		if err != nil {
			return fmt.Errorf("compact: compare-and-set %q: %w", it.key, err)
		}
		if n != 1 {
			r.st.skip(SkipChanged)
			continue
		}
		done = append(done, it)
	}
	if len(done) == 0 {
		return nil
	}
	mems := make([]*redis.IntCmd, len(done))
	_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, it := range done {
			mems[i] = p.MemoryUsage(ctx, it.key, 0)
		}
		return nil
	})
	if err != nil && !isPerKey(err) {
		return fmt.Errorf("compact: MEMORY USAGE: %w", err)
	}
	for i, it := range done {
		after, err := mems[i].Result()
		if err != nil { // gone since: estimate
			after = it.memOld - (dictstore.ValueMemory(len(it.old)) - dictstore.ValueMemory(len(it.new)))
		}
		r.count(it, after)
	}
	return nil
}

func (r *runner) count(it *item, memAfter int64) {
	r.countKey(int64(len(it.old)), int64(len(it.new)), it.memOld, memAfter)
}

// pace sleeps until the keys and bytes so far fit the rate limits.
func (r *runner) pace(ctx context.Context) {
	var wait time.Duration
	if r.o.KeysPerSecond > 0 {
		wait = max(wait, time.Duration(float64(r.st.Scanned)/r.o.KeysPerSecond*float64(time.Second)))
	}
	if r.o.BytesPerSecond > 0 {
		wait = max(wait, time.Duration(float64(r.st.BytesRead)/r.o.BytesPerSecond*float64(time.Second)))
	}
	d := wait - time.Since(r.start)
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// frameCodec returns the codec byte of a frame (of version 1), even one this
// build does not know, and codec.IDNone's opposite for anything else: a
// value that is not a frame matches no codec of From.
func frameCodec(v []byte) codec.ID {
	if !codec.IsFramed(v) || len(v) < len(codec.Magic)+2 || v[len(codec.Magic)] != codec.Version {
		return 0xff
	}
	return codec.ID(v[len(codec.Magic)+1])
}
