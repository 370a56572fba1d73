package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestDemo_WriteSample: the sample data the guides start from is valid
// JSON of the size asked, the same for the same seed, another for another,
// and needs no Redis.
func TestDemo_WriteSample(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "doc.json")
	_, errs, code := runCLI(t, nil, "demo", "--write-sample", p, "--redis", "127.0.0.1:1")
	if code != 0 || !strings.Contains(errs, "221.9 kB") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	doc, err := os.ReadFile(p)
	if err != nil || len(doc) != demoDocSize || !json.Valid(doc) {
		t.Fatalf("%d bytes, valid JSON %v, %v", len(doc), json.Valid(doc), err)
	}
	small, _, code := runCLI(t, nil, "demo", "--write-sample", "-", "--sample-size", "4KB", "--seed", "7")
	again, _, _ := runCLI(t, nil, "demo", "--write-sample", "-", "--sample-size", "4KB", "--seed", "7")
	other, _, _ := runCLI(t, nil, "demo", "--write-sample", "-", "--sample-size", "4KB", "--seed", "8")
	if code != 0 || len(small) != 4000 || !json.Valid([]byte(small)) || small != again || small == other {
		t.Fatalf("exit %d, %d bytes, same seed equal %v, other seed equal %v", code, len(small), small == again, small == other)
	}
	for _, args := range [][]string{
		{"demo", "--seed", "3"},
		{"demo", "--write-sample", "-", "--sample-size", "10"},
	} {
		if _, errs, code := runCLI(t, nil, args...); code != 2 {
			t.Errorf("squeeze %s: exit %d, %s", strings.Join(args, " "), code, errs)
		}
	}
}

// TestCompact_SaysWhyNothingWasRewritten: a first dry run on fresh keys
// skips them all as hot; the output says so and what to pass, and so for
// values stored without a frame.
func TestCompact_SaysWhyNothingWasRewritten(t *testing.T) {
	r := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	for i := range 3 {
		rdb.Set(context.Background(), fmt.Sprintf("doc:%d", i), strings.Repeat(`{"a":"b"},`, 100), 0)
	}
	out, errs, code := runCLI(t, nil, "compact", "--redis", r.URL(), "--dry-run")
	if code != 0 || !strings.Contains(out, "3 keys were used less than --min-idle (10m0s) ago") || !strings.Contains(out, "--min-idle 0 takes them") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = runCLI(t, nil, "compact", "--redis", r.URL(), "--dry-run", "--min-idle", "0")
	if code != 0 || !strings.Contains(out, "3 values are stored without a squeeze frame: --include-raw") || strings.Contains(out, "--min-idle (") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}

// TestCounters_OtherTypeSaysWhatToDo: a command with another --type than
// the series was created with says how to fix the command line.
func TestCounters_OtherTypeSaysWhatToDo(t *testing.T) {
	r := testutil.StartRedis(t)
	if _, errs, code := runCLI(t, nil, "counters", "incr", "--redis", r.URL(), "user42", "17"); code != 0 {
		t.Fatal(errs)
	}
	_, errs, code := runCLI(t, nil, "counters", "incr", "--redis", r.URL(), "--type", "u8", "--overflow", "sat", "user42", "17", "250")
	if code != 1 || !strings.Contains(errs, "another --prefix for a new series") {
		t.Fatalf("exit %d, %q", code, errs)
	}
	out, errs, code := runCLI(t, nil, "counters", "incr", "--redis", r.URL(), "--prefix", "hits8:", "--type", "u8", "--overflow", "sat", "user42", "17", "250")
	if code != 0 || out != "250\n" {
		t.Fatalf("exit %d, %q %q", code, out, errs)
	}
}

// TestDictTrain_Quiet: --quiet prints the id alone, the same on every run
// and the one --publish stores.
func TestDictTrain_Quiet(t *testing.T) {
	r := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	fillDocs(t, rdb, "user:", 200, 600)
	var ids []string
	for _, extra := range [][]string{nil, nil, {"--publish"}} {
		out, errs, code := runCLI(t, nil, append([]string{"dict", "train", "--redis", r.URL(), "--pattern", "user:*", "--quiet"}, extra...)...)
		if _, err := strconv.ParseUint(strings.TrimSpace(out), 10, 32); code != 0 || err != nil || strings.Count(out, "\n") != 1 {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	if ids[0] != ids[1] || ids[1] != ids[2] {
		t.Fatalf("ids %v: training the same values gave other ids", ids)
	}
	out, _, code := runCLI(t, nil, "dict", "show", "--redis", r.URL(), ids[2])
	if code != 0 || !strings.Contains(out, "squeeze:dict:"+ids[2]) {
		t.Fatalf("the published id is not %s:\n%s", ids[2], out)
	}
	if _, errs, code := runCLI(t, nil, "dict", "train", "--redis", r.URL(), "--pattern", "user:*", "--quiet", "--json"); code != 2 {
		t.Fatalf("--quiet with --json: exit %d, %s", code, errs)
	}
}
