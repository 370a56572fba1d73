package dictstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// profiles returns n small JSON documents that share their structure, as
// the values of one key pattern do.
func profiles(n int, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 7))
	countries := []string{"DE", "FR", "US", "JP", "BR", "IN", "NG"}
	plans := []string{"free", "pro", "team", "enterprise"}
	tags := []string{"early-adopter", "newsletter", "beta-tester", "support-vip", "churn-risk", "referral"}
	docs := make([][]byte, n)
	for i := range docs {
		var b bytes.Buffer
		fmt.Fprintf(&b, `{"user_id":%d,"email":"user%d@example.com","country":"%s","plan":"%s",`,
			r.IntN(1e7), r.IntN(1e6), countries[r.IntN(len(countries))], plans[r.IntN(len(plans))])
		fmt.Fprintf(&b, `"created_at":"2025-%02d-%02dT%02d:%02d:%02dZ","last_login":"2026-11-%02dT%02d:%02d:00Z",`,
			1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), 1+r.IntN(28), r.IntN(24), r.IntN(60))
		fmt.Fprintf(&b, `"preferences":{"language":"%s","timezone":"Europe/Berlin","dark_mode":%v,"notifications":{"email":%v,"push":%v,"sms":false}},`,
			[]string{"en", "de", "fr", "ja"}[r.IntN(4)], r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0)
		b.WriteString(`"tags":[`)
		for j := range 1 + r.IntN(3) {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%s"`, tags[r.IntN(len(tags))])
		}
		fmt.Fprintf(&b, `],"cart":{"items":%d,"currency":"EUR","total_cents":%d},"session":"%016x"}`, r.IntN(9), r.IntN(100000), r.Uint64())
		docs[i] = b.Bytes()
	}
	return docs
}

func newClient(t *testing.T) *redis.Client {
	t.Helper()
	srv := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func fill(t *testing.T, rdb *redis.Client, prefix string, docs [][]byte) {
	t.Helper()
	ctx := context.Background()
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, d := range docs {
			p.Set(ctx, fmt.Sprintf("%s%05d", prefix, i), d, 0)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func mustTrain(t *testing.T, id uint32, docs [][]byte) codec.Dictionary {
	t.Helper()
	d, err := codec.TrainDictionary(id, docs, 8<<10)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestPublishLoad(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	d := mustTrain(t, 40001, profiles(300, 1))
	if err := Publish(ctx, rdb, d, Meta{Pattern: "user:*", Samples: 300}); err != nil {
		t.Fatal(err)
	}
	got, err := Load(ctx, rdb, 40001)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != d.ID || !bytes.Equal(got.Data, d.Data) {
		t.Fatalf("loaded dictionary %d (%d bytes), want %d (%d bytes)", got.ID, len(got.Data), d.ID, len(d.Data))
	}
	metas, err := List(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) != 1 || metas[0].ID != 40001 || metas[0].Size != len(d.Data) || metas[0].Pattern != "user:*" || metas[0].Created.IsZero() {
		t.Fatalf("List = %+v", metas)
	}
	// Publishing the same bytes again is fine and keeps the first metadata.
	if err := Publish(ctx, rdb, d, Meta{Pattern: "other:*"}); err != nil {
		t.Fatalf("republish same bytes: %v", err)
	}
	if metas, _ := List(ctx, rdb); len(metas) != 1 || metas[0].Pattern != "user:*" {
		t.Fatalf("metadata after republish: %+v", metas)
	}
}

func TestPublish_Immutable(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	d1 := mustTrain(t, 40002, profiles(300, 1))
	d2 := mustTrain(t, 40002, profiles(300, 2))
	if bytes.Equal(d1.Data, d2.Data) {
		t.Fatal("test needs two different dictionaries")
	}
	if err := Publish(ctx, rdb, d1, Meta{}); err != nil {
		t.Fatal(err)
	}
	err := Publish(ctx, rdb, d2, Meta{})
	if err == nil || !strings.Contains(err.Error(), "40002") || !strings.Contains(err.Error(), "already published") {
		t.Fatalf("publishing other bytes under a taken id: %v", err)
	}
	got, err := Load(ctx, rdb, 40002)
	if err != nil || !bytes.Equal(got.Data, d1.Data) {
		t.Fatalf("the first bytes must stay: %v", err)
	}
}

func TestPublish_Invalid(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	d := mustTrain(t, 40003, profiles(300, 1))
	tests := []struct {
		name string
		d    codec.Dictionary
		want string
	}{
		{"id mismatch", codec.Dictionary{ID: 40004, Data: d.Data}, "carry id 40003"},
		{"not a dictionary", codec.Dictionary{ID: 40003, Data: []byte("hello")}, "not a zstd dictionary"},
		{"id zero", codec.Dictionary{ID: 0, Data: d.Data}, "out of range"},
		{"id too large", codec.Dictionary{ID: 1 << 31, Data: d.Data}, "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Publish(ctx, rdb, tt.d, Meta{}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if n, _ := rdb.DBSize(ctx).Result(); n != 0 {
		t.Fatalf("invalid dictionaries wrote %d keys", n)
	}
}

func TestLoad_Errors(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	_, err := Load(ctx, rdb, 40005)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "40005") || !strings.Contains(err.Error(), "squeeze:dict:40005") {
		t.Fatalf("missing dictionary: %v", err)
	}
	rdb.Set(ctx, Key(40006), "garbage", 0)
	if _, err := Load(ctx, rdb, 40006); err == nil || !strings.Contains(err.Error(), "not a zstd dictionary") {
		t.Fatalf("garbage dictionary: %v", err)
	}
	rdb.HSet(ctx, IndexKey, "40007", "{not json")
	if _, err := List(ctx, rdb); err == nil || !strings.Contains(err.Error(), "40007") {
		t.Fatalf("bad metadata: %v", err)
	}
}

func TestTrain(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	docs := profiles(1500, 3)
	fill(t, rdb, "user:", docs)
	fill(t, rdb, "other:", profiles(50, 4)) // not matched
	// A hash and a value squeeze already compressed are sampled too.
	enc, _ := codec.NewEncoder(codec.MustParseAlgorithm("zstd:1"), codec.WithMinSize(0), codec.WithMinGain(-1))
	rdb.Set(ctx, "user:framed", enc.AppendEncode(nil, docs[0]), 0)
	rdb.HSet(ctx, "user:hash", "a", docs[1], "b", docs[2])

	d, rep, err := Train(ctx, rdb, "user:*", TrainOptions{Samples: 1000, Size: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report: %+v", rep)
	if d.ID < MinUserID || d.ID > MaxID || rep.ID != d.ID || rep.Size != len(d.Data) || rep.Size > 16<<10 {
		t.Fatalf("dictionary %d of %d bytes, report %+v", d.ID, len(d.Data), rep)
	}
	if rep.Samples+rep.HeldOut != 1000 || rep.HeldOut < 100 || rep.HeldOut > 300 {
		t.Fatalf("samples %d, held out %d: want 1000 in all, about a fifth held out", rep.Samples, rep.HeldOut)
	}
	if rep.StoredWith*2 > rep.StoredWithout {
		t.Errorf("held-out bytes with dictionary %d, want under half of %d without", rep.StoredWith, rep.StoredWithout)
	}
	without, with := rep.SavedPct()
	if with <= without || with <= 0 {
		t.Errorf("memory saved %.1f%% with dictionary, %.1f%% without", with, without)
	}
	// The id follows from the bytes.
	if d.ID != DeriveID(d.Data) {
		t.Fatalf("id %d, DeriveID %d", d.ID, DeriveID(d.Data))
	}
	// Train changes nothing in Redis.
	if n, _ := rdb.DBSize(ctx).Result(); n != 1500+50+2 {
		t.Fatalf("%d keys after training", n)
	}
	// The published dictionary decodes frames written with it.
	if err := Publish(ctx, rdb, d, rep.Meta()); err != nil {
		t.Fatal(err)
	}
	metas, err := List(ctx, rdb)
	if err != nil || len(metas) != 1 || metas[0].RatioWith != rep.RatioWith || metas[0].Samples != rep.Samples {
		t.Fatalf("List after publish: %+v, %v", metas, err)
	}
}

func TestTrain_Errors(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	fill(t, rdb, "few:", profiles(5, 1))
	if _, _, err := Train(ctx, rdb, "few:*", TrainOptions{}); err == nil || !strings.Contains(err.Error(), "usable values") {
		t.Fatalf("5 values: %v", err)
	}
	if _, _, err := Train(ctx, rdb, "none:*", TrainOptions{}); err == nil {
		t.Fatal("no values: no error")
	}
	if _, _, err := Train(ctx, rdb, "few:*", TrainOptions{Algorithm: codec.MustParseAlgorithm("lz4")}); err == nil || !strings.Contains(err.Error(), "zstd") {
		t.Fatalf("lz4: %v", err)
	}
}

func TestDeriveID(t *testing.T) {
	d, err := TrainID(profiles(300, 1), 4096)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != DeriveID(d.Data) || d.ID < MinUserID {
		t.Fatalf("id %d, DeriveID %d", d.ID, DeriveID(d.Data))
	}
	other, err := TrainID(profiles(300, 2), 4096)
	if err != nil {
		t.Fatal(err)
	}
	if other.ID == d.ID {
		t.Fatalf("two different dictionaries share id %d", d.ID)
	}
}

// TestTrainID_Deterministic: the same samples give the same dictionary and
// id on every run, so the id "dict train" shows before --publish is the one
// --publish stores. (The builder this replaced walked Go maps, and gave
// another id nearly every time.)
func TestTrainID_Deterministic(t *testing.T) {
	samples := profiles(500, 3)
	first, err := TrainID(samples, 8192)
	if err != nil {
		t.Fatal(err)
	}
	for range 8 {
		d, err := TrainID(samples, 8192)
		if err != nil {
			t.Fatal(err)
		}
		if d.ID != first.ID || !bytes.Equal(d.Data, first.Data) {
			t.Fatalf("trained %d, then %d, on the same samples", first.ID, d.ID)
		}
	}
}

// TestTrain_SameIDTwice: training twice on the same keys in Redis gives the
// same id, as dict train promises.
func TestTrain_SameIDTwice(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	fill(t, rdb, "user:", profiles(400, 4))
	a, _, err := Train(ctx, rdb, "user:*", TrainOptions{Size: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := Train(ctx, rdb, "user:*", TrainOptions{Size: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != b.ID {
		t.Fatalf("ids %d and %d", a.ID, b.ID)
	}
}

// frameWith compresses doc with dictionary d.
func frameWith(t *testing.T, d codec.Dictionary, doc []byte) []byte {
	t.Helper()
	enc, err := codec.NewEncoder(codec.MustParseAlgorithm("zstd:1"), codec.WithDictionary(d), codec.WithMinGain(-1))
	if err != nil {
		t.Fatal(err)
	}
	f := enc.AppendEncode(nil, doc)
	if h, err := codec.ParseHeader(f); err != nil || !h.HasDict {
		t.Fatalf("frame without dictionary: %+v %v", h, err)
	}
	return f
}

func TestResolver_LoadsLater(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	r, err := NewResolver(rdb)
	if err != nil {
		t.Fatal(err)
	}
	// Published after the resolver started.
	d := mustTrain(t, 40010, profiles(300, 1))
	if err := Publish(ctx, rdb, d, Meta{}); err != nil {
		t.Fatal(err)
	}
	doc := profiles(1, 9)[0]
	frame := frameWith(t, d, doc)
	dec := r.Decoder()
	if _, err := dec.AppendDecode(nil, frame); !errors.Is(err, codec.ErrUnknownDictionary) {
		t.Fatalf("before refresh: %v", err)
	}
	dec, err = r.Refresh(ctx, 40010)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dec.AppendDecode(nil, frame)
	if err != nil || !bytes.Equal(got, doc) {
		t.Fatalf("after refresh: %v", err)
	}
	if r.Decoder() != dec || !r.Known(40010) {
		t.Fatal("the resolver does not hand out the new decoder")
	}
	// The convenience loop, with a second dictionary published later still.
	d2 := mustTrain(t, 40011, profiles(300, 2))
	if err := Publish(ctx, rdb, d2, Meta{}); err != nil {
		t.Fatal(err)
	}
	got, err = r.AppendDecode(ctx, []byte("prefix:"), frameWith(t, d2, doc))
	if err != nil || string(got) != "prefix:"+string(doc) {
		t.Fatalf("AppendDecode: %q, %v", got, err)
	}
	// Both stay known.
	if _, err := r.Decoder().AppendDecode(nil, frame); err != nil {
		t.Fatalf("first dictionary forgotten: %v", err)
	}
}

func TestResolver_Preload(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	for i, id := range []uint32{40020, 40021} {
		if err := Publish(ctx, rdb, mustTrain(t, id, profiles(300, uint64(i))), Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := NewResolver(rdb)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Preload(ctx); err != nil {
		t.Fatal(err)
	}
	if !r.Known(40020) || !r.Known(40021) {
		t.Fatal("Preload left a dictionary out")
	}
}

func TestResolver_ConcurrentRefresh(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	r, err := NewResolver(rdb)
	if err != nil {
		t.Fatal(err)
	}
	d := mustTrain(t, 40030, profiles(300, 1))
	if err := Publish(ctx, rdb, d, Meta{}); err != nil {
		t.Fatal(err)
	}
	doc := profiles(1, 9)[0]
	frame := frameWith(t, d, doc)
	before, _ := rdb.InfoMap(ctx, "commandstats").Result()
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			got, err := r.AppendDecode(ctx, nil, frame)
			if err == nil && !bytes.Equal(got, doc) {
				err = errors.New("wrong bytes")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	after, _ := rdb.InfoMap(ctx, "commandstats").Result()
	gets := func(m map[string]map[string]string) string { return m["Commandstats"]["cmdstat_get"] }
	t.Logf("GET stats before %q after %q", gets(before), gets(after))
	if !strings.HasPrefix(gets(after), "calls=1,") {
		t.Errorf("%d concurrent refreshes sent GET stats %q, want one load", n, gets(after))
	}
}

func TestResolver_Missing(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	r, err := NewResolver(rdb)
	if err != nil {
		t.Fatal(err)
	}
	d := mustTrain(t, 40040, profiles(300, 1)) // never published
	frame := frameWith(t, d, profiles(1, 2)[0])
	_, err = r.AppendDecode(ctx, nil, frame)
	if !errors.Is(err, codec.ErrUnknownDictionary) || !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "squeeze:dict:40040") {
		t.Fatalf("missing dictionary: %v", err)
	}
	if _, err := r.Refresh(ctx, 0); err == nil {
		t.Fatal("id 0 accepted")
	}
	if _, err := r.Refresh(ctx, 1<<40); err == nil || !strings.Contains(err.Error(), "1099511627776") {
		t.Fatalf("huge id: %v", err)
	}
	// Published now: after the failure is forgotten (a second), it loads.
	if err := Publish(ctx, rdb, d, Meta{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err = r.Refresh(ctx, 40040)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("after publishing: %v", err)
	}
}

func TestResolver_DecoderAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never used
	defer rdb.Close()
	r, err := NewResolver(rdb)
	if err != nil {
		t.Fatal(err)
	}
	d := mustTrain(t, 40050, profiles(300, 1))
	if err := r.Add(d); err != nil {
		t.Fatal(err)
	}
	frame := frameWith(t, d, profiles(1, 2)[0])
	out := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() {
		out, _ = r.Decoder().AppendDecode(out[:0], frame)
	}); n != 0 {
		t.Fatalf("hot path allocates %v times", n)
	}
}

func TestValueMemory(t *testing.T) {
	tests := []struct {
		n    int
		want int64
	}{
		{0, 8}, {4, 8}, {5, 16}, {100, 112}, {124, 128}, {125, 160}, {16600, 20480}, {47500, 49152},
	}
	for _, tt := range tests {
		if got := ValueMemory(tt.n); got != tt.want {
			t.Errorf("ValueMemory(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}

func TestIsStoreKey(t *testing.T) {
	for key, want := range map[string]bool{Key(40001): true, IndexKey: true, "squeeze:bench:x": false, "user:1": false, "squeeze:dic": false} {
		if IsStoreKey(key) != want {
			t.Errorf("IsStoreKey(%q) = %v", key, !want)
		}
	}
}

// TestTrainID_LargeSamples: samples above 128 KiB are cut, not a panic of
// the zstd dictionary builder.
func TestTrainID_LargeSamples(t *testing.T) {
	var samples [][]byte
	for _, p := range profiles(1600, 5) {
		if len(samples) == 0 || len(samples[len(samples)-1]) > 250<<10 {
			samples = append(samples, nil)
		}
		samples[len(samples)-1] = append(samples[len(samples)-1], p...)
	}
	for len(samples) < 8 {
		samples = append(samples, samples...)
	}
	if _, err := TrainID(samples, MaxDictSize); err != nil {
		t.Fatal(err)
	}
	if _, err := TrainID(samples, MaxDictSize+1); err == nil {
		t.Fatal("dictionary size above MaxDictSize accepted")
	}
}
