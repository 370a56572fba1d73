package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/counters"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

func TestCounters_CLI(t *testing.T) {
	r := testutil.StartRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	url := r.URL()

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // substring
		stderr string // substring
	}{
		{"incr creates", []string{"counters", "incr", "--redis", url, "user42", "17"}, 0, "1\n", ""},
		{"incr delta", []string{"counters", "incr", "--redis", url, "user42", "17", "41"}, 0, "42\n", ""},
		{"decr", []string{"counters", "incr", "--redis", url, "user42", "17", "-2"}, 0, "40\n", ""},
		{"decr after --", []string{"counters", "incr", "--redis", url, "user42", "17", "--", "-2"}, 0, "38\n", ""},
		{"get", []string{"counters", "get", "--redis", url, "user42", "17"}, 0, "38\n", ""},
		{"get window", []string{"counters", "get", "--redis", url, "user42", "16:18"}, 0, "16\t0\n17\t38\nsum\t38\n", ""},
		{"overflow fail", []string{"counters", "incr", "--redis", url, "--type", "u8", "--prefix", "c8:", "e", "0", "300"}, 1, "", "overflows"},
		{"overflow sat", []string{"counters", "incr", "--redis", url, "--type", "u8", "--prefix", "c8:", "--overflow", "sat", "e", "0", "300"}, 0, "255\n", ""},
		{"json", []string{"counters", "incr", "--redis", url, "--json", "user42", "0", "5"}, 0, `"value":5`, ""},
		{"bad slot", []string{"counters", "incr", "--redis", url, "user42", "365"}, 2, "", "slot 365 not within"},
		{"bad type", []string{"counters", "get", "--redis", url, "--type", "u64", "e", "0"}, 2, "", "invalid type"},
		{"bad window", []string{"counters", "get", "--redis", url, "e", "5:400"}, 2, "", "not within"},
		{"bad delta", []string{"counters", "incr", "--redis", url, "e", "1", "x"}, 2, "", "not an integer"},
		{"no sub", []string{"counters"}, 2, "", "subcommand"},
		{"unknown sub", []string{"counters", "zap"}, 2, "", "unknown counters subcommand"},
		{"help", []string{"counters", "--help"}, 0, "Examples:", ""},
		{"get help", []string{"counters", "get", "--help"}, 0, "squeeze counters get --json", ""},
		{"migrate needs from", []string{"counters", "migrate", "--redis", url, "a", "b"}, 2, "", "--from"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := runCLI(t, nil, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errs, tt.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, %q, %q", code, out, errs, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
	if n := rdb.StrLen(ctx, "cnt:user42").Val(); n != 730 {
		t.Fatalf("series created by incr is %d bytes, want 730 (pre-sized)", n)
	}
}

func TestCounters_CLIMigrate(t *testing.T) {
	r := testutil.StartRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	url := r.URL()

	days := []int64{280, 150, 250, 560}
	hex, _ := counters.AppendHex(nil, days)
	rdb.HSet(ctx, "newkey", "counts", hex)
	rdb.HSet(ctx, "daily:a", "counts", hex)
	rdb.HSet(ctx, "daily:b", "counts", "0118FFFFFFFFFFFFFFFB") // a negative written by the seed's script
	rdb.RPush(ctx, "oldkey", 280, 150, 250, 560)

	out, errs, code := runCLI(t, nil, "counters", "migrate", "--redis", url, "--from", "hex", "newkey", "n1")
	if code != 0 || !strings.Contains(out, "4 values verified, sum 1240") {
		t.Fatalf("hex: exit %d, %q, %q", code, out, errs)
	}
	out, errs, code = runCLI(t, nil, "counters", "migrate", "--redis", url, "--from", "list", "--delete", "oldkey", "n2")
	if code != 0 || !strings.Contains(out, "source deleted") || rdb.Exists(ctx, "oldkey").Val() != 0 {
		t.Fatalf("list: exit %d, %q, %q", code, out, errs)
	}
	out, errs, code = runCLI(t, nil, "counters", "migrate", "--redis", url, "--from", "list", "oldkey", "n3")
	if code != 1 || !strings.Contains(errs, "1 of 1 migrations failed") {
		t.Fatalf("missing source: exit %d, %q, %q", code, out, errs)
	}
	out, errs, code = runCLI(t, nil, "counters", "migrate", "--redis", url, "--from", "hex", "--expect", "4", "--scan", "daily:*", "--json")
	if code != 1 {
		t.Fatalf("scan with one bad source: exit %d, %q, %q", code, out, errs)
	}
	var reports []map[string]any // one JSON array
	if err := json.Unmarshal([]byte(out), &reports); err != nil {
		t.Fatalf("--json output is not one JSON array: %v\n%s", err, out)
	}
	if len(reports) != 2 {
		t.Fatalf("scan reports = %v", reports)
	}
	for _, m := range reports {
		ok := m["verified"] == true
		if (m["source"] == "daily:a counts") != ok {
			t.Fatalf("report %v", m)
		}
		if !ok && !strings.Contains(m["error"].(string), "want exactly 4") {
			t.Fatalf("bad source error: %v", m["error"])
		}
	}
	s, _ := counters.New(rdb, counters.Config{Prefix: "cnt:", Slots: 365})
	for _, e := range []string{"n1", "n2", "daily:a"} {
		got, err := s.AppendRange(ctx, nil, e, 0, 4)
		if err != nil || got[0] != 280 || got[3] != 560 {
			t.Fatalf("%s = %v, %v", e, got, err)
		}
	}
}

// TestCounters_CLIArgs: flags may follow the arguments, negative deltas stay
// arguments, an empty ENTITY is refused, --scan --json with no match prints
// an empty array, and a key longer than a series of the given --type and
// --slots is refused instead of read or incremented as garbage.
func TestCounters_CLIArgs(t *testing.T) {
	r := testutil.StartRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	url := r.URL()
	s32, err := counters.New(rdb, counters.Config{Prefix: "cnt:", Type: counters.U32, Slots: 365})
	if err != nil {
		t.Fatal(err)
	}
	if err := s32.Load(ctx, "wide", []int64{70000}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"flags after args", []string{"counters", "incr", "a", "3", "5", "--redis", url, "--type", "u8"}, 0, "5\n", ""},
		{"negative delta then flag", []string{"counters", "incr", "a", "3", "-2", "--redis", url, "--type", "u8"}, 0, "3\n", ""},
		{"get flags after args", []string{"counters", "get", "a", "3", "--redis", url, "--type", "u8", "--json"}, 0, `"sum":3`, ""},
		{"empty entity get", []string{"counters", "get", "--redis", url, "", "1"}, 2, "", "ENTITY must not be empty"},
		{"empty entity incr", []string{"counters", "incr", "--redis", url, "", "1"}, 2, "", "ENTITY must not be empty"},
		{"wider series read as u16", []string{"counters", "get", "--redis", url, "wide", "0"}, 1, "", "not a series of this --type and --slots"},
		{"wider series incremented as u16", []string{"counters", "incr", "--redis", url, "wide", "0"}, 1, "", "1460 bytes, more than the 730"},
		{"same series as u32", []string{"counters", "get", "--redis", url, "--type", "u32", "wide", "0"}, 0, "70000\n", ""},
		{"empty window json", []string{"counters", "get", "--redis", url, "--json", "a", "4:4"}, 0, `"values":[],"sum":0`, ""},
		{"scan json no match", []string{"counters", "migrate", "--redis", url, "--from", "hex", "--scan", "nomatch:*", "--json"}, 0, "[]\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := runCLI(t, nil, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errs, tt.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, %q, %q", code, out, errs, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
	if v, _ := s32.Get(ctx, "wide", 0); v != 70000 {
		t.Fatalf("the refused increment changed the u32 series: slot 0 = %d", v)
	}
}
