package compact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/dictstore"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

func newClient(t *testing.T, args ...string) *redis.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	r := testutil.StartRedis(t, args...)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func encoder(t *testing.T, alg string, opts ...codec.EncoderOption) *codec.Encoder {
	t.Helper()
	e, err := codec.NewEncoder(codec.MustParseAlgorithm(alg), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func doc(i int) []byte { return jsonDoc(uint64(7000+i), 3000+i%7*500) }

// jsonDoc returns a JSON document of about size bytes, deterministic in
// seed: records with the same fields and varied values, as an API returns.
// (bench.JSONDocument would make an import cycle: bench uses compact.)
func jsonDoc(seed uint64, size int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"}
	b := []byte(`{"items":[`)
	for n := 0; len(b) < size-60; n++ {
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = strconv.AppendUint(b, r.Uint64N(1e9), 10)
		b = append(b, `,"name":"`...)
		b = append(b, words[r.IntN(len(words))]...)
		b = append(b, ' ')
		b = append(b, words[r.IntN(len(words))]...)
		b = append(b, `","score":`...)
		b = strconv.AppendFloat(b, r.Float64()*100, 'f', 2, 64)
		b = append(b, `,"active":`...)
		b = strconv.AppendBool(b, r.IntN(2) == 0)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// fillS2 writes n JSON documents encoded with s2 at prefix0000...; every
// other key gets a TTL of an hour.
func fillS2(t *testing.T, rdb *redis.Client, prefix string, n int) []string {
	t.Helper()
	ctx := context.Background()
	s2 := encoder(t, "s2")
	keys := make([]string, n)
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range keys {
			keys[i] = fmt.Sprintf("%s%04d", prefix, i)
			ttl := time.Duration(0)
			if i%2 == 0 {
				ttl = time.Hour
			}
			p.Set(ctx, keys[i], s2.AppendEncode(nil, doc(i)), ttl)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func header(t *testing.T, rdb *redis.Client, key string) codec.Header {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Bytes()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	h, err := codec.ParseHeader(v)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return h
}

func decoded(t *testing.T, rdb *redis.Client, key string) []byte {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Bytes()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	dec, _ := codec.NewDecoder()
	out, err := dec.AppendDecode(nil, v)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return out
}

func TestRun_S2ToZstd(t *testing.T) {
	rdb := newClient(t)
	ctx := context.Background()
	keys := fillS2(t, rdb, "doc:", 150)
	st, err := Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:9"), ScanCount: 40, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", st)
	if st.Scanned != 150 || st.Eligible != 150 || st.Rewritten != 150 || st.SkippedTotal() != 0 {
		t.Fatalf("stats %+v", st)
	}
	if st.BytesAfter >= st.BytesBefore || st.MemoryAfter >= st.MemoryBefore || st.MemoryBefore == 0 {
		t.Fatalf("nothing saved: %+v", st)
	}
	for i, k := range keys {
		if h := header(t, rdb, k); h.ID != codec.IDZstd {
			t.Fatalf("%s: codec %v after compaction", k, h.ID)
		}
		if got := decoded(t, rdb, k); string(got) != string(doc(i)) {
			t.Fatalf("%s: value changed", k)
		}
		ttl := rdb.PTTL(ctx, k).Val()
		if i%2 == 0 && (ttl <= 50*time.Minute || ttl > time.Hour) {
			t.Fatalf("%s: TTL %v, want about an hour (KEEPTTL)", k, ttl)
		}
		if i%2 == 1 && ttl != -1 {
			t.Fatalf("%s: TTL %v, want none", k, ttl)
		}
	}
	// A second run finds everything compacted already.
	st, err = Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:9")})
	if err != nil {
		t.Fatal(err)
	}
	if st.Rewritten != 0 || st.Skipped[SkipNoGain] != 150 {
		t.Fatalf("second run %+v", st)
	}
}

// TestRun_From migrates the frames of one codec to another whatever the
// size (minlz frames are smaller than s2's on these documents), in strings,
// hash fields and list elements, and leaves other codecs and raw values
// alone.
func TestRun_From(t *testing.T) {
	rdb := newClient(t)
	ctx := context.Background()
	minlz, zstd := encoder(t, "minlz"), encoder(t, "zstd:3")
	for i := range 20 {
		rdb.Set(ctx, fmt.Sprintf("new:%02d", i), minlz.AppendEncode(nil, doc(i)), time.Hour)
		rdb.Set(ctx, fmt.Sprintf("old:%02d", i), zstd.AppendEncode(nil, doc(i)), 0)
	}
	rdb.Set(ctx, "plain", doc(1), 0)
	rdb.Set(ctx, "tiny", minlz.AppendEncode(nil, bytes.Repeat([]byte("ab"), 100)), 0) // under the target's min size
	rdb.HSet(ctx, "h", "a", minlz.AppendEncode(nil, doc(2)), "b", zstd.AppendEncode(nil, doc(3)))
	rdb.RPush(ctx, "l", minlz.AppendEncode(nil, doc(4)), doc(5))

	from := []codec.ID{codec.IDMinLZ}
	if _, err := Run(ctx, rdb, Options{Encoder: encoder(t, "minlz:balanced"), From: from}); err == nil {
		t.Fatal("migrating from the target's own codec: no error")
	}
	if _, err := Run(ctx, rdb, Options{Encoder: encoder(t, "s2"), From: from, IncludeRaw: true}); err == nil {
		t.Fatal("From with IncludeRaw: no error")
	}
	s2 := encoder(t, "s2", codec.WithMinSize(1000))
	st, err := Run(ctx, rdb, Options{Encoder: s2, From: from})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", st)
	// 20 new: keys, tiny, h and l rewritten; 20 old: keys of another codec;
	// plain is raw.
	if st.Rewritten != 23 || st.Skipped[SkipOtherCodec] != 20 || st.Skipped[SkipRaw] != 1 || st.BytesAfter <= st.BytesBefore {
		t.Fatalf("stats %+v", st)
	}
	for i := range 20 {
		k := fmt.Sprintf("new:%02d", i)
		if h := header(t, rdb, k); h.ID != codec.IDS2 {
			t.Fatalf("%s: codec %v after migration", k, h.ID)
		}
		if string(decoded(t, rdb, k)) != string(doc(i)) || rdb.TTL(ctx, k).Val() <= 0 {
			t.Fatalf("%s: value or TTL changed", k)
		}
		if h := header(t, rdb, fmt.Sprintf("old:%02d", i)); h.ID != codec.IDZstd {
			t.Fatalf("old:%02d: codec %v, want zstd left alone", i, h.ID)
		}
	}
	if v := rdb.Get(ctx, "tiny").Val(); v != strings.Repeat("ab", 100) {
		t.Fatalf("tiny: %q, want the value stored raw", v)
	}
	dec, _ := codec.NewDecoder()
	for _, c := range []struct {
		v    string
		id   codec.ID
		want []byte
	}{
		{rdb.HGet(ctx, "h", "a").Val(), codec.IDS2, doc(2)},
		{rdb.HGet(ctx, "h", "b").Val(), codec.IDZstd, doc(3)},
		{rdb.LIndex(ctx, "l", 0).Val(), codec.IDS2, doc(4)},
	} {
		h, err := codec.ParseHeader([]byte(c.v))
		got, derr := dec.AppendDecode(nil, []byte(c.v))
		if err != nil || derr != nil || h.ID != c.id || !bytes.Equal(got, c.want) {
			t.Fatalf("element: codec %v (want %v), err %v %v", h.ID, c.id, err, derr)
		}
	}
	// Nothing of minlz is left: a second run rewrites nothing.
	st, err = Run(ctx, rdb, Options{Encoder: s2, From: from})
	if err != nil || st.Rewritten != 0 {
		t.Fatalf("second run: %+v, %v", st, err)
	}
}

func TestRun_MinIdle(t *testing.T) {
	rdb := newClient(t)
	ctx := context.Background()
	keys := fillS2(t, rdb, "doc:", 20)
	// OBJECT IDLETIME counts whole seconds of the server's LRU clock, so a
	// key read just now can show 1 when that clock ticks in between: the
	// cold keys wait 3 s and the bound is 2 s, clear of both.
	time.Sleep(3100 * time.Millisecond)
	for _, k := range keys[:5] {
		if err := rdb.Get(ctx, k).Err(); err != nil { // hot again
			t.Fatal(err)
		}
	}
	st, err := Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:3"), MinIdle: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if st.Skipped[SkipHot] != 5 || st.Rewritten != 15 {
		t.Fatalf("stats %+v", st)
	}
	for i, k := range keys {
		want := codec.IDZstd
		if i < 5 {
			want = codec.IDS2
		}
		if h := header(t, rdb, k); h.ID != want {
			t.Fatalf("%s: codec %v, want %v", k, h.ID, want)
		}
	}
}

// TestRun_LFU: under an LFU policy OBJECT IDLETIME fails; Run says why, and
// runs without the idleness check when MinIdle is 0.
func TestRun_LFU(t *testing.T) {
	rdb := newClient(t, "--maxmemory-policy", "allkeys-lfu")
	ctx := context.Background()
	fillS2(t, rdb, "doc:", 10)
	_, err := Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:3"), MinIdle: time.Minute})
	if !errors.Is(err, ErrIdleUnavailable) {
		t.Fatalf("err %v, want ErrIdleUnavailable", err)
	}
	st, err := Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:3")})
	if err != nil || st.Rewritten != 10 {
		t.Fatalf("MinIdle 0: %+v, %v", st, err)
	}
}

func TestRun_KindsOfValues(t *testing.T) {
	rdb := newClient(t)
	ctx := context.Background()
	big := doc(1)
	rdb.Set(ctx, "raw:big", big, 0)
	rdb.Set(ctx, "raw:small", "hello", 0)
	rdb.Set(ctx, "raw:empty", "", 0)
	rdb.HSet(ctx, "hash", "f", big)
	rdb.RPush(ctx, "list", big)
	rdb.SAdd(ctx, "set", big)                  // members are never compressed
	rdb.Set(ctx, dictstore.Key(40001), big, 0) // squeeze's own: never touched
	rdb.Set(ctx, "corrupt", append([]byte(codec.Magic+"\x01\x03\x00\x90\x4e"), "garbage"...), 0)
	rdb.Set(ctx, "unknown-dict", encoder(t, "zstd:1", codec.WithDictionary(mustDict(t))).AppendEncode(nil, big), 0)
	before := map[string]string{}
	for _, k := range []string{"raw:big", "raw:small", "raw:empty", dictstore.Key(40001), "corrupt", "unknown-dict"} {
		before[k] = rdb.Get(ctx, k).Val()
	}

	st, err := Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:3")})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{SkipRaw: 5, SkipNotString: 1, SkipReserved: 1, SkipDecodeError: 2}
	if fmt.Sprint(st.Skipped) != fmt.Sprint(want) || st.Rewritten != 0 || st.Scanned != 9 {
		t.Fatalf("stats %+v, want skipped %v", st, want)
	}
	for k, v := range before {
		if got := rdb.Get(ctx, k).Val(); got != v {
			t.Fatalf("%s changed", k)
		}
	}

	st, err = Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:3"), IncludeRaw: true})
	if err != nil {
		t.Fatal(err)
	}
	// Small and empty raw values: the encoder would store them raw.
	want = map[string]int{SkipNoGain: 2, SkipNotString: 1, SkipReserved: 1, SkipDecodeError: 2}
	if fmt.Sprint(st.Skipped) != fmt.Sprint(want) || st.Rewritten != 3 {
		t.Fatalf("IncludeRaw: stats %+v, want skipped %v", st, want)
	}
	if h := header(t, rdb, "raw:big"); h.ID != codec.IDZstd || string(decoded(t, rdb, "raw:big")) != string(big) {
		t.Fatalf("raw:big not compacted: %+v", h)
	}
	if f := []byte(rdb.HGet(ctx, "hash", "f").Val()); !codec.IsFramed(f) {
		t.Fatal("the raw hash field was not compacted with IncludeRaw")
	}
	if e := []byte(rdb.LIndex(ctx, "list", 0).Val()); !codec.IsFramed(e) {
		t.Fatal("the raw list element was not compacted with IncludeRaw")
	}
	if rdb.SIsMember(ctx, "set", big).Val() != true || rdb.Get(ctx, dictstore.Key(40001)).Val() != string(big) {
		t.Fatal("a skipped key changed")
	}
}

func mustDict(t *testing.T) codec.Dictionary {
	t.Helper()
	samples := make([][]byte, 40)
	for i := range samples {
		samples[i] = jsonDoc(uint64(90000+i), 2000)
	}
	d, err := dictstore.TrainID(samples, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRun_Dictionary compacts into zstd with a published dictionary, and
// reads frames naming a dictionary through the Resolver.
func TestRun_Dictionary(t *testing.T) {
	rdb := newClient(t)
	ctx := context.Background()
	d := mustDict(t)
	if err := dictstore.Publish(ctx, rdb, d, dictstore.Meta{ID: d.ID, Size: len(d.Data)}); err != nil {
		t.Fatal(err)
	}
	keys := fillS2(t, rdb, "doc:", 30)
	res, err := dictstore.NewResolver(rdb)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:3", codec.WithDictionary(d)), Resolver: res})
	if err != nil || st.Rewritten != 30 || st.Skipped[SkipReserved] != 2 {
		t.Fatalf("%+v, %v", st, err)
	}
	// From a dictionary frame to a plain strong codec: the fresh Resolver
	// loads the dictionary on demand.
	res2, _ := dictstore.NewResolver(rdb)
	st, err = Run(ctx, rdb, Options{Encoder: encoder(t, "brotli:9"), Resolver: res2, MinGain: -1})
	if err != nil || st.Skipped[SkipDecodeError] != 0 {
		t.Fatalf("%+v, %v", st, err)
	}
	dec, _ := codec.NewDecoder(codec.WithDictionaries(d))
	for i, k := range keys {
		v, _ := rdb.Get(ctx, k).Bytes()
		out, err := dec.AppendDecode(nil, v)
		if err != nil || string(out) != string(doc(i)) {
			t.Fatalf("%s: %v", k, err)
		}
	}
}

func TestRun_DryRun(t *testing.T) {
	rdb := newClient(t)
	ctx := context.Background()
	keys := fillS2(t, rdb, "doc:", 40)
	before := make([]string, len(keys))
	for i, k := range keys {
		before[i] = rdb.Get(ctx, k).Val()
	}
	st, err := Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:9"), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !st.DryRun || st.Rewritten != 40 || st.MemoryAfter >= st.MemoryBefore || st.BytesAfter >= st.BytesBefore {
		t.Fatalf("stats %+v", st)
	}
	for i, k := range keys {
		if rdb.Get(ctx, k).Val() != before[i] {
			t.Fatalf("dry run wrote %s", k)
		}
	}
	if n := rdb.ScriptExists(ctx, casScript.Hash()).Val(); n[0] {
		t.Fatal("dry run loaded the script")
	}
}

// TestRun_ChangedBeforeWrite: keys rewritten (or deleted) between Run's read
// and its write keep the newer value and count as changed.
func TestRun_ChangedBeforeWrite(t *testing.T) {
	rdb := newClient(t)
	ctx := context.Background()
	keys := fillS2(t, rdb, "doc:", 20)
	s2 := encoder(t, "s2")
	newer := func(k string) []byte { return []byte("newer value of " + k) }
	var once sync.Once
	st, err := Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:3"), beforeWrite: func() {
		once.Do(func() {
			for _, k := range keys[:6] {
				rdb.Set(ctx, k, s2.AppendEncode(nil, newer(k)), 0)
			}
			rdb.Del(ctx, keys[6])
			rdb.Del(ctx, keys[7])
			rdb.HSet(ctx, keys[7], "f", "v") // now a hash
			// The server forgets the script: EVAL sends it again.
			rdb.ScriptFlush(ctx)
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Skipped[SkipChanged] != 8 || st.Rewritten != 12 {
		t.Fatalf("stats %+v", st)
	}
	for i, k := range keys {
		switch {
		case i < 6:
			if got := decoded(t, rdb, k); string(got) != string(newer(k)) {
				t.Fatalf("%s: %q, want the newer value", k, got)
			}
		case i == 6:
			if rdb.Exists(ctx, k).Val() != 0 {
				t.Fatalf("%s came back", k)
			}
		case i == 7:
			if rdb.Type(ctx, k).Val() != "hash" {
				t.Fatalf("%s is no longer the hash written", k)
			}
		default:
			if string(decoded(t, rdb, k)) != string(doc(i)) || header(t, rdb, k).ID != codec.IDZstd {
				t.Fatalf("%s not compacted", k)
			}
		}
	}
}

// TestRun_ConcurrentWriter: a writer keeps replacing a third of the keys
// while Run compacts; afterwards every key holds the last value written.
func TestRun_ConcurrentWriter(t *testing.T) {
	rdb := newClient(t)
	ctx := context.Background()
	const n = 300
	keys := fillS2(t, rdb, "doc:", n)
	last := make([][]byte, n)
	for i := range last {
		last[i] = doc(i)
	}
	s2 := encoder(t, "s2")
	var stop atomic.Bool
	var writes int
	done := make(chan struct{})
	go func() {
		defer close(done)
		w := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr})
		defer w.Close()
		for writes = 0; writes < 20000 && !stop.Load(); writes++ {
			i := (writes * 3) % n
			v := jsonDoc(uint64(writes+1)<<20, 2000+writes%1000)
			if err := w.Set(ctx, keys[i], s2.AppendEncode(nil, v), redis.KeepTTL).Err(); err != nil {
				t.Error(err)
				return
			}
			last[i] = v
		}
	}()
	st, err := Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:9"), ScanCount: 10})
	stop.Store(true)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d concurrent writes; %+v", writes, st)
	if st.Scanned != n || st.Rewritten+st.SkippedTotal() != n {
		t.Fatalf("stats %+v", st)
	}
	for i, k := range keys {
		if got := decoded(t, rdb, k); string(got) != string(last[i]) {
			t.Fatalf("%s lost the last write", k)
		}
	}
}

func TestRun_Cancel(t *testing.T) {
	rdb := newClient(t)
	fillS2(t, rdb, "doc:", 50)
	ctx, cancel := context.WithCancel(context.Background())
	var calls int
	st, err := Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:3"), ScanCount: 5, Progress: func(Stats) {
		calls++
		cancel()
	}})
	if !errors.Is(err, context.Canceled) || calls != 1 || st.Scanned >= 50 {
		t.Fatalf("%+v, %v after %d batches", st, err, calls)
	}
}

// TestRun_Rate: 60 keys at 100 keys/s take at least half a second (a lower
// bound only: sleeping is what the limit does).
func TestRun_Rate(t *testing.T) {
	rdb := newClient(t)
	fillS2(t, rdb, "doc:", 60)
	st, err := Run(context.Background(), rdb, Options{Encoder: encoder(t, "zstd:1"), ScanCount: 10, KeysPerSecond: 100})
	if err != nil || st.Rewritten != 60 {
		t.Fatalf("%+v, %v", st, err)
	}
	if st.Elapsed < 500*time.Millisecond {
		t.Fatalf("60 keys at 100 keys/s took %v", st.Elapsed)
	}
}

func TestRun_Errors(t *testing.T) {
	if _, err := Run(context.Background(), nil, Options{}); err == nil {
		t.Fatal("no encoder: no error")
	}
	// A cluster nobody answers for: a clear error, no hang.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRetries: -1})
	defer cc.Close()
	if _, err := Run(context.Background(), cc, Options{Encoder: encoder(t, "zstd:3")}); err == nil || !strings.Contains(err.Error(), "cluster masters") {
		t.Fatalf("unreachable cluster: %v", err)
	}
}

// TestRun_Cluster compacts through a cluster client: Run walks each master
// (here a one-node cluster holding every slot).
func TestRun_Cluster(t *testing.T) {
	r := testutil.StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	ctx := context.Background()
	node := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer node.Close()
	if err := node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(node.ClusterInfo(ctx).Val(), "cluster_state:ok") {
		if time.Now().After(deadline) {
			t.Fatal("cluster did not reach state ok")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{r.Addr}})
	defer cc.Close()
	s2 := encoder(t, "s2")
	for i := range 20 {
		if err := cc.Set(ctx, "doc:"+strconv.Itoa(i), s2.AppendEncode(nil, doc(i)), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var progress int
	st, err := Run(ctx, cc, Options{Encoder: encoder(t, "zstd:9"), Progress: func(Stats) { progress++ }})
	if err != nil || st.Rewritten != 20 || st.Scanned != 20 || progress == 0 {
		t.Fatalf("%+v, %v (progress calls %d)", st, err, progress)
	}
	if h := header(t, node, "doc:7"); h.ID != codec.IDZstd || string(decoded(t, node, "doc:7")) != string(doc(7)) {
		t.Fatalf("doc:7 not compacted: %+v", h)
	}
}
