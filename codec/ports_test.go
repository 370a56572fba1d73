package codec_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/codec"
)

// The ports in ports/python and ports/node are written from docs/FORMAT.md
// alone. These tests hold the three implementations to one truth: what the
// ports write, the Go decoder reads byte for byte (and under the same write
// policy), and what Go writes in a portable codec, the ports read.
// bash scripts/test-ports.sh installs what they need and runs them.

// port is the command line of one port's CLI.
type port struct {
	name string
	argv []string
	// levels are the levels the port is asked to write each codec at.
	levels map[string][]string
}

// need skips the test when a port's runtime is missing on a developer's
// machine, and fails it in CI, where scripts/test-ports.sh installs it.
func need(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) + " (bash scripts/test-ports.sh installs what the ports need)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func pythonPort(t *testing.T) port {
	py := os.Getenv("SQUEEZE_PYTHON")
	if py == "" {
		// Debian's interpreter, which the python3-* packages install into,
		// before whatever python3 comes first on PATH.
		py = "/usr/bin/python3"
		if _, err := os.Stat(py); err != nil {
			if py, err = exec.LookPath("python3"); err != nil {
				need(t, "python3 is not installed")
			}
		}
	}
	if out, err := exec.Command(py, "-c", "import zstandard, lz4.block, brotli, snappy").CombinedOutput(); err != nil {
		need(t, "%s lacks the codec packages: %s", py, bytes.TrimSpace(out))
	}
	return port{name: "python", argv: []string{py, filepath.Join("..", "ports", "python", "squeeze_frames.py")},
		levels: map[string][]string{
			"none": {""}, "zstd": {"1", "19"}, "lz4": {"fast", "hc9"}, "snappy": {""}, "brotli": {"0", "9"},
			"gzip": {"1", "9"}, "deflate": {"6"}, "zlib": {"6"},
		}}
}

func nodePort(t *testing.T) port {
	node, err := exec.LookPath("node")
	if err != nil {
		need(t, "node is not installed")
	}
	dir := filepath.Join("..", "ports", "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@toondepauw", "node-zstd")); err != nil {
		need(t, "ports/node has no node_modules (npm ci in ports/node)")
	}
	return port{name: "node", argv: []string{node, filepath.Join(dir, "cli.js")},
		levels: map[string][]string{
			"none": {""}, "zstd": {"1", "19"}, "lz4": {"fast"}, "snappy": {""}, "brotli": {"0", "9"},
			"gzip": {"1", "9"}, "deflate": {"6"}, "zlib": {"6"},
		}}
}

func ports(t *testing.T) []port {
	var ps []port
	for name, mk := range map[string]func(*testing.T) port{"find-python": pythonPort, "find-node": nodePort} {
		t.Run(name, func(t *testing.T) { ps = append(ps, mk(t)) })
	}
	if t.Failed() {
		t.FailNow()
	}
	if len(ps) == 0 {
		t.Skip("neither port can run here")
	}
	return ps
}

// run runs the port's CLI on files, each of which it answers with FILE.out.
func (p port) run(t *testing.T, args []string, files []string) [][]byte {
	t.Helper()
	argv := append(append(append([]string{}, p.argv[1:]...), args...), "--files")
	cmd := exec.Command(p.argv[0], append(argv, files...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", p.name, strings.Join(args, " "), err, out)
	}
	outs := make([][]byte, len(files))
	for i, f := range files {
		b, err := os.ReadFile(f + ".out")
		if err != nil {
			t.Fatal(err)
		}
		outs[i] = b
	}
	return outs
}

// portInputs are values of the shapes and sizes squeeze stores: a
// document, logs, a value above 128 KiB (several zstd blocks) and one above
// 1 MiB (Go compresses it on several cores), noise, the magic, empty.
func portInputs() map[string][]byte {
	r := rand.New(rand.NewPCG(36, 36))
	var doc, logs, big bytes.Buffer
	for i := range 20 {
		fmt.Fprintf(&doc, `{"id":%d,"user":"ada%d","langs":["go","ruby","node"],"score":%d},`, i, r.IntN(50), r.IntN(1000))
	}
	for i := range 3000 {
		fmt.Fprintf(&logs, "2026-12-05T01:%02d:%02d GET /api/v1/users/%d 200 %dms\n", i/60%60, i%60, r.IntN(5000), r.IntN(300))
	}
	for big.Len() < 1<<20+12345 {
		fmt.Fprintf(&big, "%d the quick brown fox %x jumps over the lazy dog\n", big.Len(), r.Uint32())
	}
	noise := make([]byte, 300)
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	golden, _ := os.ReadFile(filepath.Join("testdata", "frames", "v1", "input.txt"))
	return map[string][]byte{
		"golden": golden, "doc": doc.Bytes(), "logs": logs.Bytes(), "big": big.Bytes(), "noise": noise,
		"magic": append([]byte(codec.Magic+"\x01"), bytes.Repeat([]byte("magic "), 30)...),
		"one":   []byte("x"), "empty": {},
	}
}

func writeInputs(t *testing.T, inputs map[string][]byte) (names, files []string) {
	dir := t.TempDir()
	for name, v := range inputs {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, v, 0o644); err != nil {
			t.Fatal(err)
		}
		names, files = append(names, name), append(files, f)
	}
	return names, files
}

// TestPortsEncodeGoDecodes: frames the ports write in every portable codec
// decode in Go to the bytes they were given.
func TestPortsEncodeGoDecodes(t *testing.T) {
	inputs := portInputs()
	dec, err := codec.NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports(t) {
		for _, name := range codec.Names() {
			levels, ok := p.levels[name]
			if !ok {
				continue
			}
			want, _ := codec.ParseAlgorithm(name)
			for _, lvl := range levels {
				t.Run(p.name+"/"+name+":"+lvl, func(t *testing.T) {
					names, files := writeInputs(t, inputs)
					args := []string{"encode", name, "--frame"}
					if lvl != "" {
						args = []string{"encode", name, lvl, "--frame"}
					}
					for i, out := range p.run(t, args, files) {
						v := inputs[names[i]]
						if name != "none" || codec.IsFramed(v) {
							h, err := codec.ParseHeader(out)
							if err != nil {
								t.Fatalf("%s: %s wrote no frame: %v", names[i], p.name, err)
							}
							if h.ID != want.ID {
								t.Errorf("%s: frame of codec %v, want %v", names[i], h.ID, want.ID)
							}
							if !h.HasChecksum {
								t.Errorf("%s: frame without a checksum", names[i])
							}
						}
						got, err := dec.AppendDecode(nil, out)
						if err != nil || !bytes.Equal(got, v) {
							t.Errorf("%s (%d bytes): Go decodes %s's frame to %d bytes, %v", names[i], len(v), p.name, len(got), err)
						}
					}
				})
			}
		}
	}
}

// TestPortsEncodeWithDictionary: a zstd frame a port writes with a
// dictionary decodes in Go with that dictionary: the one squeeze trained,
// or, where the port's libzstd will not compress with that one (Debian 12's
// python3-zstandard has libzstd 1.5.4), one the port's libzstd trained.
func TestPortsEncodeWithDictionary(t *testing.T) {
	dir := filepath.Join("testdata", "frames", "v1", "dict")
	squeezeDict := filepath.Join(dir, "40001.zdict")
	value, err := os.ReadFile(filepath.Join(dir, "input.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports(t) {
		t.Run(p.name, func(t *testing.T) {
			dictFile, id, value := squeezeDict, uint32(40001), value
			if p.name == "python" {
				out, _ := exec.Command(p.argv[0], "-c", "import zstandard; print(zstandard.ZSTD_VERSION >= (1, 5, 7))").Output()
				if strings.TrimSpace(string(out)) != "True" {
					dictFile, id = filepath.Join(t.TempDir(), "40077.zdict"), 40077
					train := `import sys, zstandard
docs = [b'{"id":%d,"user":"ada%d","langs":["go","ruby","node"],"bio":"writes compilers"}' % (i, i % 7) for i in range(500)]
open(sys.argv[1], "wb").write(zstandard.train_dictionary(2048, docs, dict_id=40077).as_bytes())`
					if out, err := exec.Command(p.argv[0], "-c", train, dictFile).CombinedOutput(); err != nil {
						t.Fatalf("training a dictionary in Python: %v\n%s", err, out)
					}
					value = []byte(`{"id":12345,"user":"ada3","langs":["go","ruby","node"],"bio":"writes compilers"}`)
				}
			}
			data, err := os.ReadFile(dictFile)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := codec.NewDecoder(codec.WithDictionaries(codec.Dictionary{ID: id, Data: data}))
			if err != nil {
				t.Fatal(err)
			}
			_, files := writeInputs(t, map[string][]byte{"doc": value})
			out := p.run(t, []string{"encode", "zstd", "3", "--frame", "--dict", dictFile}, files)[0]
			h, err := codec.ParseHeader(out)
			if err != nil || !h.HasDict || h.DictID != uint64(id) {
				t.Fatalf("%s wrote %x (%v), want a zstd frame naming dictionary %d", p.name, out, err, id)
			}
			got, err := dec.AppendDecode(nil, out)
			if err != nil || !bytes.Equal(got, value) {
				t.Fatalf("Go decodes %s's dictionary frame to %q, %v", p.name, got, err)
			}
		})
	}
}

// TestGoEncodesPortsDecode: what Go writes in every portable codec, at
// every level it names, the ports read, large values compressed on several
// cores among them.
func TestGoEncodesPortsDecode(t *testing.T) {
	inputs := portInputs()
	var algs []codec.Algorithm
	for _, s := range []string{"none", "zstd:1", "zstd:3", "zstd:7", "zstd:11", "lz4:fast", "lz4:hc9", "snappy:default",
		"snappy:better", "snappy:best", "brotli:1", "brotli:11", "gzip:6", "deflate:1", "zlib:9"} {
		algs = append(algs, codec.MustParseAlgorithm(s))
	}
	for _, p := range ports(t) {
		t.Run(p.name, func(t *testing.T) {
			all := map[string][]byte{}
			for _, a := range algs {
				enc, err := codec.NewEncoder(a, codec.WithMinGain(-1), codec.WithMinSize(0), codec.WithConcurrency(4))
				if err != nil {
					t.Fatal(err)
				}
				for name, v := range inputs {
					if a.ID == codec.IDBrotli && a.Level == 11 && len(v) > 200<<10 {
						continue // minutes of brotli for nothing new
					}
					all[strings.ReplaceAll(a.String(), ":", "-")+"-"+name] = enc.AppendEncode(nil, v)
				}
			}
			names, files := writeInputs(t, all)
			outs := p.run(t, []string{"decode"}, files)
			for i, out := range outs {
				in := inputs[names[i][strings.LastIndex(names[i], "-")+1:]]
				if !bytes.Equal(out, in) {
					t.Errorf("%s: %s decodes Go's frame to %d bytes, want %d", names[i], p.name, len(out), len(in))
				}
			}
		})
	}
}

// TestPortsWritePolicy: the ports store raw exactly what Go stores raw
// (short values, numbers, HyperLogLogs) and wrap the magic the same way.
func TestPortsWritePolicy(t *testing.T) {
	values := map[string][]byte{
		"digits":     bytes.Repeat([]byte("1"), 100),
		"digitsx":    append(bytes.Repeat([]byte("1"), 99), 'x'),
		"hex":        append([]byte("0x"), bytes.Repeat([]byte("f"), 100)...),
		"exp":        append(append([]byte(" -"), bytes.Repeat([]byte("9"), 80)...), "e-5"...),
		"expdangle":  append(bytes.Repeat([]byte("9"), 80), 'e'),
		"nan":        append(append([]byte("nan("), bytes.Repeat([]byte("ab_1"), 30)...), ')'),
		"hll":        append([]byte("HYLL"), bytes.Repeat([]byte("a"), 100)...),
		"magic":      append([]byte(codec.Magic), bytes.Repeat([]byte("a"), 100)...),
		"magicshort": []byte(codec.Magic + "x"),
		"short":      []byte("short"),
		"json":       bytes.Repeat([]byte(`{"a":"b"},`), 20),
	}
	enc, err := codec.NewEncoder(codec.MustParseAlgorithm("zstd:3"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports(t) {
		t.Run(p.name, func(t *testing.T) {
			names, files := writeInputs(t, values)
			for i, out := range p.run(t, []string{"encode", "zstd", "3"}, files) {
				v := values[names[i]]
				goOut, outcome := enc.AppendEncodeOutcome(nil, v)
				portRaw := bytes.Equal(out, v)
				if portRaw != (outcome == codec.StoredRaw) {
					t.Errorf("%s: %s stored it raw: %v; Go: %v", names[i], p.name, portRaw, outcome)
				}
				if outcome == codec.Wrapped && !bytes.Equal(out, goOut) {
					t.Errorf("%s: %s wrapped it as %x, Go as %x", names[i], p.name, out, goOut)
				}
			}
		})
	}
}
