package bench

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

func newClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func TestRunRedis(t *testing.T) {
	srv := testutil.StartRedis(t)
	rdb := newClient(t, srv.Addr)
	ctx := context.Background()
	// A key of the user's that the study must leave alone.
	if err := rdb.Set(ctx, "user:key", "keep me", 0).Err(); err != nil {
		t.Fatal(err)
	}
	zstd1, _ := codec.ParseAlgorithm("zstd:1")
	none, _ := codec.ParseAlgorithm("none") // the baseline; listing it must not measure it twice
	calls := 0
	res, err := RunRedis(ctx, RedisOptions{
		Client: rdb, Codecs: []codec.Algorithm{zstd1, none}, Sizes: []int{0, 16600},
		Iterations: []int{1, 3}, Repeats: 2, MemoryKeys: 2,
		Progress: func(done, total int) { calls++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	// direct none, library none, library zstd:1 = 3 variants; 3 workloads,
	// 2 sizes, 2 iteration counts.
	if want := 3 * 3 * 2 * 2; len(res.Rows) != want {
		t.Fatalf("%d rows, want %d (skipped: %v)", len(res.Rows), want, res.Skipped)
	}
	if calls == 0 {
		t.Error("progress never called")
	}
	for _, r := range res.Rows {
		if r.NsPerOp <= 0 || r.TotalMs <= 0 || r.Repeats != 2 {
			t.Errorf("row without a measurement: %+v", r)
		}
		if r.Codec == "none" && r.SlowdownPct != 0 {
			t.Errorf("baseline with a slowdown: %+v", r)
		}
		if r.Codec == "zstd:1" && r.SizeBytes == 16600 && r.MemorySavedPct < 30 {
			t.Errorf("zstd:1 on a 16.6 kB JSON document saves only %.1f%% of memory", r.MemorySavedPct)
		}
	}
	if len(res.Memory) != 2*2 {
		t.Fatalf("%d memory rows, want 4", len(res.Memory))
	}
	for _, m := range res.Memory {
		if m.SizeBytes == 16600 && m.MemoryUsageBytes < float64(m.StoredBytes) {
			t.Errorf("MEMORY USAGE %v below the stored size %d", m.MemoryUsageBytes, m.StoredBytes)
		}
	}
	// Only the user's key is left.
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != "user:key" {
		t.Errorf("keys left after the study: %v", keys)
	}
}

func TestRunRedis_Budget(t *testing.T) {
	srv := testutil.StartRedis(t)
	rdb := newClient(t, srv.Addr)
	res, err := RunRedis(context.Background(), RedisOptions{
		Client: rdb, Paths: []string{PathDirect}, Workloads: []string{WorkloadWrite}, Sizes: []int{1 << 20},
		Iterations: []int{1, 1000000}, Repeats: 1, CellBudget: 50 * time.Millisecond, MemoryKeys: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0], "x1000000") {
		t.Fatalf("rows %v, skipped %v; want the million-iteration cell skipped", res.Rows, res.Skipped)
	}
}

func TestRunRedis_BadOptions(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	tests := []struct {
		name string
		o    RedisOptions
		want string
	}{
		{"no client", RedisOptions{}, "Client is nil"},
		{"bad path", RedisOptions{Client: rdb, Paths: []string{"carrier-pigeon"}}, "unknown path"},
		{"bad workload", RedisOptions{Client: rdb, Workloads: []string{"delete"}}, "unknown workload"},
		{"zero iterations", RedisOptions{Client: rdb, Iterations: []int{0}}, "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RunRedis(context.Background(), tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestRunDocs(t *testing.T) {
	srv := testutil.StartRedis(t)
	rdb := newClient(t, srv.Addr)
	algs, err := ParseAlgorithms("zstd:1,none,lz4") // none anywhere is the one baseline
	if err != nil {
		t.Fatal(err)
	}
	rows, err := RunDocs(context.Background(), DocsOptions{Client: rdb, Codecs: algs, Sizes: []int{100e3, 300e3}, Repeats: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3*2 {
		t.Fatalf("%d rows, want 6 (none added as the baseline)", len(rows))
	}
	for _, r := range rows {
		if r.Link != "loopback" || r.UploadMs <= 0 || r.DownloadMs <= 0 || r.Repeats != 2 {
			t.Errorf("bad row %+v", r)
		}
		if r.Codec != "none" && r.SavedPct < 30 {
			t.Errorf("%s saves only %.1f%% on a JSON document", r.Codec, r.SavedPct)
		}
	}
	if n, _ := rdb.DBSize(context.Background()).Result(); n != 0 {
		t.Errorf("%d keys left behind", n)
	}
	if c := Crossovers(rows); len(c) != 4 {
		t.Errorf("crossovers %v, want 2 codecs x 2 directions", c)
	}
}

func TestSampleRedis(t *testing.T) {
	srv := testutil.StartRedis(t)
	rdb := newClient(t, srv.Addr)
	ctx := context.Background()
	doc := JSONDocument(1, 5000)
	enc, _ := codec.NewEncoder(codec.DefaultAlgorithm)
	rdb.Set(ctx, "plain", doc, 0)
	rdb.Set(ctx, "framed", enc.AppendEncode(nil, doc), 0)
	rdb.HSet(ctx, "h", "a", "alpha", "b", "beta")
	rdb.RPush(ctx, "list", "skipped")
	rdb.Set(ctx, "empty", "", 0)
	c, err := SampleRedis(ctx, rdb, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Samples) != 4 {
		t.Fatalf("%d samples, want 4 (2 strings, 2 hash fields)", len(c.Samples))
	}
	for _, s := range c.Samples {
		if (s.Name == "plain" || s.Name == "framed") && string(s.Data) != string(doc) {
			t.Errorf("%s: sample is not the original document", s.Name)
		}
	}
	if c, err := SampleRedis(ctx, rdb, 1); err != nil || len(c.Samples) != 1 {
		t.Errorf("sample of 1: %d samples, %v", len(c.Samples), err)
	}
	if _, err := SampleRedis(ctx, rdb, 0); err == nil {
		t.Error("no error for a sample size of 0")
	}
	rdb.FlushAll(ctx)
	if _, err := SampleRedis(ctx, rdb, 10); err == nil || !strings.Contains(err.Error(), "corpus is empty") {
		t.Errorf("empty Redis: err = %v", err)
	}
}

func TestShapedLink(t *testing.T) {
	if testing.Short() {
		t.Skip("shaped link test in -short mode")
	}
	if os.Geteuid() != 0 {
		if _, err := StartShapedLink(context.Background(), LinkOptions{}); err != ErrNotRoot {
			t.Fatalf("not root: err = %v, want ErrNotRoot", err)
		}
		t.Skip("the shaped link needs root")
	}
	if testutil.ServerPath() == "" {
		t.Skip("redis-server not installed")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (Debian: apt-get install -y iproute2)", tool)
		}
	}
	l, err := StartShapedLink(context.Background(), LinkOptions{Rate: "100mbit"})
	if err != nil {
		for _, kernel := range []string{"ip netns add", "ip link add", "neither netem nor tbf"} {
			if strings.Contains(err.Error(), kernel) {
				t.Skipf("root, but this kernel or sandbox lacks what the link needs: %v", err)
			}
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rdb := newClient(t, l.Addr)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	// The shaping must hold from the first 64 KiB on (what one GSO packet
	// needs): n bytes cross a 100 Mbit/s link in no less than
	// (n - 64 KiB) * 8 / 100e6 seconds, whatever the headers add, in both
	// directions. The earlier 512 KiB bucket let 2 MB through in about
	// 118 ms, under this bound; loopback takes a few ms.
	const n, rate, ahead = 2_000_000, 100e6, 64 << 10
	if l.Shaper == "tbf" && l.Burst != DefaultBurst {
		t.Fatalf("tbf burst %d, want DefaultBurst %d", l.Burst, DefaultBurst)
	}
	floor := time.Duration(float64(n-ahead) * 8 / rate * float64(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := rdb.Set(ctx, "k", make([]byte, n), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < floor {
		t.Errorf("SET: 2 MB crossed the 100mbit link in %v, under the %v the rate allows: the link is not shaped", d, floor)
	}
	start = time.Now()
	if b, err := rdb.Get(ctx, "k").Bytes(); err != nil || len(b) != n {
		t.Fatalf("GET: %d bytes, err %v", len(b), err)
	}
	if d := time.Since(start); d < floor {
		t.Errorf("GET: 2 MB crossed the 100mbit link in %v, under the %v the rate allows: the link is not shaped", d, floor)
	}
	if _, err := StartShapedLink(context.Background(), LinkOptions{Burst: 1500}); err == nil || !strings.Contains(err.Error(), "burst") {
		t.Errorf("a 1500-byte burst: err = %v, want an error about the burst", err)
	}
	ns := l.ns
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/run/netns/" + ns); err == nil {
		t.Errorf("namespace %s still exists", ns)
	}
}

func TestProxyFor(t *testing.T) {
	srv := testutil.StartRedis(t)
	rdb := newClient(t, srv.Addr)
	ctx := context.Background()
	zstd1, _ := codec.ParseAlgorithm("zstd:1")
	p, stop, err := proxyFor(ctx, rdb, zstd1)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	doc := JSONDocument(3, 16600)
	if err := p.Set(ctx, "k", doc, 0).Err(); err != nil {
		t.Fatal(err)
	}
	stored, err := rdb.Get(ctx, "k").Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if !codec.IsFramed(stored) || len(stored) >= len(doc) {
		t.Fatalf("the proxy stored %d bytes, framed %v; want a compressed frame", len(stored), codec.IsFramed(stored))
	}
	back, err := p.Get(ctx, "k").Bytes()
	if err != nil || string(back) != string(doc) {
		t.Fatalf("read through the proxy: %d bytes, err %v; want the document", len(back), err)
	}
}

// TestRunRedis_Dict: --dict adds zstd:1+dict rows on the library path and
// in the memory study, for sizes above 0, with a dictionary trained on
// other documents; the measured values round-trip (runCell checks them).
func TestRunRedis_Dict(t *testing.T) {
	srv := testutil.StartRedis(t)
	rdb := newClient(t, srv.Addr)
	zstd1, zlib6 := codec.MustParseAlgorithm("zstd:1"), codec.MustParseAlgorithm("zlib:6")
	trained := map[int]int{}
	res, err := RunRedis(context.Background(), RedisOptions{
		Client: rdb, Codecs: []codec.Algorithm{zstd1, zlib6}, Sizes: []int{0, 4000},
		Iterations: []int{2}, Repeats: 1, MemoryKeys: 2, Workloads: []string{WorkloadReadWrite}, Dict: true,
		DictValue: func(size, i int) []byte {
			trained[size]++
			return JSONDocument(uint64(777+i), size)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(trained) != 1 || trained[4000] != dictSamples(4000) {
		t.Fatalf("training values drawn: %v", trained)
	}
	var dictRows, dictMem int
	mem := map[string]MemoryRow{}
	for _, m := range res.Memory {
		if m.SizeBytes == 4000 {
			mem[m.Codec] = m
		}
		if m.Codec == "zstd:1"+DictSuffix {
			dictMem++
			if m.SizeBytes != 4000 {
				t.Errorf("dictionary memory row at size %d", m.SizeBytes)
			}
		}
	}
	for _, r := range res.Rows {
		if r.Codec == "zlib:6"+DictSuffix {
			t.Error("a dictionary row for zlib")
		}
		if r.Codec == "zstd:1"+DictSuffix {
			dictRows++
			if r.Path != PathLibrary || r.SizeBytes != 4000 || r.NsPerOp <= 0 {
				t.Errorf("dictionary row %+v", r)
			}
		}
	}
	if dictRows != 1 || dictMem != 1 {
		t.Fatalf("%d dictionary rows, %d memory rows; want 1 and 1", dictRows, dictMem)
	}
	if d, p := mem["zstd:1"+DictSuffix], mem["zstd:1"]; d.StoredBytes >= p.StoredBytes {
		t.Errorf("4 kB document with dictionary stored in %d bytes, without %d", d.StoredBytes, p.StoredBytes)
	}
}

// TestRunRedis_CompactTo: the memory study writes distinct values, and
// CompactTo adds rows at rest: keys written with the default codec, every
// one rewritten by compact.Run to the target (here with a trained
// dictionary), smaller than as written and still decoding to the values
// (measureCompacted checks each).
func TestRunRedis_CompactTo(t *testing.T) {
	srv := testutil.StartRedis(t)
	rdb := newClient(t, srv.Addr)
	drawn := map[int]bool{}
	res, err := RunRedis(context.Background(), RedisOptions{
		Client: rdb, Paths: []string{PathLibrary}, Codecs: []codec.Algorithm{codec.DefaultAlgorithm}, Sizes: []int{0, 8000},
		Iterations: []int{1}, Repeats: 1, MemoryKeys: 3, Workloads: []string{WorkloadRead},
		CompactTo: []string{"zstd:9", "zstd:9" + DictSuffix},
		MemoryValue: func(size, i int) []byte {
			if size == 8000 {
				drawn[i] = true
			}
			return JSONDocument(uint64(1000+i), size)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(drawn) < 100 {
		t.Errorf("the memory study drew %d distinct 8 kB values, want one per key (over 100 for 1 MB of them)", len(drawn))
	}
	mem := map[string]MemoryRow{}
	for _, m := range res.Memory {
		if m.SizeBytes == 0 && m.WrittenWith != "" {
			t.Errorf("a row at rest for empty values: %+v", m)
		}
		if m.SizeBytes == 8000 {
			mem[m.Codec] = m
		}
	}
	written := mem[codec.DefaultAlgorithm.String()]
	for _, target := range []string{"zstd:9", "zstd:9" + DictSuffix} {
		m, ok := mem[CompactedLabel(codec.DefaultAlgorithm.String(), target)]
		if !ok {
			t.Fatalf("no row at rest for %s: %+v", target, res.Memory)
		}
		if m.WrittenWith != codec.DefaultAlgorithm.String() || m.Rewritten != m.Keys || m.Keys < 100 {
			t.Errorf("%s: written with %q, %d of %d keys rewritten", target, m.WrittenWith, m.Rewritten, m.Keys)
		}
		if m.StoredBytes >= written.StoredBytes || m.SavedPct <= written.SavedPct {
			t.Errorf("%s at rest: %d bytes, %.1f%% saved; as written: %d bytes, %.1f%%", target, m.StoredBytes, m.SavedPct, written.StoredBytes, written.SavedPct)
		}
	}
	if d, p := mem[CompactedLabel(codec.DefaultAlgorithm.String(), "zstd:9"+DictSuffix)], mem[CompactedLabel(codec.DefaultAlgorithm.String(), "zstd:9")]; d.StoredBytes >= p.StoredBytes {
		t.Errorf("with a dictionary %d bytes, without %d", d.StoredBytes, p.StoredBytes)
	}
	if n, _ := rdb.DBSize(context.Background()).Result(); n != 0 {
		t.Errorf("%d keys left behind", n)
	}
	if _, err := RunRedis(context.Background(), RedisOptions{Client: rdb, CompactTo: []string{"lz4+dict"}}); err == nil || !strings.Contains(err.Error(), "zstd only") {
		t.Errorf("lz4+dict target: %v", err)
	}
}

// TestRunRedis_UsedMemoryLargeValues: the used_memory delta per key agrees
// with MEMORY USAGE, as written and at rest, for large values and for
// empty ones. Taken from before the writes, it had also counted the
// megabytes of query buffer a connection keeps after large SETs, and what
// compaction's scripts leave allocated in Redis for good (+25% to +81% at
// rest). What remains is Redis shrinking idle clients' output buffers when
// its cron runs, up to about 20 kB: 8 keys keep that under 2% here.
func TestRunRedis_UsedMemoryLargeValues(t *testing.T) {
	srv := testutil.StartRedis(t)
	rdb := newClient(t, srv.Addr)
	res, err := RunRedis(context.Background(), RedisOptions{
		Client: rdb, Paths: []string{PathLibrary}, Codecs: []codec.Algorithm{codec.DefaultAlgorithm}, Sizes: []int{0, 1 << 20},
		Iterations: []int{1}, Repeats: 1, MemoryKeys: 8, Workloads: []string{WorkloadWrite},
		CompactTo: []string{"zstd:3"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Memory) != 5 {
		t.Fatalf("memory rows: %+v", res.Memory)
	}
	for _, m := range res.Memory {
		limit := 0.05
		if m.SizeBytes == 0 {
			limit = 0.25 // MEMORY USAGE estimates the allocator's share of a small key
		}
		t.Logf("%s %d: %+.2f%%", m.Codec, m.SizeBytes, 100*(m.UsedMemoryDeltaBytes/m.MemoryUsageBytes-1))
		if off := m.UsedMemoryDeltaBytes/m.MemoryUsageBytes - 1; off > limit || off < -limit {
			t.Errorf("%s: used_memory delta %.0f bytes per key, MEMORY USAGE %.0f (%+.1f%%)", m.Codec, m.UsedMemoryDeltaBytes, m.MemoryUsageBytes, 100*off)
		}
	}
}

func TestCorpusValueAt(t *testing.T) {
	data := []byte("abcdef")
	for _, tt := range []struct {
		off, size int
		want      string
	}{
		{0, 4, "abcd"}, {4, 4, "efab"}, {10, 3, "efa"}, {1, 13, "bcdefabcdefab"}, {3, 0, ""},
	} {
		if got := string(CorpusValueAt(data, tt.off, tt.size)); got != tt.want {
			t.Errorf("CorpusValueAt(%q, %d, %d) = %q, want %q", data, tt.off, tt.size, got, tt.want)
		}
	}
	if got := CorpusValueAt(nil, 5, 10); len(got) != 0 {
		t.Errorf("empty data gave %q", got)
	}
}

func TestParseMemoryInfo(t *testing.T) {
	for _, tt := range []struct {
		info          string
		used, dataset int64
		err           string
	}{
		{"# Memory\r\nused_memory:1048576\r\nused_memory_dataset:524288\r\n", 1 << 20, 1 << 19, ""},
		// Overhead above used_memory: Redis prints the wrapped unsigned value.
		{"used_memory:1000\r\nused_memory_dataset:18446744073702339392\r\n", 1000, -7212224, ""},
		{"used_memory:1000\r\n", 0, 0, "lacks"},
		{"used_memory:x\r\nused_memory_dataset:1\r\n", 0, 0, `used_memory "x"`},
		{"used_memory:1\r\nused_memory_dataset:-5\r\n", 0, 0, `used_memory_dataset "-5"`},
	} {
		used, dataset, err := parseMemoryInfo(tt.info)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want %q", tt.info, err, tt.err)
			}
			continue
		}
		if err != nil || used != tt.used || dataset != tt.dataset {
			t.Errorf("%q: %d, %d, %v; want %d, %d", tt.info, used, dataset, err, tt.used, tt.dataset)
		}
	}
}
