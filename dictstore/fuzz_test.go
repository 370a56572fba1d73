package dictstore

import (
	"encoding/json"
	"testing"
)

// FuzzParseMeta: any input either parses to metadata that survives a JSON
// round trip, or is an error; never a panic.
func FuzzParseMeta(f *testing.F) {
	f.Add([]byte(`{"id":40001,"size":65536,"pattern":"user:*","samples":1600,"sample_bytes":900000,"created":"2026-11-30T00:00:00Z","codec":"zstd:3","held_out":400,"ratio_without":2.5,"ratio_with":6.1}`))
	f.Add([]byte(`{"id":0}`))
	f.Add([]byte(`{"id":40001} {}`))
	f.Add([]byte(`{"id":40001,"samples":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMeta(b)
		if err != nil {
			return
		}
		if m.ID == 0 || m.ID > MaxID {
			t.Fatalf("accepted id %d", m.ID)
		}
		js, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := ParseMeta(js)
		if err != nil {
			t.Fatalf("re-parse %s: %v", js, err)
		}
		if m2.ID != m.ID || m2.Pattern != m.Pattern || m2.Samples != m.Samples || !m2.Created.Equal(m.Created) {
			t.Fatalf("round trip %+v -> %+v", m, m2)
		}
	})
}
