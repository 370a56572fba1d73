package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/dictstore"
	"github.com/squeeze-kv/squeeze/internal/units"
)

func init() {
	register(command{Name: "dict", Summary: "train zstd dictionaries on your values and share them through Redis (train, list, show)", Run: runDict})
}

const dictUsage = `
Usage: squeeze dict <train|list|show> [--redis URL] [flags] [arguments]

Small values (user profiles, sessions, API responses of a few hundred bytes
to a few kB) share most of their structure with each other but little with
themselves, so they compress poorly one by one. A zstd dictionary trained on
their peers holds that shared structure, and values compressed with it are
often several times smaller again.

Dictionaries live in the Redis that holds the data, so that every squeeze
proxy and library in front of it can read values written with them:
squeeze:dict:<id> holds the bytes (written once, never changed) and the hash
squeeze:dicts describes each one. Readers load a dictionary the first time
a value names it; writers pick one with "squeeze proxy --dict ID" (every
key), "squeeze proxy --rule 'user:=zstd:1,dict=ID'" (the keys of one
prefix, each prefix with its own dictionary) or the client's
Config.DictionaryID and Config.Rules.

  train   sample values of a key pattern (read-only), train a dictionary,
          measure it on held-out values, and with --publish store it
  list    the published dictionaries and what they measured
  show    one dictionary's metadata (--out writes its bytes, for zstd -D)

A Redis is required, named by --redis or else the environment variable
SQUEEZE_REDIS (redis://host:port/db, host:port, unix:///path.sock, ...):
there is no throwaway server here, the dictionary must come from and go to
the Redis your applications use. In a Redis Cluster add --cluster (with
any node's URL): train samples the keys of every master, and the
dictionary is stored on the node that owns its key, where every proxy
finds it.

Examples:
  squeeze dict train --redis redis://127.0.0.1:6379 --pattern 'user:*'
  squeeze dict train --redis redis://127.0.0.1:6379 --pattern 'session:*' --size 32KiB --publish
  squeeze proxy --upstream redis://127.0.0.1:6379 --dict 1690163204
  squeeze proxy --upstream redis://127.0.0.1:6379 --rule 'user:=zstd:1,dict=1690163204'
  squeeze dict list --redis redis://127.0.0.1:6379
  squeeze dict show --redis redis://127.0.0.1:6379 --out user.dict 1690163204
  squeeze dict train --cluster --redis redis://10.0.0.5:7000 --pattern 'user:*' --publish

Run "squeeze dict <train|list|show> --help" for the flags of each.
`

func runDict(ctx context.Context, e env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) == 0 {
			fmt.Fprint(e.Stderr, strings.TrimLeft(dictUsage, "\n"))
			return usageError("dict needs a subcommand: train, list or show")
		}
		fmt.Fprint(e.Stdout, strings.TrimLeft(dictUsage, "\n"))
		return flag.ErrHelp
	}
	switch args[0] {
	case "train":
		return runDictTrain(ctx, e, args[1:])
	case "list":
		return runDictList(ctx, e, args[1:])
	case "show":
		return runDictShow(ctx, e, args[1:])
	}
	return usageError("unknown dict subcommand %q (want train, list or show)", args[0])
}

func addDictRedisFlag(fs *flag.FlagSet) (url *string, cluster *bool) {
	url = addRedisFlag(fs, "Redis server `URL` holding the data and the dictionaries", "none: required")
	cluster = fs.Bool("cluster", false, "--redis names a node of a Redis Cluster: reach the keys of every master")
	return url, cluster
}

// needRedis resolves the Redis of a dict subcommand, which has no default.
func needRedis(url *string, sub string) error {
	u, err := resolveRedis(*url, "")
	if err != nil {
		return err
	}
	if u == "" {
		return needRedisError("dict "+sub, "dictionaries are trained on and shared through the Redis your applications use")
	}
	*url = u
	return nil
}

const dictTrainUsage = `
Usage: squeeze dict train [--redis URL] --pattern GLOB [flags]

Reads up to --sample values of the keys matching --pattern (SCAN, TYPE, GET
and HGETALL only: nothing is written unless --publish), string values and
hash field values alike; values squeeze already compressed are decoded
first. A fifth of them, picked by a hash of the key, is held out: the
dictionary is trained on the rest and measured on those, so the figures are
what new values of the same kind would get.

It prints the dictionary's id, its size, the compression ratio with and
without it, and the Redis memory the held-out values would take raw,
compressed, and compressed with the dictionary (allocator size classes
included). The id is derived from the dictionary's bytes: training twice on
the same values gives the same id.

With --publish the dictionary is stored at squeeze:dict:<id> (SET NX; it
never changes once published) and described in the hash squeeze:dicts.
Nothing starts using it until a writer is told to: squeeze proxy --dict ID
or --rule 'PREFIX=zstd:1,dict=ID' (printed for a PREFIX* pattern), or the
client library's Config.DictionaryID or Config.Rules. Readers find it on
their own.

Examples:
  squeeze dict train --redis redis://127.0.0.1:6379 --pattern 'user:*'
  squeeze dict train --redis redis://10.0.0.5:6379/2 --pattern 'cart:*' --sample 5000 --size 112KiB --publish
  squeeze dict train --redis unix:///run/redis.sock --pattern 'sess:*' --codec zstd:1 --json
  id=$(squeeze dict train --pattern 'user:*' --publish --quiet)
`

func runDictTrain(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "dict train", dictTrainUsage)
	url, cluster := addDictRedisFlag(fs)
	pattern := fs.String("pattern", "", "SCAN `GLOB` of the keys to sample (required), e.g. 'user:*'")
	sample := fs.Int("sample", dictstore.DefaultSamples, "most values to read (a fifth is held out to measure)")
	size := units.SizeFlag(dictstore.DefaultDictSize)
	fs.Var(&size, "size", "largest dictionary (e.g. 16KiB, 64KiB, at most 128KiB)")
	codecName := fs.String("codec", dictstore.DefaultTrainAlgorithm.String(), "zstd level to measure with (zstd:1 ... zstd:4)")
	maxValue := units.SizeFlag(dictstore.DefaultMaxValue)
	fs.Var(&maxValue, "max-value", "skip values larger than this: dictionaries help small values")
	publish := fs.Bool("publish", false, "store the dictionary in Redis (squeeze:dict:<id>) for proxies and clients")
	asJSON := fs.Bool("json", false, "print JSON for machines")
	quiet := fs.Bool("quiet", false, "print only the dictionary's id, for scripts: id=$(squeeze dict train ... --quiet)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("dict train takes no arguments (got %q); the keys come from --pattern", fs.Args())
	}
	if *quiet && *asJSON {
		return usageError("dict train: --quiet and --json print different things; pick one")
	}
	if err := needRedis(url, "train"); err != nil {
		return err
	}
	if *pattern == "" {
		return usageError("dict train needs --pattern GLOB: the keys whose values the dictionary is for (e.g. --pattern 'user:*')")
	}
	if *sample < 10 {
		return usageError("--sample must be at least 10, got %d", *sample)
	}
	if size < 256 || size > dictstore.MaxDictSize {
		return usageError("--size must be between 256 bytes and 128KiB, got %s", size.String())
	}
	alg, err := codec.ParseAlgorithm(*codecName)
	if err != nil {
		return usageError("--codec: %v", err)
	}
	if alg.ID != codec.IDZstd {
		return usageError("--codec %s: dictionaries work with zstd only", alg)
	}
	rdb, err := openClusterOr(ctx, *url, *cluster)
	if err != nil {
		return err
	}
	defer rdb.Close()
	// Values written with dictionaries published earlier decode too.
	res, err := dictstore.NewResolver(rdb)
	if err != nil {
		return err
	}
	if err := res.Preload(ctx); err != nil {
		fmt.Fprintln(e.Stderr, "squeeze: warning:", err)
	}
	b := newProgress(e, *asJSON || *quiet)
	d, rep, err := dictstore.Train(ctx, rdb, *pattern, dictstore.TrainOptions{
		Samples: *sample, Size: int(size), Algorithm: alg, MaxValue: int(maxValue), Decoder: res.Decoder(),
		Progress: b.update,
	})
	b.finish()
	if err != nil {
		return err
	}
	if *publish {
		if err := dictstore.Publish(ctx, rdb, d, rep.Meta()); err != nil {
			return err
		}
	}
	without, with := rep.SavedPct()
	if *quiet {
		fmt.Fprintln(e.Stdout, d.ID)
		return nil
	}
	if *asJSON {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			dictstore.Report
			SavedPctWithout float64 `json:"memory_saved_pct_without"`
			SavedPctWith    float64 `json:"memory_saved_pct_with"`
			Published       bool    `json:"published"`
			Key             string  `json:"key"`
		}{rep, round1(without), round1(with), *publish, dictstore.Key(d.ID)})
	}
	w := e.Stdout
	fmt.Fprintf(w, "dictionary %d: %s, trained on %d values (%s) of %s, %d keys scanned",
		d.ID, units.FormatSize(int64(rep.Size)), rep.Samples, units.FormatSize(rep.SampleBytes), rep.Pattern, rep.KeysScanned)
	if rep.Skipped > 0 {
		fmt.Fprintf(w, ", %d values skipped (other types, empty, over --max-value, or undecodable)", rep.Skipped)
	}
	fmt.Fprintf(w, "\n\nmeasured on %d held-out values (%s), never trained on:\n", rep.HeldOut, units.FormatSize(rep.HeldOutBytes))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tstored\tratio\tRedis memory\tsaved\t\n")
	fmt.Fprintf(tw, "uncompressed\t%s\t1.00x\t%s\t-\t\n", units.FormatSize(rep.HeldOutBytes), units.FormatSize(rep.MemoryRaw))
	fmt.Fprintf(tw, "%s\t%s\t%.2fx\t%s\t%.1f%%\t\n", rep.Codec, units.FormatSize(rep.StoredWithout), rep.RatioWithout, units.FormatSize(rep.MemoryWithout), without)
	fmt.Fprintf(tw, "%s+dict\t%s\t%.2fx\t%s\t%.1f%%\t\n", rep.Codec, units.FormatSize(rep.StoredWith), rep.RatioWith, units.FormatSize(rep.MemoryWith), with)
	tw.Flush()
	if rep.HeldOut > 0 {
		per := float64(rep.MemoryWithout-rep.MemoryWith) / float64(rep.HeldOut)
		fmt.Fprintf(w, "\nwith the dictionary, values like these take %.0f bytes less Redis memory each than with %s alone (%s per million values)\n",
			per, rep.Codec, units.FormatSize(int64(per*1e6)))
	}
	if *publish {
		use := fmt.Sprintf("--dict %d", d.ID)
		if prefix, ok := globPrefix(rep.Pattern); ok && !strings.Contains(prefix, ";") {
			use = "--rule " + shellQuote(fmt.Sprintf("%s=%s,dict=%d", prefix, rep.Codec, d.ID)) // these keys only
		}
		fmt.Fprintf(w, "published as %s; write with it: squeeze proxy %s (readers load it on their own)\n", dictstore.Key(d.ID), use)
	} else {
		fmt.Fprintf(w, "not published: add --publish to store it at %s\n", dictstore.Key(d.ID))
	}
	return nil
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

const dictListUsage = `
Usage: squeeze dict list [--redis URL] [--json]

Lists the dictionaries published in this Redis (the hash squeeze:dicts):
id, size, the key pattern and sample count they were trained on, and the
compression ratio they measured with and without the dictionary.

Examples:
  squeeze dict list --redis redis://127.0.0.1:6379
  squeeze dict list --redis redis://127.0.0.1:6379 --json
`

func runDictList(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "dict list", dictListUsage)
	url, cluster := addDictRedisFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON for machines")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("dict list takes no arguments (got %q)", fs.Args())
	}
	if err := needRedis(url, "list"); err != nil {
		return err
	}
	rdb, err := openClusterOr(ctx, *url, *cluster)
	if err != nil {
		return err
	}
	defer rdb.Close()
	metas, err := dictstore.List(ctx, rdb)
	if err != nil {
		return err
	}
	if *asJSON {
		if metas == nil {
			metas = []dictstore.Meta{}
		}
		return json.NewEncoder(e.Stdout).Encode(metas)
	}
	if len(metas) == 0 {
		fmt.Fprintln(e.Stdout, "no dictionaries published (train one: squeeze dict train --redis URL --pattern GLOB --publish)")
		return nil
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSIZE\tPATTERN\tSAMPLES\tCODEC\tRATIO\tWITH DICT\tCREATED")
	for _, m := range metas {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", m.ID, units.FormatSize(int64(m.Size)), m.Pattern, m.Samples, m.Codec,
			ratio(m.RatioWithout), ratio(m.RatioWith), m.Created.Format(time.DateTime))
	}
	return tw.Flush()
}

func ratio(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", r)
}

const dictShowUsage = `
Usage: squeeze dict show [--redis URL] [--out FILE] [--json] ID

Prints what squeeze:dicts says about dictionary ID and checks its bytes at
squeeze:dict:ID. --out writes the bytes to FILE: a standard zstd dictionary,
so "zstd -D FILE -d" reads the payload of a frame written with it.

Examples:
  squeeze dict show --redis redis://127.0.0.1:6379 1690163204
  squeeze dict show --redis redis://127.0.0.1:6379 --out user.dict 1690163204
`

func runDictShow(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "dict show", dictShowUsage)
	url, cluster := addDictRedisFlag(fs)
	out := fs.String("out", "", "write the dictionary bytes to this `FILE`")
	asJSON := fs.Bool("json", false, "print JSON for machines")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("dict show takes one dictionary ID (got %d arguments)", len(pos))
	}
	id, err := strconv.ParseUint(pos[0], 10, 32)
	if err != nil || id == 0 || id > dictstore.MaxID {
		return usageError("dictionary ID %q is not a number in 1..2147483647", pos[0])
	}
	if err := needRedis(url, "show"); err != nil {
		return err
	}
	rdb, err := openClusterOr(ctx, *url, *cluster)
	if err != nil {
		return err
	}
	defer rdb.Close()
	d, err := dictstore.Load(ctx, rdb, uint32(id))
	if err != nil {
		return atRedis(err, *url)
	}
	metas, err := dictstore.List(ctx, rdb)
	if err != nil {
		return err
	}
	meta := dictstore.Meta{ID: d.ID, Size: len(d.Data)}
	for _, m := range metas {
		if m.ID == d.ID {
			meta = m
		}
	}
	if *out != "" {
		if err := os.WriteFile(*out, d.Data, 0o644); err != nil {
			return err
		}
	}
	if *asJSON {
		return json.NewEncoder(e.Stdout).Encode(meta)
	}
	info, _ := zstd.InspectDictionary(d.Data) // Load checked it
	w := e.Stdout
	fmt.Fprintf(w, "id            %d\n", d.ID)
	fmt.Fprintf(w, "key           %s\n", dictstore.Key(d.ID))
	fmt.Fprintf(w, "size          %s (%s of content)\n", units.FormatSize(int64(len(d.Data))), units.FormatSize(int64(info.ContentSize())))
	if meta.Pattern != "" || meta.Samples > 0 {
		fmt.Fprintf(w, "trained on    %d values (%s) of %s\n", meta.Samples, units.FormatSize(meta.SampleBytes), meta.Pattern)
	}
	if !meta.Created.IsZero() {
		fmt.Fprintf(w, "created       %s\n", meta.Created.Format(time.RFC3339))
	}
	if meta.HeldOut > 0 {
		fmt.Fprintf(w, "measured      %s on %d held-out values: %s without, %s with the dictionary\n", meta.Codec, meta.HeldOut, ratio(meta.RatioWithout), ratio(meta.RatioWith))
	}
	if *out != "" {
		fmt.Fprintf(w, "written to    %s\n", *out)
	}
	return nil
}

// globPrefix returns the prefix a SCAN pattern of the form PREFIX* matches,
// and whether the pattern has that form (no other glob characters).
func globPrefix(pattern string) (string, bool) {
	prefix, ok := strings.CutSuffix(pattern, "*")
	if !ok || prefix == "" || strings.ContainsAny(prefix, `*?[\`) {
		return "", false
	}
	return prefix, true
}
