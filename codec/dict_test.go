package codec

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// smallDocs returns n small JSON documents that share structure.
func smallDocs(n int, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 3))
	docs := make([][]byte, n)
	for i := range docs {
		docs[i] = fmt.Appendf(nil, `{"user_id":%d,"session":"%016x","country":"%s","plan":"%s","last_login":"2026-11-%02dT%02d:%02d:00Z","features":{"dark_mode":%v,"beta":%v},"cart":{"items":%d,"currency":"EUR"}}`,
			r.IntN(1e7), r.Uint64(), []string{"DE", "FR", "US", "JP", "BR"}[r.IntN(5)], []string{"free", "pro", "team"}[r.IntN(3)],
			1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(9))
	}
	return docs
}

func TestDictionary_SmallValues(t *testing.T) {
	d, err := TrainDictionary(40001, smallDocs(2000, 1), 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	plain := mustEncoder(t, MustParseAlgorithm("zstd:1"))
	withDict := mustEncoder(t, MustParseAlgorithm("zstd:1"), WithDictionary(d))
	dec := mustDecoder(t, WithDictionaries(d))
	var rawBytes, plainBytes, dictBytes int
	for _, doc := range smallDocs(200, 2) { // other documents than the training set
		rawBytes += len(doc)
		plainBytes += len(plain.AppendEncode(nil, doc))
		frame := withDict.AppendEncode(nil, doc)
		dictBytes += len(frame)
		h, err := ParseHeader(frame)
		if err != nil || !h.HasDict || h.DictID != 40001 {
			t.Fatalf("frame header %+v, %v", h, err)
		}
		got, err := dec.AppendDecode(nil, frame)
		if err != nil || !bytes.Equal(got, doc) {
			t.Fatalf("round trip with dictionary: %v", err)
		}
		if _, err := mustDecoder(t).AppendDecode(nil, frame); !errors.Is(err, ErrUnknownDictionary) {
			t.Fatalf("decoder without the dictionary: %v", err)
		}
	}
	t.Logf("200 small docs: raw %d, zstd %d, zstd+dict %d bytes", rawBytes, plainBytes, dictBytes)
	if dictBytes*2 > plainBytes {
		t.Errorf("dictionary frames %d bytes, want under half of plain zstd's %d", dictBytes, plainBytes)
	}
}

func TestDictionary_Errors(t *testing.T) {
	if _, err := TrainDictionary(0, smallDocs(100, 1), 4096); err == nil {
		t.Error("id 0 accepted")
	}
	if _, err := TrainDictionary(40001, smallDocs(3, 1), 4096); err == nil {
		t.Error("3 samples accepted")
	}
	d, err := TrainDictionary(40002, smallDocs(500, 1), 4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewEncoder(MustParseAlgorithm("lz4"), WithDictionary(d)); err == nil {
		t.Error("dictionary accepted for lz4")
	}
	if _, err := NewEncoder(MustParseAlgorithm("zstd:1"), WithDictionary(Dictionary{ID: 7, Data: d.Data})); err == nil {
		t.Error("mismatched dictionary id accepted")
	}
	if _, err := NewDecoder(WithDictionaries(Dictionary{ID: 1, Data: []byte("not a dictionary")})); err == nil {
		t.Error("garbage dictionary accepted")
	}
}
