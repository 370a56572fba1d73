package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func zstdRatio(t *testing.T, data []byte) float64 {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return float64(len(data)) / float64(len(enc.EncodeAll(data, nil)))
}

func TestBuiltinCorpus_Properties(t *testing.T) {
	c := BuiltinCorpus(DefaultSeed)
	if len(c.Samples) != len(Kinds)*len(builtinSizes) {
		t.Fatalf("%d samples, want %d", len(c.Samples), len(Kinds)*len(builtinSizes))
	}
	again := BuiltinCorpus(DefaultSeed)
	other := BuiltinCorpus(DefaultSeed + 1)
	for i, s := range c.Samples {
		t.Run(s.Name, func(t *testing.T) {
			if !bytes.Equal(s.Data, again.Samples[i].Data) {
				t.Fatal("same seed gave different bytes")
			}
			if bytes.Equal(s.Data, other.Samples[i].Data) {
				t.Fatal("another seed gave the same bytes")
			}
			if len(s.Data) < builtinSizes[i%len(builtinSizes)] {
				t.Fatalf("%d bytes, want at least %d", len(s.Data), builtinSizes[i%len(builtinSizes)])
			}
			kind := Kinds[i/len(builtinSizes)]
			if kind == KindJSON && !json.Valid(s.Data) {
				t.Fatalf("generated JSON does not parse: %.200s", s.Data)
			}
			if kind == KindHTML && !bytes.HasPrefix(s.Data, []byte("<!DOCTYPE html>")) {
				t.Fatalf("HTML page starts with %.40q", s.Data)
			}
			// Compressible, but not trivially: real data compresses 2-20x
			// with zstd; random bytes would give ~1, one repeated string >100.
			if len(s.Data) >= 16<<10 {
				r := zstdRatio(t, s.Data)
				if r < 2 || r > 20 {
					t.Fatalf("zstd ratio %.2f outside [2, 20]", r)
				}
			}
			// Not one repeated line: count distinct lines.
			lines := strings.Split(string(s.Data), "\n")
			distinct := map[string]bool{}
			for _, l := range lines {
				distinct[l] = true
			}
			if len(lines) > 20 && len(distinct) < len(lines)/3 {
				t.Fatalf("%d distinct lines of %d", len(distinct), len(lines))
			}
		})
	}
	// The whole corpus as one stream.
	var all []byte
	for _, s := range c.Samples {
		all = append(all, s.Data...)
	}
	if r := zstdRatio(t, all); r < 2 || r > 20 {
		t.Fatalf("whole corpus zstd ratio %.2f outside [2, 20]", r)
	}
}

func TestGenerator_ProseWordFrequency(t *testing.T) {
	p := NewGenerator(1).AppendProse(nil, 200<<10)
	counts := map[string]int{}
	total := 0
	for _, w := range strings.Fields(strings.ToLower(string(p))) {
		counts[strings.Trim(w, ".,;?!")]++
		total++
	}
	// In English "the" is the most frequent word (about 5-7%), and the text
	// uses a broad vocabulary.
	if f := float64(counts["the"]) / float64(total); f < 0.02 || f > 0.15 {
		t.Errorf(`"the" is %.1f%% of words`, f*100)
	}
	if len(counts) < 200 {
		t.Errorf("only %d distinct words", len(counts))
	}
}

func TestJSONDocument_ExactSize(t *testing.T) {
	for _, size := range []int{0, 10, 64, 100, 700, 1000, 16600, 47500, 221900, 1 << 20} {
		for seed := uint64(0); seed < 3; seed++ {
			d := JSONDocument(seed, size)
			if len(d) != size {
				t.Fatalf("size %d seed %d: got %d bytes", size, seed, len(d))
			}
			if size >= 64 && !json.Valid(d) {
				t.Fatalf("size %d seed %d: invalid JSON %.300s", size, seed, d)
			}
		}
	}
}

func TestLoadCorpus(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.txt", bytes.Repeat([]byte("abcdefghij"), 25)) // 250 bytes
	write("sub/b.txt", []byte("hello"))
	empty := write("empty.txt", nil)

	tests := []struct {
		name    string
		paths   []string
		block   int
		want    []int // sample lengths
		wantErr string
	}{
		{"whole", []string{a}, 0, []int{250}, ""},
		{"blocks", []string{a}, 100, []int{100, 100, 50}, ""},
		{"block larger than file", []string{a}, 1000, []int{250}, ""},
		{"directory", []string{filepath.Join(dir, "sub")}, 0, []int{5}, ""},
		{"missing", []string{filepath.Join(dir, "nope")}, 0, nil, "no such file"},
		{"empty", []string{empty}, 0, nil, "corpus is empty"},
		{"negative block", []string{a}, -1, nil, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadCorpus(tt.paths, tt.block)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, s := range c.Samples {
				got = append(got, len(s.Data))
			}
			if len(got) != len(tt.want) {
				t.Fatalf("sample lengths %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("sample lengths %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int
		err  bool
	}{
		{"0", 0, false}, {"512", 512, false}, {"16.6kB", 16600, false}, {"47.5 kB", 47500, false},
		{"4.2MB", 4200000, false}, {"64KiB", 65536, false}, {"1M", 1 << 20, false}, {"20MB", 20000000, false},
		{"", 0, true}, {"abc", 0, true}, {"-1", 0, true}, {"1.5XB", 0, true}, {"NaN", 0, true}, {"2TB", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, err %v", tt.in, got, err, tt.want, tt.err)
		}
	}
	if s := FormatSize(16600); s != "16.6 kB" {
		t.Errorf("FormatSize(16600) = %q", s)
	}
}

// TestReadLimited_TooLarge: a file above the limit is refused with a message
// that does not send the user to --block (which cannot help: the whole file
// is read before it is cut).
func TestReadLimited_TooLarge(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(p, []byte(strings.Repeat("x", 11)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readLimited(p, 10); err == nil || strings.Contains(err.Error(), "--block") || !strings.Contains(err.Error(), "larger than 10 bytes") {
		t.Fatalf("err = %v", err)
	}
	if b, err := readLimited(p, 11); err != nil || len(b) != 11 {
		t.Fatalf("at the limit: %d bytes, %v", len(b), err)
	}
}

// TestParseAlgorithms_Lists: "all" is matched in any case, like codec names
// ("ALL" was refused as an unknown codec while "ZSTD:1" was accepted), and
// bad lists are errors.
func TestParseAlgorithms_Lists(t *testing.T) {
	for _, all := range []string{"all", "ALL", " All "} {
		algs, err := ParseAlgorithms(all)
		if err != nil || len(algs) < 10 {
			t.Errorf("ParseAlgorithms(%q) = %d codecs, %v", all, len(algs), err)
		}
	}
	if algs, err := ParseAlgorithms("ZSTD:1, lz4,,zstd:1"); err != nil || len(algs) != 2 {
		t.Errorf("mixed case, spaces, duplicates: %v, %v", algs, err)
	}
	for _, bad := range []string{"", " , ", "zstd:99", "all,zstd", "pigeon"} {
		if _, err := ParseAlgorithms(bad); err == nil {
			t.Errorf("ParseAlgorithms(%q) accepted", bad)
		}
	}
}
