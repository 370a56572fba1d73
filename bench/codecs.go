package bench

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/squeeze-kv/squeeze/codec"
)

// DefaultCodecList is what "squeeze bench codecs" measures without --codecs:
// every codec family at its useful levels, like the seed's HBase table.
const DefaultCodecList = "none,zstd:1,zstd:3,zstd:7,zstd:11,lz4,lz4:hc9,s2,s2:better,s2:best,snappy," +
	"minlz:superfast,minlz:fastest,minlz:balanced," +
	"brotli:1,brotli:3,brotli:6,brotli:9,brotli:11,gzip:1,gzip:6,gzip:9,deflate:1,deflate:3,deflate:6,zlib:1,zlib:6,zlib:9,xz"

// ParseAlgorithms parses a comma-separated codec list such as
// "zstd:1,lz4,s2". "all" stands for every codec at every level.
func ParseAlgorithms(list string) ([]codec.Algorithm, error) {
	if strings.EqualFold(strings.TrimSpace(list), "all") { // as codec names, any case
		return codec.Algorithms(), nil
	}
	var out []codec.Algorithm
	seen := map[string]bool{}
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		a, err := codec.ParseAlgorithm(f)
		if err != nil {
			return nil, err
		}
		if !seen[a.String()] {
			seen[a.String()] = true
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty codec list %q", list)
	}
	return out, nil
}

// splitAlgorithm returns the codec name and level of a's canonical form
// ("zstd:3" gives "zstd", "3"; "none" gives "none", "").
func splitAlgorithm(a codec.Algorithm) (name, level string) {
	s := a.String()
	name, level, _ = strings.Cut(s, ":")
	return name, level
}

// CodecResult is one row of the codec table: one algorithm over a whole
// corpus, as the seed's HBase table has it.
type CodecResult struct {
	Codec          string  `json:"codec"`
	Level          string  `json:"level"`
	Algorithm      string  `json:"algorithm"`
	Slow           bool    `json:"slow"`
	Samples        int     `json:"samples"`
	InputBytes     int64   `json:"input_bytes"`
	OutputBytes    int64   `json:"output_bytes"`
	StoredRaw      int     `json:"stored_raw"`
	Ratio          float64 `json:"ratio"`
	ImprovementPct float64 `json:"improvement_pct"`
	CompressMs     float64 `json:"compress_ms"`
	DecompressMs   float64 `json:"decompress_ms"`
	CompressMBs    float64 `json:"compress_mb_s"`
	DecompressMBs  float64 `json:"decompress_mb_s"`
	Rounds         int     `json:"rounds"`
}

// CodecOptions bound the codec benchmark.
type CodecOptions struct {
	// MinTime is how long each algorithm is measured at least (the corpus is
	// compressed and decompressed in whole rounds until then). Zero means
	// 300ms.
	MinTime time.Duration
	// MaxRounds caps the rounds per algorithm; zero means 50. One round
	// always runs, however slow.
	MaxRounds int
	// Progress, if set, is called after each algorithm.
	Progress Progress
}

// RunCodecs compresses and decompresses every sample of c with each
// algorithm, verifies every round trip byte for byte, and returns one row
// per algorithm. Times are medians over the rounds of a full pass over the
// corpus. Values go through squeeze's encoder with the raw-storage policy
// switched off (minimum size 0, minimum gain 0), so the sizes are the
// codec's own plus the frame header.
func RunCodecs(ctx context.Context, c Corpus, algs []codec.Algorithm, o CodecOptions) ([]CodecResult, error) {
	if o.MinTime <= 0 {
		o.MinTime = 300 * time.Millisecond
	}
	if o.MaxRounds <= 0 {
		o.MaxRounds = 50
	}
	if len(c.Samples) == 0 {
		return nil, ErrEmptyCorpus
	}
	dec, err := codec.NewDecoder()
	if err != nil {
		return nil, err
	}
	in := c.Bytes()
	encoded := make([][]byte, len(c.Samples))
	decoded := make([][]byte, len(c.Samples))
	var out []CodecResult
	for ai, a := range algs {
		enc, err := codec.NewEncoder(a, codec.WithMinSize(0), codec.WithMinGain(0))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a, err)
		}
		name, level := splitAlgorithm(a)
		r := CodecResult{Codec: name, Level: level, Algorithm: a.String(), Slow: a.Slow(), Samples: len(c.Samples), InputBytes: in}
		var ctimes, dtimes []float64
		start := time.Now()
		for round := 0; round < o.MaxRounds && (round == 0 || time.Since(start) < o.MinTime); round++ {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			raw := 0
			t0 := time.Now()
			for i, s := range c.Samples {
				var oc codec.Outcome
				encoded[i], oc = enc.AppendEncodeOutcome(encoded[i][:0], s.Data)
				if oc != codec.Compressed {
					raw++
				}
			}
			t1 := time.Now()
			for i := range c.Samples {
				decoded[i], err = dec.AppendDecode(decoded[i][:0], encoded[i])
				if err != nil {
					return out, fmt.Errorf("%s: decode %s: %w", a, c.Samples[i].Name, err)
				}
			}
			t2 := time.Now()
			ctimes = append(ctimes, t1.Sub(t0).Seconds())
			dtimes = append(dtimes, t2.Sub(t1).Seconds())
			var outBytes int64
			for i, s := range c.Samples {
				if !bytes.Equal(decoded[i], s.Data) {
					return out, fmt.Errorf("%s: round trip of %s changed the data (%d bytes in, %d out)", a, s.Name, len(s.Data), len(decoded[i]))
				}
				outBytes += int64(len(encoded[i]))
			}
			r.OutputBytes, r.StoredRaw, r.Rounds = outBytes, raw, round+1
		}
		ct, dt := Median(ctimes), Median(dtimes)
		r.CompressMs, r.DecompressMs = ct*1e3, dt*1e3
		r.CompressMBs, r.DecompressMBs = mbps(in, ct), mbps(in, dt)
		if r.OutputBytes > 0 {
			r.Ratio = float64(in) / float64(r.OutputBytes)
		}
		if in > 0 {
			r.ImprovementPct = 100 * (1 - float64(r.OutputBytes)/float64(in))
		}
		out = append(out, r)
		o.Progress.step(ai+1, len(algs))
	}
	return out, nil
}

func mbps(n int64, sec float64) float64 {
	if sec <= 0 {
		return 0
	}
	return float64(n) / 1e6 / sec
}
