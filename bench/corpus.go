package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// Sample is one value a benchmark compresses or stores: what squeeze would
// see as one Redis value.
type Sample struct {
	Name string // where it came from: "json/3", "twitter.json", "twitter.json#2"
	Data []byte
}

// Corpus is the data a benchmark runs on.
type Corpus struct {
	Name    string // "built-in", the file names, or "redis"
	Samples []Sample
}

// Bytes returns the total size of all samples.
func (c Corpus) Bytes() int64 {
	var n int64
	for _, s := range c.Samples {
		n += int64(len(s.Data))
	}
	return n
}

// DefaultSeed is the seed of the built-in corpus; figures in the README are
// measured with it.
const DefaultSeed = 20240311

// builtinSizes are the value sizes of the built-in corpus: typical cache
// values from 1 kB to 256 kB.
var builtinSizes = []int{1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10}

// BuiltinCorpus returns the generated corpus that "squeeze bench codecs" uses
// when no --corpus is given: for each kind (JSON API documents, logs, HTML,
// prose) one value of each size from 1 kB to 256 kB, about 1.4 MB in all. It
// is a function of seed alone.
func BuiltinCorpus(seed uint64) Corpus {
	c := Corpus{Name: "built-in"}
	for ki, k := range Kinds {
		for si, size := range builtinSizes {
			g := NewGenerator(seed + uint64(ki*100+si))
			data := g.Append(nil, k, size)
			if (k == KindLogs || k == KindProse) && len(data) > size { // JSON and HTML stay whole
				data = data[:size]
			}
			c.Samples = append(c.Samples, Sample{Name: fmt.Sprintf("%s/%d", k, size), Data: data})
		}
	}
	return c
}

// MaxValueSize is the largest single value LoadCorpus accepts (the codec's
// default decoded-size limit).
const MaxValueSize = 512 << 20

// ErrEmptyCorpus is returned when the files given hold no data.
var ErrEmptyCorpus = errors.New("bench: corpus is empty")

// LoadCorpus reads the files (a directory adds every regular file inside
// it, recursively, in name order). With block > 0 each file is cut into
// values of block bytes (the last one shorter), as a store that compresses
// fixed-size blocks would; with block == 0 each file is one value.
func LoadCorpus(paths []string, block int) (Corpus, error) {
	if block < 0 {
		return Corpus{}, fmt.Errorf("bench: block size %d is negative", block)
	}
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return Corpus{}, fmt.Errorf("corpus: %w", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		var inDir []string
		err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() {
				inDir = append(inDir, path)
			}
			return nil
		})
		if err != nil {
			return Corpus{}, fmt.Errorf("corpus: %w", err)
		}
		sort.Strings(inDir)
		files = append(files, inDir...)
	}
	c := Corpus{}
	for i, f := range files {
		if i > 0 {
			c.Name += ","
		}
		c.Name += filepath.Base(f)
		data, err := readLimited(f, MaxValueSize)
		if err != nil {
			return Corpus{}, err
		}
		if len(data) == 0 {
			continue
		}
		name := filepath.Base(f)
		if block == 0 || len(data) <= block {
			c.Samples = append(c.Samples, Sample{Name: name, Data: data})
			continue
		}
		for off, n := 0, 0; off < len(data); off, n = off+block, n+1 {
			end := min(off+block, len(data))
			c.Samples = append(c.Samples, Sample{Name: fmt.Sprintf("%s#%d", name, n), Data: data[off:end:end]})
		}
	}
	if len(c.Samples) == 0 {
		return Corpus{}, fmt.Errorf("%w: %d file(s) with no bytes", ErrEmptyCorpus, len(files))
	}
	return c, nil
}

func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("corpus: read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		// --block does not help here: the whole file is read before it is cut.
		return nil, fmt.Errorf("corpus: %s is larger than %d bytes (%d MiB), the most squeeze reads from one file; measure a part of it (head -c 256M FILE > part)", path, limit, limit>>20)
	}
	return data, nil
}

// Split returns a corpus whose values are c's values cut into pieces of at
// most block bytes (block <= 0 returns c unchanged).
func (c Corpus) Split(block int) Corpus {
	if block <= 0 {
		return c
	}
	out := Corpus{Name: c.Name}
	for _, s := range c.Samples {
		if len(s.Data) <= block {
			out.Samples = append(out.Samples, s)
			continue
		}
		for off, n := 0, 0; off < len(s.Data); off, n = off+block, n+1 {
			end := min(off+block, len(s.Data))
			out.Samples = append(out.Samples, Sample{Name: fmt.Sprintf("%s#%d", s.Name, n), Data: s.Data[off:end:end]})
		}
	}
	return out
}
