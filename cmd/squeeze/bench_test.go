package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

func TestBenchCodecs_JSON(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "doc.json")
	if err := os.WriteFile(file, bench.JSONDocument(7, 200e3), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, nil, "bench", "codecs", "--corpus", file, "--block", "64KiB",
		"--codecs", "none,zstd:1,lz4,s2,brotli:1", "--time", "1ms", "--json", "--report", filepath.Join(dir, "rep"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("--json output is not a JSON array: %v\n%s", err, out)
	}
	if len(rows) != 5 {
		t.Fatalf("%d rows, want 5", len(rows))
	}
	for _, r := range rows {
		for _, f := range []string{"codec", "level", "input_bytes", "output_bytes", "ratio", "compress_mb_s", "decompress_mb_s"} {
			if _, ok := r[f]; !ok {
				t.Errorf("row lacks %q: %v", f, r)
			}
		}
		if r["input_bytes"].(float64) != 200e3 || r["samples"].(float64) != 4 {
			t.Errorf("200 kB in 64 KiB blocks: row %v", r)
		}
		if r["codec"] != "none" && r["ratio"].(float64) < 2 {
			t.Errorf("%v: ratio %v on a JSON document", r["codec"], r["ratio"])
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "rep", "index.html")); err != nil {
		t.Errorf("no report: %v", err)
	}
}

func TestBenchCodecs_Table(t *testing.T) {
	out, stderr, code := runCLI(t, nil, "bench", "codecs", "--codecs", "zstd:1,s2", "--time", "1ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Codec", "Result (bytes)", "Improvement", "Compress MB/s", "Decompress MB/s", "Ratio", "zstd", "s2"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "corpus built-in: 20 values") {
		t.Errorf("stderr does not name the built-in corpus: %s", stderr)
	}
}

func TestBenchCodecs_FromRedis(t *testing.T) {
	srv := testutil.StartRedis(t)
	c := newTestClient(t, srv.Addr)
	for i := 0; i < 5; i++ {
		c.Set(t.Context(), "doc:"+string(rune('a'+i)), bench.JSONDocument(uint64(i), 3000), 0)
	}
	out, stderr, code := runCLI(t, nil, "bench", "codecs", "--from-redis", srv.URL(), "--sample", "3", "--codecs", "zstd:1", "--time", "1ms", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []bench.CodecResult
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Samples != 3 || rows[0].InputBytes != 9000 {
		t.Fatalf("rows %+v, want 3 samples of 3000 bytes", rows)
	}
	// --block cuts sampled values too (it used to be ignored silently).
	out, stderr, code = runCLI(t, nil, "bench", "codecs", "--from-redis", srv.URL(), "--sample", "3", "--block", "1000", "--codecs", "zstd:1", "--time", "1ms", "--json")
	if code != 0 {
		t.Fatalf("--block: exit %d: %s", code, stderr)
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Samples != 9 || rows[0].InputBytes != 9000 {
		t.Fatalf("--block 1000: rows %+v, want 9 values of 1000 bytes", rows)
	}
}

func TestBenchRedis_Quick(t *testing.T) {
	srv := testutil.StartRedis(t)
	dir := t.TempDir()
	out, stderr, code := runCLI(t, nil, "bench", "redis", "--quick", "--redis", srv.URL(),
		"--sizes", "0,16.6kB", "--iterations", "1,2", "--repeat", "1", "--json", "--report", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("--json output is not a JSON array: %v\n%s", err, out)
	}
	// direct none + library and proxy with none, s2, zstd:1, zlib:6; 3
	// workloads; 2 sizes; 2 counts.
	if want := 9 * 3 * 2 * 2; len(rows) != want {
		t.Fatalf("%d rows, want %d", len(rows), want)
	}
	seen := map[string]bool{}
	for _, r := range rows {
		for _, f := range []string{"path", "codec", "workload", "size_bytes", "ns_per_op", "slowdown_pct", "memory_saved_pct"} {
			if _, ok := r[f]; !ok {
				t.Fatalf("row lacks %q: %v", f, r)
			}
		}
		seen[r["path"].(string)+" "+r["codec"].(string)+" "+r["workload"].(string)] = true
	}
	for _, want := range []string{"direct none read", "library zlib:6 write", "library zstd:1 readwrite", "proxy zstd:1 read", "proxy none write"} {
		if !seen[want] {
			t.Errorf("no rows for %s", want)
		}
	}
	for _, p := range []string{"index.html", "results.json", "redis.csv", "memory.csv", "charts/tradeoff.svg", "charts/memory.svg", "charts/time-write.svg", "charts/time-read.svg"} {
		if st, err := os.Stat(filepath.Join(dir, p)); err != nil || st.Size() == 0 {
			t.Errorf("report file %s missing or empty: %v", p, err)
		}
	}
	if !strings.Contains(stderr, "report: "+dir+"/index.html") {
		t.Errorf("stderr does not say where the report is: %s", stderr)
	}
	// The note on the machine's idle policy appears, on stderr and in the
	// report, exactly when this machine halts idle CPUs without polling.
	html, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	halts := bench.ReadIdlePolicy().HaltsWithoutPolling()
	const marker = "halts idle CPUs without polling"
	if got := strings.Contains(stderr, marker); got != halts {
		t.Errorf("idle note on stderr: %v, want %v (machine halts without polling: %v)\n%s", got, halts, halts, stderr)
	}
	if got := strings.Contains(string(html), marker); got != halts {
		t.Errorf("idle note in the report: %v, want %v", got, halts)
	}
}

func TestBenchDocs_Loopback(t *testing.T) {
	srv := testutil.StartRedis(t)
	out, stderr, code := runCLI(t, nil, "bench", "docs", "--redis", srv.URL(), "--shaped", "off",
		"--codecs", "zstd:1,lz4", "--sizes", "100kB,200kB", "--repeat", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3*2 {
		t.Fatalf("%d rows, want 6", len(rows))
	}
	for _, r := range rows {
		for _, f := range []string{"codec", "link", "size_bytes", "upload_ms", "download_ms"} {
			if _, ok := r[f]; !ok {
				t.Fatalf("row lacks %q: %v", f, r)
			}
		}
	}
}

// TestBenchDocs_Proxy: --path library,proxy measures both paths; the proxy
// rows name their path and link, and Redis holds compressed documents
// written through the proxy.
func TestBenchDocs_Proxy(t *testing.T) {
	srv := testutil.StartRedis(t)
	out, stderr, code := runCLI(t, nil, "bench", "docs", "--redis", srv.URL(), "--shaped", "off",
		"--codecs", "s2", "--sizes", "100kB,1MB", "--repeat", "2", "--path", "library,proxy", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []bench.DocRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range rows {
		count[r.Path+"|"+r.Link]++
		if r.Path == "proxy" && r.Codec == "s2:default" {
			if r.StoredBytes <= 0 || r.StoredBytes > r.SizeBytes/2 || r.SavedPct < 50 {
				t.Errorf("through the proxy, s2 stored %d bytes of %d (%.1f%% saved)", r.StoredBytes, r.SizeBytes, r.SavedPct)
			}
			if r.UploadMs <= 0 || r.DownloadMs <= 0 || r.CompressMs != 0 {
				t.Errorf("proxy row times: %+v", r)
			}
		}
		if r.Path == "proxy" && r.Codec == "none" && r.StoredBytes != r.SizeBytes {
			t.Errorf("through the proxy without compression, Redis holds %d bytes of %d", r.StoredBytes, r.SizeBytes)
		}
	}
	if count["library|loopback"] != 4 || count["proxy|loopback via proxy"] != 4 {
		t.Fatalf("rows per path and link: %v, want 4 each", count)
	}
	out, stderr, code = runCLI(t, nil, "bench", "docs", "--redis", srv.URL(), "--shaped", "off",
		"--codecs", "s2", "--sizes", "100kB", "--repeat", "1", "--path", "proxy")
	if code != 0 || !strings.Contains(out, "loopback via proxy, upload (SET through the proxy)") {
		t.Fatalf("exit %d, tables:\n%s\n%s", code, out, stderr)
	}
}

func TestBench_BadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"block and whole", []string{"bench", "codecs", "--block", "4KiB", "--whole"}, "exclude each other"},
		{"bad block", []string{"bench", "codecs", "--block", "lots"}, "invalid size"},
		{"bad codec", []string{"bench", "codecs", "--codecs", "zstd:99"}, "--codecs"},
		{"missing corpus", []string{"bench", "codecs", "--corpus", "/nonexistent/file"}, "no such file"},
		{"corpus and redis", []string{"bench", "codecs", "--corpus", "x", "--from-redis", "redis://127.0.0.1:1"}, "not both"},
		{"bad sample", []string{"bench", "codecs", "--from-redis", "redis://127.0.0.1:1", "--sample", "0"}, "--sample"},
		{"sample without redis", []string{"bench", "codecs", "--sample", "10"}, "--sample needs --from-redis"},
		{"seed with corpus", []string{"bench", "codecs", "--seed", "7", "--corpus", "x"}, "--seed is for the built-in corpus"},
		{"unknown path", []string{"bench", "redis", "--path", "pigeon"}, "unknown path"},
		{"bad sizes", []string{"bench", "redis", "--sizes", "16.6kB,big"}, "--sizes"},
		{"bad iterations", []string{"bench", "redis", "--iterations", "1,0"}, "--iterations"},
		{"bad repeat", []string{"bench", "redis", "--repeat", "0"}, "--repeat"},
		{"bad compact target", []string{"bench", "redis", "--compact-to", "zstd:9,lz4+dict"}, "dictionaries work with zstd only"},
		{"compact to none codec", []string{"bench", "redis", "--compact-to", "none,zstd:9"}, "not a compaction target"},
		{"dict target with corpus", []string{"bench", "redis", "--compact-to", "zstd:9+dict", "--corpus", "README.md"}, "cannot be combined with --corpus"},
		{"bad shaped", []string{"bench", "docs", "--shaped", "maybe"}, "--shaped"},
		{"bad rate", []string{"bench", "docs", "--rate", "fast"}, "--rate"},
		{"bad docs path", []string{"bench", "docs", "--path", "carrier-pigeon"}, "--path"},
		{"zero doc size", []string{"bench", "docs", "--sizes", "0"}, "between 1 byte"},
		{"demo argument", []string{"demo", "now"}, "unexpected argument"},
		{"redis corpus dir", []string{"bench", "redis", "--corpus", "."}, "is a directory"},
		{"docs corpus dir", []string{"bench", "docs", "--corpus", "."}, "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, nil, tt.args...)
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want failure mentioning %q", code, stderr, tt.want)
			}
		})
	}
}

func TestBench_Help(t *testing.T) {
	for _, args := range [][]string{{"bench", "codecs", "--help"}, {"bench", "redis", "--help"}, {"bench", "docs", "--help"}, {"demo", "--help"}} {
		stdout, stderr, code := runCLI(t, nil, args...)
		if code != 0 || !strings.Contains(stdout, "Examples:") || stderr != "" {
			t.Errorf("%v: exit %d, help without examples on stdout:\n%s\nstderr: %s", args, code, stdout, stderr)
		}
	}
}

func newTestClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestPrintRedisTables_NoBaseline: the table shows each codec at the largest
// iteration count that also has a "none" baseline, never a "+0.0%" slowdown
// made up for a cell whose baseline was skipped.
func TestPrintRedisTables_NoBaseline(t *testing.T) {
	res := bench.RedisResult{Rows: []bench.RedisRow{
		{Path: bench.PathLibrary, Codec: "none", Workload: "read", SizeBytes: 4200000, Iterations: 10, NsPerOp: 4e6},
		{Path: bench.PathLibrary, Codec: "zstd:1", Workload: "read", SizeBytes: 4200000, Iterations: 10, NsPerOp: 1e6, SlowdownPct: -75},
		{Path: bench.PathLibrary, Codec: "zstd:1", Workload: "read", SizeBytes: 4200000, Iterations: 100, NsPerOp: 0.9e6, NoBaseline: true},
		{Path: bench.PathLibrary, Codec: "lz4", Workload: "read", SizeBytes: 4200000, Iterations: 100, NsPerOp: 0.5e6, NoBaseline: true},
	}}
	var b strings.Builder
	printRedisTables(&b, res, true)
	out := b.String()
	if strings.Contains(out, "+0.0%") || !strings.Contains(out, "-75.0%") {
		t.Fatalf("zstd:1 row should show -75.0%% at 10 iterations:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, " lz4 ") && !strings.Contains(line, "n/a") {
			t.Fatalf("lz4 has no baseline at any count, want n/a: %q", line)
		}
	}
}

// TestPrintRedisTables_Targets: the figures to reach and the seed study's
// column are for squeeze's developers, printed with --targets only.
func TestPrintRedisTables_Targets(t *testing.T) {
	var res bench.RedisResult
	for _, c := range []string{"none", "s2:default", "zlib:6"} {
		for _, wl := range []string{bench.WorkloadRead, bench.WorkloadWrite} {
			res.Rows = append(res.Rows, bench.RedisRow{Path: bench.PathLibrary, Codec: c, Workload: wl, SizeBytes: 16600, Iterations: 10, NsPerOp: 1e5, SlowdownPct: 50})
		}
		res.Memory = append(res.Memory, bench.MemoryRow{Codec: c, SizeBytes: 16600, MemoryUsageBytes: 1e4, SavedPct: 70})
	}
	var plain, dev strings.Builder
	printRedisTables(&plain, res, false)
	printRedisTables(&dev, res, true)
	for _, s := range []string{"Seed", "seed", "Figures to reach", "NOT met"} {
		if strings.Contains(plain.String(), s) {
			t.Errorf("without --targets the tables say %q:\n%s", s, plain.String())
		}
	}
	for _, s := range []string{"2013 study, zlib", "Figures to reach", "NOT met", bench.SeedSentence} {
		if !strings.Contains(dev.String(), s) {
			t.Errorf("with --targets the tables lack %q:\n%s", s, dev.String())
		}
	}
}

// TestBench_HelpDocumentsJSON: the help of each study names every field of
// its --json rows, so that the documentation cannot fall behind the rows.
func TestBench_HelpDocumentsJSON(t *testing.T) {
	for study, row := range map[string]any{"codecs": bench.CodecResult{}, "redis": bench.RedisRow{}, "docs": bench.DocRow{}, "counters": bench.CountersRow{}} {
		help, _, _ := runCLI(t, nil, "bench", study, "--help")
		help = strings.Join(strings.Fields(help), " ")
		typ := reflect.TypeOf(row)
		for i := 0; i < typ.NumField(); i++ {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" && !strings.Contains(help, name) {
				t.Errorf("bench %s --help does not name the JSON field %q", study, name)
			}
		}
	}
}

// TestBench_BadReportDirFailsFirst: a --report that cannot be written fails
// before the measurement (it used to fail after it, losing the results),
// without starting a server or printing results.
func TestBench_BadReportDirFailsFirst(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"bench", "codecs", "--codecs", "zstd:1", "--report", file},
		{"bench", "redis", "--quick", "--report", file},
		{"bench", "docs", "--quick", "--shaped", "off", "--report", file},
		{"demo", "--report", file},
	} {
		stdout, stderr, code := runCLI(t, nil, args...)
		if code != 1 || stdout != "" || stderr != "squeeze: --report: mkdir "+file+": not a directory\n" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args[:2], code, stdout, stderr)
		}
	}
}

// TestCheckReportDir: the early check of --report leaves no directory
// behind, so a run that fails after it (no Redis, say) does not litter the
// working directory; a directory that was there stays, with what it holds.
func TestCheckReportDir(t *testing.T) {
	base := t.TempDir()
	nested := filepath.Join(base, "a", "b", "report")
	if err := checkReportDir(nested); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(base, "a")); !os.IsNotExist(err) {
		t.Errorf("%s left behind (stat: %v)", filepath.Join(base, "a"), err)
	}
	old := filepath.Join(base, "old")
	if err := os.MkdirAll(filepath.Join(old, "charts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkReportDir(old); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(old); err != nil || len(entries) != 1 || entries[0].Name() != "charts" {
		t.Errorf("existing report directory holds %v (%v), want only charts", entries, err)
	}
	if err := os.Chmod(old, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(old, 0o755)
	if os.Geteuid() != 0 { // root writes anywhere
		if err := checkReportDir(old); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("read-only directory: %v, want permission denied", err)
		}
	}
}
