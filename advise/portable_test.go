package advise

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// checkProfile checks what p.Profile says against p's own measurements:
// the portable choice writes a portable codec, saves no more than the
// codec saving the most of those the advice may name, and, when both are
// fast codecs, no more than the margin beyond the choice over every
// codec; its speeds are the measured ones, and the ratios and points are
// computed from them. portable: the advice is the portable choice
// (Options.Portable), else the one over every codec.
func checkProfile(t *testing.T, p Prefix, portable bool) {
	t.Helper()
	pc := p.Profile
	if pc == nil {
		t.Fatalf("%q: no portable profile: %+v", p.Prefix, p)
	}
	fits := map[string]CodecFit{}
	best := 0.0
	for _, c := range p.Codecs {
		fits[c.Codec] = c
		if !codec.MustParseAlgorithm(c.Codec).ID.AddedLater() {
			best = max(best, c.SavedPct)
		}
	}
	advised := pc.Any
	if portable {
		advised = pc.Portable
	}
	if a := p.Advice; a.Compress != advised.Compress || a.Write != advised.Codec || a.MinSize != advised.MinSize || a.SavedPct != advised.SavedPct {
		t.Errorf("%q: advice %+v is not the profile's %+v", p.Prefix, a, advised)
	}
	for _, c := range []WriteChoice{pc.Portable, pc.Any} {
		if !c.Compress {
			if c.Codec != "" || c.EncodeMBs != 0 || c.DecodeMBs != 0 {
				t.Errorf("%q: raw choice with a codec or speeds: %+v", p.Prefix, c)
			}
			continue
		}
		f, ok := fits[c.Codec]
		if !ok || f.EncodeMBs != c.EncodeMBs || f.DecodeMBs != c.DecodeMBs {
			t.Errorf("%q: choice %+v, measured %+v", p.Prefix, c, f)
		}
	}
	if c := pc.Portable; c.Compress {
		if !codec.MustParseAlgorithm(c.Codec).ID.Portable() {
			t.Errorf("%q: portable choice %s is not portable", p.Prefix, c.Codec)
		}
		if f := fits[c.Codec]; f.SavedPct > best {
			t.Errorf("%q: portable %s saves %.1f%%, more than the best codec's %.1f%%", p.Prefix, c.Codec, f.SavedPct, best)
		}
		if pc.Any.Compress && fits[c.Codec].Fast && fits[pc.Any.Codec].Fast && fits[c.Codec].SavedPct >= fits[pc.Any.Codec].SavedPct+WriteMargin {
			t.Errorf("%q: portable fast %s saves %.1f%%, the margin beyond %s's %.1f%%", p.Prefix, c.Codec, fits[c.Codec].SavedPct, pc.Any.Codec, fits[pc.Any.Codec].SavedPct)
		}
	}
	if pc.SavedPoints != pc.Any.SavedPct-pc.Portable.SavedPct {
		t.Errorf("%q: %.2f points for %.2f%% and %.2f%%", p.Prefix, pc.SavedPoints, pc.Any.SavedPct, pc.Portable.SavedPct)
	}
	switch {
	case pc.Portable.Compress && pc.Any.Compress:
		if math.Abs(pc.EncodeRatio-pc.Portable.EncodeMBs/pc.Any.EncodeMBs) > 1e-9 || math.Abs(pc.DecodeRatio-pc.Portable.DecodeMBs/pc.Any.DecodeMBs) > 1e-9 {
			t.Errorf("%q: ratios %.3f, %.3f for %+v", p.Prefix, pc.EncodeRatio, pc.DecodeRatio, pc)
		}
		if pc.Portable.Codec == pc.Any.Codec && (pc.EncodeRatio != 1 || pc.DecodeRatio != 1 || pc.SavedPoints != 0) {
			t.Errorf("%q: one codec, and yet a cost: %+v", p.Prefix, pc)
		}
	case pc.EncodeRatio != 0 || pc.DecodeRatio != 0:
		t.Errorf("%q: speed ratios beside a raw choice: %+v", p.Prefix, pc)
	}
	if portable && p.Advice.AtRest != "" && !codec.MustParseAlgorithm(p.Advice.AtRest).ID.Portable() {
		t.Errorf("%q: portable advice compacts to %s", p.Prefix, p.Advice.AtRest)
	}
}

func TestAnalyze_PortableProfile(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	docs := values(30, "doc:", func(int) []byte { return jsonDoc(r, 4000) })
	imgs := values(20, "img:", func(int) []byte { return randomBytes(r, 3000) })
	for _, c := range []struct {
		name     string
		vals     []Value
		o        Options
		compress bool
	}{
		{"json, advice over every codec", docs, Options{DictMin: -1}, true},
		{"json, advice within the profile", docs, Options{DictMin: -1, Portable: true}, true},
		{"json, portable candidates named", docs, Options{DictMin: -1, Portable: true, Codecs: []codec.Algorithm{codec.MustParseAlgorithm("s2"), codec.MustParseAlgorithm("zstd:1")}}, true},
		{"random bytes stay raw either way", imgs, Options{DictMin: -1}, false},
		{"random bytes within the profile", imgs, Options{DictMin: -1, Portable: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Analyze("k:", c.vals, c.o)
			if err != nil {
				t.Fatal(err)
			}
			checkProfile(t, p, c.o.Portable)
			if p.Profile.Portable.Compress != c.compress || p.Advice.Compress != c.compress {
				t.Fatalf("compress %v, want %v: %+v", p.Profile.Portable.Compress, c.compress, p.Profile)
			}
			if c.o.Portable && !strings.HasPrefix(p.Advice.Why, "within the portable profile") {
				t.Errorf("why: %q", p.Advice.Why)
			}
		})
	}
	t.Run("no portable candidate", func(t *testing.T) {
		goOnly := []codec.Algorithm{codec.MustParseAlgorithm("s2"), codec.MustParseAlgorithm("minlz")}
		if _, err := Analyze("k:", docs, Options{Portable: true, Codecs: goOnly}); err == nil || !strings.Contains(err.Error(), "portable") {
			t.Fatalf("Portable with s2 and minlz only: %v", err)
		}
		p, err := Analyze("k:", docs, Options{DictMin: -1, Codecs: goOnly})
		if err != nil || p.Profile != nil {
			t.Fatalf("without Portable: profile %+v, %v; want none", p.Profile, err)
		}
	})
}

// TestRun_Portable samples a real Redis with Options.Portable: every
// prefix and the overall advice write and compact with portable codecs
// only, the proxy rules name portable codecs, and each profile holds
// together.
func TestRun_Portable(t *testing.T) {
	srv := testutil.StartRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	r := rand.New(rand.NewPCG(11, 12))
	for i := range 30 {
		rdb.Set(ctx, "doc:"+strconv.Itoa(i), jsonDoc(r, 2000+r.IntN(6000)), 0)
		rdb.Set(ctx, "img:"+strconv.Itoa(i), randomBytes(r, 1500), 0)
		rdb.HSet(ctx, "cart:"+strconv.Itoa(i), "a", jsonDoc(r, 300), "b", jsonDoc(r, 700))
	}
	for _, portable := range []bool{false, true} {
		rep, err := Run(ctx, rdb, Options{Portable: portable})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range append(rep.Prefixes, rep.Overall) {
			checkProfile(t, p, portable)
		}
		if !portable {
			continue
		}
		for _, rule := range rep.ProxyRules {
			_, spec, _ := strings.Cut(rule, "=")
			name, _, _ := strings.Cut(spec, ",")
			if a, err := codec.ParseAlgorithm(name); err != nil || !a.ID.Portable() {
				t.Errorf("rule %q: %s is not portable (%v)", rule, name, err)
			}
		}
	}
}
