// Package archive keeps a directory of files in one Redis hash: each file
// is a field named by its slash-separated path, whose value is the file's
// contents as a squeeze frame. It is the Redis answer to a zip of a
// directory from which single files are served: reading one file is one
// HGET and one decode, whatever the number of files, where a zip reader
// must first find the entry among all of them.
//
// Any client reads a file through squeeze proxy with a plain HGET (the
// proxy decodes hash field values), or with Get here. Put replaces an
// archive atomically: it fills a temporary key and renames it over the
// archive, so readers see the old files or the new ones, never a mix.
// Files keep their contents only: not their modes, owners or times.
//
// Small files of one kind (reports, logs, pages) share most of their
// words and structure, which a zip, compressing each file alone, cannot
// use. With Options.Dict, Put trains a zstd dictionary on the files,
// publishes it in Redis (dictstore: squeeze:dict:<id>, immutable, where
// every squeeze reader finds it) and compresses every file with it.
package archive

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/dictstore"
)

// ErrNotFound is returned by Get for a path the archive does not hold.
var ErrNotFound = errors.New("archive: no such file in the archive")

// DefaultAlgorithm compresses archived files: they are written once and
// read many times, so a strong level pays.
var DefaultAlgorithm = codec.Algorithm{ID: codec.IDZstd, Level: 9}

// batchBytes bounds the file bytes of one pipelined HSET batch.
const batchBytes = 8 << 20

// Options configure Put. Zero fields take the defaults.
type Options struct {
	// Algorithm compresses the files (default DefaultAlgorithm), under the
	// default write policy: tiny and incompressible files stay raw.
	Algorithm codec.Algorithm
	// Dict trains a zstd dictionary on the files and compresses them with
	// it (Algorithm must be a zstd level); the dictionary is published
	// before any file names it.
	Dict bool
	// Progress, if set, is called after each batch with the files stored
	// so far and the total.
	Progress func(done, total int)
}

// Stats is what Put or Extract did.
type Stats struct {
	Files   int           `json:"files"`
	Skipped int           `json:"skipped"` // not regular files (links, devices ...)
	Bytes   int64         `json:"bytes"`   // original bytes of the files
	Stored  int64         `json:"stored"`  // bytes of the stored values
	DictID  uint32        `json:"dict_id,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// SavedPct is the share of the files' bytes that compression saved.
func (s Stats) SavedPct() float64 {
	if s.Bytes == 0 {
		return 0
	}
	return 100 * (1 - float64(s.Stored)/float64(s.Bytes))
}

// tempKey names the key Put fills before renaming it over key; it hashes
// to key's cluster slot, as RENAME requires.
func tempKey(key string) string {
	if strings.Contains(key, "{") {
		return key + ".squeeze-tmp" // key's own hash tag, if any, still leads
	}
	return "{" + key + "}.squeeze-tmp"
}

// Put stores every regular file under fsys into the hash key, replacing
// what key held (see the package documentation).
func Put(ctx context.Context, rdb redis.UniversalClient, key string, fsys fs.FS, o Options) (Stats, error) {
	start := time.Now()
	alg := o.Algorithm
	if alg.ID == codec.IDNone {
		alg = DefaultAlgorithm
	}
	if o.Dict && alg.ID != codec.IDZstd {
		return Stats{}, fmt.Errorf("archive: dictionaries work with zstd, not %s", alg)
	}
	var st Stats
	var files []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.Type().IsRegular():
			files = append(files, p)
		case !d.IsDir():
			st.Skipped++
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("archive: %w", err)
	}
	if len(files) == 0 {
		return st, errors.New("archive: no regular files to store")
	}
	var opts []codec.EncoderOption
	if o.Dict {
		d, err := trainDict(ctx, rdb, fsys, files)
		if err != nil {
			return st, err
		}
		opts = append(opts, codec.WithDictionary(d))
		st.DictID = d.ID
	}
	enc, err := codec.NewEncoder(alg, opts...)
	if err != nil {
		return st, fmt.Errorf("archive: %w", err)
	}
	tmp := tempKey(key)
	if err := rdb.Del(ctx, tmp).Err(); err != nil {
		return st, fmt.Errorf("archive: DEL %s: %w", tmp, err)
	}
	var batch []any
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := rdb.HSet(ctx, tmp, batch...).Err(); err != nil {
			return fmt.Errorf("archive: HSET %s: %w", tmp, err)
		}
		batch, size = batch[:0], 0
		if o.Progress != nil {
			o.Progress(st.Files, len(files))
		}
		return nil
	}
	for _, p := range files {
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			rdb.Del(context.WithoutCancel(ctx), tmp)
			return st, fmt.Errorf("archive: %w", err)
		}
		v := enc.AppendEncode(nil, data)
		batch = append(batch, p, v)
		size += len(v)
		st.Files++
		st.Bytes += int64(len(data))
		st.Stored += int64(len(v))
		if size >= batchBytes {
			if err := flush(); err != nil {
				rdb.Del(context.WithoutCancel(ctx), tmp)
				return st, err
			}
		}
	}
	if err := flush(); err != nil {
		rdb.Del(context.WithoutCancel(ctx), tmp)
		return st, err
	}
	if err := rdb.Rename(ctx, tmp, key).Err(); err != nil {
		rdb.Del(context.WithoutCancel(ctx), tmp)
		return st, fmt.Errorf("archive: RENAME %s %s: %w", tmp, key, err)
	}
	st.Elapsed = time.Since(start)
	return st, nil
}

// trainDict trains a dictionary on up to 2000 of the files and publishes
// it.
func trainDict(ctx context.Context, rdb redis.UniversalClient, fsys fs.FS, files []string) (codec.Dictionary, error) {
	step := max(1, len(files)/2000)
	var samples [][]byte
	total := 0
	for i := 0; i < len(files); i += step {
		data, err := fs.ReadFile(fsys, files[i])
		if err != nil {
			return codec.Dictionary{}, fmt.Errorf("archive: %w", err)
		}
		if len(data) > 0 {
			samples = append(samples, data)
			total += min(len(data), 128<<10)
		}
	}
	if len(samples) < 8 {
		return codec.Dictionary{}, fmt.Errorf("archive: %d files are too few to train a dictionary on (at least 8)", len(samples))
	}
	d, err := dictstore.TrainID(samples, min(dictstore.DefaultDictSize, max(1024, total/8)))
	if err != nil {
		return codec.Dictionary{}, fmt.Errorf("archive: %w", err)
	}
	if err := dictstore.Publish(ctx, rdb, d, dictstore.Meta{ID: d.ID, Size: len(d.Data), Samples: len(samples), SampleBytes: int64(total), Codec: "zstd"}); err != nil {
		return codec.Dictionary{}, fmt.Errorf("archive: %w", err)
	}
	return d, nil
}

// decoder returns res, or a new Resolver over rdb when res is nil.
func decoder(rdb redis.UniversalClient, res *dictstore.Resolver) (*dictstore.Resolver, error) {
	if res != nil {
		return res, nil
	}
	return dictstore.NewResolver(rdb)
}

// Get returns the contents of the file at path p (slash-separated, as List
// names it) in the archive key. res decodes it, loading the dictionary a
// file names from Redis (nil: a new dictstore.Resolver; pass one to reuse
// loaded dictionaries across calls).
func Get(ctx context.Context, rdb redis.UniversalClient, res *dictstore.Resolver, key, p string) ([]byte, error) {
	res, err := decoder(rdb, res)
	if err != nil {
		return nil, err
	}
	v, err := rdb.HGet(ctx, key, p).Bytes()
	if err == redis.Nil {
		return nil, fmt.Errorf("%w: %s in %s", ErrNotFound, p, key)
	}
	if err != nil {
		return nil, fmt.Errorf("archive: HGET %s %s: %w", key, p, err)
	}
	out, err := res.AppendDecode(ctx, nil, v)
	if err != nil {
		return nil, fmt.Errorf("archive: %s in %s: %w", p, key, err)
	}
	return out, nil
}

// Entry is one file of an archive.
type Entry struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`   // original bytes
	Stored int64  `json:"stored"` // bytes Redis holds
	Codec  string `json:"codec"`  // "none" for a file stored raw
}

// List returns the files of the archive key sorted by path. It reads the
// whole archive (HSCAN with values): the sizes come from frame headers.
func List(ctx context.Context, rdb redis.UniversalClient, key string) ([]Entry, error) {
	var out []Entry
	err := scan(ctx, rdb, key, func(p string, v []byte) error {
		e := Entry{Path: p, Size: int64(len(v)), Stored: int64(len(v)), Codec: "none"}
		if codec.IsFramed(v) {
			h, err := codec.ParseHeader(v)
			if err != nil {
				return fmt.Errorf("archive: %s in %s: %w", p, key, err)
			}
			e.Size, e.Codec = int64(h.OriginalLen), h.ID.String()
		}
		out = append(out, e)
		return nil
	})
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return out, err
}

// Extract writes every file of the archive key under dir (created as
// needed), decoded and checked. A path that would leave dir is an error.
func Extract(ctx context.Context, rdb redis.UniversalClient, res *dictstore.Resolver, key, dir string) (Stats, error) {
	start := time.Now()
	res, err := decoder(rdb, res)
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	err = scan(ctx, rdb, key, func(p string, v []byte) error {
		clean := path.Clean(p)
		if !fs.ValidPath(clean) || clean == "." {
			return fmt.Errorf("archive: %s holds the path %q, which would leave %s", key, p, dir)
		}
		data, err := res.AppendDecode(ctx, nil, v)
		if err != nil {
			return fmt.Errorf("archive: %s in %s: %w", p, key, err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(clean))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("archive: %w", err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return fmt.Errorf("archive: %w", err)
		}
		st.Files++
		st.Bytes += int64(len(data))
		st.Stored += int64(len(v))
		return nil
	})
	st.Elapsed = time.Since(start)
	return st, err
}

// scan calls fn for each field of the hash key. A missing key is an
// ErrNotFound error; a key of another type is Redis's WRONGTYPE error.
func scan(ctx context.Context, rdb redis.UniversalClient, key string, fn func(p string, v []byte) error) error {
	n, err := rdb.Exists(ctx, key).Result()
	if err != nil {
		return fmt.Errorf("archive: EXISTS %s: %w", key, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: no archive at %s", ErrNotFound, key)
	}
	var cursor uint64
	seen := map[string]bool{} // HSCAN may return a field twice
	for {
		kv, next, err := rdb.HScan(ctx, key, cursor, "", 100).Result()
		if err != nil {
			return fmt.Errorf("archive: HSCAN %s: %w", key, err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if seen[kv[i]] {
				continue
			}
			seen[kv[i]] = true
			if err := fn(kv[i], []byte(kv[i+1])); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}
