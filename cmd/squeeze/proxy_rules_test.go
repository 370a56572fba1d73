package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/dictstore"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

func TestParseRule(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{in: "doc:=zstd:3", want: "doc:=zstd:3"},
		{in: "img:=none", want: "img:=none"},
		{in: "s:=s2,min-size=1KiB,min-gain=0.2", want: "s:=s2:default,min-size=1024,min-gain=0.2"},
		{in: "d:=zstd:1,dict=42", want: "d:=zstd:1,dict=42"},
		{in: "doc:", err: "want PREFIX=CODEC"},
		{in: "=zstd:1", err: "want PREFIX=CODEC"},
		{in: "doc:=", err: "want PREFIX=CODEC"},
		{in: "doc:=zstd:99", err: "doc:"},
		{in: "doc:=snappyish", err: "doc:"},
		{in: "doc:=s2,dict=5", err: "dict needs a zstd codec"},
		{in: "doc:=zstd:1,dict=0", err: "dictionary id"},
		{in: "doc:=zstd:1,min-gain=1", err: "min-gain"},
		{in: "doc:=zstd:1,min-size=big", err: "min-size"},
		{in: "doc:=zstd:1,level=3", err: `unknown option "level=3"`},
	}
	for _, tt := range tests {
		r, err := parseRule(tt.in)
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: %v, want error %q", tt.in, err, tt.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tt.in, err)
		case r.String() != tt.want:
			t.Errorf("%q: %s, want %s", tt.in, r, tt.want)
		}
	}
}

// TestProxySettings_Rules: rules come from the file, the environment
// (several separated by ;) or the command line, and a later source
// replaces the earlier one's rules instead of adding to them.
func TestProxySettings_Rules(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "squeeze.conf")
	os.WriteFile(cfg, []byte("rule = doc:=zstd:3\nrule = img:=none # pictures\n"), 0o644)
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"file", map[string]string{"SQUEEZE_CONFIG": cfg}, nil, "doc:=zstd:3;img:=none"},
		{"env beats file", map[string]string{"SQUEEZE_CONFIG": cfg, "SQUEEZE_RULE": "a:=lz4; b:=s2"}, nil, "a:=lz4:fast;b:=s2:default"},
		{"flags beat env", map[string]string{"SQUEEZE_RULE": "a:=lz4"}, []string{"--rule", "c:=brotli:1", "--rule", "d:=zstd:1"}, "c:=brotli:1;d:=zstd:1"},
		{"flags beat file", nil, []string{"--config", cfg, "--rule", "c:=brotli:1"}, "c:=brotli:1"},
		{"none", nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := proxySettings(t, tt.env, tt.args)
			if got := p.rules.String(); got != tt.want {
				t.Errorf("rules %q, want %q", got, tt.want)
			}
		})
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), env{Stdout: io.Discard, Stderr: &stderr}, []string{"proxy", "--rule", "a:=lz4", "--rule", "a:=s2"}); code != 2 || !strings.Contains(stderr.String(), `two rules for prefix "a:"`) {
		t.Errorf("duplicate prefix: exit %d, %s", code, stderr.String())
	}
}

// TestProxyRules_Dictionary: a rule names a published dictionary, which
// the proxy loads at start; an unknown one stops it with an error.
func TestProxyRules_Dictionary(t *testing.T) {
	r := testutil.StartRedis(t)
	ctx := context.Background()
	docs := publishTestDict(t, r.Addr, 777)
	for _, tt := range []struct {
		rule, err string
	}{{"user:=zstd:3,dict=777,min-size=0", ""}, {"user:=zstd:3,dict=778", "--rule user:: dict 778"}} {
		fs, p, _ := newProxyFlags(env{Stdout: io.Discard, Stderr: io.Discard})
		if err := parseFlags(fs, []string{"--upstream", r.URL(), "--rule", tt.rule, "--rule", "img:=none"}); err != nil {
			t.Fatal(err)
		}
		srv, err := p.buildServer(slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		closeDicts, err := p.setupDictionaries(ctx, srv)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %v, want %q", tt.rule, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		closeDicts()
		if len(srv.Rules) != 2 {
			t.Fatalf("%d rules, want 2", len(srv.Rules))
		}
		h, err := codec.ParseHeader(srv.Rules[0].Encoder.AppendEncode(nil, bytes.Join(docs[3:9], []byte(","))))
		if err != nil || !h.HasDict || h.DictID != 777 || h.ID != codec.IDZstd {
			t.Errorf("user: value header %+v, %v; want zstd with dictionary 777", h, err)
		}
		if a := srv.Rules[1].Encoder.Algorithm(); a.ID != codec.IDNone {
			t.Errorf("img: rule codec %s, want none", a)
		}
	}
}

// FuzzParseRule: any --rule value parses or fails with an error, never a
// panic; a rule that parses prints as a value that parses to the same rule.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"doc:=zstd:3", "img:=none", "s:=s2,min-size=1KiB,min-gain=0.2", "d:=zstd:1,dict=42", "=", "a=b=c", "x:=lz4,min-size=", "é:=brotli:11,dict=2147483647"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseRule(s)
		if err != nil {
			return
		}
		again, err := parseRule(r.String())
		if err != nil || again != r {
			t.Fatalf("%q parsed as %+v, printed %q, reparsed %+v, %v", s, r, r.String(), again, err)
		}
	})
}

// TestProxyDictionaries_Sentinel: behind Sentinel, the proxy loads the
// dictionary --dict names from the master the Sentinel names.
func TestProxyDictionaries_Sentinel(t *testing.T) {
	master := testutil.StartRedis(t)
	sen := testutil.StartSentinel(t, "m", master.Addr)
	ctx := context.Background()
	docs := publishTestDict(t, master.Addr, 4242)
	p := proxySettings(t, nil, []string{"--upstream", "sentinel://" + sen.Addr + "/m", "--dict", "4242"})
	srv, err := p.buildServer(slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	closeDicts, err := p.setupDictionaries(ctx, srv)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDicts()
	h, err := codec.ParseHeader(srv.Encoder.AppendEncode(nil, bytes.Join(docs[:8], nil)))
	if err != nil || !h.HasDict || h.DictID != 4242 {
		t.Fatalf("a new value's header %+v, %v: want dictionary 4242", h, err)
	}
}

// publishTestDict trains dictionary id on generated JSON documents,
// publishes it in the Redis at addr, and returns the documents.
func publishTestDict(t *testing.T, addr string, id uint32) [][]byte {
	t.Helper()
	var docs [][]byte
	for i := range 1000 {
		docs = append(docs, fmt.Appendf(nil, `{"user_id":%d,"country":"%s","plan":"%s"}`, i*7919, []string{"DE", "FR", "US"}[i%3], []string{"free", "pro"}[i%2]))
	}
	d, err := codec.TrainDictionary(id, docs, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := dictstore.Publish(context.Background(), rdb, d, dictstore.Meta{}); err != nil {
		t.Fatal(err)
	}
	return docs
}

// TestProxyWritePolicy_Concurrency: the proxy's encoders, the default one
// and each rule's, may compress one large value on every CPU, although Go
// code runs on --procs threads (half the CPUs by default): GOMAXPROCS is
// set before they are built, and the encoders would otherwise take it.
func TestProxyWritePolicy_Concurrency(t *testing.T) {
	p := proxySettings(t, nil, []string{"--procs", "1", "--rule", "doc:=zstd:1", "--rule", "log:=lz4"})
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	enc, rules, err := p.writePolicy(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := enc.Concurrency(); got != runtime.NumCPU() {
		t.Errorf("default encoder: concurrency %d, want %d (the CPUs)", got, runtime.NumCPU())
	}
	for _, r := range rules {
		if got := r.Encoder.Concurrency(); got != runtime.NumCPU() {
			t.Errorf("rule %s: concurrency %d, want %d", r.Prefix, got, runtime.NumCPU())
		}
	}
}

// TestProxyPortable: --portable writes snappy by default and refuses to
// start when --codec or a rule names a codec other languages cannot read.
func TestProxyPortable(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string // error, or the default codec
	}{
		{[]string{"--portable"}, "snappy:default"},
		{[]string{"--portable", "--codec", "zstd:3", "--rule", "a:=lz4", "--rule", "b:=none"}, "zstd:3"},
		{[]string{"--codec", "s2"}, "s2:default"},
		{[]string{}, "s2:default"},
		{[]string{"--portable", "--codec", "s2"}, "--codec with --portable: codec s2:default is Go-only"},
		{[]string{"--portable", "--codec", "xz"}, "not in the portable profile"},
		{[]string{"--portable", "--codec", "gzip:6", "--rule", "a:=lz4", "--rule", "b:=minlz"}, "--rule b: with --portable: codec minlz:fastest is Go-only"},
	} {
		fs, p, _ := newProxyFlags(env{Stdout: io.Discard, Stderr: io.Discard})
		if err := parseFlags(fs, tt.args); err != nil {
			t.Fatal(err)
		}
		enc, _, err := p.writePolicy(context.Background(), nil)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = enc.Algorithm().String()
		}
		if !strings.Contains(got, tt.want) {
			t.Errorf("%q: %s, want %q", tt.args, got, tt.want)
		}
	}
	if p := proxySettings(t, map[string]string{"SQUEEZE_PORTABLE": "true"}, nil); !p.portable {
		t.Error("SQUEEZE_PORTABLE=true did not set --portable")
	}
	var stderr bytes.Buffer
	code := run(context.Background(), env{Stdout: io.Discard, Stderr: &stderr}, []string{"proxy", "--portable", "--rule", "s:=s2:better"})
	if code != 2 || !strings.Contains(stderr.String(), "Go-only") || !strings.Contains(stderr.String(), "snappy stands in for s2") {
		t.Errorf("proxy --portable with an s2 rule: exit %d, %s", code, stderr.String())
	}
}
