package advise

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestRun_ScriptPrefixes: the prefixes in squeeze:script-prefixes are
// reported, and the advise prefixes they overlap are marked.
func TestRun_ScriptPrefixes(t *testing.T) {
	srv := testutil.StartRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 20 {
		rdb.Set(ctx, "bull:"+strconv.Itoa(i), jsonDoc(r, 2000), 0)
		rdb.Set(ctx, "doc:"+strconv.Itoa(i), jsonDoc(r, 2000), 0)
	}
	rdb.SAdd(ctx, ScriptPrefixesKey, "bull:jobs:", "lock:")
	rep, err := Run(ctx, rdb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.ScriptPrefixes) != 2 || rep.ScriptPrefixes[0] != "bull:jobs:" || rep.ScriptPrefixes[1] != "lock:" {
		t.Fatalf("ScriptPrefixes = %q", rep.ScriptPrefixes)
	}
	marked := map[string]bool{}
	for _, p := range rep.Prefixes {
		marked[p.Prefix] = p.ScriptUsed
	}
	if !marked["bull:"] || marked["doc:"] {
		t.Fatalf("ScriptUsed by prefix = %v: want bull: only", marked)
	}
}
