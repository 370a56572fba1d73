package bench

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/archive"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/dictstore"
)

// The archive study follows the first seed's last part: a directory of
// text files (15.9 kB each) compressed into one zip, single files read out
// of it, and the time of one read against the number of files. squeeze
// keeps the same files in one Redis hash (package archive).

// Archive layouts.
const (
	LayoutZipOpen = "zip, opened per read" // the seed's open_one: open, walk the entries, read
	LayoutZipKept = "zip, kept open"       // central directory read once, entries by name
	LayoutSqueeze = "squeeze archive"      // HGET + decode
	LayoutDict    = "squeeze archive, trained dictionary"
)

// DefaultArchiveFileSize is the seed's file size.
const DefaultArchiveFileSize = 15900

// ArchiveConfig configures RunArchive. Zero fields take defaults.
type ArchiveConfig struct {
	Client    *redis.Client
	Files     []int           // archive sizes in files (default 10, 100, 1000)
	FileSize  int             // bytes per file (DefaultArchiveFileSize)
	Reads     int             // single-file reads timed per layout and size (default 300)
	Algorithm codec.Algorithm // squeeze's codec (archive.DefaultAlgorithm)
	Dir       string          // where the zip files go (default a temporary directory)
	Progress  Progress
}

// ArchiveRow is one layout at one archive size.
type ArchiveRow struct {
	Layout      string  `json:"layout"`
	Files       int     `json:"files"`
	FileBytes   int     `json:"file_bytes"`
	RawBytes    int64   `json:"raw_bytes"`
	StoredBytes int64   `json:"stored_bytes"` // the zip file, or MEMORY USAGE of the hash
	SavedPct    float64 `json:"saved_pct"`
	ReadUs      float64 `json:"read_us"` // median time to read one file, verified
	Reads       int     `json:"reads"`
}

// RunArchive measures, for each archive size, the stored size and the
// median time to read one random file with each layout. Every read is
// compared with the original file.
func RunArchive(ctx context.Context, c ArchiveConfig) ([]ArchiveRow, error) {
	if c.Client == nil {
		return nil, errors.New("bench archive: no Redis client")
	}
	if len(c.Files) == 0 {
		c.Files = []int{10, 100, 1000}
	}
	if c.FileSize <= 0 {
		c.FileSize = DefaultArchiveFileSize
	}
	if c.Reads <= 0 {
		c.Reads = 300
	}
	if c.Algorithm.ID == codec.IDNone {
		c.Algorithm = archive.DefaultAlgorithm
	}
	res, err := dictstore.NewResolver(c.Client)
	if err != nil {
		return nil, err
	}
	dir := c.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "squeeze-bench-archive-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	}
	var rows []ArchiveRow
	key, dkey := KeyPrefix+"archive", KeyPrefix+"archive-dict"
	defer c.Client.Del(context.WithoutCancel(ctx), key, dkey)
	for si, n := range c.Files {
		src := filepath.Join(dir, fmt.Sprintf("files-%d", n))
		names, files, err := writeArchiveFiles(src, n, c.FileSize)
		if err != nil {
			return rows, err
		}
		var raw int64
		for _, f := range files {
			raw += int64(len(f))
		}
		zipPath := filepath.Join(dir, fmt.Sprintf("files-%d.zip", n))
		if err := writeZip(zipPath, names, files); err != nil {
			return rows, err
		}
		zst, err := os.Stat(zipPath)
		if err != nil {
			return rows, err
		}
		if _, err := archive.Put(ctx, c.Client, key, os.DirFS(src), archive.Options{Algorithm: c.Algorithm}); err != nil {
			return rows, err
		}
		mem, err := c.Client.MemoryUsage(ctx, key, 0).Result()
		if err != nil {
			return rows, fmt.Errorf("bench archive: MEMORY USAGE: %w", err)
		}
		dictMem := int64(-1) // no dictionary layout: too few files, or not zstd
		if n >= 8 && c.Algorithm.ID == codec.IDZstd {
			dst, err := archive.Put(ctx, c.Client, dkey, os.DirFS(src), archive.Options{Algorithm: c.Algorithm, Dict: true})
			if err != nil {
				return rows, err
			}
			m, err := c.Client.MemoryUsage(ctx, dkey, 0).Result()
			if err != nil {
				return rows, fmt.Errorf("bench archive: MEMORY USAGE: %w", err)
			}
			d, err := res.Dictionary(ctx, dst.DictID)
			if err != nil {
				return rows, err
			}
			dictMem = m + int64(len(d.Data)) // the dictionary is part of the cost
		}
		kept, err := zip.OpenReader(zipPath)
		if err != nil {
			return rows, err
		}
		byName := map[string]*zip.File{}
		for _, f := range kept.File {
			byName[f.Name] = f
		}
		readers := []struct {
			layout string
			stored int64
			read   func(name string) ([]byte, error)
		}{
			{LayoutZipOpen, zst.Size(), func(name string) ([]byte, error) { return zipOpenOne(zipPath, name) }},
			{LayoutZipKept, zst.Size(), func(name string) ([]byte, error) { return readZipFile(byName[name]) }},
			{LayoutSqueeze, mem, func(name string) ([]byte, error) { return archive.Get(ctx, c.Client, res, key, name) }},
		}
		if dictMem >= 0 {
			readers = append(readers, struct {
				layout string
				stored int64
				read   func(name string) ([]byte, error)
			}{LayoutDict, dictMem, func(name string) ([]byte, error) { return archive.Get(ctx, c.Client, res, dkey, name) }})
		}
		r := rand.New(rand.NewPCG(uint64(n), 7))
		times := make([][]float64, len(readers))
		// Interleave the layouts read by read, so that noise hits them alike.
		for i := 0; i < c.Reads; i++ {
			if err := ctx.Err(); err != nil {
				kept.Close()
				return rows, err
			}
			pick := r.IntN(n)
			for li, rd := range readers {
				t0 := time.Now()
				got, err := rd.read(names[pick])
				d := time.Since(t0)
				if err != nil {
					kept.Close()
					return rows, fmt.Errorf("bench archive: %s, %d files: %s: %w", rd.layout, n, names[pick], err)
				}
				if string(got) != string(files[pick]) {
					kept.Close()
					return rows, fmt.Errorf("bench archive: %s, %d files: %s read back %d bytes that differ from the file", rd.layout, n, names[pick], len(got))
				}
				times[li] = append(times[li], d.Seconds()*1e6)
			}
		}
		kept.Close()
		for li, rd := range readers {
			rows = append(rows, ArchiveRow{Layout: rd.layout, Files: n, FileBytes: c.FileSize, RawBytes: raw,
				StoredBytes: rd.stored, SavedPct: 100 * (1 - float64(rd.stored)/float64(raw)),
				ReadUs: Median(times[li]), Reads: len(times[li])})
		}
		os.RemoveAll(src)
		os.Remove(zipPath)
		c.Progress.step(si+1, len(c.Files))
	}
	return rows, nil
}

// writeArchiveFiles writes n generated text files of size bytes under dir
// (ten to a directory) and returns their slash paths and contents.
func writeArchiveFiles(dir string, n, size int) ([]string, [][]byte, error) {
	names := make([]string, n)
	files := make([][]byte, n)
	for i := range n {
		names[i] = fmt.Sprintf("d%04d/file%05d.txt", i/10, i)
		g := NewGenerator(uint64(i) + 1)
		files[i] = g.AppendProse(nil, size)[:size]
		p := filepath.Join(dir, filepath.FromSlash(names[i]))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(p, files[i], 0o644); err != nil {
			return nil, nil, err
		}
	}
	return names, files, nil
}

// writeZip writes the files into a zip at path, deflated as zip tools do.
func writeZip(path string, names []string, files [][]byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	for i, name := range names {
		w, err := zw.Create(name)
		if err != nil {
			f.Close()
			return err
		}
		if _, err := w.Write(files[i]); err != nil {
			f.Close()
			return err
		}
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// zipOpenOne reads one file as the seed's open_one does: open the zip,
// walk its entries until the name matches, read it.
func zipOpenOne(path, name string) ([]byte, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	for _, f := range zr.File {
		if f.Name == name {
			return readZipFile(f)
		}
	}
	return nil, fmt.Errorf("%s not in %s", name, path)
}

func readZipFile(f *zip.File) ([]byte, error) {
	if f == nil {
		return nil, errors.New("no such entry")
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// ArchiveReport turns the rows into a report: the table, and bar charts of
// the read time and the stored size per layout and archive size.
func ArchiveReport(command string, rows []ArchiveRow) Report {
	r := Report{Title: "squeeze bench archive", Command: command,
		Tables: []Table{{Name: "archive", Title: "Single files out of an archive: read time and size", Rows: rows}}}
	var groups []string
	var sizes []int
	for _, row := range rows {
		if !containsInt(sizes, row.Files) {
			sizes = append(sizes, row.Files)
			groups = append(groups, fmt.Sprintf("%d files", row.Files))
		}
	}
	read := BarChart{Name: "archive-read", Title: "Time to read one file", YLabel: "µs (median)", Groups: groups,
		Caption: "Median time to read one random file, checked against the original, by the number of files in the archive."}
	stored := BarChart{Name: "archive-size", Title: "Stored size", YLabel: "% of the files' bytes saved", Groups: groups,
		Caption: "zip: the zip file's size; squeeze: MEMORY USAGE of the hash (plus the dictionary, with one)."}
	for _, l := range []string{LayoutZipOpen, LayoutZipKept, LayoutSqueeze, LayoutDict} {
		rs, ss := BarSeries{Label: l}, BarSeries{Label: l}
		for _, n := range sizes {
			for _, row := range rows {
				if row.Layout == l && row.Files == n {
					rs.Values = append(rs.Values, row.ReadUs)
					ss.Values = append(ss.Values, row.SavedPct)
				}
			}
		}
		if len(rs.Values) == len(groups) {
			read.Series = append(read.Series, rs)
			if l != LayoutZipKept { // the same file as opened per read
				stored.Series = append(stored.Series, ss)
			}
		}
	}
	r.Bars = []BarChart{read, stored}
	return r
}
