package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/compact"
	"github.com/squeeze-kv/squeeze/dictstore"
)

// Defaults of the Redis study (seed 000's parameters).
var (
	DefaultRedisSizes      = []int{0, 16600, 47500, 221900, 4200000}
	DefaultRedisIterations = []int{1, 10, 100, 1000}
)

// KeyPrefix starts every key the studies write; they delete their keys when
// done and never touch others.
const KeyPrefix = "squeeze:bench:"

// RedisOptions configure RunRedis. Zero fields take the documented defaults.
type RedisOptions struct {
	// Client is the Redis to measure against. Required.
	Client *redis.Client
	// Paths to measure: PathDirect, PathLibrary and PathProxy. Default
	// direct and library. The proxy path starts one in-process squeeze proxy
	// per codec on a loopback port in front of Client's server.
	Paths []string
	// Codecs measured on the library path besides "none" (which is always
	// measured, as the baseline). Default codec.DefaultAlgorithm (s2) and
	// zlib:6 (the seed's approach).
	Codecs []codec.Algorithm
	// Workloads: WorkloadRead, WorkloadWrite, WorkloadReadWrite (default all).
	Workloads []string
	// Sizes of the values in bytes; default DefaultRedisSizes.
	Sizes []int
	// Iterations per timed run; default DefaultRedisIterations.
	Iterations []int
	// Repeats of each timed run, of which the median is reported; default 10.
	Repeats int
	// CellBudget bounds the time of one cell (all repeats of one iteration
	// count): larger iteration counts are skipped when the time measured at
	// the previous count predicts more than this. Default 2s.
	CellBudget time.Duration
	// MemoryKeys is how many keys the memory study writes per codec and
	// size; default 10.
	MemoryKeys int
	// Value returns the value of a given size; default JSONDocument.
	Value func(size int) []byte
	// Dict adds, for each zstd codec, the same codec with a trained
	// dictionary ("zstd:1+dict") on the library path and in the memory
	// study: one dictionary per size (above 0), trained on DictSamples
	// other values of that size from DictValue, never on the measured one.
	Dict bool
	// DictValue returns training value i of a given size; default
	// JSONDocument with seeds the measured values never use.
	DictValue func(size, i int) []byte
	// DictSize is the largest dictionary; default dictstore.DefaultDictSize.
	DictSize int
	// CompactTo adds memory rows "at rest": keys written with
	// codec.DefaultAlgorithm (what the proxy and the library write), then
	// recompressed by compact.Run to each of these targets (what "squeeze
	// compact" does to cold keys), measured the same way. Targets are
	// codecs, as ParseCompactTarget reads them: "zstd:9+dict" uses a
	// dictionary trained per size on DictValue's values. Default none.
	CompactTo []string
	// MemoryValue returns value i of a size for the memory study, whose
	// keys hold distinct values, as real keys do. Default: JSONDocument
	// (value 0 is Value's document) when Value is nil, else Value's one
	// value for every key.
	MemoryValue func(size, i int) []byte
	// Progress is called after each cell.
	Progress Progress
}

func (o *RedisOptions) defaults() error {
	if o.Client == nil {
		return errors.New("bench: RedisOptions.Client is nil")
	}
	if len(o.Paths) == 0 {
		o.Paths = []string{PathDirect, PathLibrary}
	}
	for _, p := range o.Paths {
		switch p {
		case PathDirect, PathLibrary, PathProxy:
		default:
			return fmt.Errorf("bench: unknown path %q (direct, library, proxy)", p)
		}
	}
	o.Codecs = withoutNone(o.Codecs) // none is always measured, as the baseline
	if len(o.Codecs) == 0 {
		o.Codecs = []codec.Algorithm{codec.DefaultAlgorithm, {ID: codec.IDZlib, Level: 6}}
	}
	if len(o.Workloads) == 0 {
		o.Workloads = []string{WorkloadRead, WorkloadWrite, WorkloadReadWrite}
	}
	for _, w := range o.Workloads {
		if w != WorkloadRead && w != WorkloadWrite && w != WorkloadReadWrite {
			return fmt.Errorf("bench: unknown workload %q (read, write, readwrite)", w)
		}
	}
	if len(o.Sizes) == 0 {
		o.Sizes = DefaultRedisSizes
	}
	if len(o.Iterations) == 0 {
		o.Iterations = DefaultRedisIterations
	}
	for _, n := range o.Iterations {
		if n <= 0 {
			return fmt.Errorf("bench: iteration count %d must be positive", n)
		}
	}
	if o.Repeats <= 0 {
		o.Repeats = 10
	}
	if o.CellBudget <= 0 {
		o.CellBudget = 2 * time.Second
	}
	if o.MemoryKeys <= 0 {
		o.MemoryKeys = 10
	}
	if o.MemoryValue == nil {
		if o.Value == nil {
			o.MemoryValue = func(size, i int) []byte { return JSONDocument(DefaultSeed+uint64(size)+uint64(i)<<40, size) }
		} else {
			value := o.Value
			o.MemoryValue = func(size, _ int) []byte { return value(size) }
		}
	}
	if o.Value == nil {
		o.Value = func(size int) []byte { return JSONDocument(DefaultSeed+uint64(size), size) }
	}
	for _, t := range o.CompactTo {
		if _, _, err := ParseCompactTarget(t); err != nil {
			return fmt.Errorf("bench: compaction target %w", err)
		}
	}
	if o.DictValue == nil {
		o.DictValue = func(size, i int) []byte { return JSONDocument(DefaultSeed+uint64(size)+1<<32+uint64(i), size) }
	}
	if o.DictSize <= 0 {
		o.DictSize = dictstore.DefaultDictSize
	}
	return nil
}

// RedisResult is what RunRedis measured.
type RedisResult struct {
	Rows   []RedisRow
	Memory []MemoryRow
	// Skipped lists cells left out because the time budget predicted them
	// too long, e.g. "library zlib:6 write 4.2 MB x1000".
	Skipped []string
}

// variant is one way of talking to Redis: a path and a codec.
type variant struct {
	path  string
	codec string
	rdb   *redis.Client
	enc   *codec.Encoder // nil: store the value as is
	dec   *codec.Decoder // nil: read the value as is
	// bySize, for dictionary variants, is the encoder of each size (with
	// that size's dictionary); sizes without one are not measured.
	bySize map[int]*codec.Encoder
}

// DictSuffix marks the codec of rows measured with a trained dictionary.
const DictSuffix = "+dict"

// dictSamples is how many training values a size's dictionary gets: about
// 2 MB of them, between 16 and 64.
func dictSamples(size int) int { return max(16, min(64, (2<<20)/max(size, 1))) }

// trainSizeDict trains the dictionary of one size, at most dictSize bytes,
// on dictSamples(size) values from value.
func trainSizeDict(size int, value func(size, i int) []byte, dictSize int) (codec.Dictionary, error) {
	samples := make([][]byte, dictSamples(size))
	for i := range samples {
		samples[i] = value(size, i)
	}
	d, err := dictstore.TrainID(samples, dictSize)
	if err != nil {
		return d, fmt.Errorf("dictionary for %s: %w", FormatSize(int64(size)), err)
	}
	return d, nil
}

// trainDicts trains one dictionary per size above 0 and returns, per zstd
// codec, an encoder per size, plus a decoder that knows every dictionary.
func trainDicts(o *RedisOptions) (map[codec.Algorithm]map[int]*codec.Encoder, *codec.Decoder, error) {
	var all []codec.Dictionary
	encs := map[codec.Algorithm]map[int]*codec.Encoder{}
	for _, size := range o.Sizes {
		if size == 0 {
			continue
		}
		d, err := trainSizeDict(size, o.DictValue, o.DictSize)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, d)
		for _, a := range o.Codecs {
			if a.ID != codec.IDZstd {
				continue
			}
			enc, err := codec.NewEncoder(a, codec.WithDictionary(d))
			if err != nil {
				return nil, nil, err
			}
			if encs[a] == nil {
				encs[a] = map[int]*codec.Encoder{}
			}
			encs[a][size] = enc
		}
	}
	dec, err := codec.NewDecoder(codec.WithDictionaries(all...))
	return encs, dec, err
}

// RunRedis runs seed 000's study: read-only, write-only and read-write
// workloads at each value size, for each path without compression and with
// each codec, timing Repeats runs of each iteration count. It then measures
// the memory each codec takes in Redis. It only writes and deletes keys that
// start with KeyPrefix.
func RunRedis(ctx context.Context, o RedisOptions) (RedisResult, error) {
	if err := o.defaults(); err != nil {
		return RedisResult{}, err
	}
	dec, err := codec.NewDecoder()
	if err != nil {
		return RedisResult{}, err
	}
	var variants []variant
	var dictEncs map[codec.Algorithm]map[int]*codec.Encoder
	var dictDec *codec.Decoder
	if o.Dict {
		if dictEncs, dictDec, err = trainDicts(&o); err != nil {
			return RedisResult{}, err
		}
	}
	for _, p := range o.Paths {
		switch p {
		case PathDirect:
			variants = append(variants, variant{path: p, codec: "none", rdb: o.Client})
		case PathLibrary, PathProxy:
			for _, a := range append([]codec.Algorithm{{ID: codec.IDNone}}, o.Codecs...) {
				v := variant{path: p, codec: a.String(), rdb: o.Client}
				if p == PathLibrary {
					if v.enc, err = codec.NewEncoder(a); err != nil {
						return RedisResult{}, fmt.Errorf("%s: %w", a, err)
					}
					v.dec = dec
				} else {
					// The proxy compresses and decompresses; the client sees
					// plain values.
					rdb, stop, err := proxyFor(ctx, o.Client, a)
					if err != nil {
						return RedisResult{}, err
					}
					defer stop()
					v.rdb = rdb
				}
				variants = append(variants, v)
			}
			if p == PathLibrary {
				for _, a := range o.Codecs {
					if encs := dictEncs[a]; encs != nil {
						variants = append(variants, variant{path: p, codec: a.String() + DictSuffix, rdb: o.Client, dec: dictDec, bySize: encs})
					}
				}
			}
		}
	}

	var res RedisResult
	values := map[int][]byte{}
	for _, s := range o.Sizes {
		values[s] = o.Value(s)
	}
	total := len(o.Sizes)*len(o.Workloads)*len(o.Iterations)*len(variants) + len(o.Sizes)
	done := 0
	// perOp remembers the last measured time per operation of each
	// (variant, workload, size), to predict the next iteration count.
	perOp := map[string]time.Duration{}
	stopped := map[string]bool{}
	key := KeyPrefix + "cell"
	defer o.Client.Del(context.WithoutCancel(ctx), key)

	for _, size := range o.Sizes {
		val := values[size]
		for _, wl := range o.Workloads {
			for _, n := range o.Iterations {
				// The variants' runs are interleaved, repeat by repeat, so
				// that a burst of noise on this shared machine hits them all
				// alike instead of one variant's whole cell.
				var active []int
				for vi, v := range variants {
					id := v.path + " " + v.codec + " " + wl + " " + FormatSize(int64(size))
					if v.bySize != nil && v.bySize[size] == nil {
						continue // no dictionary for this size
					}
					if stopped[id] {
						continue
					}
					if est, ok := perOp[id]; ok && est*time.Duration(n*o.Repeats) > o.CellBudget {
						stopped[id] = true
						res.Skipped = append(res.Skipped, id+" x"+strconv.Itoa(n))
						continue
					}
					active = append(active, vi)
				}
				times := make([][]float64, len(variants))
				for r := 0; r < o.Repeats; r++ {
					for i := range active {
						v := variants[active[(i+r)%len(active)]]
						if v.bySize != nil {
							v.enc = v.bySize[size]
						}
						t, err := runCell(ctx, v, wl, key, val, n, 1)
						if err != nil {
							return res, fmt.Errorf("%s %s %s %s x%d: %w", v.path, v.codec, wl, FormatSize(int64(size)), n, err)
						}
						vi := active[(i+r)%len(active)]
						times[vi] = append(times[vi], t...)
					}
				}
				for _, vi := range active {
					v := variants[vi]
					id := v.path + " " + v.codec + " " + wl + " " + FormatSize(int64(size))
					med := Median(times[vi])
					perOp[id] = time.Duration(med / float64(n) * 1e9)
					res.Rows = append(res.Rows, RedisRow{
						Path: v.path, Codec: v.codec, Workload: wl, SizeBytes: size, Iterations: n,
						Repeats: len(times[vi]), TotalMs: med * 1e3, NsPerOp: med / float64(n) * 1e9,
					})
				}
				done += len(variants)
				o.Progress.step(done, total)
			}
		}
	}
	// Memory: every codec measured, at every size.
	var encs []labeled
	for _, a := range append([]codec.Algorithm{{ID: codec.IDNone}}, o.Codecs...) {
		enc, err := codec.NewEncoder(a)
		if err != nil {
			return res, err
		}
		encs = append(encs, labeled{a.String(), enc})
	}
	for _, size := range o.Sizes {
		encs := encs
		for _, a := range o.Codecs {
			if enc := dictEncs[a][size]; enc != nil {
				encs = append(encs[:len(encs):len(encs)], labeled{a.String() + DictSuffix, enc})
			}
		}
		vals := &memoryValues{size: size, fn: o.MemoryValue}
		rows, err := measureMemory(ctx, o.Client, encs, vals, o.MemoryKeys)
		if err != nil {
			return res, fmt.Errorf("memory at %s: %w", FormatSize(int64(size)), err)
		}
		res.Memory = append(res.Memory, rows...)
		if size > 0 {
			var dict *codec.Dictionary
			for ti, target := range o.CompactTo {
				if strings.HasSuffix(target, DictSuffix) && dict == nil {
					d, err := trainSizeDict(size, o.DictValue, o.DictSize)
					if err != nil {
						return res, err
					}
					dict = &d
				}
				row, err := measureCompacted(ctx, o.Client, target, dict, len(encs)+ti, vals, o.MemoryKeys)
				if err != nil {
					return res, fmt.Errorf("memory at %s compacted to %s: %w", FormatSize(int64(size)), target, err)
				}
				res.Memory = append(res.Memory, row)
			}
		}
		done++
		o.Progress.step(done, total)
	}
	fillRelative(&res)
	return res, nil
}

// runCell times repeats runs of n operations of workload wl and returns the
// durations in seconds. Every value read is checked against the original
// (in full on the first read of each run, by length on the others).
func runCell(ctx context.Context, v variant, wl, key string, val []byte, n, repeats int) ([]float64, error) {
	var wbuf, rbuf []byte
	stored := val
	if v.enc != nil {
		wbuf = v.enc.AppendEncode(wbuf[:0], val)
		stored = wbuf
	}
	if wl == WorkloadRead {
		if err := v.rdb.Set(ctx, key, stored, 0).Err(); err != nil {
			return nil, fmt.Errorf("SET: %w", err)
		}
	}
	write := func() error {
		out := val
		if v.enc != nil {
			wbuf = v.enc.AppendEncode(wbuf[:0], val)
			out = wbuf
		}
		return v.rdb.Set(ctx, key, out, 0).Err()
	}
	read := func(full bool) error {
		b, err := v.rdb.Get(ctx, key).Bytes()
		if err != nil {
			return fmt.Errorf("GET: %w", err)
		}
		if v.dec != nil {
			if rbuf, err = v.dec.AppendDecode(rbuf[:0], b); err != nil {
				return fmt.Errorf("decode: %w", err)
			}
			b = rbuf
		}
		if len(b) != len(val) || full && !bytes.Equal(b, val) {
			return fmt.Errorf("read back %d bytes that differ from the %d written", len(b), len(val))
		}
		return nil
	}
	times := make([]float64, 0, repeats)
	for r := 0; r < repeats; r++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start := time.Now()
		for i := 0; i < n; i++ {
			var err error
			switch wl {
			case WorkloadRead:
				err = read(i == 0)
			case WorkloadWrite:
				err = write()
			default:
				if err = write(); err == nil {
					err = read(i == 0)
				}
			}
			if err != nil {
				return nil, err
			}
		}
		times = append(times, time.Since(start).Seconds())
	}
	return times, nil
}

// labeled is an encoder and the codec name its rows carry.
type labeled struct {
	name string
	enc  *codec.Encoder
}

// memoryValues hands out the values of one size for the memory study and
// keeps them, so that every codec stores the same ones.
type memoryValues struct {
	size int
	fn   func(size, i int) []byte
	vals [][]byte
}

func (m *memoryValues) get(i int) []byte {
	for len(m.vals) <= i {
		m.vals = append(m.vals, m.fn(m.size, len(m.vals)))
	}
	return m.vals[i]
}

// memoryKeyCount is how many keys a memory row writes: at least keys, and
// for small values enough for about 1 MB in all (at most 2000), so that the
// used_memory delta rises above the allocator's noise.
func memoryKeyCount(keys, stored int) int {
	if stored == 0 {
		return max(keys, 2000)
	}
	return max(keys, min(2000, (1<<20)/stored))
}

// memoryKeyNames returns the n key names of memory row slot at a size:
// the same length for every codec, since a codec's name in the key would
// change what small values cost.
func memoryKeyNames(slot, size, n int) (prefix string, names []string) {
	prefix = fmt.Sprintf("%smem:%03d:%d:", KeyPrefix, slot, size)
	names = make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return prefix, names
}

// measureMemory writes distinct values (as real keys hold) with each
// encoder, reads MEMORY USAGE of every key, then the used_memory delta as
// it deletes them (measureKeys).
func measureMemory(ctx context.Context, rdb *redis.Client, encs []labeled, vals *memoryValues, keys int) ([]MemoryRow, error) {
	var rows []MemoryRow
	for ci, l := range encs {
		n := memoryKeyCount(keys, len(l.enc.AppendEncode(nil, vals.get(0))))
		prefix, names := memoryKeyNames(ci, vals.size, n)
		rdb.Del(ctx, names...)
		var stored int
		err := withWriter(rdb, func(w *redis.Client) error {
			var buf []byte
			for i, k := range names {
				buf = l.enc.AppendEncode(buf[:0], vals.get(i))
				stored += len(buf)
				if err := w.Set(ctx, k, buf, 0).Err(); err != nil {
					return fmt.Errorf("SET: %w", err)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		row, err := measureKeys(ctx, rdb, prefix, names)
		if err != nil {
			return nil, err
		}
		row.Codec, row.SizeBytes, row.StoredBytes = l.name, vals.size, stored/n
		rows = append(rows, row)
	}
	return rows, nil
}

// measureKeys reads the mean MEMORY USAGE of names, and the used_memory
// deltas per key as what deleting them frees; then it deletes them.
//
// Measured from before the writes instead, the deltas would also count
// what stays allocated once the keys are gone: the script state that
// compaction's scripts grow, and a key table grown for the keys. So that
// deleting them does not shrink that table either (which frees its
// buckets, as the keys' share or not depending on when Redis's cron runs),
// ballast keys holding empty strings keep it at least a sixth full
// meanwhile.
func measureKeys(ctx context.Context, rdb *redis.Client, prefix string, names []string) (MemoryRow, error) {
	ballast := make([]string, len(names)/2+16)
	for i := range ballast {
		ballast[i] = fmt.Sprintf("%sballast:%d", prefix, i)
	}
	defer rdb.Del(context.WithoutCancel(ctx), append(ballast, names...)...)
	pipe := rdb.Pipeline()
	for _, k := range ballast {
		pipe.Set(ctx, k, "", 0)
	}
	usages := make([]*redis.IntCmd, len(names))
	for i, k := range names {
		usages[i] = pipe.MemoryUsage(ctx, k, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return MemoryRow{}, fmt.Errorf("MEMORY USAGE: %w", err)
	}
	var usage float64
	for _, u := range usages {
		usage += float64(u.Val())
	}
	with, withData, err := settledMemory(ctx, rdb)
	if err != nil {
		return MemoryRow{}, err
	}
	if err := rdb.Del(ctx, names...).Err(); err != nil {
		return MemoryRow{}, fmt.Errorf("DEL: %w", err)
	}
	without, withoutData, err := settledMemory(ctx, rdb)
	if err != nil {
		return MemoryRow{}, err
	}
	n := float64(len(names))
	return MemoryRow{
		Keys:                 len(names),
		MemoryUsageBytes:     usage / n,
		UsedMemoryDeltaBytes: float64(with-without) / n,
		DatasetDeltaBytes:    float64(withData-withoutData) / n,
	}, nil
}

// CompactedLabel is the codec column of a memory row measured at rest:
// written with codec write, then compacted to target.
func CompactedLabel(write, target string) string { return write + "->" + target }

// measureCompacted writes distinct values with codec.DefaultAlgorithm,
// recompresses them to target with compact.Run (every key, regardless of
// idleness) and measures them as measureMemory does; slot keeps the key
// names the same length as the other rows'. A target ending in DictSuffix
// uses dict, trained on other values of the size.
func measureCompacted(ctx context.Context, rdb *redis.Client, target string, dict *codec.Dictionary, slot int, vals *memoryValues, keys int) (MemoryRow, error) {
	enc, dec, err := targetCodecs(target, dict)
	if err != nil {
		return MemoryRow{}, err
	}
	write, err := codec.NewEncoder(codec.DefaultAlgorithm)
	if err != nil {
		return MemoryRow{}, err
	}
	n := memoryKeyCount(keys, len(write.AppendEncode(nil, vals.get(0))))
	prefix, names := memoryKeyNames(slot, vals.size, n)
	rdb.Del(ctx, names...)
	var st compact.Stats
	err = withWriter(rdb, func(w *redis.Client) error {
		var buf []byte
		for i, k := range names {
			buf = write.AppendEncode(buf[:0], vals.get(i))
			if err := w.Set(ctx, k, buf, 0).Err(); err != nil {
				return fmt.Errorf("SET: %w", err)
			}
		}
		var err error
		st, err = compact.Run(ctx, w, compact.Options{Encoder: enc, Decoder: dec, Pattern: prefix + "*", MinGain: -1})
		return err
	})
	if err != nil {
		return MemoryRow{}, err
	}
	var stored int
	err = withWriter(rdb, func(w *redis.Client) error { // read back over a connection closed after
		var err error
		stored, err = checkCompacted(ctx, w, dec, names, vals.get)
		return err
	})
	if err != nil {
		return MemoryRow{}, err
	}
	row, err := measureKeys(ctx, rdb, prefix, names)
	if err != nil {
		return MemoryRow{}, err
	}
	row.Codec = CompactedLabel(codec.DefaultAlgorithm.String(), target)
	row.WrittenWith, row.Rewritten = codec.DefaultAlgorithm.String(), int(st.Rewritten)
	row.SizeBytes, row.StoredBytes = vals.size, stored/n
	return row, nil
}

// withWriter runs fn with a client of its own on rdb's server and closes
// its connections after: Redis keeps a connection's query buffer
// (megabytes after large SETs) for a while and frees it in its cron, which
// could fall between measureKeys's two readings of used_memory; closing
// the connection frees it at once, before them.
func withWriter(rdb *redis.Client, fn func(w *redis.Client) error) error {
	opt := *rdb.Options()
	opt.MinIdleConns = 0
	w := redis.NewClient(&opt)
	err := fn(w)
	if cerr := w.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing the writer connection: %w", cerr)
	}
	return err
}

// settledMemory waits until used_memory stops moving (Redis frees client
// query buffers of large writes in its cron, up to a second later) and
// returns it; it gives up waiting after 2 seconds.
func settledMemory(ctx context.Context, rdb *redis.Client) (used, dataset int64, err error) {
	deadline := time.Now().Add(2 * time.Second)
	used, dataset, err = usedMemory(ctx, rdb)
	for err == nil && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(120 * time.Millisecond):
		}
		u, d, e := usedMemory(ctx, rdb)
		if e != nil {
			return 0, 0, e
		}
		if u == used && d == dataset {
			break
		}
		used, dataset = u, d
	}
	return used, dataset, err
}

// usedMemory returns INFO's used_memory and used_memory_dataset (the
// former minus Redis's own overhead, such as client buffers, which move
// with the traffic of the benchmark itself).
func usedMemory(ctx context.Context, rdb *redis.Client) (used, dataset int64, err error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, 0, fmt.Errorf("INFO memory: %w", err)
	}
	return parseMemoryInfo(info)
}

// parseMemoryInfo reads used_memory and used_memory_dataset from the text
// of INFO memory.
func parseMemoryInfo(info string) (used, dataset int64, err error) {
	found := 0
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			if used, err = strconv.ParseInt(v, 10, 64); err != nil {
				return 0, 0, fmt.Errorf("INFO used_memory %q: %w", v, err)
			}
			found++
		}
		if v, ok := strings.CutPrefix(line, "used_memory_dataset:"); ok {
			// Redis prints used_memory minus its overhead as an unsigned
			// number, which wraps around when the overhead (client
			// buffers, after heavy traffic) exceeds it: read it back as
			// the negative number it is, so that differences stay right.
			u, perr := strconv.ParseUint(v, 10, 64)
			if perr != nil {
				return 0, 0, fmt.Errorf("INFO used_memory_dataset %q: %w", v, perr)
			}
			dataset = int64(u)
			found++
		}
	}
	if found != 2 {
		return 0, 0, errors.New("INFO memory lacks used_memory or used_memory_dataset")
	}
	return used, dataset, nil
}

// fillRelative sets the slowdowns against "none" on the same path and the
// memory savings against the raw value.
func fillRelative(res *RedisResult) {
	type cell struct {
		path, wl    string
		size, iters int
	}
	base := map[cell]float64{}
	for _, r := range res.Rows {
		if r.Codec == "none" {
			base[cell{r.Path, r.Workload, r.SizeBytes, r.Iterations}] = r.NsPerOp
		}
	}
	memBase := map[int]MemoryRow{}
	for _, m := range res.Memory {
		if m.Codec == "none" {
			memBase[m.SizeBytes] = m
		}
	}
	for i := range res.Memory {
		m := &res.Memory[i]
		b := memBase[m.SizeBytes]
		m.SavedPct = SavedPct(m.MemoryUsageBytes, b.MemoryUsageBytes)
		m.UsedMemorySavedPct = SavedPct(m.UsedMemoryDeltaBytes, b.UsedMemoryDeltaBytes)
		m.DatasetSavedPct = SavedPct(m.DatasetDeltaBytes, b.DatasetDeltaBytes)
	}
	saved := map[string]float64{}
	for _, m := range res.Memory {
		saved[m.Codec+"/"+strconv.Itoa(m.SizeBytes)] = m.SavedPct
	}
	for i := range res.Rows {
		r := &res.Rows[i]
		b, ok := base[cell{r.Path, r.Workload, r.SizeBytes, r.Iterations}]
		r.SlowdownPct, r.NoBaseline = ChangePct(r.NsPerOp, b), !ok
		r.MemorySavedPct = saved[r.Codec+"/"+strconv.Itoa(r.SizeBytes)]
	}
}

// CorpusValue returns size bytes cut from data, repeating data when it is
// shorter, so that a user's file can stand in for the generated documents.
func CorpusValue(data []byte, size int) []byte {
	out := make([]byte, 0, size)
	for len(data) > 0 && len(out) < size {
		out = append(out, data[:min(len(data), size-len(out))]...)
	}
	return out
}

// CorpusValueAt is CorpusValue starting at byte off of data (modulo its
// length), wrapping around to its start: distinct cuts of one file.
func CorpusValueAt(data []byte, off, size int) []byte {
	if len(data) == 0 {
		return []byte{}
	}
	off %= len(data)
	out := make([]byte, 0, size)
	for len(out) < size {
		chunk := data[off:]
		out = append(out, chunk[:min(len(chunk), size-len(out))]...)
		off = 0
	}
	return out
}

// withoutNone returns algs without codec none.
func withoutNone(algs []codec.Algorithm) []codec.Algorithm {
	var out []codec.Algorithm
	for _, a := range algs {
		if a.ID != codec.IDNone {
			out = append(out, a)
		}
	}
	return out
}
