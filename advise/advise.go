// Package advise samples a live Redis and recommends, per key prefix, how
// squeeze should store its values: whether to compress at all, the codec
// for writes (the proxy's and the library's --codec), the size under which
// values stay raw (--min-size), the codec for compaction at rest (squeeze
// compact), and whether a trained dictionary pays (squeeze dict train).
//
// Sampling only reads (SCAN, TYPE, MEMORY USAGE, GET, HSCAN, LRANGE,
// XRANGE); values squeeze already stores are decoded first, so the advice
// is about the original bytes. The sample is the same on every run over
// the same data (the first keys SCAN returns, the first fields, elements
// or entries of each), so that two runs advise the same. Every candidate
// codec then encodes every sampled value here, on this machine: the sizes
// are exact, the speeds are this machine's (each value's best of three
// rounds).
//
// The rules, applied per prefix and over the values of the prefixes that
// compress (the proxy's --codec and --min-size, for keys no --rule covers;
// ProxyRules gives the rules for the prefixes whose advice differs):
//
//   - Memory is estimated per value as Redis allocates a string: the SDS
//     header and the jemalloc size class (dictstore.ValueMemory).
//   - Write codec: among the fast codecs (those encoding at least half as
//     fast as the fastest candidate measured; the default codec, made to
//     be the fast writer, at least a quarter as fast, so that a busy
//     machine's timings do not take it out of the running), the default codec (s2; or
//     the first fast candidate when s2 is not one), unless another saves
//     at least 3 points more memory: a margin, so that the noise of one
//     run's timings, or a codec a point ahead, does not flip the advice
//     from run to run. If it saves less than the minimum gain, the advice
//     is to leave the values raw (images, already compressed data); when
//     no codec saves that much, the reason names the one that saves the
//     most, not the fast one (which the timings pick).
//   - Codecs that came after the first release (minlz: older squeeze
//     readers cannot read their frames) are measured and shown, but
//     advised, for writes or at rest, only with Options.LaterCodecs.
//   - The portable profile (codec.ID.Portable: the codecs other languages
//     read): the write advice is worked out twice, over every codec and
//     within the profile, where snappy (codec.PortableDefault) takes s2's
//     place as the incumbent (fast when at least a quarter as fast as the
//     fastest portable codec: measured against s2, a busy machine's
//     timings took it out of the running now and then, and another codec
//     a point ahead took its place); Prefix.Profile sets the two side by side,
//     memory and speed. With Options.Portable, the advice (write, at rest)
//     is the one within the profile.
//   - Min size: values are grouped by size (powers of two); the advice is
//     the smallest size from which every group compresses by at least the
//     minimum gain with the write codec.
//   - At rest: the candidate saving the most memory, if it saves at least
//     3 points more than the write codec; compaction rewrites cold keys
//     with it.
//   - Dictionary: for prefixes with enough values of at most 16 KiB, a
//     zstd dictionary is trained on four fifths and measured on the rest
//     with zstd:1; it is advised when it saves at least 5 points more.
package advise

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/dictstore"
	"github.com/squeeze-kv/squeeze/internal/rediscluster"
)

// Defaults of Options.
const (
	DefaultKeys      = 1000
	DefaultPerKey    = 50
	DefaultDepth     = 1
	DefaultSeparator = ":"
	DefaultDictMin   = 40
	// DefaultCodecs are the candidates: fast writers and strong compactors,
	// snappy for s2's place in the portable profile.
	DefaultCodecs = "s2,snappy,minlz,lz4,zstd:1,zstd:3,zstd:9,brotli:9"
)

// WriteMargin is the points of memory another fast codec must save beyond
// the default one to be advised for writes instead.
const WriteMargin = 3.0

// Thresholds of the rules in the package documentation.
const (
	fastShare       = 0.5   // a fast codec encodes at least this share of the fastest's speed
	defaultFast     = 0.25  // the default codec (and the portable one): at least this share
	atRestPoints    = 3.0   // points of memory saved an at-rest codec must add
	dictPoints      = 5.0   // points a dictionary must add
	dictMaxMedian   = 16384 // dictionaries help small values
	maxValueSampled = 8 << 20
)

// Options configure Run. Zero fields take the defaults.
type Options struct {
	Keys      int               // most keys sampled (DefaultKeys)
	PerKey    int               // most hash fields, list elements or stream entries read per key (DefaultPerKey)
	Depth     int               // a prefix is the first Depth segments of a key (DefaultDepth)
	Separator string            // segment separator (DefaultSeparator)
	Codecs    []codec.Algorithm // candidates (DefaultCodecs)
	MinGain   float64           // fraction a codec must save (codec.DefaultMinGain)
	DictMin   int               // fewest values of a prefix to try a dictionary (DefaultDictMin); negative: never
	ScanCount int64             // SCAN COUNT (100)
	// LaterCodecs lets the advice name codecs that came after the first
	// release (codec.ID.AddedLater: minlz), which squeeze readers built
	// before them cannot read. Without it they are measured, not advised.
	LaterCodecs bool
	// Portable advises within the portable profile (codec.ID.Portable;
	// docs/FORMAT.md, section 8), for deployments whose values are read
	// outside squeeze: codecs outside it are measured and shown, never
	// advised. Run and Analyze return an error when no candidate is in it.
	Portable bool
	// Progress, if set, is called as the run goes: done of total steps of
	// stage, which names what takes the time ("sampling keys", "measuring
	// codecs on user:", ...). Each stage counts its own steps.
	Progress func(stage string, done, total int)

	// codecDone, if set, is called by Analyze after each codec it measured.
	codecDone func()
}

func (o *Options) defaults() error {
	if o.Keys <= 0 {
		o.Keys = DefaultKeys
	}
	if o.PerKey <= 0 {
		o.PerKey = DefaultPerKey
	}
	if o.Depth <= 0 {
		o.Depth = DefaultDepth
	}
	if o.Separator == "" {
		o.Separator = DefaultSeparator
	}
	if len(o.Codecs) == 0 {
		for _, s := range strings.Split(DefaultCodecs, ",") {
			o.Codecs = append(o.Codecs, codec.MustParseAlgorithm(s))
		}
	}
	for _, a := range o.Codecs {
		if a.ID == codec.IDNone {
			return errors.New("advise: none is not a candidate codec")
		}
	}
	if o.Portable && !slices.ContainsFunc(o.Codecs, func(a codec.Algorithm) bool { return a.ID.Portable() }) {
		return fmt.Errorf("advise: portable: no candidate codec is in the portable profile (%s)", strings.Join(codec.PortableNames()[1:], ", "))
	}
	if o.MinGain == 0 {
		o.MinGain = codec.DefaultMinGain
	}
	if o.MinGain < 0 || o.MinGain >= 1 {
		return fmt.Errorf("advise: min gain %v must be in [0, 1)", o.MinGain)
	}
	if o.DictMin == 0 {
		o.DictMin = DefaultDictMin
	}
	if o.ScanCount <= 0 {
		o.ScanCount = 100
	}
	return nil
}

// Value is one sampled value: a string, a hash field value, a list element
// or a stream field value, as the application wrote it.
type Value struct {
	Key  string
	Data []byte
}

// Report is the advice and what it rests on.
type Report struct {
	KeysScanned int      `json:"keys_scanned"`
	KeysSampled int      `json:"keys_sampled"` // keys whose values were read
	Values      int      `json:"values"`
	Bytes       int64    `json:"bytes"` // original bytes of the sampled values
	Prefixes    []Prefix `json:"prefixes"`
	// Overall is the advice for the proxy's --codec and --min-size, for
	// the keys no rule covers: one codec and min size over the sampled
	// values of the prefixes that compress (all values when none does),
	// since the prefixes advised raw get a rule to store them raw.
	Overall Prefix `json:"overall"`
	// ProxyRules are the squeeze proxy --rule values that give the
	// prefixes whose advice differs from Overall's their own codec and
	// min size (see ProxyRules).
	ProxyRules []string `json:"proxy_rules"`
	// ScriptPrefixes are the key prefixes scripts use, as squeeze proxy
	// and the go-redis hook keep them in ScriptPrefixesKey: values under
	// them are stored as written (scripts compare and copy their bytes),
	// whatever the advice, and squeeze compact skips them.
	ScriptPrefixes []string `json:"script_prefixes"`
	// ScriptPrefixesLastUsed is when a script last used each of
	// ScriptPrefixes, as squeeze proxy keeps it in ScriptPrefixesUsedKey
	// (absent: not recorded). A proxy compresses a prefix again once no
	// script used it for its --script-prefix-ttl.
	ScriptPrefixesLastUsed map[string]time.Time `json:"script_prefixes_last_used,omitempty"`
}

// ScriptPrefixesKey is the set of the key prefixes scripts use (see
// Report.ScriptPrefixes).
const ScriptPrefixesKey = "squeeze:script-prefixes"

// ScriptPrefixesUsedKey is the hash of when a script last used each of
// them, in Unix milliseconds.
const ScriptPrefixesUsedKey = "squeeze:script-prefixes:used"

// ScriptPrefixesOver returns those of scriptPrefixes that the advise
// prefix p overlaps (see ScriptUsed).
func ScriptPrefixesOver(p string, scriptPrefixes []string) []string {
	var out []string
	for _, sp := range scriptPrefixes {
		if strings.HasPrefix(sp, p) || strings.HasPrefix(p, sp) {
			out = append(out, sp)
		}
	}
	return out
}

// ScriptUsed reports whether the advise prefix p overlaps a prefix scripts
// use: one of them begins with the other.
func ScriptUsed(p string, scriptPrefixes []string) bool {
	for _, sp := range scriptPrefixes {
		if strings.HasPrefix(sp, p) || strings.HasPrefix(p, sp) {
			return true
		}
	}
	return false
}

// ProxyRules returns the squeeze proxy --rule values
// (PREFIX=CODEC,min-size=N, or PREFIX=none) for the prefixes whose sampled
// values the overall advice would store otherwise than their own advice:
// another codec; raw values the overall codec would try to compress; or
// the same codec with a min size on the other side of some sampled value.
// A prefix that a rule cannot name (empty, or holding "=" or ";") is left
// to the overall advice.
func ProxyRules(prefixes []Prefix, overall Advice) []string {
	rules := []string{}
	for _, p := range prefixes {
		a := p.Advice
		if !ruleable(p.Prefix) || p.Values == 0 {
			continue
		}
		lo, hi := min(a.MinSize, overall.MinSize), max(a.MinSize, overall.MinSize)
		switch {
		case !a.Compress:
			if overall.Compress && p.Largest >= overall.MinSize {
				rules = append(rules, p.Prefix+"=none")
			}
		case !overall.Compress || a.Write != overall.Write ||
			a.MinSize != overall.MinSize && p.Largest >= lo && p.Smallest < hi:
			rules = append(rules, fmt.Sprintf("%s=%s,min-size=%d", p.Prefix, a.Write, a.MinSize))
		}
	}
	return rules
}

// ruleable reports whether a --rule can name prefix.
func ruleable(prefix string) bool {
	return prefix != "" && !strings.ContainsAny(prefix, "=;")
}

// Prefix is the analysis of the values of one key prefix.
type Prefix struct {
	Prefix   string         `json:"prefix"`
	Keys     int            `json:"keys"`
	Types    map[string]int `json:"types"` // keys by Redis type
	Values   int            `json:"values"`
	Bytes    int64          `json:"bytes"`
	Median   int            `json:"median_bytes"`
	P90      int            `json:"p90_bytes"`
	Smallest int            `json:"min_bytes"`
	Largest  int            `json:"max_bytes"`
	Framed   int            `json:"already_framed"` // values squeeze already stores as frames
	// StoredCodecs counts the sampled frames by the codec that wrote them
	// (decodable or not): which codecs the prefix's readers must know.
	StoredCodecs map[string]int `json:"stored_codecs,omitempty"`
	// Undecodable counts frames this build could not decode (a codec it
	// does not know, a dictionary not published, corruption); they are left
	// out of the advice, and UndecodableWhy gives the first reason.
	Undecodable    int    `json:"undecodable,omitempty"`
	UndecodableWhy string `json:"undecodable_why,omitempty"`
	MemoryRaw      int64  `json:"memory_raw"` // estimated allocations of the values if stored raw
	// MemoryUsage is what Redis reports (MEMORY USAGE) for the sampled
	// keys as they are stored now: keys, overhead and all their values.
	MemoryUsage int64      `json:"memory_usage"`
	Codecs      []CodecFit `json:"codecs"`
	Dict        *DictFit   `json:"dict,omitempty"`
	Advice      Advice     `json:"advice"`
	// Profile sets the write advice within the portable profile beside the
	// one over every codec: what writing only codecs other languages read
	// costs on these values. Nil when no candidate is portable, or no
	// value was sampled.
	Profile *ProfileCost `json:"portable_profile,omitempty"`
	// ScriptUsed: the prefix overlaps one scripts use (Report.ScriptPrefixes):
	// values written there by scripts, or read by them, stay uncompressed.
	ScriptUsed bool `json:"script_used,omitempty"`
}

// CodecFit is one candidate codec over a prefix's values.
type CodecFit struct {
	Codec     string  `json:"codec"`
	Memory    int64   `json:"memory"`    // estimated allocations, values kept raw where they gain too little
	SavedPct  float64 `json:"saved_pct"` // against MemoryRaw
	EncodeMBs float64 `json:"encode_mb_s"`
	DecodeMBs float64 `json:"decode_mb_s"`
	Fast      bool    `json:"fast"`
}

// DictFit is a dictionary trained on a prefix's values and measured on
// held-out ones with zstd:1.
type DictFit struct {
	Samples         int     `json:"samples"`
	HeldOut         int     `json:"held_out"`
	Size            int     `json:"size"`
	SavedPctWithout float64 `json:"saved_pct_without"`
	SavedPctWith    float64 `json:"saved_pct_with"`
}

// ProfileCost compares two write advices on the same values: within the
// portable profile, and over every codec advise may name. One of them is
// Prefix.Advice's (Options.Portable says which).
type ProfileCost struct {
	Portable WriteChoice `json:"portable"`
	Any      WriteChoice `json:"any_codec"`
	// SavedPoints is the memory the profile costs: Any's SavedPct minus
	// Portable's, in points. It is negative when the portable choice saves
	// more: by less than WriteMargin when both are fast codecs (a portable
	// rival of snappy under the margin from s2), by more when no portable
	// candidate was fast and the fastest of them is the choice.
	SavedPoints float64 `json:"saved_points_lost"`
	// EncodeRatio and DecodeRatio are Portable's speed over Any's (1: as
	// fast; 0.5: half as fast); 0 when either stores the values raw.
	EncodeRatio float64 `json:"encode_speed_ratio"`
	DecodeRatio float64 `json:"decode_speed_ratio"`
}

// WriteChoice is a write advice with its codec's speeds on the values.
type WriteChoice struct {
	Compress  bool    `json:"compress"`
	Codec     string  `json:"write_codec,omitempty"`
	MinSize   int     `json:"min_size"`
	SavedPct  float64 `json:"saved_pct"` // with Codec and MinSize, against storing them raw
	EncodeMBs float64 `json:"encode_mb_s,omitempty"`
	DecodeMBs float64 `json:"decode_mb_s,omitempty"`
}

// Advice is the recommendation for a prefix.
type Advice struct {
	Compress    bool    `json:"compress"`
	Write       string  `json:"write_codec,omitempty"`
	MinSize     int     `json:"min_size"`
	SavedPct    float64 `json:"saved_pct"` // with Write and MinSize
	AtRest      string  `json:"at_rest_codec,omitempty"`
	AtRestSaved float64 `json:"at_rest_saved_pct,omitempty"`
	Dict        bool    `json:"dict"`
	Why         string  `json:"why"`
}

// Pattern returns the SCAN pattern of a prefix's keys.
func (p Prefix) Pattern() string { return globEscape(p.Prefix) + "*" }

func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// PrefixOf returns the prefix of key: its first depth segments, each with
// its separator; a key with fewer segments is its own group, named by the
// key up to its last separator (or "" for keys without one).
func PrefixOf(key, sep string, depth int) string {
	end := 0
	for range depth {
		i := strings.Index(key[end:], sep)
		if i < 0 {
			return key[:end]
		}
		end += i + len(sep)
	}
	return key[:end]
}

// Run samples rdb and analyses what it read.
func Run(ctx context.Context, rdb redis.UniversalClient, o Options) (Report, error) {
	if err := o.defaults(); err != nil {
		return Report{}, err
	}
	res, err := dictstore.NewResolver(rdb)
	if err != nil {
		return Report{}, err
	}
	var rep Report
	sp, err := rdb.SMembers(ctx, ScriptPrefixesKey).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return rep, fmt.Errorf("advise: SMEMBERS %s: %w", ScriptPrefixesKey, err)
	}
	slices.Sort(sp)
	rep.ScriptPrefixes = sp
	if len(sp) > 0 {
		used, err := rdb.HGetAll(ctx, ScriptPrefixesUsedKey).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return rep, fmt.Errorf("advise: HGETALL %s: %w", ScriptPrefixesUsedKey, err)
		}
		for _, p := range sp {
			if ms, err := strconv.ParseInt(used[p], 10, 64); err == nil && ms > 0 {
				if rep.ScriptPrefixesLastUsed == nil {
					rep.ScriptPrefixesLastUsed = map[string]time.Time{}
				}
				rep.ScriptPrefixesLastUsed[p] = time.UnixMilli(ms).UTC()
			}
		}
	}
	groups := map[string]*group{}
	sample := func(ctx context.Context, node redis.Cmdable, keys int) error {
		return sampleNode(ctx, node, res, o, keys, &rep, groups)
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		masters, err := rediscluster.Masters(ctx, cc)
		if err != nil {
			return rep, fmt.Errorf("advise: cluster masters: %w", err)
		}
		for _, n := range masters {
			if err := sample(ctx, n, (o.Keys+len(masters)-1)/len(masters)); err != nil {
				return rep, err
			}
		}
	} else if err := sample(ctx, rdb, o.Keys); err != nil {
		return rep, err
	}
	names := make([]string, 0, len(groups))
	for name := range groups {
		names = append(names, name)
	}
	slices.Sort(names)
	// Measuring takes the time: every codec on every prefix's values, a
	// dictionary trained for each prefix, then every codec on all values
	// together. A step is a codec or a dictionary.
	steps, total := 0, (len(names)+1)*(len(o.Codecs)+1)
	progress := func(stage string) {
		if o.Progress != nil {
			o.Progress(stage, steps, total)
		}
	}
	for i, name := range names {
		g := groups[name]
		stage := fmt.Sprintf("measuring codecs on %q (%d of %d prefixes)", name, i+1, len(names))
		o.codecDone = func() { steps++; progress(stage) }
		progress(stage)
		p, err := Analyze(name, g.values, o)
		if err != nil {
			return rep, err
		}
		p.Keys, p.Types, p.Framed, p.MemoryUsage = g.keys, g.types, g.framed, g.memory
		p.StoredCodecs, p.Undecodable, p.UndecodableWhy = g.stored, g.bad, g.badWhy
		p.ScriptUsed = ScriptUsed(name, rep.ScriptPrefixes)
		rep.Prefixes = append(rep.Prefixes, p)
		steps = (i + 1) * (len(o.Codecs) + 1) // and the dictionary, trained or not
		progress(stage)
	}
	// The default policy is for the values that compress: a prefix of
	// images or archives gets a rule to store them raw instead of pushing
	// everyone's min size up.
	var all, compressing []Value
	for _, p := range rep.Prefixes {
		g := groups[p.Prefix]
		all = append(all, g.values...)
		if p.Advice.Compress || !ruleable(p.Prefix) {
			compressing = append(compressing, g.values...)
		}
	}
	if len(compressing) > 0 {
		all = compressing
	}
	slices.SortStableFunc(rep.Prefixes, func(a, b Prefix) int { return int(b.MemoryRaw - a.MemoryRaw) })
	if len(all) > 0 {
		o.DictMin = -1 // one dictionary per prefix, not one for everything
		stage := "measuring codecs on all prefixes together"
		o.codecDone = func() { steps++; progress(stage) }
		progress(stage)
		if rep.Overall, err = Analyze("", all, o); err != nil {
			return rep, err
		}
		steps = total
		progress(stage)
		rep.Overall.Keys = rep.KeysSampled
	}
	rep.ProxyRules = ProxyRules(rep.Prefixes, rep.Overall.Advice)
	return rep, nil
}

// group collects the sampled values of one prefix.
type group struct {
	keys   int
	memory int64 // MEMORY USAGE of the sampled keys
	types  map[string]int
	framed int
	stored map[string]int // frames by codec name
	bad    int            // frames that did not decode
	badWhy string
	values []Value
}

// sampleNode reads up to keys keys of one server.
func sampleNode(ctx context.Context, rdb redis.Cmdable, res *dictstore.Resolver, o Options, keys int, rep *Report, groups map[string]*group) error {
	var cursor uint64
	seen := 0
	for seen < keys {
		batch, next, err := rdb.Scan(ctx, cursor, "", o.ScanCount).Result()
		if err != nil {
			return fmt.Errorf("advise: SCAN: %w", err)
		}
		for _, k := range batch {
			if seen >= keys {
				break
			}
			if strings.HasPrefix(k, "squeeze:dict") {
				continue // squeeze's own dictionaries
			}
			seen++
			rep.KeysScanned++
			typ, err := rdb.Type(ctx, k).Result()
			if err != nil {
				return fmt.Errorf("advise: TYPE %q: %w", k, err)
			}
			vals, err := readValues(ctx, rdb, k, typ, o.PerKey)
			if err != nil {
				return err
			}
			name := PrefixOf(k, o.Separator, o.Depth)
			g := groups[name]
			if g == nil {
				g = &group{types: map[string]int{}}
				groups[name] = g
			}
			g.keys++
			if n, err := rdb.MemoryUsage(ctx, k, 0).Result(); err == nil {
				g.memory += n // a key gone since SCAN counts nothing
			}
			g.types[typ]++
			if len(vals) > 0 {
				rep.KeysSampled++
			}
			for _, v := range vals {
				if len(v) == 0 || len(v) > maxValueSampled {
					continue
				}
				if codec.IsFramed(v) {
					if len(v) > len(codec.Magic)+1 && v[len(codec.Magic)] == codec.Version {
						if g.stored == nil {
							g.stored = map[string]int{}
						}
						// The codec byte, read even where this build does not know it.
						g.stored[codec.ID(v[len(codec.Magic)+1]).String()]++
					}
					d, err := res.AppendDecode(ctx, nil, v)
					if err != nil { // a frame this reader cannot decode: no advice from it
						if g.bad++; g.badWhy == "" {
							g.badWhy = fmt.Sprintf("key %q: %v", k, err)
						}
						continue
					}
					v = d
					g.framed++
				}
				g.values = append(g.values, Value{Key: k, Data: v})
				rep.Values++
				rep.Bytes += int64(len(v))
			}
			if o.Progress != nil {
				o.Progress("sampling keys", seen, keys)
			}
		}
		cursor = next
		if cursor == 0 {
			break
		}
	}
	return nil
}

// readValues reads the values of one key that squeeze would compress.
func readValues(ctx context.Context, rdb redis.Cmdable, key, typ string, perKey int) ([][]byte, error) {
	var out [][]byte
	switch typ {
	case "string":
		v, err := rdb.Get(ctx, key).Bytes()
		if err == redis.Nil {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("advise: GET %q: %w", key, err)
		}
		out = append(out, v)
	case "hash":
		// HSCAN from cursor 0: the same fields on every run over the same
		// hash (HRANDFIELD drew others each time, and the advice with them).
		var cursor uint64
		for len(out) < perKey {
			kv, next, err := rdb.HScan(ctx, key, cursor, "", int64(perKey)).Result()
			if err != nil {
				return nil, fmt.Errorf("advise: HSCAN %q: %w", key, err)
			}
			for i := 1; i < len(kv) && len(out) < perKey; i += 2 {
				out = append(out, []byte(kv[i]))
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	case "list":
		vs, err := rdb.LRange(ctx, key, 0, int64(perKey)-1).Result()
		if err != nil {
			return nil, fmt.Errorf("advise: LRANGE %q: %w", key, err)
		}
		for _, v := range vs {
			out = append(out, []byte(v))
		}
	case "stream":
		es, err := rdb.XRangeN(ctx, key, "-", "+", int64(perKey)).Result()
		if err != nil {
			return nil, fmt.Errorf("advise: XRANGE %q: %w", key, err)
		}
		for _, e := range es {
			for _, v := range e.Values {
				if s, ok := v.(string); ok {
					out = append(out, []byte(s))
				}
			}
		}
	}
	return out, nil
}

// Analyze measures every candidate codec on values and gives the advice
// for them (see the package documentation for the rules).
func Analyze(name string, values []Value, o Options) (Prefix, error) {
	if err := o.defaults(); err != nil {
		return Prefix{}, err
	}
	p := Prefix{Prefix: name, Values: len(values)}
	if len(values) == 0 {
		p.Advice.Why = "no string, hash, list or stream values sampled"
		return p, nil
	}
	sizes := make([]int, len(values))
	for i, v := range values {
		sizes[i] = len(v.Data)
		p.Bytes += int64(len(v.Data))
		p.MemoryRaw += dictstore.ValueMemory(len(v.Data))
	}
	slices.Sort(sizes)
	p.Median, p.P90 = sizes[len(sizes)/2], sizes[len(sizes)*9/10]
	p.Smallest, p.Largest = sizes[0], sizes[len(sizes)-1]

	dec, err := codec.NewDecoder()
	if err != nil {
		return p, err
	}
	// stored[c][i]: the frame size of value i with codec c, policy off.
	stored := make([][]int, len(o.Codecs))
	fastest, fastestPortable := 0.0, 0.0
	for ci, a := range o.Codecs {
		fit, sz, err := measureCodec(a, values, dec, p, o)
		if err != nil {
			return p, err
		}
		stored[ci] = sz
		p.Codecs = append(p.Codecs, fit)
		fastest = max(fastest, fit.EncodeMBs)
		if a.ID.Portable() {
			fastestPortable = max(fastestPortable, fit.EncodeMBs)
		}
		if o.codecDone != nil {
			o.codecDone()
		}
	}
	// Codecs the advice may name: all, or those older readers know.
	eligible := func(ci int) bool { return o.LaterCodecs || !o.Codecs[ci].ID.AddedLater() }
	if !slices.ContainsFunc(o.Codecs, func(a codec.Algorithm) bool { return !a.ID.AddedLater() }) {
		eligible = func(int) bool { return true } // only later codecs were asked for
	}
	markFast(p.Codecs, o.Codecs, fastest, fastestPortable)
	anyAdv, anyBest := writeAdvice(&p, values, stored, o.Codecs, eligible, codec.DefaultAlgorithm, o.MinGain)
	p.Advice = anyAdv
	portable := func(ci int) bool { return eligible(ci) && o.Codecs[ci].ID.Portable() }
	if slices.ContainsFunc(o.Codecs, func(a codec.Algorithm) bool { return a.ID.Portable() }) {
		portAdv, portBest := writeAdvice(&p, values, stored, o.Codecs, portable, codec.PortableDefault, o.MinGain)
		p.Profile = profileCost(p.Codecs, portAdv, portBest, anyAdv, anyBest)
		if o.Portable {
			p.Advice = portAdv
			p.Advice.Why = "within the portable profile, " + p.Advice.Why
		}
	}
	adv := &p.Advice
	if o.DictMin > 0 && len(values) >= o.DictMin && p.Median <= dictMaxMedian {
		fit, err := measureDict(values)
		if err != nil {
			return p, err
		}
		if fit != nil {
			p.Dict = fit
			if fit.SavedPctWith >= fit.SavedPctWithout+dictPoints && fit.SavedPctWith >= 100*o.MinGain {
				adv.Dict = true
				adv.Why += fmt.Sprintf("; a trained dictionary takes zstd:1 from %.1f%% to %.1f%%", fit.SavedPctWithout, fit.SavedPctWith)
			}
		}
	}
	return p, nil
}

// writeAdvice is the advice for writes and at rest over the candidates
// eligible lets the advice name, def being the incumbent write codec (see
// writeCodec), and the index of its write codec.
func writeAdvice(p *Prefix, values []Value, stored [][]int, candidates []codec.Algorithm, eligible func(int) bool, def codec.Algorithm, minGain float64) (Advice, int) {
	var adv Advice
	best, incumbent := writeCodec(p.Codecs, candidates, eligible, def)
	strongest := -1
	for ci, c := range p.Codecs {
		if eligible(ci) && (strongest < 0 || c.SavedPct > p.Codecs[strongest].SavedPct) {
			strongest = ci
		}
	}
	w := p.Codecs[best]
	if s := p.Codecs[strongest]; s.SavedPct < 100*minGain {
		// None would do: name the one that saves the most, which sizes
		// decide, not which codec the timings made the fast one.
		adv.Why = fmt.Sprintf("no codec saves the %.0f%% minimum gain (the most: %s, %.1f%%): store these values raw", 100*minGain, s.Codec, s.SavedPct)
		return adv, best
	}
	if w.SavedPct < 100*minGain {
		adv.Why = fmt.Sprintf("the best fast codec (%s) saves %.1f%%, under the %.0f%% minimum gain: store these values raw", w.Codec, w.SavedPct, 100*minGain)
		if s := p.Codecs[strongest]; s.SavedPct >= 100*minGain+atRestPoints {
			adv.AtRest, adv.AtRestSaved = s.Codec, s.SavedPct
			adv.Why += fmt.Sprintf("; %s saves %.1f%% at rest", s.Codec, s.SavedPct)
		}
		return adv, best
	}
	adv.Compress, adv.Write = true, w.Codec
	adv.MinSize = minSize(values, stored[best], minGain)
	adv.SavedPct = savedWithMinSize(values, stored[best], adv.MinSize, minGain, p.MemoryRaw)
	if best == incumbent {
		// No word of a rival under the margin: which codecs are fast
		// is measured, and the advice must read the same every run.
		adv.Why = fmt.Sprintf("%s is the fast codec for writes (%.1f%% from %s up)", w.Codec, adv.SavedPct, sizeName(adv.MinSize))
	} else {
		adv.Why = fmt.Sprintf("%s is the fast codec that saves the most (%.1f%% from %s up), %.1f points more than %s", w.Codec, adv.SavedPct, sizeName(adv.MinSize),
			w.SavedPct-p.Codecs[incumbent].SavedPct, p.Codecs[incumbent].Codec)
	}
	if s := p.Codecs[strongest]; s.SavedPct >= adv.SavedPct+atRestPoints {
		adv.AtRest, adv.AtRestSaved = s.Codec, s.SavedPct
		adv.Why += fmt.Sprintf("; compact cold keys to %s for %.1f%%", s.Codec, s.SavedPct)
	}
	return adv, best
}

// profileCost sets the write advice within the portable profile (port,
// whose write codec is fits[portBest]) beside the one over every codec.
func profileCost(fits []CodecFit, port Advice, portBest int, all Advice, allBest int) *ProfileCost {
	choice := func(a Advice, best int) WriteChoice {
		c := WriteChoice{Compress: a.Compress, Codec: a.Write, MinSize: a.MinSize, SavedPct: a.SavedPct}
		if a.Compress {
			c.EncodeMBs, c.DecodeMBs = fits[best].EncodeMBs, fits[best].DecodeMBs
		}
		return c
	}
	pc := &ProfileCost{Portable: choice(port, portBest), Any: choice(all, allBest)}
	pc.SavedPoints = pc.Any.SavedPct - pc.Portable.SavedPct
	if pc.Portable.Compress && pc.Any.Compress && pc.Any.EncodeMBs > 0 && pc.Any.DecodeMBs > 0 {
		pc.EncodeRatio = pc.Portable.EncodeMBs / pc.Any.EncodeMBs
		pc.DecodeRatio = pc.Portable.DecodeMBs / pc.Any.DecodeMBs
	}
	return pc
}

// markFast marks the fits of the codecs that encode fast enough to write
// with: at least fastShare of the fastest speed measured, or for the
// default codec defaultFast of it, and for the portable profile's default
// defaultFast of the fastest portable codec's.
func markFast(fits []CodecFit, candidates []codec.Algorithm, fastest, fastestPortable float64) {
	for ci := range fits {
		share, of := fastShare, fastest
		switch candidates[ci] {
		case codec.DefaultAlgorithm:
			share = defaultFast
		case codec.PortableDefault:
			share, of = defaultFast, fastestPortable
		}
		fits[ci].Fast = fits[ci].EncodeMBs >= share*of
	}
}

// writeCodec picks the write codec among the measured fits (in the order
// of candidates). The incumbent is the default codec when it is a fast,
// eligible candidate, else the first fast eligible one; the choice is the
// incumbent unless another fast eligible codec saves at least WriteMargin
// points more, then the one saving the most (the first of equals). When
// no eligible codec is fast, the fastest eligible one is both.
func writeCodec(fits []CodecFit, candidates []codec.Algorithm, eligible func(int) bool, def codec.Algorithm) (choice, incumbent int) {
	incumbent, best := -1, -1
	for ci, c := range fits {
		if !c.Fast || !eligible(ci) {
			continue
		}
		if incumbent < 0 || candidates[ci] == def && candidates[incumbent] != def {
			incumbent = ci
		}
		if best < 0 || c.SavedPct > fits[best].SavedPct {
			best = ci
		}
	}
	if incumbent < 0 {
		for ci, c := range fits {
			if eligible(ci) && (incumbent < 0 || c.EncodeMBs > fits[incumbent].EncodeMBs) {
				incumbent = ci
			}
		}
		return incumbent, incumbent
	}
	if fits[best].SavedPct < fits[incumbent].SavedPct+WriteMargin {
		return incumbent, incumbent
	}
	return best, incumbent
}

// measureCodec encodes and decodes every value with a (three rounds, each
// value's best time: the least disturbed by the rest of the machine),
// checks the round trip, and returns the codec's fit and each value's
// frame size with the raw-storage policy off.
func measureCodec(a codec.Algorithm, values []Value, dec *codec.Decoder, p Prefix, o Options) (CodecFit, []int, error) {
	enc, err := codec.NewEncoder(a, codec.WithMinSize(0), codec.WithMinGain(-1))
	if err != nil {
		return CodecFit{}, nil, err
	}
	sz := make([]int, len(values))
	// Each value's best time of the rounds, summed: a round's total
	// takes every pause the scheduler gives the process, and on a busy
	// machine each of three rounds had some (the default codec then
	// measured under a quarter of the fastest, and the advice named
	// another one: TestRun_SameAdviceEveryRun, beside other tests).
	etimes := make([]time.Duration, len(values))
	dtimes := make([]time.Duration, len(values))
	var buf, out []byte
	for round := 0; round < 3; round++ {
		for i, v := range values {
			t0 := time.Now()
			buf = enc.AppendEncode(buf[:0], v.Data)
			t1 := time.Now()
			out, err = dec.AppendDecode(out[:0], buf)
			dt, et := time.Since(t1), t1.Sub(t0)
			if err != nil || string(out) != string(v.Data) {
				return CodecFit{}, nil, fmt.Errorf("advise: %s does not round-trip a value of %q (%v)", a, v.Key, err)
			}
			if round == 0 || et < etimes[i] {
				etimes[i] = et
			}
			if round == 0 || dt < dtimes[i] {
				dtimes[i] = dt
			}
			sz[i] = len(buf)
		}
	}
	fit := CodecFit{Codec: a.String()}
	var et, dt time.Duration
	for i, v := range values {
		fit.Memory += dictstore.ValueMemory(keptSize(len(v.Data), sz[i], o.MinGain))
		et, dt = et+etimes[i], dt+dtimes[i]
	}
	fit.SavedPct = saved(fit.Memory, p.MemoryRaw)
	fit.EncodeMBs = rate(p.Bytes, et)
	fit.DecodeMBs = rate(p.Bytes, dt)
	return fit, sz, nil
}

// keptSize is what the write policy stores for a value of n bytes whose
// frame has f bytes: the frame if it saves at least minGain, else the value.
func keptSize(n, f int, minGain float64) int {
	if float64(f) <= float64(n)*(1-minGain) {
		return f
	}
	return n
}

// minSize returns the smallest power of two from which every group of
// values of sizes [2^k, 2^(k+1)) saves at least minGain with the frames in
// stored. When every group gains, it is the smallest group's lower bound,
// or codec.DefaultMinSize when that is higher: nothing was sampled below
// it to say that smaller values gain.
func minSize(values []Value, stored []int, minGain float64) int {
	var orig, frame [65]int64
	for i, v := range values {
		k := bits.Len(uint(len(v.Data)))
		orig[k] += int64(len(v.Data))
		frame[k] += int64(stored[i])
	}
	from, lowest := 0, -1
	for k := 64; k >= 0; k-- {
		if orig[k] == 0 {
			continue
		}
		lowest = k
		if float64(frame[k]) > float64(orig[k])*(1-minGain) {
			from = k + 1
			break
		}
	}
	if from == 0 {
		if lowest <= 0 {
			return 0
		}
		return min(1<<(lowest-1), codec.DefaultMinSize)
	}
	return 1 << (from - 1)
}

// savedWithMinSize is the memory saved when values from minSize up are
// compressed under the policy.
func savedWithMinSize(values []Value, stored []int, minSize int, minGain float64, raw int64) float64 {
	var mem int64
	for i, v := range values {
		n := len(v.Data)
		if n >= minSize {
			n = keptSize(n, stored[i], minGain)
		}
		mem += dictstore.ValueMemory(n)
	}
	return saved(mem, raw)
}

// measureDict trains a dictionary on four fifths of the values (by a hash
// of their key) and measures zstd:1 with and without it on the rest.
func measureDict(values []Value) (*DictFit, error) {
	var train [][]byte
	var held []Value
	for i, v := range values {
		h := fnv.New32a()
		h.Write([]byte(v.Key))
		h.Write([]byte{byte(i), byte(i >> 8)})
		if h.Sum32()%5 == 0 {
			held = append(held, v)
		} else {
			train = append(train, v.Data)
		}
	}
	if len(train) < 8 || len(held) < 2 {
		return nil, nil
	}
	var total int
	for _, t := range train {
		total += len(t)
	}
	size := min(dictstore.DefaultDictSize, max(256, total/4))
	d, err := dictstore.TrainID(train, size)
	if err != nil {
		return nil, nil // too little or too uniform to train on: no dictionary advice
	}
	zstd1 := codec.Algorithm{ID: codec.IDZstd, Level: 1}
	plain, err := codec.NewEncoder(zstd1)
	if err != nil {
		return nil, err
	}
	withDict, err := codec.NewEncoder(zstd1, codec.WithDictionary(d))
	if err != nil {
		return nil, err
	}
	var raw, without, with int64
	var buf []byte
	for _, v := range held {
		raw += dictstore.ValueMemory(len(v.Data))
		buf = plain.AppendEncode(buf[:0], v.Data)
		without += dictstore.ValueMemory(len(buf))
		buf = withDict.AppendEncode(buf[:0], v.Data)
		with += dictstore.ValueMemory(len(buf))
	}
	return &DictFit{Samples: len(train), HeldOut: len(held), Size: len(d.Data),
		SavedPctWithout: saved(without, raw), SavedPctWith: saved(with, raw)}, nil
}

func saved(mem, raw int64) float64 {
	if raw == 0 {
		return 0
	}
	return 100 * (1 - float64(mem)/float64(raw))
}

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / 1e6 / d.Seconds()
}

func sizeName(n int) string {
	switch {
	case n <= 0:
		return "0 B"
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
