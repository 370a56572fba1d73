package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/bench"
)

func TestPortableCosts(t *testing.T) {
	row := func(path, c, wl string, size, n int, ns float64) bench.RedisRow {
		return bench.RedisRow{Path: path, Codec: c, Workload: wl, SizeBytes: size, Iterations: n, NsPerOp: ns}
	}
	for _, tt := range []struct {
		name string
		rows []bench.RedisRow
		want []portableCost
	}{
		{"the largest count both were measured at", []bench.RedisRow{
			row("proxy", "s2:default", "read", 100, 10, 200), row("proxy", "snappy:default", "read", 100, 10, 300),
			row("proxy", "s2:default", "read", 100, 100, 100), row("proxy", "snappy:default", "read", 100, 100, 110),
			row("proxy", "s2:default", "read", 100, 1000, 100), // snappy's cell skipped by the budget
		}, []portableCost{{"proxy", "read", 100, 100, 1.1}}},
		{"paths, workloads and sizes apart, in the rows' order", []bench.RedisRow{
			row("library", "s2:default", "write", 100, 10, 100), row("library", "snappy:default", "write", 100, 10, 50),
			row("proxy", "s2:default", "write", 100, 10, 100), row("proxy", "snappy:default", "write", 100, 10, 200),
			row("proxy", "none", "write", 100, 10, 10), row("proxy", "zstd:1", "write", 100, 10, 400),
		}, []portableCost{{"library", "write", 100, 10, 0.5}, {"proxy", "write", 100, 10, 2}}},
		{"no default row: nothing to compare", []bench.RedisRow{row("proxy", "snappy:default", "read", 100, 10, 300)}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := portableCosts(tt.rows, "s2:default", "snappy:default")
			if len(got) != len(tt.want) {
				t.Fatalf("%+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("%+v, want %+v", got[i], tt.want[i])
				}
			}
		})
	}
	var out bytes.Buffer
	printPortableCost(&out, bench.RedisResult{
		Rows: []bench.RedisRow{row("proxy", "s2:default", "read", 16600, 10, 100), row("proxy", "snappy:default", "read", 16600, 10, 101)},
		Memory: []bench.MemoryRow{{Codec: "s2:default", SizeBytes: 16600, SavedPct: 70}, {Codec: "snappy:default", SizeBytes: 16600, SavedPct: 69.8},
			{Codec: "s2:default", SizeBytes: 16600, SavedPct: 85, WrittenWith: "s2:default"}}, // at rest: not the written figure
	})
	for _, want := range []string{"against the default (s2:default)", "1.01x", "70.0%", "69.8%", "0.2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lacks %q:\n%s", want, out.String())
		}
	}
}
