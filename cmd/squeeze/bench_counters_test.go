package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

func TestBenchCounters_CLI(t *testing.T) {
	if testing.Short() || testutil.ServerPath() == "" {
		t.Skip("needs redis-server")
	}
	out, errs, code := runCLI(t, nil, "bench", "counters", "--entities", "30", "--days", "10", "--clients", "2", "--pipeline", "4", "--ops", "100", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rows []bench.CountersRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if len(rows) != 8 || rows[0].Layout != bench.CountersLayoutList || rows[7].Pipeline != 4 {
		t.Fatalf("rows = %+v", rows)
	}
	dir := t.TempDir()
	out, errs, code = runCLI(t, nil, "bench", "counters", "--entities", "20", "--days", "5", "--clients", "2", "--pipeline", "1", "--ops", "50", "--layouts", "hex-hash-lua,packed-bitfield", "--report", dir)
	if code != 0 || !strings.Contains(out, "packed-bitfield") || !strings.Contains(out, "bytes/counter") || strings.Contains(out, "list-lua") {
		t.Fatalf("table: exit %d\n%s\n%s", code, out, errs)
	}
	checkReport(t, dir, "counters.csv", "charts/counters-memory.png", "charts/counters-speed.svg")
	out, errs, code = runCLI(t, nil, "bench", "counters", "--unix", "--entities", "10", "--days", "5", "--clients", "2", "--pipeline", "1", "--ops", "20", "--layouts", "packed-bitfield", "--json")
	if code != 0 || !strings.Contains(out, `"network": "unix"`) {
		t.Fatalf("--unix: exit %d\n%s\n%s", code, out, errs)
	}
	_, errs, code = runCLI(t, nil, "bench", "counters", "--clients", "0")
	if code != 2 || !strings.Contains(errs, "must be positive") {
		t.Fatalf("bad flag: exit %d, %s", code, errs)
	}
	out, errs, code = runCLI(t, nil, "bench", "counters", "--layouts", "hex-hash-lua, packed-bitfield", "--entities", "10", "--days", "5", "--clients", "2", "--pipeline", "1", "--ops", "20")
	if code != 0 || !strings.Contains(out, "packed-bitfield") {
		t.Fatalf("layouts with a space: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestBenchCounters_BadUsage: a bad layout, driver or day count is bad usage
// (exit 2, before any server starts), not a run failure (exit 1).
func TestBenchCounters_BadUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--layouts", "nope"}, "unknown layout"},
		{[]string{"--layouts", "packed-bitfield,"}, `unknown layout ""`},
		{[]string{"--driver", "carrier-pigeon"}, "unknown driver"},
		{[]string{"--days", "20000"}, "more than this study's 16384"},
		{[]string{"--quick", "--days", "20000"}, "more than this study's 16384"},
	} {
		_, errs, code := runCLI(t, nil, append([]string{"bench", "counters"}, tt.args...)...)
		if code != 2 || !strings.Contains(errs, tt.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 with %q", tt.args, code, errs, tt.want)
		}
	}
}

func TestBenchCounters_Help(t *testing.T) {
	out, errs, code := runCLI(t, nil, "bench", "counters", "--help")
	if code != 0 || errs != "" || !strings.Contains(out, "squeeze bench counters --quick") || strings.Contains(out, "--pipeline-deep") {
		t.Fatalf("help: exit %d\n%s", code, out)
	}
	out, _, code = runCLI(t, nil, "bench", "counters", "--help")
	if code != 0 || !strings.Contains(out, "Examples:") {
		t.Fatalf("help: exit %d", code)
	}
}
