package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestAdvise_CLI runs "squeeze advise" as a new user would, on a Redis
// holding JSON pages, random bytes and short tokens: the table, the
// commands that apply the advice, and the --json report.
func TestAdvise_CLI(t *testing.T) {
	r := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	ctx := context.Background()
	random := rand.New(rand.NewPCG(1, 2))
	for i := range 40 {
		rdb.Set(ctx, fmt.Sprintf("page:%d", i), bench.JSONDocument(uint64(i), 8000), 0)
		rdb.Set(ctx, fmt.Sprintf("img:%d", i), randomBytes(random, 20000), 0)
		rdb.Set(ctx, fmt.Sprintf("token:%d", i), fmt.Sprintf("%016x", i*7919), 0)
	}
	out, errs, code := runCLI(t, nil, "advise", "--redis", r.URL(), "--no-dict")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"sampled 120 keys of " + r.URL(), "prefix", "page:", "img:", "token:",
		"to apply it:", "squeeze proxy --upstream " + r.URL() + " --codec ",
		"squeeze compact --redis " + r.URL() + " --pattern 'page:*' --codec ",
		// Random images, larger than the pages: a rule stores them raw
		// rather than one min size above them all; tokens are too short to
		// be tried anyway.
		"--rule 'img:=none'",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "img:") && !strings.Contains(line, " raw ") {
			t.Errorf("random bytes not advised raw: %q", line)
		}
	}

	out, errs, code = runCLI(t, nil, "advise", "--redis", r.URL(), "--json", "--codecs", "s2,zstd:3", "--keys", "60")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errs)
	}
	var rep struct {
		KeysScanned int      `json:"keys_scanned"`
		ProxyRules  []string `json:"proxy_rules"`
		Prefixes    []struct {
			Prefix string `json:"prefix"`
			Codecs []struct {
				Codec    string  `json:"codec"`
				SavedPct float64 `json:"saved_pct"`
			} `json:"codecs"`
			Advice struct {
				Compress bool   `json:"compress"`
				Write    string `json:"write_codec"`
				MinSize  int    `json:"min_size"`
			} `json:"advice"`
		} `json:"prefixes"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if rep.KeysScanned != 60 || len(rep.Prefixes) == 0 || len(rep.Prefixes[0].Codecs) != 2 || !slices.Contains(rep.ProxyRules, "img:=none") {
		t.Fatalf("--json: %+v", rep)
	}
	// The codec advised overall depends on the speeds measured here (a fast
	// codec is one within a share of the fastest's speed), which a loaded
	// machine moves: pages may then get a rule of their own, the random
	// bytes always get theirs, and tokens, too short to try, never do.
	for _, rule := range rep.ProxyRules {
		if rule != "img:=none" && !strings.HasPrefix(rule, "page:=") {
			t.Fatalf("--json: rule %q: %+v", rule, rep)
		}
	}
	for _, p := range rep.Prefixes {
		if p.Prefix == "page:" && (!p.Advice.Compress || p.Advice.Write == "") {
			t.Fatalf("page: %+v", p)
		}
	}

	for _, bad := range [][]string{
		{"advise"},
		{"advise", "--redis", r.URL(), "--codecs", "nope"},
		{"advise", "--redis", r.URL(), "--codecs", "none"},
		{"advise", "--redis", r.URL(), "--min-gain", "1"},
		{"advise", "--redis", r.URL(), "--depth", "0"},
	} {
		if _, errs, code := runCLI(t, nil, bad...); code != 2 || errs == "" {
			t.Errorf("%q: exit %d, stderr %q; want a usage error", bad, code, errs)
		}
	}
}

// TestAdvise_CLI_UnreadableFrames: frames this build cannot decode (here a
// codec id from the future) are left out of the advice, and the output
// says so, with the codecs found, instead of passing over them in silence.
func TestAdvise_CLI_UnreadableFrames(t *testing.T) {
	r := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	ctx := context.Background()
	future := append(codec.AppendHeader(nil, codec.Header{ID: 0x7f, OriginalLen: 5}), "?????"...)
	for i := range 20 {
		rdb.Set(ctx, fmt.Sprintf("page:%d", i), bench.JSONDocument(uint64(i), 4000), 0)
	}
	for i := range 3 {
		rdb.Set(ctx, fmt.Sprintf("next:%d", i), future, 0)
	}
	out, errs, code := runCLI(t, nil, "advise", "--redis", r.URL(), "--no-dict")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := `warning: 3 sampled values under "next:" are frames this build cannot read (stored codecs map[codec(0x7f):3])`
	if !strings.Contains(out, want) || !strings.Contains(out, "unknown codec") {
		t.Fatalf("output lacks %q:\n%s", want, out)
	}
}

// TestAdvise_CLI_LaterCodecNote: advice to write minlz, which readers older
// than it cannot read, says so and how to go back.
func TestAdvise_CLI_LaterCodecNote(t *testing.T) {
	r := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	for i := range 20 {
		rdb.Set(context.Background(), fmt.Sprintf("page:%d", i), bench.JSONDocument(uint64(i), 4000), 0)
	}
	const note = "note: minlz came later than the other codecs"
	out, errs, code := runCLI(t, nil, "advise", "--redis", r.URL(), "--no-dict", "--codecs", "minlz,zstd:9")
	if code != 0 || !strings.Contains(out, "--codec minlz:fastest") || !strings.Contains(out, note) ||
		!strings.Contains(out, "squeeze compact --from\nminlz --codec s2") {
		t.Fatalf("exit %d, advice to write minlz without the note:\n%s%s", code, out, errs)
	}
	out, errs, code = runCLI(t, nil, "advise", "--redis", r.URL(), "--no-dict", "--codecs", "s2,zstd:9")
	if code != 0 || strings.Contains(out, note) {
		t.Fatalf("exit %d, note without minlz:\n%s%s", code, out, errs)
	}
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

// TestCluster_AdviseCompact: with --cluster, advise samples and compact
// rewrites the keys of every master, not only those of the node named.
func TestCluster_AdviseCompact(t *testing.T) {
	nodes := testutil.StartCluster(t, 2)
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr}})
	defer cc.Close()
	s2, _ := codec.NewEncoder(codec.MustParseAlgorithm("s2"))
	for i := range 40 {
		if err := cc.Set(ctx, fmt.Sprintf("doc:%d", i), s2.AppendEncode(nil, bench.JSONDocument(uint64(i), 4000)), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		if size, _ := testutil.Do(n.Addr, "DBSIZE"); size == ":0" {
			t.Fatalf("node %s holds no keys", n.Addr)
		}
	}
	out, errs, code := runCLI(t, nil, "advise", "--cluster", "--redis", nodes[0].URL(), "--json", "--no-dict")
	var rep struct {
		KeysScanned int `json:"keys_scanned"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.KeysScanned != 40 {
		t.Fatalf("advise --cluster: exit %d, %d keys scanned\n%s%s", code, rep.KeysScanned, out, errs)
	}
	out, errs, code = runCLI(t, nil, "compact", "--cluster", "--redis", nodes[0].URL(), "--min-idle", "0", "--json")
	var st struct {
		Rewritten int `json:"keys_rewritten"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Rewritten != 40 {
		t.Fatalf("compact --cluster: exit %d, %d rewritten\n%s%s", code, st.Rewritten, out, errs)
	}
	_, errs, code = runCLI(t, nil, "advise", "--cluster", "--redis", "redis://127.0.0.1:1")
	if code == 0 || !strings.Contains(errs, "redis cluster at") {
		t.Fatalf("no cluster there: exit %d, %q", code, errs)
	}
}

// TestAdvise_CLI_UnprefixedKeys: keys without a prefix have no pattern of
// their own, so beside other prefixes advise prints no command with
// --pattern '*' (it would take every key), only a note; when they are all
// there is, '*' is theirs.
func TestAdvise_CLI_UnprefixedKeys(t *testing.T) {
	r := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	ctx := context.Background()
	for i := range 30 {
		rdb.Set(ctx, fmt.Sprintf("report%d", i), bench.JSONDocument(uint64(100+i), 1500), 0)
	}
	alone, errs, code := runCLI(t, nil, "advise", "--redis", r.URL())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if want := "squeeze compact --redis " + r.URL() + " --pattern '*' --codec "; !strings.Contains(alone, want) || !strings.Contains(alone, "# cold keys: ") {
		t.Errorf("unprefixed keys alone: no compaction of '*':\n%s", alone)
	}

	for i := range 30 {
		rdb.Set(ctx, fmt.Sprintf("page:%d", i), bench.JSONDocument(uint64(i), 8000), 0)
	}
	out, errs, code := runCLI(t, nil, "advise", "--redis", r.URL())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Contains(out, "--pattern '*'") {
		t.Errorf("a command takes every key for the unprefixed ones:\n%s", out)
	}
	for _, want := range []string{"--pattern 'page:*'", "# keys without a prefix: ", "no pattern selects them alone"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// Small unprefixed values that a dictionary would help: no dict train
	// over every key either.
	for i := range 200 {
		rdb.Set(ctx, fmt.Sprintf("event%d", i), fmt.Sprintf(`{"type":"click","user":%d,"page":"/products/%d","ts":%d,"agent":"Mozilla/5.0"}`, i, i%17, 1700000000+i), 0)
	}
	out, errs, code = runCLI(t, nil, "advise", "--redis", r.URL())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Contains(out, "--pattern '*'") || !strings.Contains(out, "# keys without a prefix: a dictionary would help them") {
		t.Errorf("dictionary advice for unprefixed keys:\n%s", out)
	}
}

// TestAdvise_CLI_StableAndConsistent: on the same data two runs print the
// same advice (it flipped between s2 and minlz:fastest), and the default
// candidates never advise a codec the same output warns against: minlz is
// measured, left out of the advice, and no note warns about it.
func TestAdvise_CLI_StableAndConsistent(t *testing.T) {
	r := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	ctx := context.Background()
	for i := range 20 {
		rdb.Set(ctx, fmt.Sprintf("page:%d", i), bench.JSONDocument(uint64(i), 4000), 0)
		rdb.HSet(ctx, fmt.Sprintf("cart:%d", i), "a", bench.JSONDocument(uint64(100+i), 900), "b", bench.JSONDocument(uint64(200+i), 2500))
	}
	// The advice: everything from "advice:" on, less the speeds' table.
	advice := func() string {
		out, errs, code := runCLI(t, nil, "advise", "--redis", r.URL(), "--no-dict")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		if strings.Contains(out, "note: minlz came later") || strings.Contains(out, "--codec minlz") || strings.Contains(out, "=minlz") {
			t.Fatalf("advises minlz with the default candidates:\n%s", out)
		}
		if !strings.Contains(out, "minlz:fastest") {
			t.Fatalf("minlz not measured:\n%s", out)
		}
		i := strings.Index(out, "\nadvice: ")
		if i < 0 {
			t.Fatalf("no advice:\n%s", out)
		}
		return out[i:]
	}
	first := advice()
	for range 2 {
		if again := advice(); again != first {
			t.Fatalf("advice changed between runs:\n%s\nthen:\n%s", first, again)
		}
	}
}

// TestAdvise_ScriptPrefixes: a prefix scripts use is reported with its
// last use, and gets no compact command (compact skips its keys, so the
// command would rewrite none of them), while the other prefixes keep theirs.
func TestAdvise_ScriptPrefixes(t *testing.T) {
	r := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	ctx := context.Background()
	for i := range 40 {
		rdb.HSet(ctx, fmt.Sprintf("bull:q:%d", i), "data", bench.JSONDocument(uint64(i), 8000))
		rdb.Set(ctx, fmt.Sprintf("page:%d", i), bench.JSONDocument(uint64(i+100), 8000), 0)
	}
	rdb.SAdd(ctx, "squeeze:script-prefixes", "bull:q:")
	rdb.HSet(ctx, "squeeze:script-prefixes:used", "bull:q:", "1796428800000") // 2026-12-05 00:00 UTC
	out, errs, code := runCLI(t, nil, "advise", "--redis", r.URL(), "--no-dict")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Contains(out, "--pattern 'bull:") {
		t.Errorf("a compact command for a prefix scripts use:\n%s", out)
	}
	for _, want := range []string{
		"bull:q: (last used by a script 2026-12-05 00:00:00 UTC)",
		"but scripts use bull:q:, whose keys squeeze compact skips",
		"squeeze compact --redis " + r.URL() + " --pattern 'page:*' --codec ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestAdvise_CLI_Portable: advise sets the portable profile beside the
// advice over every codec, in the table and in --json; with --portable it
// advises portable codecs only, and the commands it prints carry
// --portable and are accepted as printed (proxy --check, compact
// --dry-run).
func TestAdvise_CLI_Portable(t *testing.T) {
	r := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	ctx := context.Background()
	random := rand.New(rand.NewPCG(3, 4))
	for i := range 30 {
		rdb.Set(ctx, fmt.Sprintf("page:%d", i), bench.JSONDocument(uint64(i), 8000), 0)
		rdb.Set(ctx, fmt.Sprintf("img:%d", i), randomBytes(random, 5000), 0)
	}
	const section = "the portable profile (codecs other languages read) against every codec"
	out, errs, code := runCLI(t, nil, "advise", "--redis", r.URL(), "--no-dict")
	if code != 0 || !strings.Contains(out, section) || !strings.Contains(out, "squeeze advise --portable advises within the profile") {
		t.Fatalf("exit %d, no portable profile table:\n%s%s", code, out, errs)
	}
	for _, cmd := range printedCommands(out, "squeeze ") {
		if strings.Contains(cmd, "--portable") {
			t.Errorf("without --portable: %q", cmd)
		}
	}

	out, errs, code = runCLI(t, nil, "advise", "--redis", r.URL(), "--no-dict", "--portable")
	if code != 0 || !strings.Contains(out, section) || !strings.Contains(out, "advice: within the portable profile") {
		t.Fatalf("--portable: exit %d:\n%s%s", code, out, errs)
	}
	rows := 0
	for _, line := range strings.Split(out[strings.Index(out, section):], "\n")[2:] {
		if line == "" {
			break
		}
		f := strings.Fields(line)
		if f[0] != "page:" && f[0] != "img:" && f[0] != "(all)" {
			t.Errorf("portable profile row %q", line)
		}
		rows++
	}
	if rows != 3 {
		t.Errorf("%d rows in the portable profile table, want page:, img: and (all):\n%s", rows, out)
	}
	portableCodec := func(name string) bool {
		a, err := codec.ParseAlgorithm(name)
		return err == nil && a.ID.Portable()
	}
	proxies := printedCommands(out, "squeeze proxy ")
	if len(proxies) != 1 || !strings.Contains(proxies[0], " --portable ") {
		t.Fatalf("--portable: proxy commands %q:\n%s", proxies, out)
	}
	words := argv(t, proxies[0])
	for i, w := range words {
		switch {
		case w == "--codec" && !portableCodec(words[i+1]):
			t.Errorf("--codec %s is not portable: %q", words[i+1], proxies[0])
		case w == "--rule":
			_, spec, _ := strings.Cut(words[i+1], "=")
			name, _, _ := strings.Cut(spec, ",")
			if !portableCodec(name) {
				t.Errorf("--rule %s: %s is not portable", words[i+1], name)
			}
		}
	}
	if _, errs, code := runCLI(t, nil, append(words[1:], "--check")...); code != 0 {
		t.Errorf("%q --check: exit %d: %s", proxies[0], code, errs)
	}
	for _, c := range printedCommands(out, "squeeze compact ") {
		if !strings.Contains(c, " --portable ") {
			t.Errorf("--portable: %q", c)
		}
		if _, errs, code := runCLI(t, nil, append(argv(t, c)[1:], "--dry-run")...); code != 0 {
			t.Errorf("%q --dry-run: exit %d: %s", c, code, errs)
		}
	}

	out, errs, code = runCLI(t, nil, "advise", "--redis", r.URL(), "--no-dict", "--portable", "--json")
	if code != 0 {
		t.Fatalf("--portable --json: exit %d: %s", code, errs)
	}
	type choice struct {
		Compress  bool    `json:"compress"`
		Codec     string  `json:"write_codec"`
		SavedPct  float64 `json:"saved_pct"`
		EncodeMBs float64 `json:"encode_mb_s"`
		DecodeMBs float64 `json:"decode_mb_s"`
	}
	type prefix struct {
		Prefix string `json:"prefix"`
		Advice struct {
			Compress bool   `json:"compress"`
			Write    string `json:"write_codec"`
		} `json:"advice"`
		Profile *struct {
			Portable    choice  `json:"portable"`
			Any         choice  `json:"any_codec"`
			SavedPoints float64 `json:"saved_points_lost"`
			EncodeRatio float64 `json:"encode_speed_ratio"`
			DecodeRatio float64 `json:"decode_speed_ratio"`
		} `json:"portable_profile"`
	}
	var rep struct {
		Prefixes []prefix `json:"prefixes"`
		Overall  prefix   `json:"overall"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	for _, p := range append(rep.Prefixes, rep.Overall) {
		pc := p.Profile
		if pc == nil {
			t.Fatalf("%q: no portable_profile:\n%s", p.Prefix, out)
		}
		if p.Advice.Compress != pc.Portable.Compress || p.Advice.Write != pc.Portable.Codec {
			t.Errorf("%q: --portable advises %+v, its portable choice is %+v", p.Prefix, p.Advice, pc.Portable)
		}
		if pc.Portable.Compress && (!portableCodec(pc.Portable.Codec) || pc.Portable.EncodeMBs <= 0 || pc.Portable.DecodeMBs <= 0) {
			t.Errorf("%q: portable choice %+v", p.Prefix, pc.Portable)
		}
		if pc.Portable.Compress && pc.Any.Compress && (pc.EncodeRatio <= 0 || pc.DecodeRatio <= 0) {
			t.Errorf("%q: no speed ratios: %+v", p.Prefix, pc)
		}
		if d := pc.Any.SavedPct - pc.Portable.SavedPct - pc.SavedPoints; d > 1e-9 || d < -1e-9 {
			t.Errorf("%q: saved_points_lost %.2f for %.2f%% and %.2f%%", p.Prefix, pc.SavedPoints, pc.Any.SavedPct, pc.Portable.SavedPct)
		}
	}

	if _, errs, code := runCLI(t, nil, "advise", "--redis", r.URL(), "--portable", "--codecs", "s2,minlz"); code != 2 || !strings.Contains(errs, "portable") {
		t.Errorf("--portable with Go-only codecs: exit %d, %q; want a usage error", code, errs)
	}
}
