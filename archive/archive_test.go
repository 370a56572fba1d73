package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// writeTree writes files (path -> contents) under a new temporary directory.
func writeTree(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for p, data := range files {
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func sampleFiles() map[string][]byte {
	r := rand.New(rand.NewPCG(5, 6))
	files := map[string][]byte{}
	for i := range 250 {
		var b strings.Builder
		for b.Len() < 2000+i*40 {
			fmt.Fprintf(&b, "line %d: the quick brown fox %d jumps over the lazy dog\n", r.IntN(1000), i)
		}
		files[fmt.Sprintf("logs/day%03d/app.log", i)] = []byte(b.String())
	}
	random := make([]byte, 5000)
	for i := range random {
		random[i] = byte(r.UintN(256))
	}
	files["img/photo.jpg"] = random
	files["tiny.txt"] = []byte("hi\n")
	files["empty"] = nil
	return files
}

func TestArchive(t *testing.T) {
	srv := testutil.StartRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	files := sampleFiles()
	dir := writeTree(t, files)
	os.Symlink("tiny.txt", filepath.Join(dir, "link"))
	var progress int
	st, err := Put(ctx, rdb, "arc:docs", os.DirFS(dir), Options{Progress: func(int, int) { progress++ }})
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != len(files) || st.Skipped != 1 || st.SavedPct() < 50 || progress == 0 {
		t.Fatalf("%+v saved %.1f%%, %d progress calls", st, st.SavedPct(), progress)
	}
	if n := rdb.Exists(ctx, tempKey("arc:docs")).Val(); n != 0 {
		t.Fatal("the temporary key is left behind")
	}
	for p, want := range files {
		got, err := Get(ctx, rdb, nil, "arc:docs", p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Get %s: %d bytes, %v; want %d", p, len(got), err, len(want))
		}
	}
	// The log files are stored as zstd frames; the random and tiny ones raw.
	if v := rdb.HGet(ctx, "arc:docs", "logs/day007/app.log").Val(); !codec.IsFramed([]byte(v)) {
		t.Fatal("a log file is stored raw")
	}
	if v := rdb.HGet(ctx, "arc:docs", "tiny.txt").Val(); v != "hi\n" {
		t.Fatalf("tiny.txt stored as %q", v)
	}
	if _, err := Get(ctx, rdb, nil, "arc:docs", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing file: %v", err)
	}

	list, err := List(ctx, rdb, "arc:docs")
	if err != nil || len(list) != len(files) {
		t.Fatalf("List: %d entries, %v", len(list), err)
	}
	for i, e := range list {
		if i > 0 && list[i-1].Path >= e.Path {
			t.Fatalf("List not sorted at %s", e.Path)
		}
		if e.Size != int64(len(files[e.Path])) {
			t.Fatalf("List %s: size %d, want %d", e.Path, e.Size, len(files[e.Path]))
		}
		if strings.HasPrefix(e.Path, "logs/") && (e.Codec != "zstd" || e.Stored >= e.Size) {
			t.Fatalf("List %+v", e)
		}
	}

	out := t.TempDir()
	xst, err := Extract(ctx, rdb, nil, "arc:docs", out)
	if err != nil || xst.Files != len(files) {
		t.Fatalf("Extract: %+v %v", xst, err)
	}
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(p)))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("extracted %s: %v", p, err)
		}
	}

	// A new Put replaces the archive whole: files not in it are gone.
	if _, err := Put(ctx, rdb, "arc:docs", os.DirFS(writeTree(t, map[string][]byte{"only.txt": []byte("x")})), Options{}); err != nil {
		t.Fatal(err)
	}
	if n := rdb.HLen(ctx, "arc:docs").Val(); n != 1 {
		t.Fatalf("after the second Put the archive has %d files", n)
	}
}

func TestArchive_Errors(t *testing.T) {
	srv := testutil.StartRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	if _, err := Put(ctx, rdb, "a", os.DirFS(t.TempDir()), Options{}); err == nil || !strings.Contains(err.Error(), "no regular files") {
		t.Fatalf("empty directory: %v", err)
	}
	if _, err := Put(ctx, rdb, "a", os.DirFS(filepath.Join(t.TempDir(), "missing")), Options{}); err == nil {
		t.Fatal("missing directory accepted")
	}
	if _, err := List(ctx, rdb, "none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("List of no archive: %v", err)
	}
	rdb.Set(ctx, "str", "x", 0)
	if _, err := List(ctx, rdb, "str"); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("List of a string: %v", err)
	}
	// A corrupt file is an error naming it, never garbage.
	enc, _ := codec.NewEncoder(DefaultAlgorithm)
	frame := enc.AppendEncode(nil, bytes.Repeat([]byte("abc"), 1000))
	frame[len(frame)-1] ^= 0xff
	rdb.HSet(ctx, "bad", "f.txt", frame, "../escape", "x")
	if _, err := Get(ctx, rdb, nil, "bad", "f.txt"); err == nil || !strings.Contains(err.Error(), "f.txt") {
		t.Fatalf("corrupt file: %v", err)
	}
	rdb.HDel(ctx, "bad", "f.txt")
	out := t.TempDir()
	if _, err := Extract(ctx, rdb, nil, "bad", out); err == nil || !strings.Contains(err.Error(), "would leave") {
		t.Fatalf("path out of the directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(out), "escape")); err == nil {
		t.Fatal("Extract wrote outside its directory")
	}
}

func TestTempKey(t *testing.T) {
	for key, want := range map[string]string{
		"arc:docs":    "{arc:docs}.squeeze-tmp",
		"{user1}:arc": "{user1}:arc.squeeze-tmp",
	} {
		if got := tempKey(key); got != want {
			t.Errorf("tempKey(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestArchive_Dict: with a trained dictionary, many small files of one
// kind take less room than without; the dictionary is published, and a
// reader that never saw it loads it from Redis.
func TestArchive_Dict(t *testing.T) {
	srv := testutil.StartRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	r := rand.New(rand.NewPCG(9, 9))
	files := map[string][]byte{}
	for i := range 300 {
		files[fmt.Sprintf("orders/%04d.json", i)] = fmt.Appendf(nil,
			`{"order_id":%d,"customer":{"name":"customer %d","country":"%s","tier":"%s"},"items":[{"sku":"SKU-%05d","quantity":%d,"unit_price":{"amount":%d,"currency":"EUR"}}],"status":"%s","shipping":{"method":"%s","tracking":"TRK%09d"}}`,
			i, r.IntN(5000), []string{"DE", "FR", "NL"}[r.IntN(3)], []string{"gold", "silver"}[r.IntN(2)], r.IntN(99999), 1+r.IntN(5), r.IntN(20000),
			[]string{"paid", "shipped", "delivered"}[r.IntN(3)], []string{"standard", "express"}[r.IntN(2)], r.IntN(1e9))
	}
	dir := writeTree(t, files)
	plain, err := Put(ctx, rdb, "arc:plain", os.DirFS(dir), Options{})
	if err != nil {
		t.Fatal(err)
	}
	withDict, err := Put(ctx, rdb, "arc:dict", os.DirFS(dir), Options{Dict: true})
	if err != nil {
		t.Fatal(err)
	}
	if withDict.DictID == 0 || withDict.Stored >= plain.Stored*3/4 {
		t.Fatalf("dictionary %d: stored %d bytes, %d without", withDict.DictID, withDict.Stored, plain.Stored)
	}
	if n := rdb.Exists(ctx, fmt.Sprintf("squeeze:dict:%d", withDict.DictID)).Val(); n != 1 {
		t.Fatal("the dictionary is not published")
	}
	for p, want := range files {
		got, err := Get(ctx, rdb, nil, "arc:dict", p) // a new resolver each time: loads the dictionary
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Get %s: %v", p, err)
		}
		break
	}
	if _, err := Put(ctx, rdb, "arc:x", os.DirFS(dir), Options{Dict: true, Algorithm: codec.MustParseAlgorithm("s2")}); err == nil {
		t.Fatal("a dictionary with s2 was accepted")
	}
}
