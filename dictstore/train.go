package dictstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/rediscluster"
)

// Defaults of TrainOptions.
const (
	DefaultSamples  = 2000
	DefaultDictSize = 64 << 10
	DefaultMaxValue = 1 << 20
	// MaxDictSize is the largest dictionary Train and TrainID build (zstd's
	// own trainer defaults to 110 KB).
	MaxDictSize = 128 << 10
	// maxSampleLen cuts training samples: a dictionary helps the start of
	// a value, and the zstd dictionary builder fails (panics, in
	// klauspost/compress v1.20.4) when history and sample exceed 256 KiB.
	maxSampleLen = 128 << 10
)

// DefaultTrainAlgorithm is the codec Train measures with: dictionaries work
// with zstd only.
var DefaultTrainAlgorithm = codec.Algorithm{ID: codec.IDZstd, Level: 3}

// TrainOptions configure Train. Zero fields take the defaults in their
// comments.
type TrainOptions struct {
	// Samples is the most values read (default DefaultSamples). A fifth of
	// them, chosen by a hash of the key, is held out to measure.
	Samples int
	// Size is the largest dictionary (default DefaultDictSize, 64 KiB; at
	// most MaxDictSize). It is lowered to a quarter of the training bytes
	// when they are few.
	Size int
	// Algorithm is the zstd level the held-out values are measured with
	// (default DefaultTrainAlgorithm, zstd:3). Encoder defaults (minimum
	// size and gain) apply, as they do in the proxy and the client.
	Algorithm codec.Algorithm
	// Decoder decodes values that are already squeeze frames. Nil means
	// codec.NewDecoder(); frames it cannot decode (a dictionary it does not
	// know, corrupt) are skipped and counted in Report.Skipped.
	Decoder *codec.Decoder
	// MaxValue skips values larger than this many bytes (default
	// DefaultMaxValue, 1 MiB): large values gain little from a dictionary.
	MaxValue int
	// ScanCount is the COUNT hint of each SCAN (default 1000).
	ScanCount int64
	// Progress, if set, is called as the work goes: done of total steps of
	// stage, which is "reading values" (of Samples), "training the
	// dictionary" (total 0: one step of unknown length) and "measuring
	// the dictionary" (of the held-out values).
	Progress func(stage string, done, total int)
}

func (o TrainOptions) progress(stage string, done, total int) {
	if o.Progress != nil {
		o.Progress(stage, done, total)
	}
}

// Report is what Train measured. Sizes are in bytes.
type Report struct {
	ID           uint32 `json:"id"`
	Size         int    `json:"size"`
	Pattern      string `json:"pattern"`
	Codec        string `json:"codec"`
	KeysScanned  int    `json:"keys_scanned"`
	Skipped      int    `json:"skipped"` // values left out: other types, empty, too large, undecodable frames
	Samples      int    `json:"samples"` // trained on
	SampleBytes  int64  `json:"sample_bytes"`
	HeldOut      int    `json:"held_out"` // measured on, never trained on
	HeldOutBytes int64  `json:"held_out_bytes"`
	// StoredWithout and StoredWith are the held-out values' stored sizes
	// (frames, or raw when the encoder keeps them raw) without and with the
	// dictionary.
	StoredWithout int64   `json:"stored_without"`
	StoredWith    int64   `json:"stored_with"`
	RatioWithout  float64 `json:"ratio_without"` // HeldOutBytes / StoredWithout
	RatioWith     float64 `json:"ratio_with"`
	// MemoryRaw, MemoryWithout and MemoryWith estimate the Redis memory of
	// the held-out values' allocations (SDS header and jemalloc size class;
	// keys and their overhead are the same in all three and left out).
	MemoryRaw     int64 `json:"memory_raw"`
	MemoryWithout int64 `json:"memory_without"`
	MemoryWith    int64 `json:"memory_with"`
}

// SavedPct returns the percentage of the raw values' memory saved by
// compression without and with the dictionary.
func (r Report) SavedPct() (without, with float64) {
	if r.MemoryRaw == 0 {
		return 0, 0
	}
	return 100 * (1 - float64(r.MemoryWithout)/float64(r.MemoryRaw)), 100 * (1 - float64(r.MemoryWith)/float64(r.MemoryRaw))
}

// Meta returns the metadata to publish with the dictionary of r.
func (r Report) Meta() Meta {
	return Meta{ID: r.ID, Size: r.Size, Pattern: r.Pattern, Samples: r.Samples, SampleBytes: r.SampleBytes,
		Codec: r.Codec, HeldOut: r.HeldOut, RatioWithout: r.RatioWithout, RatioWith: r.RatioWith}
}

type sample struct {
	name string // key, or key NUL field for a hash field value
	data []byte
}

// Train samples the values of the keys matching pattern (SCAN MATCH
// syntax; string values and hash field values) without changing anything
// in Redis (SCAN, TYPE, GET and HGETALL only), trains a dictionary on about
// four fifths of them and measures it on the rest. The id is derived from a
// hash of the dictionary bytes (DeriveID), so the same samples give the
// same dictionary and id. It returns an error when fewer than 10 usable
// values match.
func Train(ctx context.Context, rdb redis.UniversalClient, pattern string, o TrainOptions) (codec.Dictionary, Report, error) {
	if o.Samples <= 0 {
		o.Samples = DefaultSamples
	}
	if o.Size <= 0 {
		o.Size = DefaultDictSize
	}
	if o.Size > MaxDictSize {
		return codec.Dictionary{}, Report{}, fmt.Errorf("dictstore: dictionary size %d above the %d bytes allowed", o.Size, MaxDictSize)
	}
	if o.Algorithm == (codec.Algorithm{}) {
		o.Algorithm = DefaultTrainAlgorithm
	}
	if o.Algorithm.ID != codec.IDZstd {
		return codec.Dictionary{}, Report{}, fmt.Errorf("dictstore: dictionaries work with zstd, not %s", o.Algorithm)
	}
	if o.MaxValue <= 0 {
		o.MaxValue = DefaultMaxValue
	}
	if o.ScanCount <= 0 {
		o.ScanCount = 1000
	}
	if pattern == "" {
		pattern = "*"
	}
	dec := o.Decoder
	if dec == nil {
		var err error
		if dec, err = codec.NewDecoder(); err != nil {
			return codec.Dictionary{}, Report{}, err
		}
	}
	rep := Report{Pattern: pattern, Codec: o.Algorithm.String()}
	samples, err := collect(ctx, rdb, pattern, o, dec, &rep)
	if err != nil {
		return codec.Dictionary{}, rep, err
	}
	train, held := split(samples)
	if len(train) < 8 || len(held) < 2 {
		return codec.Dictionary{}, rep, fmt.Errorf("dictstore: only %d usable values match %q (want at least 10: 8 to train, 2 to measure)", len(samples), pattern)
	}
	trainData := make([][]byte, len(train))
	for i, s := range train {
		trainData[i] = s.data
		rep.Samples++
		rep.SampleBytes += int64(len(s.data))
	}
	size := min(o.Size, max(256, int(rep.SampleBytes/4)))
	o.progress("training the dictionary", 0, 0)
	d, err := TrainID(trainData, size)
	if err != nil {
		return codec.Dictionary{}, rep, err
	}
	rep.ID, rep.Size = d.ID, len(d.Data)
	if err := measure(d, o, held, &rep); err != nil {
		return codec.Dictionary{}, rep, err
	}
	return d, rep, nil
}

// collect reads up to o.Samples values of keys matching pattern, sorted by
// name so that training does not depend on the order of SCAN's pages.
func collect(ctx context.Context, rdb redis.UniversalClient, pattern string, o TrainOptions, dec *codec.Decoder, rep *Report) ([]sample, error) {
	var out []sample
	limit := o.Samples // of the node being scanned, in a cluster
	add := func(name string, v []byte) {
		if len(out) >= limit {
			return
		}
		if codec.IsFramed(v) {
			d, err := dec.AppendDecode(nil, v)
			if err != nil {
				rep.Skipped++
				return
			}
			v = d
		}
		if len(v) == 0 || len(v) > o.MaxValue {
			rep.Skipped++
			return
		}
		out = append(out, sample{name: name, data: v})
		if len(out)%100 == 0 || len(out) == o.Samples {
			o.progress("reading values", len(out), o.Samples)
		}
	}
	o.progress("reading values", 0, o.Samples)
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		if err := collectNode(ctx, rdb, pattern, o, &out, limit, add, rep); err != nil {
			return nil, err
		}
		slices.SortFunc(out, func(a, b sample) int { return strings.Compare(a.name, b.name) })
		return out, nil
	}
	// A cluster client's SCAN walks one node: scan each master, in the
	// order of their addresses, for its share of the samples.
	masters, err := rediscluster.Masters(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("dictstore: cluster masters: %w", err)
	}
	slices.SortFunc(masters, func(a, b *redis.Client) int { return strings.Compare(a.Options().Addr, b.Options().Addr) })
	for i, m := range masters {
		limit = o.Samples * (i + 1) / len(masters)
		if err := collectNode(ctx, m, pattern, o, &out, limit, add, rep); err != nil {
			return nil, fmt.Errorf("%w (node %s)", err, m.Options().Addr)
		}
	}
	slices.SortFunc(out, func(a, b sample) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// collectNode scans the keys of one server (a node, in a cluster) that
// match pattern and adds their values until *out holds limit samples.
func collectNode(ctx context.Context, rdb redis.Cmdable, pattern string, o TrainOptions, out *[]sample, limit int, add func(string, []byte), rep *Report) error {
	var cursor uint64
	for len(*out) < limit {
		keys, next, err := rdb.Scan(ctx, cursor, pattern, o.ScanCount).Result()
		if err != nil {
			return fmt.Errorf("dictstore: SCAN %q: %w", pattern, err)
		}
		keys = slices.DeleteFunc(keys, IsStoreKey)
		rep.KeysScanned += len(keys)
		if len(keys) > 0 {
			types := make([]*redis.StatusCmd, len(keys))
			_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i, k := range keys {
					types[i] = p.Type(ctx, k)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("dictstore: TYPE: %w", err)
			}
			gets := make([]redis.Cmder, len(keys))
			_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i, k := range keys {
					switch types[i].Val() {
					case "string":
						gets[i] = p.Get(ctx, k)
					case "hash":
						gets[i] = p.HGetAll(ctx, k)
					}
				}
				return nil
			})
			if err != nil && !errors.Is(err, redis.Nil) {
				return fmt.Errorf("dictstore: read values: %w", err)
			}
			for i, k := range keys {
				switch c := gets[i].(type) {
				case *redis.StringCmd:
					if b, err := c.Bytes(); err == nil { // a key deleted since SCAN is skipped
						add(k, b)
					}
				case *redis.MapStringStringCmd:
					fields := c.Val()
					names := make([]string, 0, len(fields))
					for f := range fields {
						names = append(names, f)
					}
					slices.Sort(names)
					for _, f := range names {
						add(k+"\x00"+f, []byte(fields[f]))
					}
				default:
					rep.Skipped++
				}
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
	return nil
}

// split holds out the samples whose name hashes to 0 mod 5.
func split(samples []sample) (train, held []sample) {
	for _, s := range samples {
		h := fnv.New32a()
		h.Write([]byte(s.name))
		if h.Sum32()%5 == 0 {
			held = append(held, s)
		} else {
			train = append(train, s)
		}
	}
	return train, held
}

// TrainID trains a dictionary of at most size bytes of history (256 to
// MaxDictSize) on samples, of which it reads the first 128 KiB each, and
// gives it the id DeriveID computes from its bytes, so the same bytes
// always have the same id.
func TrainID(samples [][]byte, size int) (codec.Dictionary, error) {
	if len(samples) < 8 {
		return codec.Dictionary{}, fmt.Errorf("dictstore: %d samples are too few to train a dictionary (want at least 8)", len(samples))
	}
	if size < 256 || size > MaxDictSize {
		return codec.Dictionary{}, fmt.Errorf("dictstore: dictionary size %d out of range 256..%d", size, MaxDictSize)
	}
	cut := make([][]byte, len(samples))
	for i, s := range samples {
		cut[i] = s[:min(len(s), maxSampleLen)]
	}
	data, err := buildZstdDict(MinUserID, cut, size)
	if err != nil {
		return codec.Dictionary{}, fmt.Errorf("dictstore: train dictionary: %w", err)
	}
	d := codec.Dictionary{ID: MinUserID, Data: data}
	id := DeriveID(d.Data)
	binary.LittleEndian.PutUint32(d.Data[4:8], id) // after the 4-byte magic
	d.ID = id
	if err := checkDictionary(id, d.Data); err != nil {
		return codec.Dictionary{}, fmt.Errorf("BUG: %w", err)
	}
	return d, nil
}

// DeriveID returns the id of a zstd dictionary from a SHA-256 of its bytes
// with the id field (bytes 4 to 8) zeroed, mapped into [MinUserID, MaxID].
func DeriveID(data []byte) uint32 {
	h := sha256.New()
	h.Write(data[:min(4, len(data))])
	if len(data) > 8 {
		h.Write([]byte{0, 0, 0, 0})
		h.Write(data[8:])
	}
	sum := h.Sum(nil)
	return MinUserID + binary.LittleEndian.Uint32(sum)%(MaxID-MinUserID+1)
}

// measure fills the held-out part of rep.
func measure(d codec.Dictionary, o TrainOptions, held []sample, rep *Report) error {
	alg := o.Algorithm
	plain, err := codec.NewEncoder(alg)
	if err != nil {
		return fmt.Errorf("dictstore: %w", err)
	}
	withDict, err := codec.NewEncoder(alg, codec.WithDictionary(d))
	if err != nil {
		return fmt.Errorf("dictstore: %w", err)
	}
	dec, err := codec.NewDecoder(codec.WithDictionaries(d))
	if err != nil {
		return fmt.Errorf("dictstore: %w", err)
	}
	var buf, out []byte
	for i, s := range held {
		if i%100 == 0 {
			o.progress("measuring the dictionary", i, len(held))
		}
		rep.HeldOut++
		rep.HeldOutBytes += int64(len(s.data))
		rep.MemoryRaw += ValueMemory(len(s.data))
		buf = plain.AppendEncode(buf[:0], s.data)
		rep.StoredWithout += int64(len(buf))
		rep.MemoryWithout += ValueMemory(len(buf))
		buf = withDict.AppendEncode(buf[:0], s.data)
		rep.StoredWith += int64(len(buf))
		rep.MemoryWith += ValueMemory(len(buf))
		if out, err = dec.AppendDecode(out[:0], buf); err != nil || string(out) != string(s.data) {
			return fmt.Errorf("BUG: dictionary %d does not round-trip a held-out value (%v)", d.ID, err)
		}
	}
	o.progress("measuring the dictionary", len(held), len(held))
	rep.RatioWithout = float64(rep.HeldOutBytes) / float64(rep.StoredWithout)
	rep.RatioWith = float64(rep.HeldOutBytes) / float64(rep.StoredWith)
	return nil
}

// ValueMemory estimates the bytes Redis allocates for a string value of n
// bytes: the SDS header and terminating NUL, rounded up to jemalloc's size
// class (four classes per doubling above 128 bytes, 16-byte steps below).
func ValueMemory(n int) int64 {
	hdr := 3 // sdshdr8
	switch {
	case n >= 1<<32:
		hdr = 17
	case n >= 1<<16:
		hdr = 9
	case n >= 1<<8:
		hdr = 5
	}
	return jemallocClass(int64(n + hdr + 1))
}

func jemallocClass(n int64) int64 {
	if n <= 8 {
		return 8
	}
	if n <= 128 {
		return (n + 15) &^ 15
	}
	step := int64(1) << (bits.Len64(uint64(n-1)) - 3) // a quarter of the power of two below
	return (n + step - 1) / step * step
}
