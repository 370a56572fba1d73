package client

import (
	"bytes"
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// cmdTypes is one of each command type of go-redis v9, for
// TestClassOf_EveryCmdType. A type go-redis adds is caught there: list it
// here, and give it its class in classOf.
var cmdTypes = []redis.Cmder{
	new(redis.Cmd), new(redis.ACLLogCmd), new(redis.AREntrySliceCmd), new(redis.AggregateCmd), new(redis.BFInfoCmd),
	new(redis.BoolCmd), new(redis.BoolSliceCmd), new(redis.CFInfoCmd), new(redis.CMSInfoCmd),
	new(redis.ClientInfoCmd), new(redis.ClusterLinksCmd), new(redis.ClusterShardsCmd),
	new(redis.ClusterSlotsCmd), new(redis.CommandsInfoCmd), new(redis.DigestCmd), new(redis.DurationCmd),
	new(redis.FTHybridCmd), new(redis.FTInfoCmd), new(redis.FTSearchCmd), new(redis.FTSpellCheckCmd),
	new(redis.FTSynDumpCmd), new(redis.FloatCmd), new(redis.FloatSliceCmd), new(redis.FunctionListCmd),
	new(redis.FunctionStatsCmd), new(redis.GeoLocationCmd), new(redis.GeoPosCmd),
	new(redis.GeoSearchLocationCmd), new(redis.HImportDiscardAllCmd), new(redis.HImportDiscardCmd),
	new(redis.HImportPrepareCmd), new(redis.HImportSetCmd), new(redis.HotKeysCmd), new(redis.IncrEXFloatCmd),
	new(redis.IncrEXIntCmd), new(redis.InfoCmd), new(redis.IntCmd), new(redis.IntPointerSliceCmd),
	new(redis.IntSliceCmd), new(redis.JSONCmd), new(redis.JSONSliceCmd), new(redis.KeyFlagsCmd),
	new(redis.KeyValueSliceCmd), new(redis.KeyValuesCmd), new(redis.LCSCmd), new(redis.LatencyCmd),
	new(redis.MapMapStringInterfaceCmd), new(redis.MapStringIntCmd), new(redis.MapStringInterfaceCmd),
	new(redis.MapStringInterfaceSliceCmd), new(redis.MapStringSliceInterfaceCmd), new(redis.MapStringStringCmd),
	new(redis.MapStringStringSliceCmd), new(redis.MonitorCmd), new(redis.RankWithScoreCmd), new(redis.RawCmd),
	new(redis.RawWriteToCmd), new(redis.ScanCmd), new(redis.ScanDumpCmd), new(redis.SliceCmd),
	new(redis.SlowLogCmd), new(redis.StatusCmd), new(redis.StringCmd), new(redis.StringSliceCmd),
	new(redis.StringSliceSliceCmd), new(redis.StringStructMapCmd), new(redis.TDigestInfoCmd),
	new(redis.TSNRangePivotRowSliceCmd), new(redis.TSTimestampValueCmd), new(redis.TSTimestampValueSliceCmd),
	new(redis.TimeCmd), new(redis.TopKInfoCmd), new(redis.UintCmd), new(redis.UintSliceCmd),
	new(redis.VectorAttribSliceCmd), new(redis.VectorScoreAttribSliceCmd), new(redis.VectorScoreSliceCmd),
	new(redis.VectorScoreSliceSliceCmd), new(redis.XAutoClaimCmd), new(redis.XAutoClaimJustIDCmd),
	new(redis.XAutoClaimWithDeletedCmd), new(redis.XInfoConsumersCmd), new(redis.XInfoGroupsCmd),
	new(redis.XInfoStreamCmd), new(redis.XInfoStreamFullCmd), new(redis.XMessageSliceCmd),
	new(redis.XPendingCmd), new(redis.XPendingExtCmd), new(redis.XStreamSliceCmd), new(redis.ZSliceCmd),
	new(redis.ZSliceWithKeyCmd), new(redis.ZWithKeyCmd), new(redis.ZeroCopyStringCmd),
}

// goRedisCmdTypes parses the go-redis package the module builds with and
// returns the names of its exported struct types whose name ends in Cmd.
func goRedisCmdTypes(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/redis/go-redis/v9").Output()
	dir := string(bytes.TrimSpace(out))
	if err != nil || dir == "" {
		t.Fatalf("go list go-redis: %v", err)
	}
	pkgs, err := parser.ParseDir(token.NewFileSet(), dir, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	pkg := pkgs["redis"]
	if pkg == nil {
		t.Fatalf("no package redis in %s", dir)
	}
	var names []string
	for fname, f := range pkg.Files {
		if strings.HasSuffix(fname, "_test.go") {
			continue
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				if _, ok := ts.Type.(*ast.StructType); ok && ts.Name.IsExported() && strings.HasSuffix(ts.Name.Name, "Cmd") {
					names = append(names, ts.Name.Name)
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

// TestClassOf_EveryCmdType walks every command type go-redis v9 exports
// (parsed from its source, so that a new one fails here) and requires the
// hook to have classified it: decoded, holding no values, checked for
// frames, or refused. A type it does not know must never pass a frame
// through silently.
func TestClassOf_EveryCmdType(t *testing.T) {
	listed := map[string]redis.Cmder{}
	for _, c := range cmdTypes {
		listed[reflect.TypeOf(c).Elem().Name()] = c
	}
	parsed := goRedisCmdTypes(t)
	if len(parsed) < 50 {
		t.Fatalf("parsed only %d command types: %v", len(parsed), parsed)
	}
	counts := map[cmdClass]int{}
	for _, name := range parsed {
		c, ok := listed[name]
		if !ok {
			t.Errorf("go-redis's %s is new to the hook: give it its class in classOf (classify.go) and list it in cmdTypes", name)
			continue
		}
		class := classOf(c)
		if class == classUnknown {
			t.Errorf("classOf does not classify *redis.%s", name)
		}
		counts[class]++
		delete(listed, name)
	}
	for name := range listed {
		t.Errorf("cmdTypes lists %s, which go-redis no longer has", name)
	}
	t.Logf("%d command types: %d decoded, %d hold no values, %d checked for frames, %d refused",
		len(parsed), counts[classDecoded], counts[classNoValues], counts[classChecked], counts[classRefused])
}

// TestClassOf_Checked: a reply type the hook cannot rewrite fails with
// ErrUndecoded when it holds a compressed value, and passes without one;
// DoRaw fails the same way, DoRawWriteTo is refused before it is sent.
func TestClassOf_Checked(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, exactConfigs[0].cfg)
	v := big("doc")
	p.hooked.Set(ctx, "k", v, 0)
	frame := p.plain.Get(ctx, "k").Val()
	mustFramed(t, frame, "SET")

	h, err := NewHook(exactConfigs[0].cfg)
	if err != nil {
		t.Fatal(err)
	}
	search := new(redis.FTSearchCmd) // FT.SEARCH idx * on hashes
	search.SetVal(redis.FTSearchResult{Total: 1, Docs: []redis.Document{{ID: "doc:1", Fields: map[string]string{"body": frame}}}})
	if err := h.decodeReply(search, prepared{name: "ft.search"}); !errors.Is(err, ErrUndecoded) {
		t.Errorf("FT.SEARCH with a frame: %v", err)
	}
	search.SetVal(redis.FTSearchResult{Total: 1, Docs: []redis.Document{{ID: "doc:1", Fields: map[string]string{"body": v}}}})
	if err := h.decodeReply(search, prepared{name: "ft.search"}); err != nil {
		t.Errorf("FT.SEARCH without: %v", err)
	}
	ar := redis.NewAREntrySliceCmd(ctx, "ARSCAN", "a", 0, 10)
	ar.SetVal([]redis.AREntry{{Index: 1, Value: "x"}, {Index: 2, Value: frame}})
	if err := h.decodeReply(ar, prepared{name: "arscan"}); !errors.Is(err, ErrUndecoded) {
		t.Errorf("ARSCAN with a frame: %v", err)
	}

	if err := p.hooked.DoRaw(ctx, "GET", "k").Err(); !errors.Is(err, ErrUndecoded) {
		t.Errorf("DoRaw GET of a compressed value: %v", err)
	}
	if err := p.hooked.DoRaw(ctx, "SET", "k2", v).Err(); err != nil {
		t.Errorf("DoRaw SET: %v", err)
	}
	mustFramed(t, p.plain.Get(ctx, "k2").Val(), "DoRaw SET")
	if raw, err := p.hooked.DoRaw(ctx, "EXISTS", "k").Result(); err != nil || string(raw) != ":1\r\n" {
		t.Errorf("DoRaw EXISTS = %q, %v", raw, err)
	}
	var w bytes.Buffer
	if err := p.hooked.DoRawWriteTo(ctx, &w, "GET", "k").Err(); !errors.Is(err, ErrUnsupported) || w.Len() != 0 {
		t.Errorf("DoRawWriteTo GET: %v, %d bytes written", err, w.Len())
	}
	if err := p.hooked.DoRawWriteTo(ctx, &w, "TYPE", "k").Err(); err != nil || w.String() != "+string\r\n" {
		t.Errorf("DoRawWriteTo TYPE: %q, %v", w.String(), err)
	}
}
