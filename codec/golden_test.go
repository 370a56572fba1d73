package codec

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden frames in testdata/frames/v1 (only for new codecs: existing frames must decode forever)")

// goldenInput is the value every golden frame holds.
func goldenInput() []byte {
	return bytes.Repeat([]byte(`{"user":"ada","langs":["go","ruby","node"],"bio":"writes compilers; likes compressed caches"}`+"\n"), 12)
}

// TestGoldenFrames decodes frames written by earlier builds. A failure here
// means a change broke the format: frames in Redis must decode forever.
func TestGoldenFrames(t *testing.T) {
	dir := filepath.Join("testdata", "frames", "v1")
	in := goldenInput()
	if *update {
		for _, a := range Algorithms() {
			enc := mustEncoder(t, a, WithMinGain(-1), WithMinSize(0))
			name := filepath.Join(dir, strings.ReplaceAll(a.String(), ":", "-")+".bin")
			if _, err := os.Stat(name); err == nil {
				continue // never rewrite an existing golden frame
			}
			frame := enc.AppendEncode(nil, in)
			if a.ID == IDNone {
				frame = enc.appendNoneFrame(nil, in)
			}
			if err := os.WriteFile(name, frame, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "input.txt"), in, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(filepath.Join(dir, "input.txt"))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.bin"))
	seen := map[ID]bool{}
	dec := mustDecoder(t)
	for _, f := range files {
		frame, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ParseHeader(frame)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		seen[h.ID] = true
		got, err := dec.AppendDecode(nil, frame)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: golden frame no longer decodes: %v", f, err)
		}
	}
	for _, c := range codecs {
		if !seen[c.id] {
			t.Errorf("no golden frame for codec %s (run go test ./codec -run Golden -update)", c.name)
		}
	}
}

// TestGoldenDictionaryFrame decodes a frame written with a trained
// dictionary, which is kept beside it.
func TestGoldenDictionaryFrame(t *testing.T) {
	dir := filepath.Join("testdata", "frames", "v1", "dict")
	in := smallDocs(1, 99)[0]
	if *update {
		if _, err := os.Stat(filepath.Join(dir, "zstd-dict-40001.bin")); err != nil {
			d, err := TrainDictionary(40001, smallDocs(2000, 1), 8<<10)
			if err != nil {
				t.Fatal(err)
			}
			enc := mustEncoder(t, MustParseAlgorithm("zstd:1"), WithDictionary(d))
			os.MkdirAll(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "40001.zdict"), d.Data, 0o644)
			os.WriteFile(filepath.Join(dir, "zstd-dict-40001.bin"), enc.AppendEncode(nil, in), 0o644)
			os.WriteFile(filepath.Join(dir, "input.json"), in, 0o644)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "40001.zdict"))
	if err != nil {
		t.Fatal(err)
	}
	frame, _ := os.ReadFile(filepath.Join(dir, "zstd-dict-40001.bin"))
	want, _ := os.ReadFile(filepath.Join(dir, "input.json"))
	dec := mustDecoder(t, WithDictionaries(Dictionary{ID: 40001, Data: data}))
	got, err := dec.AppendDecode(nil, frame)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("golden dictionary frame no longer decodes: %v", err)
	}
}

// TestFormatDocExamples decodes every example in docs/FORMAT.md, so that the
// document and the code cannot drift apart.
func TestFormatDocExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "FORMAT.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^frame: +([0-9a-f ]+)\nvalue: +(".*")$`)
	examples := re.FindAllStringSubmatch(string(doc), -1)
	if len(examples) < 4 {
		t.Fatalf("found %d examples in docs/FORMAT.md, want at least 4", len(examples))
	}
	dec := mustDecoder(t)
	for _, ex := range examples {
		frame, err := hex.DecodeString(strings.ReplaceAll(ex[1], " ", ""))
		if err != nil {
			t.Fatalf("example %q: %v", ex[1], err)
		}
		want, err := strconv.Unquote(ex[2])
		if err != nil {
			t.Fatalf("example value %s: %v", ex[2], err)
		}
		got, err := dec.AppendDecode(nil, frame)
		if err != nil || string(got) != want {
			t.Errorf("example %s: got %q, %v; want %q", ex[1], got, err, want)
		}
	}
}
