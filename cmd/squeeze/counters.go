package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/counters"
)

func init() {
	register(command{Name: "counters", Summary: "read, increment and migrate packed BITFIELD counters (get, incr, migrate)", Run: runCounters})
}

const countersUsage = `
Usage: squeeze counters <get|incr|migrate> [flags] arguments

Packed counters keep one fixed-width integer per slot (a day, an hour...) in
one pre-sized Redis string per entity, updated in place by BITFIELD: 2 bytes
per u16 counter instead of the 4 hex characters (plus hash overhead) or the
list elements of the layouts they replace.

  get      print one slot, or the slots of a window and their sum
  incr     add to one slot (negative to decrement) with an overflow rule
  migrate  convert a list of decimal counters, or a hash field of 4 hex
           characters per slot, into a packed series, verified value by value

The Redis is --redis, else the environment variable SQUEEZE_REDIS, else
redis://127.0.0.1:6379. Flags may come before or after the arguments.

Examples:
  squeeze counters incr --redis redis://127.0.0.1:6379 user42 17
  squeeze counters incr --type u8 --overflow sat user42 17 -3
  squeeze counters get user42 17
  SQUEEZE_REDIS=10.0.0.5:6379 squeeze counters get user42 17
  squeeze counters get --json user42 0:7            # days 0..6 and their sum
  squeeze counters migrate --from hex --field counts --expect 365 daily:user42 user42
  squeeze counters migrate --from list --scan 'visits:*' --delete

Run "squeeze counters <get|incr|migrate> --help" for the flags of each.
`

func runCounters(ctx context.Context, e env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) == 0 { // the usage goes with the error
			fmt.Fprint(e.Stderr, strings.TrimLeft(countersUsage, "\n"))
			return usageError("counters needs a subcommand: get, incr or migrate")
		}
		fmt.Fprint(e.Stdout, strings.TrimLeft(countersUsage, "\n"))
		return flag.ErrHelp
	}
	switch args[0] {
	case "get":
		return runCountersGet(ctx, e, args[1:])
	case "incr":
		return runCountersIncr(ctx, e, args[1:])
	case "migrate":
		return runCountersMigrate(ctx, e, args[1:])
	}
	return usageError("unknown counters subcommand %q (want get, incr or migrate)", args[0])
}

// countersFlags are the flags every counters subcommand shares: where the
// series live and what they look like.
type countersFlags struct {
	url, prefix, typ, overflow *string
	slots                      *int
	json                       *bool
}

func addCountersFlags(fs *flag.FlagSet) countersFlags {
	return countersFlags{
		url:      addRedisFlag(fs, "Redis server `URL`", localRedis),
		prefix:   fs.String("prefix", "cnt:", "key prefix: the series of ENTITY is at PREFIX+ENTITY"),
		typ:      fs.String("type", "u16", "slot width as BITFIELD spells it: u1..u63 or i1..i64"),
		slots:    fs.Int("slots", 365, "slots per series (365 days, 24 hours, ...)"),
		overflow: fs.String("overflow", "fail", "overflow rule of increments: fail (error, slot unchanged), sat (clamp) or wrap"),
		json:     fs.Bool("json", false, "print JSON for machines"),
	}
}

// open validates the shared flags and connects; the caller closes the client.
func (f countersFlags) open(ctx context.Context) (*counters.Store, *redis.Client, error) {
	typ, err := counters.ParseType(*f.typ)
	if err != nil {
		return nil, nil, usageError("--type: %v", err)
	}
	ov, err := counters.ParseOverflow(*f.overflow)
	if err != nil {
		return nil, nil, usageError("--overflow: %v", err)
	}
	cfg := counters.Config{Prefix: *f.prefix, Type: typ, Slots: *f.slots, Overflow: ov}
	// Check the series before connecting: a bad --slots is a usage error
	// whether Redis is up or not. NewClient does not connect.
	unconnected := redis.NewClient(&redis.Options{})
	_, err = counters.New(unconnected, cfg)
	unconnected.Close()
	if err != nil {
		return nil, nil, usageError("%v", err)
	}
	if *f.url, err = resolveRedis(*f.url, localRedis); err != nil {
		return nil, nil, err
	}
	rdb, err := openRedis(ctx, *f.url, 0)
	if err != nil {
		return nil, nil, err
	}
	s, err := counters.New(rdb, cfg)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return s, rdb, nil
}

func parseSlot(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, usageError("slot %q is not an integer", s)
	}
	return n, nil
}

// checkEntity refuses an empty ENTITY, which would name the bare prefix.
func checkEntity(entity string) error {
	if entity == "" {
		return usageError("ENTITY must not be empty")
	}
	return nil
}

// checkSeries refuses a key that holds more bytes than a series of this
// --type and --slots: reading or incrementing it would silently give wrong
// values (a u32 series read as u16, or another application's string).
func checkSeries(ctx context.Context, s *counters.Store, rdb *redis.Client, entity string) error {
	n, err := rdb.StrLen(ctx, s.Key(entity)).Result()
	if err != nil {
		return fmt.Errorf("read %s: %w", s.Key(entity), err)
	}
	if n > int64(s.SeriesBytes()) {
		c := s.Config()
		return fmt.Errorf("%s holds %d bytes, more than the %d of a series of %d %s slots: not a series of this --type and --slots "+
			"(give every command on a series the --type and --slots it was created with, or another --prefix for a new series)", s.Key(entity), n, s.SeriesBytes(), c.Slots, c.Type)
	}
	return nil
}

const countersGetUsage = `
Usage: squeeze counters get [flags] ENTITY SLOT|FROM:TO

Prints slot SLOT of ENTITY's series, or the slots FROM (included) to TO
(excluded) and their sum. Slots of a series that does not exist read 0.

Examples:
  squeeze counters get user42 17
  squeeze counters get --type u32 --slots 24 --prefix hits: page7 0:24
  squeeze counters get --json user42 358:365
`

func runCountersGet(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "counters get", countersGetUsage)
	f := addCountersFlags(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageError("counters get takes ENTITY and SLOT or FROM:TO (got %d arguments)", len(pos))
	}
	entity, spec := pos[0], pos[1]
	if err := checkEntity(entity); err != nil {
		return err
	}
	from, to := 0, 0
	if a, b, ok := strings.Cut(spec, ":"); ok {
		if from, err = parseSlot(a); err != nil {
			return err
		}
		if to, err = parseSlot(b); err != nil {
			return err
		}
	} else {
		if from, err = parseSlot(spec); err != nil {
			return err
		}
		to = from + 1
	}
	s, rdb, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if from < 0 || to > s.Config().Slots || from > to {
		return usageError("slots %s not within 0:%d", spec, s.Config().Slots)
	}
	if err := checkSeries(ctx, s, rdb, entity); err != nil {
		return err
	}
	vals, err := s.AppendRange(ctx, []int64{}, entity, from, to) // JSON [] for an empty window, not null
	if err != nil {
		return err
	}
	var sum int64
	for _, v := range vals {
		if (v > 0 && sum+v < sum) || (v < 0 && sum+v > sum) {
			return counters.ErrSum
		}
		sum += v
	}
	if *f.json {
		return json.NewEncoder(e.Stdout).Encode(struct {
			Key    string  `json:"key"`
			From   int     `json:"from"`
			To     int     `json:"to"`
			Values []int64 `json:"values"`
			Sum    int64   `json:"sum"`
		}{s.Key(entity), from, to, vals, sum})
	}
	if !strings.Contains(spec, ":") {
		fmt.Fprintln(e.Stdout, vals[0])
		return nil
	}
	for i, v := range vals {
		fmt.Fprintf(e.Stdout, "%d\t%d\n", from+i, v)
	}
	fmt.Fprintf(e.Stdout, "sum\t%d\n", sum)
	return nil
}

const countersIncrUsage = `
Usage: squeeze counters incr [flags] ENTITY SLOT [DELTA]

Adds DELTA (default 1; negative decrements) to slot SLOT of
ENTITY's series with one atomic BITFIELD INCRBY, creating the series at its
full size first if it does not exist, and prints the new value. With
--overflow fail (the default) an increment that would leave the type's range
fails with an error and changes nothing.

Examples:
  squeeze counters incr user42 17
  squeeze counters incr --type u8 --overflow sat user42 17 250
  squeeze counters incr user42 17 -5 --redis redis://127.0.0.1:6380
`

func runCountersIncr(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "counters incr", countersIncrUsage)
	f := addCountersFlags(fs)
	pos, err := parseArgs(fs, args) // ENTITY SLOT [DELTA]
	if err != nil {
		return err
	}
	if len(pos) < 2 || len(pos) > 3 {
		return usageError("counters incr takes ENTITY SLOT [DELTA] (got %d arguments)", len(pos))
	}
	if err := checkEntity(pos[0]); err != nil {
		return err
	}
	slot, err := parseSlot(pos[1])
	if err != nil {
		return err
	}
	delta := int64(1)
	if len(pos) == 3 {
		if delta, err = strconv.ParseInt(pos[2], 10, 64); err != nil {
			return usageError("delta %q is not an integer", pos[2])
		}
	}
	s, rdb, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if slot < 0 || slot >= s.Config().Slots {
		return usageError("slot %d not within 0..%d", slot, s.Config().Slots-1)
	}
	if err := checkSeries(ctx, s, rdb, pos[0]); err != nil {
		return err
	}
	created, err := s.Create(ctx, pos[0])
	if err != nil {
		return err
	}
	v, err := s.Incr(ctx, pos[0], slot, delta)
	if err != nil {
		if errors.Is(err, counters.ErrOverflow) {
			return fmt.Errorf("%w (type %s holds %d..%d; use --overflow sat or wrap to clamp or wrap)", err, s.Config().Type, s.Config().Type.Min(), s.Config().Type.Max())
		}
		return err
	}
	if *f.json {
		return json.NewEncoder(e.Stdout).Encode(struct {
			Key     string `json:"key"`
			Slot    int    `json:"slot"`
			Value   int64  `json:"value"`
			Created bool   `json:"created"`
		}{s.Key(pos[0]), slot, v, created})
	}
	fmt.Fprintln(e.Stdout, v)
	return nil
}

const countersMigrateUsage = `
Usage: squeeze counters migrate --from list|hex [flags] SOURCE ENTITY
       squeeze counters migrate --from list|hex --scan PATTERN [flags]

Converts the two layouts that packed counters replace into packed series.
Both keep day-wise counters as text and increment them with a Lua script;
they come from the article that motivated packed counters, on keeping
counters as hex strings updated in Lua (docs/RESULTS.md, Packed counters,
measures both against packed series):
  --from list  SOURCE is a list with one decimal counter per element
               (element i is slot i; the script does LINDEX and LSET)
  --from hex   SOURCE is a hash whose --field holds 4 hex characters per slot
               ("0118009600fa0230" is 280, 150, 250, 560; the script rewrites
               the whole string on every increment)
Each value is checked to fit --type, the series is written in one SET (never
over an existing one unless --replace), then read back and compared with the
source value by value. The source is deleted only with --delete and only after
that check. --expect N requires exactly N values: it catches hex strings that
the article's script lengthened by writing a negative value.
With --scan, every key matching PATTERN is migrated to the entity of the same
name (so keep --prefix non-empty). --json prints one JSON array with a report
per source (source, target, slots, sum, verified, deleted; error when it
failed).

Examples:
  squeeze counters migrate --from hex daily:user42 user42
  squeeze counters migrate --from list --expect 365 --delete visits:user42 user42
  squeeze counters migrate --from hex --scan 'daily:*' --json
`

func runCountersMigrate(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "counters migrate", countersMigrateUsage)
	f := addCountersFlags(fs)
	from := fs.String("from", "", "source layout: list or hex (required)")
	field := fs.String("field", "counts", "hash field of the hex layout")
	scan := fs.String("scan", "", "migrate every key matching this `PATTERN` (SCAN MATCH) instead of one SOURCE")
	expect := fs.Int("expect", 0, "require exactly this many values in each source (0: at most --slots)")
	replace := fs.Bool("replace", false, "overwrite existing target series")
	del := fs.Bool("delete", false, "delete each source (list key, or hash field) after verification")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if *from != "list" && *from != "hex" {
		return usageError("--from must be list or hex (got %q)", *from)
	}
	type job struct{ source, entity string }
	var jobs []job
	switch {
	case *scan != "" && len(pos) == 0:
	case *scan == "" && len(pos) == 2:
		if pos[0] == "" {
			return usageError("SOURCE must not be empty")
		}
		if err := checkEntity(pos[1]); err != nil {
			return err
		}
		jobs = append(jobs, job{pos[0], pos[1]})
	default:
		return usageError("counters migrate takes SOURCE ENTITY, or --scan PATTERN and no arguments")
	}
	s, rdb, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if *scan != "" {
		want := "list"
		if *from == "hex" {
			want = "hash"
		}
		iter := rdb.ScanType(ctx, 0, *scan, 1000, want).Iterator()
		for iter.Next(ctx) {
			if strings.HasPrefix(iter.Val(), *f.prefix) && *f.prefix != "" {
				continue // already a packed series
			}
			jobs = append(jobs, job{iter.Val(), iter.Val()})
		}
		if err := iter.Err(); err != nil {
			return fmt.Errorf("scan %q: %w", *scan, err)
		}
	}
	opt := counters.MigrateOptions{Replace: *replace, DeleteSource: *del, Slots: *expect}
	type jsonReport struct {
		counters.MigrateReport
		Error string `json:"error,omitempty"`
	}
	reports := []jsonReport{} // --json prints one array, [] when nothing matched
	failed := 0
	for _, j := range jobs {
		var rep counters.MigrateReport
		var err error
		if *from == "list" {
			rep, err = s.MigrateList(ctx, j.source, j.entity, opt)
		} else {
			rep, err = s.MigrateHex(ctx, j.source, *field, j.entity, opt)
		}
		if err != nil {
			failed++
			err = atRedis(err, *f.url)
		}
		if *f.json {
			out := jsonReport{MigrateReport: rep}
			if err != nil {
				out.Error = err.Error()
			}
			reports = append(reports, out)
			continue
		}
		if err != nil {
			fmt.Fprintf(e.Stderr, "squeeze: %v\n", err)
			continue
		}
		extra := ""
		if rep.Deleted {
			extra = ", source deleted"
		}
		fmt.Fprintf(e.Stdout, "%s -> %s: %d values verified, sum %d%s\n", rep.Source, rep.Target, rep.Slots, rep.Sum, extra)
	}
	if *f.json {
		if err := writeJSON(e.Stdout, reports); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d migrations failed", failed, len(jobs))
	}
	if len(jobs) == 0 {
		fmt.Fprintf(e.Stderr, "squeeze: no %s keys match %q\n", *from, *scan)
	}
	return nil
}
