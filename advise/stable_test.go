package advise

import (
	"context"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

func TestWriteCodec(t *testing.T) {
	algs := func(names ...string) []codec.Algorithm {
		var out []codec.Algorithm
		for _, n := range names {
			out = append(out, codec.MustParseAlgorithm(n))
		}
		return out
	}
	all := func(int) bool { return true }
	type fit = CodecFit
	for _, c := range []struct {
		name              string
		cands             []codec.Algorithm
		fits              []fit
		eligible          func(int) bool
		choice, incumbent int
		def               codec.Algorithm // zero: codec.DefaultAlgorithm
	}{
		{"another codec a point ahead: s2 stays", algs("s2", "lz4"),
			[]fit{{SavedPct: 60, Fast: true}, {SavedPct: 61, Fast: true}}, all, 0, 0, codec.Algorithm{}},
		{"just under the margin: s2 stays", algs("lz4", "s2"),
			[]fit{{SavedPct: 62.9, Fast: true}, {SavedPct: 60, Fast: true}}, all, 1, 1, codec.Algorithm{}},
		{"at the margin: the other", algs("s2", "lz4"),
			[]fit{{SavedPct: 60, Fast: true}, {SavedPct: 63, Fast: true}}, all, 1, 0, codec.Algorithm{}},
		{"a slow codec saving more does not count", algs("s2", "zstd:9"),
			[]fit{{SavedPct: 60, Fast: true}, {SavedPct: 80}}, all, 0, 0, codec.Algorithm{}},
		{"no s2: the first fast candidate is the incumbent", algs("zstd:9", "lz4", "snappy"),
			[]fit{{SavedPct: 80}, {SavedPct: 60, Fast: true}, {SavedPct: 62, Fast: true}}, all, 1, 1, codec.Algorithm{}},
		{"an ineligible codec is never chosen", algs("s2", "minlz"),
			[]fit{{SavedPct: 60, Fast: true}, {SavedPct: 70, Fast: true}}, func(i int) bool { return i == 0 }, 0, 0, codec.Algorithm{}},
		{"no eligible fast codec: the fastest eligible", algs("minlz", "zstd:9", "zstd:3"),
			[]fit{{SavedPct: 60, Fast: true, EncodeMBs: 900}, {SavedPct: 80, EncodeMBs: 40}, {SavedPct: 78, EncodeMBs: 200}},
			func(i int) bool { return i > 0 }, 2, 2, codec.Algorithm{}},
		{"portable: snappy is the incumbent, s2 not eligible", algs("s2", "lz4", "snappy"),
			[]fit{{SavedPct: 61, Fast: true}, {SavedPct: 62, Fast: true}, {SavedPct: 60, Fast: true}},
			func(i int) bool { return i > 0 }, 2, 2, codec.PortableDefault},
		{"portable: another portable codec at the margin", algs("s2", "lz4", "snappy"),
			[]fit{{SavedPct: 61, Fast: true}, {SavedPct: 63, Fast: true}, {SavedPct: 60, Fast: true}},
			func(i int) bool { return i > 0 }, 1, 2, codec.PortableDefault},
	} {
		t.Run(c.name, func(t *testing.T) {
			def := c.def
			if def == (codec.Algorithm{}) {
				def = codec.DefaultAlgorithm
			}
			choice, incumbent := writeCodec(c.fits, c.cands, c.eligible, def)
			if choice != c.choice || incumbent != c.incumbent {
				t.Fatalf("choice %d, incumbent %d; want %d, %d", choice, incumbent, c.choice, c.incumbent)
			}
		})
	}
}

// TestAnalyze_LaterCodecsNotAdvised: with the default candidates, minlz is
// measured but never advised, for writes or at rest, although it saves
// more than s2 on JSON; with LaterCodecs it may be.
func TestAnalyze_LaterCodecsNotAdvised(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	vals := values(30, "doc:", func(int) []byte { return jsonDoc(r, 4000) })
	p, err := Analyze("doc:", vals, Options{DictMin: -1})
	if err != nil {
		t.Fatal(err)
	}
	measured := false
	for _, c := range p.Codecs {
		measured = measured || codec.MustParseAlgorithm(c.Codec).ID == codec.IDMinLZ
	}
	if !measured {
		t.Fatalf("minlz not measured: %+v", p.Codecs)
	}
	for _, name := range []string{p.Advice.Write, p.Advice.AtRest} {
		if a, err := codec.ParseAlgorithm(name); err == nil && a.ID.AddedLater() {
			t.Fatalf("advised %s, which older readers cannot read: %+v", name, p.Advice)
		}
	}
	// Only later codecs asked for: they are what there is to advise.
	p, err = Analyze("doc:", vals, Options{DictMin: -1, Codecs: []codec.Algorithm{codec.MustParseAlgorithm("minlz")}})
	if err != nil || !p.Advice.Compress || codec.MustParseAlgorithm(p.Advice.Write).ID != codec.IDMinLZ {
		t.Fatalf("%v: %+v", err, p.Advice)
	}
}

// TestRun_SameAdviceEveryRun: the sample and the advice are the same on
// every run over the same data, hashes with more fields than --per-key
// included (HRANDFIELD drew other fields each run), whatever the timings;
// so is the advice within the portable profile.
func TestRun_SameAdviceEveryRun(t *testing.T) {
	srv := testutil.StartRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 30 {
		rdb.Set(ctx, "doc:"+strconv.Itoa(i), jsonDoc(r, 2000+r.IntN(6000)), 0)
		rdb.Set(ctx, "img:"+strconv.Itoa(i), randomBytes(r, 1500), 0)
	}
	for i := range 4 {
		fields := map[string]any{}
		for f := range 300 { // a hashtable, sampled PerKey fields at a time
			fields["f"+strconv.Itoa(f)] = jsonDoc(r, 100+r.IntN(3000))
		}
		rdb.HSet(ctx, "cart:"+strconv.Itoa(i), fields)
	}
	type summary struct {
		Values   int
		Bytes    int64
		Advice   []Advice
		Overall  Advice
		Rules    []string
		Prefixes []string
		Portable []WriteChoice // the advice within the portable profile, speeds left out
	}
	portable := func(p Prefix) WriteChoice {
		if p.Profile == nil {
			return WriteChoice{}
		}
		c := p.Profile.Portable
		c.EncodeMBs, c.DecodeMBs = 0, 0
		return c
	}
	sum := func(rep Report) summary {
		s := summary{Values: rep.Values, Bytes: rep.Bytes, Overall: rep.Overall.Advice, Rules: rep.ProxyRules,
			Portable: []WriteChoice{portable(rep.Overall)}}
		for _, p := range rep.Prefixes {
			s.Prefixes = append(s.Prefixes, p.Prefix)
			s.Advice = append(s.Advice, p.Advice)
			s.Portable = append(s.Portable, portable(p))
		}
		return s
	}
	var first summary
	for run := range 4 {
		rep, err := Run(ctx, rdb, Options{PerKey: 20})
		if err != nil {
			t.Fatal(err)
		}
		s := sum(rep)
		if run == 0 {
			first = s
			if s.Values != 60+4*20 {
				t.Fatalf("sampled %d values, want 140 (20 fields of each hash)", s.Values)
			}
			continue
		}
		if !reflect.DeepEqual(s, first) {
			t.Fatalf("run %d advised otherwise:\n%+v\nfirst:\n%+v", run+1, s, first)
		}
	}
}

// TestMarkFast: a codec is fast at half the fastest's speed; the default
// codec at a quarter, so that a run on a busy machine, which measured s2
// at 40% of lz4's speed, still advises it (the advice flipped to lz4 in
// one of four runs during a test suite); snappy, the portable profile's,
// at a quarter of the fastest portable codec's (measured against s2, it
// dropped out in a run during CI, and lz4 a point ahead took its place).
func TestMarkFast(t *testing.T) {
	candidates := []codec.Algorithm{codec.DefaultAlgorithm, codec.MustParseAlgorithm("lz4"), codec.MustParseAlgorithm("zstd:9"), codec.PortableDefault}
	for _, tt := range []struct {
		speeds []float64
		want   []bool
	}{
		{[]float64{900, 1000, 100, 900}, []bool{true, true, false, true}},
		{[]float64{400, 1000, 100, 400}, []bool{true, true, false, true}}, // snappy, s2's portable stand-in, as lenient
		{[]float64{200, 1000, 600, 200}, []bool{false, true, true, false}},
		{[]float64{1000, 450, 100, 300}, []bool{true, false, false, true}},
		{[]float64{1000, 400, 100, 150}, []bool{true, false, false, true}}, // s2 far ahead: snappy against lz4
	} {
		fits := make([]CodecFit, len(tt.speeds))
		fastest, fastestPortable := 0.0, 0.0
		for i, v := range tt.speeds {
			fits[i].EncodeMBs, fastest = v, max(fastest, v)
			if candidates[i].ID.Portable() {
				fastestPortable = max(fastestPortable, v)
			}
		}
		markFast(fits, candidates, fastest, fastestPortable)
		for i := range fits {
			if fits[i].Fast != tt.want[i] {
				t.Errorf("speeds %v: %s fast %v, want %v", tt.speeds, candidates[i], fits[i].Fast, tt.want[i])
			}
		}
	}
}
