package compact

import (
	"context"
	"testing"
)

// TestRun_SkipsScriptPrefixes: raw values under a prefix scripts use
// (squeeze:script-prefixes) stay as written, per-item keys below an id
// segment too (the proxy's prefix of bull:jobs:7:logs is bull:jobs:);
// others are compacted.
func TestRun_SkipsScriptPrefixes(t *testing.T) {
	rdb := newClient(t)
	ctx := context.Background()
	rdb.SAdd(ctx, ScriptPrefixesKey, "bull:jobs:")
	for i := range 10 {
		rdb.Set(ctx, "bull:jobs:"+string(rune('a'+i)), doc(i), 0)
		rdb.Set(ctx, "cache:"+string(rune('a'+i)), doc(i), 0)
	}
	rdb.Set(ctx, "bull:jobs:7:logs", doc(3), 0)
	st, err := Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:3"), IncludeRaw: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Skipped[SkipScript] != 12 || st.Rewritten != 10 {
		t.Fatalf("stats %+v: want 11 script keys and the set skipped, 10 rewritten", st)
	}
	for i := range 10 {
		if got := rdb.Get(ctx, "bull:jobs:"+string(rune('a'+i))).Val(); got != string(doc(i)) {
			t.Fatalf("a key under a script prefix was rewritten")
		}
	}
}
