package advise

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// jsonDoc is a JSON document of about n bytes, like an API's.
func jsonDoc(r *rand.Rand, n int) []byte {
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"user %d","country":"%s","plan":"%s","active":%v,"score":%d.%02d}`,
			r.IntN(1e6), r.IntN(1e4), []string{"DE", "FR", "US", "JP"}[r.IntN(4)], []string{"free", "pro", "team"}[r.IntN(3)], r.IntN(2) == 0, r.IntN(100), r.IntN(100))
	}
	b.WriteString("]}")
	return []byte(b.String())
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

func values(n int, key string, gen func(i int) []byte) []Value {
	out := make([]Value, n)
	for i := range out {
		out[i] = Value{Key: key + strconv.Itoa(i), Data: gen(i)}
	}
	return out
}

func TestAnalyze(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	t.Run("json compresses", func(t *testing.T) {
		p, err := Analyze("doc:", values(30, "doc:", func(int) []byte { return jsonDoc(r, 4000) }), Options{DictMin: -1})
		if err != nil {
			t.Fatal(err)
		}
		a := p.Advice
		if !a.Compress || a.SavedPct < 50 || a.MinSize > 4096 {
			t.Fatalf("%+v", a)
		}
		var fast bool
		for _, c := range p.Codecs {
			if c.Codec == a.Write {
				fast = c.Fast
			}
			if c.SavedPct <= 0 || c.EncodeMBs <= 0 || c.DecodeMBs <= 0 {
				t.Errorf("codec %+v measured nothing", c)
			}
		}
		if !fast {
			t.Fatalf("write codec %s is not a fast one: %+v", a.Write, p.Codecs)
		}
		if a.AtRest != "" && a.AtRestSaved < a.SavedPct+atRestPoints {
			t.Fatalf("at rest %s saves %.1f, write %.1f", a.AtRest, a.AtRestSaved, a.SavedPct)
		}
		if p.Values != 30 || p.Median < 4000 || p.MemoryRaw < p.Bytes {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("random stays raw", func(t *testing.T) {
		p, err := Analyze("img:", values(20, "img:", func(int) []byte { return randomBytes(r, 3000) }), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Advice.Compress || p.Advice.AtRest != "" || !strings.Contains(p.Advice.Why, "store these values raw") {
			t.Fatalf("%+v", p.Advice)
		}
	})
	t.Run("small values set the min size", func(t *testing.T) {
		vals := values(40, "k:", func(i int) []byte {
			if i%2 == 0 {
				return randomBytes(r, 20+i) // ids and tokens: no gain
			}
			return jsonDoc(r, 2000)
		})
		p, err := Analyze("k:", vals, Options{DictMin: -1})
		if err != nil {
			t.Fatal(err)
		}
		if !p.Advice.Compress || p.Advice.MinSize < 64 || p.Advice.MinSize > 2048 {
			t.Fatalf("%+v", p.Advice)
		}
	})
	t.Run("dictionary for small similar values", func(t *testing.T) {
		p, err := Analyze("user:", values(300, "user:", func(int) []byte { return jsonDoc(r, 200) }), Options{Codecs: []codec.Algorithm{codec.MustParseAlgorithm("s2")}})
		if err != nil {
			t.Fatal(err)
		}
		if p.Dict == nil || p.Dict.HeldOut == 0 || !p.Advice.Dict || p.Dict.SavedPctWith < p.Dict.SavedPctWithout+dictPoints {
			t.Fatalf("dict %+v, advice %+v", p.Dict, p.Advice)
		}
	})
	t.Run("nothing sampled", func(t *testing.T) {
		p, err := Analyze("set:", nil, Options{})
		if err != nil || p.Advice.Compress || p.Advice.Why == "" {
			t.Fatalf("%+v %v", p, err)
		}
	})
}

func TestAnalyze_BadOptions(t *testing.T) {
	for _, o := range []Options{{Codecs: []codec.Algorithm{{ID: codec.IDNone}}}, {MinGain: 1.5}} {
		if _, err := Analyze("x", nil, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestMinSize(t *testing.T) {
	v := func(n int) Value { return Value{Data: make([]byte, n)} }
	for _, c := range []struct {
		vals   []Value
		stored []int
		want   int
	}{
		{[]Value{v(100), v(5000)}, []int{50, 1000}, 64},            // everything gains: the default, nothing seen below it
		{[]Value{v(40), v(5000)}, []int{30, 1000}, 32},             // everything gains, seen from 32 up
		{[]Value{v(20), v(100), v(5000)}, []int{25, 50, 1000}, 32}, // 20 B grows: from 32 up
		{[]Value{v(20), v(100), v(5000)}, []int{25, 99, 1000}, 128},
		{[]Value{v(100), v(5000)}, []int{50, 4990}, 8192}, // the largest do not gain
	} {
		if got := minSize(c.vals, c.stored, 0.1); got != c.want {
			t.Errorf("minSize(%v) = %d, want %d", c.stored, got, c.want)
		}
	}
}

func TestPrefixOf(t *testing.T) {
	for _, c := range []struct {
		key, sep string
		depth    int
		want     string
	}{
		{"user:42", ":", 1, "user:"},
		{"user:42:profile", ":", 2, "user:42:"},
		{"user:42", ":", 2, "user:"},
		{"plain", ":", 1, ""},
		{"a/b/c", "/", 1, "a/"},
		{"a::b", "::", 1, "a::"},
	} {
		if got := PrefixOf(c.key, c.sep, c.depth); got != c.want {
			t.Errorf("PrefixOf(%q, %q, %d) = %q, want %q", c.key, c.sep, c.depth, got, c.want)
		}
	}
	if got := (Prefix{Prefix: "a*b:"}).Pattern(); got != `a\*b:*` {
		t.Errorf("Pattern = %q", got)
	}
}

// TestRun samples a real Redis holding JSON documents (strings, hashes,
// lists, some already stored as squeeze frames), random bytes and a set,
// and checks the advice per prefix and that nothing was written.
func TestRun(t *testing.T) {
	srv := testutil.StartRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	r := rand.New(rand.NewPCG(3, 4))
	s2, err := codec.NewEncoder(codec.MustParseAlgorithm("s2"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		doc := jsonDoc(r, 3000)
		if i%4 == 0 {
			doc = s2.AppendEncode(nil, doc) // written by squeeze already
		}
		rdb.Set(ctx, "doc:"+strconv.Itoa(i), doc, 0)
		rdb.Set(ctx, "img:"+strconv.Itoa(i), randomBytes(r, 2000), 0)
	}
	for i := range 5 {
		rdb.HSet(ctx, "cart:"+strconv.Itoa(i), "a", jsonDoc(r, 500), "b", jsonDoc(r, 800))
		rdb.RPush(ctx, "log:"+strconv.Itoa(i), jsonDoc(r, 300), jsonDoc(r, 300))
		rdb.SAdd(ctx, "tags:"+strconv.Itoa(i), "x", "y")
	}
	// Frames of a codec this build does not know, as a later release
	// might write them.
	future := append(codec.AppendHeader(nil, codec.Header{ID: 0x7f, OriginalLen: 5}), "?????"...)
	for i := range 3 {
		rdb.Set(ctx, "next:"+strconv.Itoa(i), future, 0)
	}
	dirty := func() string {
		info := rdb.Info(ctx, "persistence").Val()
		for _, l := range strings.Split(info, "\r\n") {
			if strings.HasPrefix(l, "rdb_changes_since_last_save:") {
				return l
			}
		}
		t.Fatal("no rdb_changes_since_last_save in INFO")
		return ""
	}
	before := dirty()
	var steps int
	var stages []string
	var last [2]int // done, total of the last call
	rep, err := Run(ctx, rdb, Options{Progress: func(stage string, done, total int) {
		steps++
		if len(stages) == 0 || stages[len(stages)-1] != stage {
			stages = append(stages, stage)
		}
		if done > total {
			t.Errorf("progress %q: %d of %d", stage, done, total)
		}
		last = [2]int{done, total}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if after := dirty(); after != before {
		t.Fatalf("advise wrote to Redis: %s, then %s", before, after)
	}
	if rep.KeysScanned != 98 || rep.KeysSampled != 93 || steps == 0 {
		t.Fatalf("scanned %d, sampled %d keys, %d progress calls", rep.KeysScanned, rep.KeysSampled, steps)
	}
	// Sampling, then each prefix, then all together, which ends the run.
	if len(stages) != len(rep.Prefixes)+2 || stages[0] != "sampling keys" || stages[len(stages)-1] != "measuring codecs on all prefixes together" || last[0] != last[1] {
		t.Errorf("progress stages %q, last %d of %d", stages, last[0], last[1])
	}
	by := map[string]Prefix{}
	for _, p := range rep.Prefixes {
		by[p.Prefix] = p
	}
	if p := by["doc:"]; !p.Advice.Compress || p.Framed != 10 || p.Values != 40 || p.Median < 3000 || p.MemoryUsage < 40*1000 ||
		len(p.StoredCodecs) != 1 || p.StoredCodecs["s2"] != 10 || p.Undecodable != 0 {
		t.Fatalf("doc: %+v", p)
	}
	if p := by["next:"]; p.Values != 0 || p.Undecodable != 3 || p.StoredCodecs["codec(0x7f)"] != 3 ||
		!strings.Contains(p.UndecodableWhy, "unknown codec") || p.Advice.Compress {
		t.Fatalf("next: %+v", p)
	}
	if p := by["img:"]; p.Advice.Compress {
		t.Fatalf("img: %+v", p.Advice)
	}
	if p := by["cart:"]; p.Values != 10 || p.Types["hash"] != 5 || !p.Advice.Compress {
		t.Fatalf("cart: %+v", p)
	}
	if p := by["log:"]; p.Values != 10 || p.Types["list"] != 5 {
		t.Fatalf("log: %+v", p)
	}
	if p := by["tags:"]; p.Values != 0 || p.Types["set"] != 5 || p.Advice.Compress {
		t.Fatalf("tags: %+v", p)
	}
	if rep.Prefixes[0].Prefix != "doc:" && rep.Prefixes[0].Prefix != "img:" {
		t.Fatalf("prefixes not by memory: first %q", rep.Prefixes[0].Prefix)
	}
	// The default policy is for the prefixes that compress; the random
	// images get a rule that stores them raw.
	if o := rep.Overall; o.Values != rep.Values-by["img:"].Values || !o.Advice.Compress || o.Dict != nil {
		t.Fatalf("overall %+v", o)
	}
	if !slices.Contains(rep.ProxyRules, "img:=none") {
		t.Fatalf("proxy rules %q, want img:=none among them", rep.ProxyRules)
	}
}

func TestProxyRules(t *testing.T) {
	overall := Advice{Compress: true, Write: "s2:default", MinSize: 2048}
	pre := func(name string, lo, hi int, a Advice) Prefix {
		return Prefix{Prefix: name, Values: 10, Smallest: lo, Largest: hi, Advice: a}
	}
	prefixes := []Prefix{
		pre("img:", 1000, 9000, Advice{}), // raw, and big enough to be tried: none
		pre("token:", 16, 16, Advice{}),   // raw, never tried: no rule
		pre("session:", 300, 5000, Advice{Compress: true, Write: "zstd:3", MinSize: 256}), // another codec
		pre("doc:", 4000, 4200, Advice{Compress: true, Write: "s2:default", MinSize: 0}),  // same outcome on every value
		pre("cart:", 100, 3000, Advice{Compress: true, Write: "s2:default", MinSize: 64}), // compresses 100..2047 too
		pre("a;b:", 1000, 9000, Advice{}),                                                 // a rule cannot name it
		pre("", 1000, 9000, Advice{}),
	}
	got := ProxyRules(prefixes, overall)
	want := []string{"img:=none", "session:=zstd:3,min-size=256", "cart:=s2:default,min-size=64"}
	if !slices.Equal(got, want) {
		t.Errorf("rules %q, want %q", got, want)
	}
	// Overall advice not to compress: every compressing prefix needs a rule.
	got = ProxyRules(prefixes, Advice{})
	want = []string{"session:=zstd:3,min-size=256", "doc:=s2:default,min-size=0", "cart:=s2:default,min-size=64"}
	if !slices.Equal(got, want) {
		t.Errorf("no overall compression: rules %q, want %q", got, want)
	}
}
