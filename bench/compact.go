package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/compact"
	"github.com/squeeze-kv/squeeze/dictstore"
)

// DefaultCompactSizes are the JSON document sizes of the compact study:
// seed 000's sizes above 0.
var DefaultCompactSizes = []int{16600, 47500, 221900, 4200000}

// DefaultCompactTargets are the codecs the compact study recompresses to;
// DictSuffix ("zstd:9+dict") adds a dictionary trained per size on other
// documents of that size.
var DefaultCompactTargets = []string{"zstd:9", "zstd:19", "brotli:9", "zstd:9" + DictSuffix}

// CompactOptions configures RunCompact.
type CompactOptions struct {
	// Client is the Redis to measure against. Required. The study writes
	// and deletes keys under KeyPrefix only.
	Client *redis.Client
	// Sizes of the documents in bytes; default DefaultCompactSizes.
	Sizes []int
	// Keys is the number of documents per size; default about 8 MB of
	// documents, between 4 and 200.
	Keys int
	// Write is the codec the documents are written with (the hot path);
	// default s2.
	Write codec.Algorithm
	// Targets are the codecs compacted to, as ParseCompactTarget reads
	// them; default DefaultCompactTargets.
	Targets []string
	// Workers encode in parallel during compaction; default 1.
	Workers int
	// Progress is called after each target of each size.
	Progress Progress
}

// CompactRow is the result of compacting the documents of one size from
// the write codec to one target.
type CompactRow struct {
	SizeBytes int    `json:"size_bytes"`
	Keys      int    `json:"keys"`
	Write     string `json:"write_codec"`
	Target    string `json:"codec"`
	// Mean MEMORY USAGE per key: uncompressed, as written, after compaction.
	RawMemory    float64 `json:"memory_raw_bytes"`
	BeforeMemory float64 `json:"memory_before_bytes"`
	AfterMemory  float64 `json:"memory_after_bytes"`
	// Memory saved against the uncompressed documents, as written and after
	// compaction, and the part of the written form's memory compaction saved.
	SavedWritePct   float64 `json:"memory_saved_pct_written"`
	SavedCompactPct float64 `json:"memory_saved_pct_compacted"`
	CompactionPct   float64 `json:"compaction_saved_pct"`
	// Compaction throughput: keys per second and MB of documents (decoded)
	// per second, over the whole Run (SCAN, reads, re-encoding, writes).
	Seconds    float64 `json:"seconds"`
	KeysPerSec float64 `json:"keys_per_s"`
	MBPerSec   float64 `json:"mb_per_s"`
}

// ParseCompactTarget parses a target codec, optionally followed by
// DictSuffix (zstd only).
func ParseCompactTarget(s string) (a codec.Algorithm, dict bool, err error) {
	name, dict := strings.CutSuffix(s, DictSuffix)
	a, err = codec.ParseAlgorithm(name)
	if err != nil {
		return a, false, err
	}
	if dict && a.ID != codec.IDZstd {
		return a, false, fmt.Errorf("%s: dictionaries work with zstd only", s)
	}
	if a.ID == codec.IDNone {
		return a, false, errors.New("none is not a compaction target")
	}
	return a, dict, nil
}

func compactDoc(size, i int) []byte {
	return JSONDocument(DefaultSeed+uint64(size)+uint64(i)<<24, size)
}

// compactDictDoc is training document i of a size: seeds compactDoc never
// uses (as RedisOptions.DictValue's).
func compactDictDoc(size, i int) []byte {
	return JSONDocument(DefaultSeed+uint64(size)+1<<32+uint64(i), size)
}

// RunCompact measures what compaction buys: for each size it writes Keys
// JSON documents with the write codec, reads their MEMORY USAGE, runs
// compact.Run to each target and reads it again, then checks every key
// still decodes to its document.
func RunCompact(ctx context.Context, o CompactOptions) ([]CompactRow, error) {
	if o.Client == nil {
		return nil, errors.New("bench: CompactOptions.Client is nil")
	}
	if len(o.Sizes) == 0 {
		o.Sizes = DefaultCompactSizes
	}
	if o.Write == (codec.Algorithm{}) {
		o.Write = codec.Algorithm{ID: codec.IDS2, Level: 1}
	}
	if len(o.Targets) == 0 {
		o.Targets = DefaultCompactTargets
	}
	for _, t := range o.Targets {
		if _, _, err := ParseCompactTarget(t); err != nil {
			return nil, fmt.Errorf("bench: target %w", err)
		}
	}
	write, err := codec.NewEncoder(o.Write)
	if err != nil {
		return nil, err
	}
	rdb := o.Client
	var rows []CompactRow
	done, total := 0, len(o.Sizes)*len(o.Targets)
	for _, size := range o.Sizes {
		if size <= 0 {
			return nil, fmt.Errorf("bench: compact size %d must be positive", size)
		}
		n := o.Keys
		if n <= 0 {
			n = max(4, min(200, (8<<20)/size))
		}
		docs := make([][]byte, n)
		keys := make([]string, n)
		prefix := fmt.Sprintf("%scompact:%d:", KeyPrefix, size)
		for i := range docs {
			docs[i] = compactDoc(size, i)
			keys[i] = fmt.Sprintf("%s%d", prefix, i)
		}
		rawMem, err := storeAndMeasure(ctx, rdb, keys, docs, nil)
		if err != nil {
			return nil, err
		}
		var dict *codec.Dictionary
		for _, t := range o.Targets {
			if strings.HasSuffix(t, DictSuffix) && dict == nil {
				d, err := trainSizeDict(size, compactDictDoc, dictstore.DefaultDictSize)
				if err != nil {
					return nil, err
				}
				dict = &d
			}
			enc, dec, err := targetCodecs(t, dict)
			if err != nil {
				return nil, err
			}
			before, err := storeAndMeasure(ctx, rdb, keys, docs, write)
			if err != nil {
				return nil, err
			}
			st, err := compact.Run(ctx, rdb, compact.Options{
				Encoder: enc, Decoder: dec, Pattern: prefix + "*", ScanCount: 50,
				MinGain: -1, Workers: o.Workers,
			})
			if err != nil {
				return nil, err
			}
			if st.Rewritten != int64(n) {
				return nil, fmt.Errorf("bench: compacting %s to %s rewrote %d of %d keys (skipped %v)", FormatSize(int64(size)), t, st.Rewritten, n, st.Skipped)
			}
			after, err := memoryUsage(ctx, rdb, keys)
			if err != nil {
				return nil, err
			}
			if _, err := checkCompacted(ctx, rdb, dec, keys, func(i int) []byte { return docs[i] }); err != nil {
				return nil, err
			}
			secs := st.Elapsed.Seconds()
			rows = append(rows, CompactRow{
				SizeBytes: size, Keys: n, Write: o.Write.String(), Target: t,
				RawMemory: rawMem / float64(n), BeforeMemory: before / float64(n), AfterMemory: after / float64(n),
				SavedWritePct: savedPct(rawMem, before), SavedCompactPct: savedPct(rawMem, after),
				CompactionPct: savedPct(before, after),
				Seconds:       secs, KeysPerSec: float64(n) / secs, MBPerSec: float64(n*size) / 1e6 / secs,
			})
			done++
			if o.Progress != nil {
				o.Progress(done, total)
			}
		}
		if err := rdb.Del(ctx, keys...).Err(); err != nil {
			return nil, fmt.Errorf("DEL: %w", err)
		}
	}
	return rows, nil
}

// targetCodecs returns the encoder and the decoder of a compaction target
// (as ParseCompactTarget reads it); dict is the size's dictionary, for a
// target ending in DictSuffix.
func targetCodecs(target string, dict *codec.Dictionary) (*codec.Encoder, *codec.Decoder, error) {
	alg, withDict, err := ParseCompactTarget(target)
	if err != nil {
		return nil, nil, err
	}
	var encOpts []codec.EncoderOption
	var decOpts []codec.DecoderOption
	if withDict {
		if dict == nil {
			return nil, nil, fmt.Errorf("bench: %s needs a dictionary", target)
		}
		encOpts = append(encOpts, codec.WithDictionary(*dict))
		decOpts = append(decOpts, codec.WithDictionaries(*dict))
	}
	enc, err := codec.NewEncoder(alg, encOpts...)
	if err != nil {
		return nil, nil, err
	}
	dec, err := codec.NewDecoder(decOpts...)
	return enc, dec, err
}

// checkCompacted reads keys back after compaction and checks that key i
// decodes to value(i); it returns the bytes they hold in all.
func checkCompacted(ctx context.Context, rdb *redis.Client, dec *codec.Decoder, keys []string, value func(i int) []byte) (int, error) {
	stored := 0
	for i, k := range keys {
		v, err := rdb.Get(ctx, k).Bytes()
		if err != nil {
			return 0, fmt.Errorf("GET: %w", err)
		}
		stored += len(v)
		if got, err := dec.AppendDecode(nil, v); err != nil || !bytes.Equal(got, value(i)) {
			return 0, fmt.Errorf("BUG: %s does not decode to its value after compaction (%v)", k, err)
		}
	}
	return stored, nil
}

func savedPct(before, after float64) float64 {
	if before == 0 {
		return 0
	}
	return 100 * (before - after) / before
}

// storeAndMeasure writes docs at keys (encoded with enc, or raw when enc
// is nil) and returns the sum of their MEMORY USAGE.
func storeAndMeasure(ctx context.Context, rdb *redis.Client, keys []string, docs [][]byte, enc *codec.Encoder) (float64, error) {
	for i, k := range keys {
		v := docs[i]
		if enc != nil {
			v = enc.AppendEncode(nil, v)
		}
		if err := rdb.Set(ctx, k, v, 0).Err(); err != nil {
			return 0, fmt.Errorf("SET: %w", err)
		}
	}
	return memoryUsage(ctx, rdb, keys)
}

func memoryUsage(ctx context.Context, rdb *redis.Client, keys []string) (float64, error) {
	var sum float64
	for _, k := range keys {
		u, err := rdb.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			return 0, fmt.Errorf("MEMORY USAGE: %w", err)
		}
		sum += float64(u)
	}
	return sum, nil
}

// CompactReport turns the compaction study's rows into a report: the table,
// and a chart of the memory saved per size as written and after each
// compaction.
func CompactReport(command string, rows []CompactRow) Report {
	r := Report{Title: "squeeze bench compact", Command: command,
		Tables: []Table{{Name: "compact", Title: "Memory before and after compaction (MEMORY USAGE per key)", Rows: rows}}}
	var sizes []int
	var targets []string
	for _, row := range rows {
		if !containsInt(sizes, row.SizeBytes) {
			sizes = append(sizes, row.SizeBytes)
		}
		if !contains(targets, row.Target) {
			targets = append(targets, row.Target)
		}
	}
	if len(rows) == 0 {
		return r
	}
	chart := BarChart{Name: "compact-memory", Title: "Memory saved: as written, and after compaction",
		Caption: "Percent of the uncompressed documents' Redis memory saved (MEMORY USAGE per key), written with " + rows[0].Write + ", then compacted to each codec.",
		YLabel:  "% of memory saved"}
	written := BarSeries{Label: "written " + rows[0].Write}
	for _, s := range sizes {
		chart.Groups = append(chart.Groups, FormatSize(int64(s)))
		for _, row := range rows {
			if row.SizeBytes == s {
				written.Values = append(written.Values, row.SavedWritePct)
				break
			}
		}
	}
	chart.Series = append(chart.Series, written)
	for _, t := range targets {
		ser := BarSeries{Label: "compacted " + t}
		for _, s := range sizes {
			v := 0.0
			for _, row := range rows {
				if row.SizeBytes == s && row.Target == t {
					v = row.SavedCompactPct
				}
			}
			ser.Values = append(ser.Values, v)
		}
		chart.Series = append(chart.Series, ser)
	}
	r.Bars = []BarChart{chart}
	return r
}
