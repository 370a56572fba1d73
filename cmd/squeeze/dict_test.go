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
	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/dictstore"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// fillDocs writes n small generated JSON documents at prefix0000...
func fillDocs(t *testing.T, rdb *redis.Client, prefix string, n, size int) {
	t.Helper()
	ctx := context.Background()
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			p.Set(ctx, fmt.Sprintf("%s%04d", prefix, i), bench.JSONDocument(uint64(1000+i), size), 0)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestDict_CLI(t *testing.T) {
	r := testutil.StartRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	fillDocs(t, rdb, "user:", 300, 1500)
	url := r.URL()

	// Train without publishing: JSON report, nothing written.
	out, errs, code := runCLI(t, nil, "dict", "train", "--redis", url, "--pattern", "user:*", "--size", "8KiB", "--json")
	if code != 0 {
		t.Fatalf("train exit %d: %s", code, errs)
	}
	var rep struct {
		ID           uint32  `json:"id"`
		Samples      int     `json:"samples"`
		HeldOut      int     `json:"held_out"`
		RatioWith    float64 `json:"ratio_with"`
		RatioWithout float64 `json:"ratio_without"`
		SavedWith    float64 `json:"memory_saved_pct_with"`
		Published    bool    `json:"published"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("train --json: %v\n%s", err, out)
	}
	if rep.ID < dictstore.MinUserID || rep.Samples+rep.HeldOut != 300 || rep.RatioWith <= rep.RatioWithout || rep.Published {
		t.Fatalf("train report %+v", rep)
	}
	if n := rdb.Exists(ctx, dictstore.Key(rep.ID)).Val(); n != 0 {
		t.Fatal("train without --publish wrote the dictionary")
	}
	// Publish: same data, same id.
	out, errs, code = runCLI(t, nil, "dict", "train", "--redis", url, "--pattern", "user:*", "--size", "8KiB", "--publish")
	id := strconv.FormatUint(uint64(rep.ID), 10)
	if code != 0 || !strings.Contains(out, "dictionary "+id) || !strings.Contains(out, "published as squeeze:dict:"+id) || !strings.Contains(out, "zstd:3+dict") {
		t.Fatalf("train --publish exit %d:\n%s%s", code, out, errs)
	}
	t.Logf("train output:\n%s", out)

	dir := t.TempDir()
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"list", []string{"dict", "list", "--redis", url}, 0, id, ""},
		{"list json", []string{"dict", "list", "--redis", url, "--json"}, 0, `"pattern":"user:*"`, ""},
		{"show", []string{"dict", "show", "--redis", url, id}, 0, "trained on", ""},
		{"show out", []string{"dict", "show", "--redis", url, "--out", filepath.Join(dir, "d.bin"), id}, 0, "written to", ""},
		{"show missing", []string{"dict", "show", "--redis", url, "40000"}, 1, "", "squeeze:dict:40000"},
		{"show bad id", []string{"dict", "show", "--redis", url, "zero"}, 2, "", "not a number"},
		{"train without redis", []string{"dict", "train", "--pattern", "user:*"}, 2, "", "needs --redis"},
		{"list without redis", []string{"dict", "list"}, 2, "", "needs --redis"},
		{"train without pattern", []string{"dict", "train", "--redis", url}, 2, "", "needs --pattern"},
		{"train lz4", []string{"dict", "train", "--redis", url, "--pattern", "u*", "--codec", "lz4"}, 2, "", "zstd only"},
		{"train too few", []string{"dict", "train", "--redis", url, "--pattern", "nothing:*"}, 1, "", "usable values"},
		{"no sub", []string{"dict"}, 2, "", "subcommand"},
		{"unknown sub", []string{"dict", "zap"}, 2, "", "unknown dict subcommand"},
		{"help", []string{"dict", "--help"}, 0, "Examples:", ""},
		{"train help", []string{"dict", "train", "--help"}, 0, "--publish", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := runCLI(t, nil, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errs, tt.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, %q, %q", code, out, errs, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
	data, err := os.ReadFile(filepath.Join(dir, "d.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := dictstore.Load(ctx, rdb, rep.ID); err != nil || string(d.Data) != string(data) {
		t.Fatalf("--out wrote other bytes than Redis holds (%v)", err)
	}
}
