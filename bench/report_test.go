package bench

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// sampleReport has a few rows of every kind; the figures are arbitrary, the
// test checks the writer, not the measurements.
func sampleReport() Report {
	r := Report{Title: "test report", Command: "squeeze bench test", Corpus: "built-in"}
	r.Codecs = []CodecResult{
		{Codec: "none", Algorithm: "none", InputBytes: 1000, OutputBytes: 1004, Ratio: 0.996, CompressMBs: 5000, DecompressMBs: 5000},
		{Codec: "zstd", Level: "1", Algorithm: "zstd:1", InputBytes: 1000, OutputBytes: 250, Ratio: 4, ImprovementPct: 75, CompressMBs: 400, DecompressMBs: 1200},
		{Codec: "lz4", Level: "fast", Algorithm: "lz4:fast", InputBytes: 1000, OutputBytes: 350, Ratio: 2.86, ImprovementPct: 65, CompressMBs: 700, DecompressMBs: 3000},
	}
	for _, p := range []string{PathDirect, PathLibrary} {
		for _, c := range []string{"none", "zstd:1", "zlib:6"} {
			if p == PathDirect && c != "none" {
				continue
			}
			for _, wl := range []string{WorkloadRead, WorkloadWrite, WorkloadReadWrite} {
				for _, size := range []int{0, 16600} {
					for _, n := range []int{1, 10} {
						r.Redis = append(r.Redis, RedisRow{Path: p, Codec: c, Workload: wl, SizeBytes: size, Iterations: n,
							Repeats: 3, TotalMs: float64(n) * 0.05, NsPerOp: 50000, SlowdownPct: 10})
					}
				}
			}
		}
	}
	r.Memory = []MemoryRow{
		{Codec: "none", SizeBytes: 16600, Keys: 10, StoredBytes: 16600, MemoryUsageBytes: 20552},
		{Codec: "zstd:1", SizeBytes: 16600, Keys: 10, StoredBytes: 4600, MemoryUsageBytes: 5208, SavedPct: 74.7},
	}
	for _, link := range []string{"loopback", "1gbit 500µs RTT (netem)"} {
		for _, c := range []string{"none", "zstd:1"} {
			for _, size := range []int{100e3, 1e6, 10e6} {
				r.Docs = append(r.Docs, DocRow{Codec: c, Link: link, SizeBytes: size, StoredBytes: size / 4, Repeats: 3,
					UploadMs: float64(size) / 1e5, DownloadMs: float64(size) / 2e5})
			}
		}
	}
	r.Crossovers = Crossovers(r.Docs)
	r.Targets = CheckTargets(RedisResult{Rows: r.Redis, Memory: r.Memory}, "zstd:1")
	return r
}

func TestWriteReport(t *testing.T) {
	dir := t.TempDir()
	if err := WriteReport(dir, sampleReport()); err != nil {
		t.Fatal(err)
	}

	// index.html parses, embeds every chart, and needs no network.
	f, err := os.Open(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := html.Parse(f)
	if err != nil {
		t.Fatalf("index.html does not parse: %v", err)
	}
	var imgs, svgs, tables, links int
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				if (a.Key == "src" || a.Key == "href") && (strings.HasPrefix(a.Val, "http:") || strings.HasPrefix(a.Val, "https:") || strings.HasPrefix(a.Val, "//")) {
					t.Errorf("<%s %s=%q> needs the network", n.Data, a.Key, a.Val)
				}
				if a.Key == "href" && !strings.HasPrefix(a.Val, "data:") {
					links++
					if _, err := os.Stat(filepath.Join(dir, a.Val)); err != nil {
						t.Errorf("link %q points to a missing file", a.Val)
					}
				}
			}
			switch n.Data {
			case "img":
				imgs++
				for _, a := range n.Attr {
					if a.Key == "src" && !strings.HasPrefix(a.Val, "data:image/png;base64,") {
						t.Errorf("img src %.40q is not embedded", a.Val)
					}
				}
			case "svg":
				svgs++
			case "table":
				tables++
			case "script":
				t.Error("report has a <script>; it must be static")
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	// PNG: 1 codec chart + 2 links x 2 directions; SVG drawn into the page:
	// the trade-off, memory saved, write and read time.
	const wantPNG, wantSVG = 1 + 4, 4
	if imgs != wantPNG || svgs != wantSVG {
		t.Errorf("%d embedded PNG charts and %d SVG charts, want %d and %d", imgs, svgs, wantPNG, wantSVG)
	}
	if tables < 5 {
		t.Errorf("%d tables, want the seed, memory, crossover, docs, codec and cell tables", tables)
	}
	if links == 0 {
		t.Error("no links to the raw results")
	}

	// Every chart exists as a file, non-empty: the PNG ones as PNG and SVG.
	for ext, want := range map[string]int{".png": wantPNG, ".svg": wantPNG + wantSVG} {
		files, _ := filepath.Glob(filepath.Join(dir, "charts", "*"+ext))
		if len(files) != want {
			t.Errorf("%d %s charts, want %d", len(files), ext, want)
		}
		for _, p := range files {
			st, err := os.Stat(p)
			if err != nil || st.Size() < 1000 {
				t.Errorf("chart %s is missing or tiny (%v)", p, err)
			}
		}
	}

	// results.json carries the documented fields.
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	schema := map[string][]string{
		"codecs":         {"codec", "level", "input_bytes", "output_bytes", "ratio", "compress_mb_s", "decompress_mb_s"},
		"redis":          {"path", "codec", "workload", "size_bytes", "ns_per_op", "slowdown_pct", "memory_saved_pct"},
		"memory":         {"codec", "size_bytes", "memory_usage_bytes", "used_memory_delta_bytes", "memory_saved_pct"},
		"docs":           {"codec", "link", "path", "size_bytes", "upload_ms", "download_ms"},
		"crossovers":     {"codec", "link", "direction", "size_bytes"},
		"seed_slowdowns": {"workload", "size_bytes", "slowdown_pct"},
		"targets":        {"target", "size_bytes", "measured", "pass"},
	}
	for section, fields := range schema {
		rows, ok := got[section].([]any)
		if !ok || len(rows) == 0 {
			t.Errorf("results.json: section %q missing or empty", section)
			continue
		}
		for _, row := range rows {
			m := row.(map[string]any)
			for _, f := range fields {
				if _, ok := m[f]; !ok {
					t.Errorf("results.json: %s row lacks %q: %v", section, f, m)
				}
			}
		}
	}

	// The CSV files have a header and one line per row.
	for name, n := range map[string]int{"codecs.csv": 3, "redis.csv": len(sampleReport().Redis), "docs.csv": 12} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(recs) != n+1 {
			t.Errorf("%s: %d records, want header + %d", name, len(recs), n)
		}
	}
}

func TestWriteReport_OnlyCodecs(t *testing.T) {
	dir := t.TempDir()
	r := Report{Title: "codecs", Codecs: sampleReport().Codecs}
	if err := WriteReport(dir, r); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"index.html", "results.json", "codecs.csv", "charts/codecs.png", "charts/codecs.svg"} {
		if st, err := os.Stat(filepath.Join(dir, p)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", p, err)
		}
	}
	for _, p := range []string{"redis.csv", "docs.csv"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s written for a report without such rows", p)
		}
	}
}

func TestWriteReport_BadDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o644)
	if err := WriteReport(filepath.Join(file, "sub"), sampleReport()); err == nil {
		t.Fatal("no error for a report directory under a file")
	}
}

func TestSeedComparison(t *testing.T) {
	r := sampleReport()
	r.Seed = SeedSlowdowns
	// zstd:1 alone reached x100: the comparison must stay at x10, where
	// zlib:6 was measured too.
	r.Redis = append(r.Redis, RedisRow{Path: PathLibrary, Codec: "zstd:1", Workload: WorkloadRead, SizeBytes: 16600, Iterations: 100, SlowdownPct: 999})
	rows := seedComparison(r)
	if len(rows) != len(SeedSlowdowns) {
		t.Fatalf("%d rows, want %d", len(rows), len(SeedSlowdowns))
	}
	for _, row := range rows {
		if row.Size == "16.6 kB" || row.Size == "0 B" {
			if !row.HasMeasur || row.Measured[0].Codec != "zlib:6" {
				t.Errorf("%s %s: measured %v, want zlib:6 first", row.Workload, row.Size, row.Measured)
			}
			for _, m := range row.Measured {
				if m.Iterations != 10 || m.Pct == 999 {
					t.Errorf("%s %s: %+v, want the x10 figures both codecs have", row.Workload, row.Size, m)
				}
			}
		} else if row.HasMeasur {
			t.Errorf("%s %s: measured %v for a size not in the run", row.Workload, row.Size, row.Measured)
		}
	}
}

func TestCrossovers(t *testing.T) {
	mk := func(c string, size int, up, down float64) DocRow {
		return DocRow{Codec: c, Link: "l", SizeBytes: size, UploadMs: up, DownloadMs: down}
	}
	rows := []DocRow{
		mk("none", 1, 1, 1), mk("none", 2, 2, 2), mk("none", 3, 3, 3),
		// faster from size 2 on for upload; faster at 1 and 3 but not 2 for download
		mk("a", 1, 1.5, 0.5), mk("a", 2, 1.9, 2.5), mk("a", 3, 2, 2),
		// never faster
		mk("b", 1, 2, 2), mk("b", 2, 3, 3), mk("b", 3, 4, 4),
	}
	got := Crossovers(rows)
	want := []Crossover{
		{"a", "l", "upload", 2}, {"a", "l", "download", 3},
		{"b", "l", "upload", -1}, {"b", "l", "download", -1},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("got %v, want %v", got[i], want[i])
		}
	}
}

// TestWriteReport_OneIteration writes the report of a run with one
// iteration count: the time against no compression comes from that count.
func TestWriteReport_OneIteration(t *testing.T) {
	r := sampleReport()
	var rows []RedisRow
	for _, row := range r.Redis {
		if row.Iterations == r.Redis[0].Iterations {
			rows = append(rows, row)
		}
	}
	r.Redis = rows
	dir := t.TempDir()
	if err := WriteReport(dir, r); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "index.html")); err != nil || st.Size() == 0 {
		t.Fatalf("index.html: %v", err)
	}
}

// TestWriteReport_TablesAndBars: a study without its own section gives a
// table (CSV and HTML, columns from the JSON names) and a bar chart.
func TestWriteReport_TablesAndBars(t *testing.T) {
	type row struct {
		Layout string  `json:"layout"`
		Bytes  float64 `json:"bytes_per_counter"`
		Hidden int     `json:"-"`
	}
	r := Report{Title: "counters",
		Tables: []Table{{Name: "counters", Title: "Counters", Rows: []row{{"hex", 4.75, 1}, {"packed", 2.3125, 2}}}},
		Bars: []BarChart{{Name: "counter-memory", Title: "Bytes per counter", YLabel: "bytes",
			Groups: []string{"hex", "packed"}, Series: []BarSeries{{Label: "bytes", Values: []float64{4.75, 2.31}}}}},
	}
	dir := t.TempDir()
	if err := WriteReport(dir, r); err != nil {
		t.Fatal(err)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "counters.csv"))
	if err != nil || string(csv) != "layout,bytes_per_counter\nhex,4.75\npacked,2.3125\n" {
		t.Fatalf("counters.csv: %q, %v", csv, err)
	}
	page, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	for _, want := range []string{"<h2>Counters</h2>", "<th>bytes_per_counter</th>", "<td>2.31</td>", `id="counter-memory"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	for _, f := range []string{"charts/counter-memory.png", "charts/counter-memory.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	r.Bars[0].Series[0].Values = []float64{1}
	if err := WriteReport(t.TempDir(), r); err == nil || !strings.Contains(err.Error(), "1 values for 2 groups") {
		t.Fatalf("mismatched series: %v", err)
	}
}
