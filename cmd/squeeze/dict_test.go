package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/codec"
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
	// Publish: training again may give other bytes, so another id; the
	// output names the one it published.
	out, errs, code = runCLI(t, nil, "dict", "train", "--redis", url, "--pattern", "user:*", "--size", "8KiB", "--publish")
	m := regexp.MustCompile(`dictionary (\d+)`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("train --publish exit %d:\n%s%s", code, out, errs)
	}
	id := m[1]
	n, _ := strconv.ParseUint(id, 10, 32)
	rep.ID = uint32(n)
	if !strings.Contains(out, "published as squeeze:dict:"+id) || !strings.Contains(out, "zstd:3+dict") {
		t.Fatalf("train --publish:\n%s%s", out, errs)
	}
	// The pattern is a prefix: the output says how to use the dictionary
	// for those keys only, in a rule the proxy takes.
	rule := "user:=zstd:3,dict=" + id
	if _, err := parseRule(rule); err != nil || !strings.Contains(out, "squeeze proxy --rule '"+rule+"'") {
		t.Fatalf("train --publish does not print the rule %q (%v):\n%s", rule, err, out)
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
		{"train without redis", []string{"dict", "train", "--pattern", "user:*"}, 2, "", "needs a Redis: --redis URL or SQUEEZE_REDIS"},
		{"list without redis", []string{"dict", "list"}, 2, "", "needs a Redis: --redis URL or SQUEEZE_REDIS"},
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

// startProxy runs "squeeze proxy" with args until the test ends and returns
// a client connected to it.
func startProxy(t *testing.T, upstream string, args ...string) *redis.Client {
	t.Helper()
	port := testutil.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr syncBuffer
	go func() {
		done <- run(ctx, env{Stdout: io.Discard, Stderr: &stderr}, append([]string{"proxy",
			"--listen", "127.0.0.1:" + strconv.Itoa(port), "--upstream", upstream}, args...))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("proxy did not stop")
		}
	})
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	for i := 0; ; i++ {
		if rdb.Ping(context.Background()).Err() == nil {
			return rdb
		}
		select {
		case code := <-done:
			t.Fatalf("proxy exited with %d: %s", code, stderr.String())
		default:
		}
		if i == 200 {
			t.Fatalf("proxy not answering after 4s: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for a proxy goroutine writing logs
// while the test reads them.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDict_Proxies: one proxy writes with a dictionary; a second proxy,
// started before the dictionary was even published, reads the values by
// loading the dictionary from Redis when a value first names it.
func TestDict_Proxies(t *testing.T) {
	r := testutil.StartRedis(t)
	ctx := context.Background()
	direct := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer direct.Close()
	fillDocs(t, direct, "user:", 300, 1500)

	reader := startProxy(t, r.URL()) // knows no dictionary

	out, errs, code := runCLI(t, nil, "dict", "train", "--redis", r.URL(), "--pattern", "user:*", "--size", "8KiB", "--publish", "--json")
	if code != 0 {
		t.Fatalf("train exit %d: %s", code, errs)
	}
	var rep struct {
		ID uint32 `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	writer := startProxy(t, r.URL(), "--dict", strconv.FormatUint(uint64(rep.ID), 10))

	docs := make([]string, 20)
	for i := range docs {
		docs[i] = string(bench.JSONDocument(uint64(5000+i), 1200))
		if err := writer.Set(ctx, "new:"+strconv.Itoa(i), docs[i], 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	stored := direct.Get(ctx, "new:0").Val()
	h, err := codec.ParseHeader([]byte(stored))
	if err != nil || !h.HasDict || h.DictID != uint64(rep.ID) {
		t.Fatalf("stored through --dict: header %+v, %v", h, err)
	}
	t.Logf("%d-byte document stored in %d bytes with dictionary %d", len(docs[0]), len(stored), rep.ID)
	for i, want := range docs {
		if got, err := reader.Get(ctx, "new:"+strconv.Itoa(i)).Result(); err != nil || got != want {
			t.Fatalf("GET new:%d through the second proxy: %v (%d bytes, want %d)", i, err, len(got), len(want))
		}
	}
	if vals, err := reader.MGet(ctx, "new:1", "user:0001", "new:2").Result(); err != nil || vals[0] != docs[1] || vals[2] != docs[2] {
		t.Fatalf("MGET through the second proxy: %v", err)
	}
	if got, err := reader.GetRange(ctx, "new:3", 0, 9).Result(); err != nil || got != docs[3][:10] {
		t.Fatalf("GETRANGE through the second proxy: %q, %v", got, err)
	}
	if n, err := reader.StrLen(ctx, "new:3").Result(); err != nil || n != int64(len(docs[3])) {
		t.Fatalf("STRLEN through the second proxy: %d, %v", n, err)
	}

	// A frame naming a dictionary nobody published: an error naming the key.
	enc, _ := codec.NewEncoder(codec.MustParseAlgorithm("zstd:1"), codec.WithDictionary(mustDict(t, 40000)), codec.WithMinGain(-1))
	direct.Set(ctx, "orphan", enc.AppendEncode(nil, []byte(docs[0])), 0)
	if _, err := reader.Get(ctx, "orphan").Result(); err == nil || !strings.Contains(err.Error(), "orphan") || !strings.Contains(err.Error(), "squeeze:dict:40000") {
		t.Fatalf("GET of a value naming an unpublished dictionary: %v", err)
	}
	if got, err := reader.Get(ctx, "new:4").Result(); err != nil || got != docs[4] {
		t.Fatalf("the connection must stay usable: %v", err)
	}
}

func mustDict(t *testing.T, id uint32) codec.Dictionary {
	t.Helper()
	var samples [][]byte
	for i := range 100 {
		samples = append(samples, bench.JSONDocument(uint64(i), 800))
	}
	d, err := codec.TrainDictionary(id, samples, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDict_ProxyFlagErrors(t *testing.T) {
	r := testutil.StartRedis(t)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--dict", "abc"}, 2, "--dict must be a dictionary id"},
		{[]string{"--dict", "40000", "--codec", "lz4"}, 2, "--dict needs a zstd --codec"},
		{[]string{"--dict", "40000"}, 1, "squeeze:dict:40000"}, // not published
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		code := run(context.Background(), env{Stdout: io.Discard, Stderr: &stderr},
			append([]string{"proxy", "--listen", "127.0.0.1:0", "--upstream", r.URL()}, tt.args...))
		if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tt.args, code, stderr.String(), tt.code, tt.want)
		}
	}
}

// TestBenchRedis_Dict: --dict adds +dict rows and the report still writes.
func TestBenchRedis_Dict(t *testing.T) {
	srv := testutil.StartRedis(t)
	dir := t.TempDir()
	out, stderr, code := runCLI(t, nil, "bench", "redis", "--quick", "--redis", srv.URL(), "--path", "library",
		"--codecs", "zstd:1", "--sizes", "0,4kB", "--iterations", "1,2", "--repeat", "1", "--dict", "--json", "--report", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []struct {
		Codec     string  `json:"codec"`
		SizeBytes int     `json:"size_bytes"`
		Saved     float64 `json:"memory_saved_pct"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	saved := map[string]float64{}
	for _, r := range rows {
		if r.SizeBytes == 4000 {
			saved[r.Codec] = r.Saved
		}
	}
	if _, ok := saved["zstd:1+dict"]; !ok || saved["zstd:1+dict"] <= saved["zstd:1"] {
		t.Fatalf("memory saved at 4 kB: %v; want a zstd:1+dict row saving more than zstd:1", saved)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "memory.csv"))
	if err != nil || !strings.Contains(string(csv), "zstd:1+dict") {
		t.Fatalf("report lacks the dictionary rows: %v", err)
	}
	if _, stderr, code := runCLI(t, nil, "bench", "redis", "--dict", "--corpus", filepath.Join(dir, "results.json")); code != 2 || !strings.Contains(stderr, "--corpus") {
		t.Fatalf("--dict with --corpus: exit %d, %s", code, stderr)
	}
}

func TestGlobPrefix(t *testing.T) {
	for _, tt := range []struct {
		pattern, prefix string
		ok              bool
	}{
		{"user:*", "user:", true},
		{"a:b:*", "a:b:", true},
		{"*", "", false},
		{"user:*:cart", "", false},
		{"us?r:*", "", false},
		{"user:[ab]*", "", false},
		{`user\*x*`, "", false},
		{"user:", "", false},
	} {
		if prefix, ok := globPrefix(tt.pattern); prefix != tt.prefix || ok != tt.ok {
			t.Errorf("globPrefix(%q) = %q, %v; want %q, %v", tt.pattern, prefix, ok, tt.prefix, tt.ok)
		}
	}
}
