package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestRunArchive runs the archive study on a real Redis at two small sizes
// and writes its report: every layout has a row per size with a read time
// and a stored size, and the report has its table and both charts.
func TestRunArchive(t *testing.T) {
	srv := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	var steps int
	rows, err := RunArchive(context.Background(), ArchiveConfig{Client: rdb, Files: []int{4, 20}, FileSize: 3000, Reads: 10,
		Progress: func(int, int) { steps++ }})
	if err != nil {
		t.Fatal(err)
	}
	// 4 files are too few for a dictionary: 3 layouts, then 4.
	if len(rows) != 7 || steps != 2 {
		t.Fatalf("%d rows, %d progress steps: %+v", len(rows), steps, rows)
	}
	for _, r := range rows {
		if r.ReadUs <= 0 || r.StoredBytes <= 0 || r.RawBytes != int64(r.Files*3000) || r.Reads != 10 {
			t.Fatalf("row %+v", r)
		}
		if r.Layout == LayoutSqueeze && r.SavedPct < 20 {
			t.Fatalf("squeeze saves only %.1f%%: %+v", r.SavedPct, r)
		}
	}
	for _, k := range rdb.Keys(context.Background(), "*").Val() { // the published dictionary stays
		if !strings.HasPrefix(k, "squeeze:dict") {
			t.Fatalf("key %q left behind", k)
		}
	}
	dir := t.TempDir()
	if err := WriteReport(dir, ArchiveReport("squeeze bench archive", rows)); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	for _, want := range []string{"Single files out of an archive", `id="archive-read"`, `id="archive-size"`, "<td>squeeze archive</td>"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	for _, f := range []string{"archive.csv", "charts/archive-read.png", "charts/archive-read.svg", "charts/archive-size.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
