package bench

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/squeeze-kv/squeeze/codec"
)

// Thresholds of Recommend, in points of memory saved (MEMORY USAGE).
const (
	// SavedMargin: a codec that saves within this many points of the codec
	// saving most is good enough on memory; of those, the fastest wins.
	SavedMargin = 10.0
	// DictMinGain: a dictionary is worth it at a value size where it saves
	// at least this many more points than the same codec without one.
	DictMinGain = 5.0
)

// Advice is what a Redis study's measurements recommend on the machine and
// data they were taken on: the codec to write with, the codec to compact
// cold keys to, and the value size below which a dictionary pays.
// Recommend computes it; the demo and the report open with it.
type Advice struct {
	// Path is where the time figures come from: PathLibrary (the codec
	// in the application) when the run measured it, else PathProxy.
	Path string `json:"path"`
	// Sizes are the value sizes the write codec is judged on: every
	// measured size that squeeze compresses (codec.DefaultMinSize and up),
	// from Dict.Below up when a dictionary is recommended below it.
	Sizes []int `json:"sizes"`
	// Write is the recommended codec to write with.
	Write string `json:"write"`
	// Best is the codec that saves most memory as written over Sizes.
	Best string `json:"best"`
	// Codecs are the figures of every codec as written over Sizes, in the
	// run's order, none left out.
	Codecs []CodecFigures `json:"codecs"`
	// Compact is the compaction target that saves most over Sizes; nil
	// when the run measured no compaction.
	Compact *CompactFigures `json:"compact,omitempty"`
	// Dict is what a dictionary brings; nil when the run measured none.
	Dict *DictFigures `json:"dict,omitempty"`
}

// CodecFigures are one codec's figures over Advice.Sizes.
type CodecFigures struct {
	Codec string `json:"codec"`
	// SavedMin, SavedMax and SavedMedian are the memory saved (MEMORY
	// USAGE against no compression, in percent) over the sizes.
	SavedMin    float64 `json:"saved_min_pct"`
	SavedMax    float64 `json:"saved_max_pct"`
	SavedMedian float64 `json:"saved_median_pct"`
	// WriteX and ReadX are the median over the sizes of the time per
	// write and per read against no compression on Advice.Path: 1.5 is
	// one and a half times the time. 0 when not measured.
	WriteX float64 `json:"write_x"`
	ReadX  float64 `json:"read_x"`
}

// Cost is the mean of WriteX and ReadX, the x of the trade-off chart; 0
// when either is unknown.
func (c CodecFigures) Cost() float64 {
	if c.WriteX <= 0 || c.ReadX <= 0 {
		return 0
	}
	return (c.WriteX + c.ReadX) / 2
}

// CompactFigures are what keys written with WrittenWith save once
// compacted to Codec (squeeze compact), over Advice.Sizes.
type CompactFigures struct {
	Codec       string  `json:"codec"`
	WrittenWith string  `json:"written_with"`
	SavedMin    float64 `json:"saved_min_pct"`
	SavedMax    float64 `json:"saved_max_pct"`
	SavedMedian float64 `json:"saved_median_pct"`
}

// DictFigures are what a dictionary adds to Base at each measured size.
type DictFigures struct {
	Codec string `json:"codec"` // e.g. "zstd:1+dict"
	Base  string `json:"base"`  // the same codec without it
	// Below: a dictionary is recommended for values under this size (it
	// saves at least DictMinGain more points at every measured size
	// below it, less from it on); 0 when it helps at no measured size,
	// -1 when it helps at every one.
	Below  int         `json:"below"`
	Points []DictPoint `json:"points"`
}

// DictPoint is the memory saved at one size with and without a dictionary.
type DictPoint struct {
	SizeBytes int     `json:"size_bytes"`
	With      float64 `json:"with_pct"`
	Without   float64 `json:"without_pct"`
}

// Gain is how many points of memory the dictionary adds.
func (p DictPoint) Gain() float64 { return p.With - p.Without }

// TimeRatio is the time per operation of Codec against no compression on
// one path, workload and size, at the largest iteration count both were
// measured at: 1.5 is one and a half times the time.
type TimeRatio struct {
	Path, Codec, Workload string
	SizeBytes             int
	Iterations            int
	X                     float64
}

// TimeRatios returns the ratio of every cell with compression against the
// none cell of its path, workload and size, at the largest iteration count
// with both (RedisRow.SlowdownPct), in the rows' order.
func TimeRatios(rows []RedisRow) []TimeRatio {
	type key struct {
		path, codec, wl string
		size            int
	}
	best := map[key]RedisRow{}
	var order []key
	for _, r := range rows {
		if r.Codec == "none" || r.NoBaseline {
			continue
		}
		k := key{r.Path, r.Codec, r.Workload, r.SizeBytes}
		b, ok := best[k]
		if !ok {
			order = append(order, k)
		}
		if !ok || r.Iterations > b.Iterations {
			best[k] = r
		}
	}
	out := make([]TimeRatio, len(order))
	for i, k := range order {
		r := best[k]
		out[i] = TimeRatio{Path: k.path, Codec: k.codec, Workload: k.wl, SizeBytes: k.size, Iterations: r.Iterations, X: 1 + r.SlowdownPct/100}
	}
	return out
}

// isAtRest reports whether a memory row was measured after compaction.
func isAtRest(m MemoryRow) bool { return m.WrittenWith != "" }

// Recommend reads a Redis study's rows (RunRedis's result) and returns its
// advice, or nil when the rows measured no codec besides none.
//
// The write codec: of the codecs as written (dictionaries aside) that save
// within SavedMargin points of the one that saves most (the median over
// Advice.Sizes), the one whose writes and reads take least time (the mean
// of their ratios to no compression); without time figures, the one that
// saves most. The compaction target: the one saving most. A dictionary:
// below the smallest size from which it adds less than DictMinGain points.
func Recommend(rows []RedisRow, mem []MemoryRow) *Advice {
	a := &Advice{Path: PathLibrary}
	hasPath := map[string]bool{}
	for _, r := range rows {
		hasPath[r.Path] = true
	}
	if !hasPath[PathLibrary] && hasPath[PathProxy] {
		a.Path = PathProxy
	}
	saved := map[string]map[int]float64{} // codec -> size -> saved
	var codecs, dicts, rest []string
	var sizes []int
	for _, m := range mem {
		if m.SizeBytes < codec.DefaultMinSize || m.Codec == "none" {
			continue
		}
		if saved[m.Codec] == nil {
			saved[m.Codec] = map[int]float64{}
			switch {
			case isAtRest(m):
				rest = append(rest, m.Codec)
			case strings.HasSuffix(m.Codec, DictSuffix):
				dicts = append(dicts, m.Codec)
			default:
				codecs = append(codecs, m.Codec)
			}
		}
		saved[m.Codec][m.SizeBytes] = m.SavedPct
		if !containsInt(sizes, m.SizeBytes) {
			sizes = append(sizes, m.SizeBytes)
		}
	}
	sort.Ints(sizes)
	// Codecs timed but not in the memory table (a run without memory rows)
	// still count, on time alone.
	for _, r := range rows {
		if r.Path == a.Path && r.Codec != "none" && !strings.HasSuffix(r.Codec, DictSuffix) && !contains(codecs, r.Codec) {
			codecs = append(codecs, r.Codec)
		}
	}
	if len(codecs) == 0 {
		return nil
	}

	// The dictionary first: it decides which sizes the write codec is for.
	for _, d := range dicts {
		base := strings.TrimSuffix(d, DictSuffix)
		if saved[base] == nil {
			continue
		}
		df := &DictFigures{Codec: d, Base: base, Below: -1}
		for _, s := range sizes {
			with, ok1 := saved[d][s]
			without, ok2 := saved[base][s]
			if ok1 && ok2 {
				df.Points = append(df.Points, DictPoint{SizeBytes: s, With: with, Without: without})
			}
		}
		if len(df.Points) == 0 {
			continue
		}
		// Below is the smallest size from which every point gains less
		// than DictMinGain.
		for i := len(df.Points) - 1; i >= 0; i-- {
			if df.Points[i].Gain() >= DictMinGain {
				break
			}
			df.Below = df.Points[i].SizeBytes
		}
		if df.Below == df.Points[0].SizeBytes {
			df.Below = 0
		}
		a.Dict = df
		break
	}
	for _, s := range sizes {
		if a.Dict == nil || a.Dict.Below <= 0 || s >= a.Dict.Below {
			a.Sizes = append(a.Sizes, s)
		}
	}

	ratios := TimeRatios(rows)
	for _, c := range codecs {
		f := CodecFigures{Codec: c}
		var sv, wx, rx []float64
		for _, s := range a.Sizes {
			if v, ok := saved[c][s]; ok {
				sv = append(sv, v)
			}
		}
		for _, t := range ratios {
			if t.Path != a.Path || t.Codec != c || t.SizeBytes < codec.DefaultMinSize || len(a.Sizes) > 0 && !containsInt(a.Sizes, t.SizeBytes) {
				continue
			}
			switch t.Workload {
			case WorkloadWrite:
				wx = append(wx, t.X)
			case WorkloadRead:
				rx = append(rx, t.X)
			}
		}
		if len(sv) > 0 {
			f.SavedMin, f.SavedMax, f.SavedMedian = slicesMin(sv), slicesMax(sv), Median(sv)
		}
		f.WriteX, f.ReadX = Median(wx), Median(rx)
		a.Codecs = append(a.Codecs, f)
	}
	best := a.Codecs[0]
	for _, f := range a.Codecs[1:] {
		if f.SavedMedian > best.SavedMedian {
			best = f
		}
	}
	a.Best, a.Write = best.Codec, best.Codec
	cheapest := math.Inf(1)
	for _, f := range a.Codecs {
		if f.SavedMedian >= best.SavedMedian-SavedMargin && f.Cost() > 0 && f.Cost() < cheapest {
			cheapest, a.Write = f.Cost(), f.Codec
		}
	}

	for _, c := range rest {
		if strings.HasSuffix(c, DictSuffix) {
			continue
		}
		var sv []float64
		var with string
		for _, m := range mem {
			if m.Codec == c && containsInt(a.Sizes, m.SizeBytes) {
				sv = append(sv, m.SavedPct)
				with = m.WrittenWith
			}
		}
		if len(sv) == 0 {
			continue
		}
		cf := &CompactFigures{Codec: strings.TrimPrefix(c, with+"->"), WrittenWith: with, SavedMin: slicesMin(sv), SavedMax: slicesMax(sv), SavedMedian: Median(sv)}
		if a.Compact == nil || cf.SavedMedian > a.Compact.SavedMedian {
			a.Compact = cf
		}
	}
	return a
}

// Figures returns the figures of one codec, and whether it was measured.
func (a *Advice) Figures(c string) (CodecFigures, bool) {
	for _, f := range a.Codecs {
		if f.Codec == c {
			return f, true
		}
	}
	return CodecFigures{}, false
}

// AdviceLine is one sentence of the advice: Lead is the instruction (bold
// in the report), Rest the figures behind it.
type AdviceLine struct {
	Lead, Rest string
}

// Lines returns the advice as sentences: write, compact, dictionary.
func (a *Advice) Lines() []AdviceLine {
	w, _ := a.Figures(a.Write)
	var out []AdviceLine
	lead := "Write with " + a.Write
	rest := ""
	if a.Write == codec.DefaultAlgorithm.String() {
		rest = " (squeeze's default)"
	}
	rest += fmt.Sprintf(": saves %s of Redis memory on values of %s", pctRange(w.SavedMin, w.SavedMax), sizeRange(a.Sizes))
	if w.Cost() > 0 {
		rest += fmt.Sprintf("; writes take %s and reads %s the time they take without compression", times(w.WriteX), times(w.ReadX))
	}
	out = append(out, AdviceLine{lead, rest + "."})
	if c := a.Compact; c != nil {
		out = append(out, AdviceLine{"Compact cold keys to " + c.Codec,
			fmt.Sprintf(" with squeeze compact: keys that stay then save %s (written with %s: %s).", pctRange(c.SavedMin, c.SavedMax), c.WrittenWith, pctRange(w.SavedMin, w.SavedMax))})
	}
	d := a.Dict
	switch {
	case d == nil:
		out = append(out, AdviceLine{"Dictionaries", " were not measured in this run (bench redis --dict measures them)."})
	case d.Below == 0:
		out = append(out, AdviceLine{"No dictionary needed", fmt.Sprintf(": at every size measured (from %s) %s with one saves less than %.0f points more than without.",
			FormatSize(int64(d.Points[0].SizeBytes)), d.Base, DictMinGain)})
	default:
		lead := "Use a dictionary for values under " + FormatSize(int64(d.Below))
		if d.Below < 0 {
			lead = "Use a dictionary"
		}
		var parts []string
		for _, p := range d.Points {
			if d.Below > 0 && p.SizeBytes >= d.Below || len(parts) == 3 {
				break
			}
			parts = append(parts, fmt.Sprintf("%.0f%% at %s (%.0f%% without)", p.With, FormatSize(int64(p.SizeBytes)), p.Without))
		}
		rest := fmt.Sprintf(" (squeeze dict train): %s with one saves %s", d.Base, strings.Join(parts, ", "))
		if d.Below > 0 {
			rest += fmt.Sprintf("; from %s on it adds less than %.0f points", FormatSize(int64(d.Below)), DictMinGain)
		}
		out = append(out, AdviceLine{lead, rest + "."})
	}
	return out
}

// Why says in one or two sentences why Write was chosen.
func (a *Advice) Why() string {
	w, _ := a.Figures(a.Write)
	b, _ := a.Figures(a.Best)
	if w.Cost() == 0 {
		return fmt.Sprintf("Why %s: it saves most memory (%.0f%%, the median over these sizes); this run timed no reads and writes.", a.Write, w.SavedMedian)
	}
	var others []string
	for _, f := range a.Codecs {
		if f.Codec != a.Write && f.Cost() > 0 && f.SavedMedian >= b.SavedMedian-SavedMargin {
			others = append(others, fmt.Sprintf("%s %s", f.Codec, times(f.Cost())))
		}
	}
	if len(others) == 0 {
		return fmt.Sprintf("Why %s: it saves most memory (%.0f%%, the median over these sizes), and every other codec saves more than %.0f points less.",
			a.Write, w.SavedMedian, SavedMargin)
	}
	why := fmt.Sprintf("Why %s: it saves %.0f%% (the median over these sizes)", a.Write, w.SavedMedian)
	if a.Write == a.Best {
		why += ", the most of any codec,"
	} else {
		why += fmt.Sprintf(", within %.0f points of the most any codec saves (%s, %.0f%%),", SavedMargin, b.Codec, b.SavedMedian)
	}
	why += fmt.Sprintf(" and takes least time of those: %s against %s (the mean of write and read time against no compression).",
		times(w.Cost()), joinAnd(others))
	if a.Write != a.Best && a.Compact != nil {
		why += " Compaction takes back the difference on keys that stay."
	}
	return why
}

// SeedSentence explains the references to the seed studies.
const SeedSentence = "The seed studies are the published measurements squeeze set out to improve on; the Redis one (2013, Ruby with zlib) compressed every value with zlib, which is why zlib:6 is measured beside squeeze's codecs."

// joinAnd joins "a", "b" and "c" as "a, b and c".
func joinAnd(parts []string) string {
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func pctRange(lo, hi float64) string {
	if math.Round(lo) == math.Round(hi) {
		return fmt.Sprintf("%.0f%%", lo)
	}
	return fmt.Sprintf("%.0f-%.0f%%", lo, hi)
}

func sizeRange(sizes []int) string {
	switch len(sizes) {
	case 0:
		return "every size"
	case 1:
		return FormatSize(int64(sizes[0]))
	}
	return FormatSize(int64(sizes[0])) + "-" + FormatSize(int64(sizes[len(sizes)-1]))
}

// times prints a time ratio: "2.2x".
func times(x float64) string {
	if x >= 10 {
		return fmt.Sprintf("%.0fx", x)
	}
	return fmt.Sprintf("%.1fx", x)
}

func slicesMin(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}

func slicesMax(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs[1:] {
		m = max(m, x)
	}
	return m
}
