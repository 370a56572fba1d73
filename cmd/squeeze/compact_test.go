package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/dictstore"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// startS2Docs starts a Redis holding n generated documents of size bytes,
// written with s2 at doc:00, doc:01 ..., and returns it, a client and the
// documents by key.
func startS2Docs(t *testing.T, n, size int, seed uint64) (*testutil.Redis, *redis.Client, map[string][]byte) {
	t.Helper()
	r := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	s2, _ := codec.NewEncoder(codec.MustParseAlgorithm("s2"))
	docs := map[string][]byte{}
	for i := range n {
		k := fmt.Sprintf("doc:%02d", i)
		docs[k] = bench.JSONDocument(seed+uint64(i), size)
		if err := rdb.Set(context.Background(), k, s2.AppendEncode(nil, docs[k]), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return r, rdb, docs
}

func TestCompact_CLI(t *testing.T) {
	r, rdb, docs := startS2Docs(t, 60, 5000, 500)
	ctx := context.Background()
	rdb.Set(ctx, "other", "not mine", 0)
	url := r.URL()

	type result struct {
		DryRun    bool           `json:"dry_run"`
		Scanned   int            `json:"keys_scanned"`
		Rewritten int            `json:"keys_rewritten"`
		Skipped   map[string]int `json:"keys_skipped"`
		Codec     string         `json:"codec"`
		SavedPct  float64        `json:"memory_saved_pct"`
		Saved     int64          `json:"memory_saved_bytes"`
	}
	compactJSON := func(args ...string) result {
		t.Helper()
		out, errs, code := runCLI(t, nil, append([]string{"compact", "--redis", url, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("compact %v: exit %d: %s", args, code, errs)
		}
		var res result
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("--json: %v\n%s", err, out)
		}
		return res
	}
	// Everything is hot: the default --min-idle is 10 minutes.
	if res := compactJSON("--pattern", "doc:*"); res.Rewritten != 0 || res.Skipped["hot"] != 60 {
		t.Fatalf("hot keys: %+v", res)
	}
	res := compactJSON("--pattern", "doc:*", "--min-idle", "0", "--dry-run")
	if !res.DryRun || res.Rewritten != 60 || res.SavedPct <= 0 || res.Codec != "zstd:9" {
		t.Fatalf("dry run: %+v", res)
	}
	for k, v := range docs {
		if h, _ := codec.ParseHeader([]byte(rdb.Get(ctx, k).Val())); h.ID != codec.IDS2 {
			t.Fatalf("dry run rewrote %s (%v)", k, v[:0])
		}
	}
	out, errs, code := runCLI(t, nil, "compact", "--redis", url, "--min-idle", "0", "--codec", "zstd:19")
	if code != 0 || !strings.Contains(out, "rewrote 60 of 61 keys") || !strings.Contains(out, "skipped: raw") || !strings.Contains(out, "MEMORY USAGE") {
		t.Fatalf("exit %d:\n%s%s", code, out, errs)
	}
	t.Logf("output:\n%s", out)
	dec, _ := codec.NewDecoder()
	for k, v := range docs {
		stored := []byte(rdb.Get(ctx, k).Val())
		got, err := dec.AppendDecode(nil, stored)
		if h, _ := codec.ParseHeader(stored); err != nil || string(got) != string(v) || h.ID != codec.IDZstd {
			t.Fatalf("%s: %v, codec %v", k, err, h.ID)
		}
	}
	if rdb.Get(ctx, "other").Val() != "not mine" {
		t.Fatal("raw value rewritten without --include-raw")
	}

	// With a published dictionary.
	samples := make([][]byte, 30)
	for i := range samples {
		samples[i] = bench.JSONDocument(uint64(9000+i), 5000)
	}
	d, err := dictstore.TrainID(samples, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	if err := dictstore.Publish(ctx, rdb, d, dictstore.Meta{ID: d.ID, Size: len(d.Data)}); err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatUint(uint64(d.ID), 10)
	res = compactJSON("--min-idle", "0", "--codec", "zstd:3", "--dict", id, "--min-gain", "0")
	if res.Codec != "zstd:3+dict "+id || res.Skipped["squeeze-key"] != 2 {
		t.Fatalf("--dict: %+v", res)
	}
	t.Logf("--dict: %+v", res)

	// Migrate off zstd (as before going back to a release without a
	// codec): every zstd frame becomes s2, though larger.
	res = compactJSON("--min-idle", "0", "--from", "zstd", "--codec", "s2")
	if res.Rewritten != 60 || res.Skipped["raw"] != 1 || res.SavedPct >= 0 {
		t.Fatalf("--from zstd: %+v", res)
	}
	for k, v := range docs {
		stored := []byte(rdb.Get(ctx, k).Val())
		got, err := dec.AppendDecode(nil, stored)
		if h, _ := codec.ParseHeader(stored); err != nil || string(got) != string(v) || h.ID != codec.IDS2 {
			t.Fatalf("%s after --from zstd: %v, codec %v", k, err, h.ID)
		}
	}
	if res = compactJSON("--min-idle", "0", "--from", "zstd,minlz", "--codec", "s2"); res.Rewritten != 0 || res.Skipped["other-codec"] != 60 {
		t.Fatalf("--from zstd again: %+v", res)
	}

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"no redis", []string{"compact"}, 2, "", "needs a Redis: --redis URL or SQUEEZE_REDIS"},
		{"bad codec", []string{"compact", "--redis", url, "--codec", "zip"}, 2, "", "--codec"},
		{"none", []string{"compact", "--redis", url, "--codec", "none"}, 2, "", "decompress"},
		{"dict lz4", []string{"compact", "--redis", url, "--codec", "lz4", "--dict", "40000"}, 2, "", "zstd codecs only"},
		{"dict bad", []string{"compact", "--redis", url, "--dict", "x"}, 2, "", "not a dictionary id"},
		{"dict missing", []string{"compact", "--redis", url, "--dict", "40000"}, 1, "", "squeeze:dict:40000"},
		{"min gain", []string{"compact", "--redis", url, "--min-gain", "100"}, 2, "", "percentage"},
		{"passes without every", []string{"compact", "--redis", url, "--passes", "2"}, 2, "", "without --every"},
		{"negative every", []string{"compact", "--redis", url, "--every", "-1s"}, 2, "", "--every must not be negative"},
		{"args", []string{"compact", "--redis", url, "doc:*"}, 2, "", "no arguments"},
		{"from target", []string{"compact", "--redis", url, "--from", "s2,zstd", "--codec", "zstd:19"}, 2, "", "names the target codec"},
		{"from raw", []string{"compact", "--redis", url, "--from", "s2", "--include-raw"}, 2, "", "use one"},
		{"from none", []string{"compact", "--redis", url, "--from", "none"}, 2, "", "--include-raw compacts them"},
		{"from unknown", []string{"compact", "--redis", url, "--from", "zip"}, 2, "", "--from: codec: unknown codec"},
		{"portable s2", []string{"compact", "--redis", url, "--portable", "--codec", "s2"}, 2, "", "--codec with --portable: codec s2:default is Go-only"},
		{"portable xz", []string{"compact", "--redis", url, "--portable", "--codec", "xz"}, 2, "", "not in the portable profile"},
		{"bad flag", []string{"compact", "--nope"}, 2, "", "--help"},
		{"help", []string{"compact", "--help"}, 0, "Examples:", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := runCLI(t, nil, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errs, tt.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, %q, %q", code, out, errs, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}

// TestCompact_Every: --every repeats the pass, one JSON line per pass; the
// second pass finds the keys the first compacted, and leaves them.
func TestCompact_Every(t *testing.T) {
	r, _, _ := startS2Docs(t, 20, 4000, 700)
	out, errs, code := runCLI(t, nil, "compact", "--redis", r.URL(), "--json", "--min-idle", "0", "--every", "20ms", "--passes", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want one per pass:\n%s", len(lines), out)
	}
	type pass struct {
		Pass      int            `json:"pass"`
		Rewritten int            `json:"keys_rewritten"`
		Skipped   map[string]int `json:"keys_skipped"`
	}
	var p [2]pass
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &p[i]); err != nil {
			t.Fatalf("line %d: %v: %s", i+1, err, l)
		}
	}
	if p[0].Pass != 1 || p[0].Rewritten != 20 || p[1].Pass != 2 || p[1].Rewritten != 0 || p[1].Skipped["no-gain"] != 20 {
		t.Fatalf("passes: %+v", p)
	}
	out, _, code = runCLI(t, nil, "compact", "--redis", r.URL(), "--min-idle", "0", "--every", "1ms", "--passes", "2")
	if code != 0 || !strings.Contains(out, "pass 1, ") || !strings.Contains(out, "pass 2, ") {
		t.Fatalf("exit %d, text output:\n%s", code, out)
	}
}

// TestCompact_LFU: under an LFU policy the error says what to do.
func TestCompact_LFU(t *testing.T) {
	r := testutil.StartRedis(t, "--maxmemory-policy", "allkeys-lfu")
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	rdb.Set(context.Background(), "k", "v", 0)
	_, errs, code := runCLI(t, nil, "compact", "--redis", r.URL())
	if code != 1 || !strings.Contains(errs, "LFU") || !strings.Contains(errs, "--min-idle 0") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	_, errs, code = runCLI(t, nil, "compact", "--redis", r.URL(), "--min-idle", "0")
	if code != 0 {
		t.Fatalf("--min-idle 0: exit %d, stderr %q", code, errs)
	}
}

// TestCompact_Portable: --portable --from s2 moves what the proxy wrote with
// its default codec into the portable profile, which the ports read.
func TestCompact_Portable(t *testing.T) {
	r, rdb, docs := startS2Docs(t, 20, 5000, 500)
	ctx := context.Background()
	out, errs, code := runCLI(t, nil, "compact", "--redis", r.URL(), "--portable", "--from", "s2,minlz", "--codec", "zstd:3", "--min-idle", "0")
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out, errs)
	}
	dec, _ := codec.NewDecoder()
	for k, v := range docs {
		stored := []byte(rdb.Get(ctx, k).Val())
		h, err := codec.ParseHeader(stored)
		if err != nil || !h.ID.Portable() {
			t.Fatalf("%s: header %+v, %v; want a portable codec", k, h, err)
		}
		if got, err := dec.AppendDecode(nil, stored); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("%s: %v", k, err)
		}
	}
}
