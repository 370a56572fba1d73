package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/term"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/dictstore"
	"github.com/squeeze-kv/squeeze/internal/units"
)

func init() {
	register(command{Name: "encode", Summary: "compress standard input into a squeeze frame (or raw, by the write policy)", Run: runEncode})
	register(command{Name: "decode", Summary: "decode a stored value from standard input to standard output", Run: runDecode})
	register(command{Name: "inspect", Summary: "print the header of a stored value (from standard input or a key in Redis), or why it is not a valid frame", Run: runInspect})
}

// newFlagSet returns a flag set whose usage (the text, then the flags) goes
// to e.Stdout on --help. Parse it with parseFlags, which keeps the flag
// package from printing anything on a bad flag.
func newFlagSet(e env, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	fs.Usage = func() {
		fmt.Fprint(e.Stdout, strings.TrimLeft(usage, "\n"))
		fmt.Fprintln(e.Stdout, "\nFlags:")
		fs.SetOutput(e.Stdout)
		fs.PrintDefaults()
		fs.SetOutput(e.Stderr)
	}
	return fs
}

// parseFlags parses args, whose flags may come before, between or after
// the arguments ("archive get KEY PATH --redis URL" as well as "archive get
// --redis URL KEY PATH"); fs.Args() then returns the arguments in order.
// A negative number ("-5") is an argument, and so is everything after
// "--". --help prints the usage and returns flag.ErrHelp (exit 0); a bad
// flag returns a one-line usage error (exit 2) and prints nothing itself:
// the flag package would print the error and the whole usage to stderr.
func parseFlags(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(flagsFirst(fs, args))
	fs.Usage = usage
	fs.SetOutput(out)
	switch {
	case err == nil:
		return stopIfChecking(fs)
	case errors.Is(err, flag.ErrHelp):
		usage()
		return err
	}
	return usageError("%s: %v (see \"squeeze %s --help\")", fs.Name(), err, fs.Name())
}

// parseArgs is parseFlags for the commands that take arguments: it returns
// them.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	return fs.Args(), nil
}

// flagsFirst returns args with the flags (and the values of those that take
// one) moved before the arguments, which follow a "--" so that the flag
// package reads them as arguments: the standard library stops at the first
// argument, so a flag after it would be taken for an argument. Arguments
// keep their order. An unknown flag stays a flag, for Parse to report.
func flagsFirst(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !looksLikeFlag(a) {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 == len(args) {
			return flags // no value: Parse reports it, whatever the arguments
		}
		flags = append(flags, args[i+1]) // its value, whatever it looks like
		i++
	}
	if len(pos) == 0 {
		return flags
	}
	return append(append(flags, "--"), pos...)
}

// looksLikeFlag reports whether a is written as a flag: a dash and more,
// but not a negative number (a counter's delta).
func looksLikeFlag(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	_, err := strconv.ParseInt(a, 10, 64)
	return err != nil
}

// isTerminal reports whether w (a reader or a writer) is a terminal (a
// variable for tests).
var isTerminal = func(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// readStored reads the stored value that decode and inspect take on
// standard input, refusing a terminal as gzip -d does: a frame cannot be
// typed, and the command would seem to hang.
func readStored(e env, cmd string) ([]byte, error) {
	if isTerminal(e.Stdin) {
		return nil, usageError("%s reads a stored value from standard input, which is a terminal; use: squeeze %s < FILE", cmd, cmd)
	}
	in, err := io.ReadAll(e.Stdin)
	if err != nil {
		return nil, fmt.Errorf("read standard input: %w", err)
	}
	return in, nil
}

const encodeUsage = `
Usage: squeeze encode [--codec C] [--min-size N] [--min-gain F] < value > stored

Reads one value from standard input and writes what squeeze would store in
Redis for it: a compressed frame (docs/FORMAT.md), or the value itself when it
is shorter than --min-size or compresses by less than --min-gain. A frame is
binary: redirect or pipe it (it is not written to a terminal).

Codecs: none, zstd[:1-22|fastest|default|better|best], lz4[:fast|hc1..hc9],
s2[:default|better|best], snappy[:...],
minlz[:superfast|fastest|balanced|smallest], brotli[:0-11], gzip[:1-9],
deflate[:1-9], zlib[:1-9], xz (slow, archival).

Examples:
  squeeze encode --codec zstd:3 < doc.json > doc.sqz
  squeeze encode --codec brotli:1 --min-size 0 < page.html | squeeze inspect
`

func runEncode(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "encode", encodeUsage)
	codecName := fs.String("codec", codec.DefaultAlgorithm.String(), "codec and level, as NAME or NAME:LEVEL")
	minSize := units.SizeFlag(codec.DefaultMinSize)
	fs.Var(&minSize, "min-size", "store values shorter than this `SIZE` raw (e.g. 64, 1KiB)")
	minGain := fs.Float64("min-gain", codec.DefaultMinGain, "store raw when compression saves less than this fraction")
	noSum := fs.Bool("no-checksum", false, "omit the CRC-32C of the original bytes")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("encode reads standard input and takes no arguments (got %q)", fs.Arg(0))
	}
	alg, err := codec.ParseAlgorithm(*codecName)
	if err != nil {
		return usageError("%v", err)
	}
	enc, err := codec.NewEncoder(alg, codec.WithMinSize(int(minSize)), codec.WithMinGain(*minGain), codec.WithChecksum(!*noSum))
	if err != nil {
		return usageError("%v", err)
	}
	in, err := io.ReadAll(e.Stdin)
	if err != nil {
		return fmt.Errorf("read standard input: %w", err)
	}
	out, outcome := enc.AppendEncodeOutcome(nil, in)
	if outcome != codec.StoredRaw && isTerminal(e.Stdout) {
		// As gzip and zstd do: binary on a terminal garbles it.
		return usageError("encode: not writing a binary frame to a terminal; redirect it (> value.sqz) or pipe it (| squeeze inspect)")
	}
	if _, err := e.Stdout.Write(out); err != nil {
		return err
	}
	if outcome != codec.Compressed {
		fmt.Fprintf(e.Stderr, "squeeze: stored %s (%d bytes; min size %d, min gain %.0f%%)\n", outcome, len(in), minSize, *minGain*100)
	}
	return nil
}

const decodeUsage = `
Usage: squeeze decode [--max-size N] < stored > value

Reads one stored value from standard input and writes the original bytes.
Bytes that are not a frame are written as they are (values stored raw). A
corrupt, truncated or oversized frame, or one with an unknown codec, exits
with status 1 and a one-line reason; nothing is written then.

Examples:
  squeeze decode < stored.bin > value.json
  squeeze encode < doc.json | squeeze decode | cmp - doc.json
  redis-cli -x SET mykey < doc.sqz      # store a frame made by squeeze encode
  redis-cli GET mykey | head -c -1 | squeeze decode   # redis-cli adds a newline
`

func runDecode(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "decode", decodeUsage)
	maxSize := units.SizeFlag(codec.DefaultMaxDecodedSize)
	fs.Var(&maxSize, "max-size", "refuse frames that declare a decoded size above this `SIZE` (e.g. 512MiB, 1GB)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("decode reads standard input and takes no arguments (got %q)", fs.Arg(0))
	}
	dec, err := codec.NewDecoder(codec.WithMaxDecodedSize(int64(maxSize)))
	if err != nil {
		return usageError("%v", err)
	}
	in, err := readStored(e, "decode")
	if err != nil {
		return err
	}
	out, err := dec.AppendDecode(nil, in)
	if err != nil {
		return err
	}
	_, err = e.Stdout.Write(out)
	return err
}

const inspectUsage = `
Usage: squeeze inspect [--json] < stored
       squeeze inspect [--json] [--redis URL] KEY [FIELD | INDEX]

Prints the header fields of a stored value (codec, sizes, ratio, checksum),
says when the value is stored raw, and verifies the payload: a corrupt frame
is reported with the reason and exit status 1.

With a KEY it reads the value from Redis itself (read-only): a string's
value, a hash field's (FIELD), or a list element's (INDEX, default 0), and
verifies frames that name a dictionary with the one published there. The
server is --redis, else $SQUEEZE_REDIS.

Examples:
  squeeze inspect < stored.bin
  squeeze encode --codec brotli:1 < page.html | squeeze inspect --json
  squeeze inspect --redis redis://127.0.0.1:6379 user:42
  squeeze inspect --redis redis://127.0.0.1:6379 cart:7 items   # a hash field
`

func runInspect(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "inspect", inspectUsage)
	asJSON := fs.Bool("json", false, "print one JSON object")
	url := fs.String("redis", "", fmt.Sprintf("read the value of KEY (a hash FIELD, a list INDEX) from this Redis `URL` instead of standard input: %s (default when KEY is given: $%s)", redisForms, envRedis))
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *url != "" || fs.NArg() > 0 { // a KEY: read it from Redis, named by the flag or SQUEEZE_REDIS
		u, err := resolveRedis(*url, "")
		if err != nil {
			return err
		}
		*url = u
	}
	decode := func(in []byte) error {
		dec, _ := codec.NewDecoder()
		_, err := dec.AppendDecode(nil, in)
		return err
	}
	var in []byte
	var where string
	if *url != "" {
		if fs.NArg() < 1 || fs.NArg() > 2 {
			return usageError("inspect --redis takes KEY [FIELD | INDEX], got %d arguments", fs.NArg())
		}
		rdb, err := openRedis(ctx, *url, 0)
		if err != nil {
			return err
		}
		defer rdb.Close()
		if in, where, err = readFromRedis(ctx, rdb, fs.Args()); err != nil {
			return atRedis(err, *url)
		}
		res, err := dictstore.NewResolver(rdb)
		if err != nil {
			return err
		}
		decode = func(in []byte) error {
			_, err := res.AppendDecode(ctx, nil, in)
			return err
		}
	} else {
		if fs.NArg() > 0 {
			return usageError("inspect %s needs a Redis: --redis URL or %s=URL, to read the key %q from; a stored value in a file goes on standard input: squeeze inspect < FILE", fs.Arg(0), envRedis, fs.Arg(0))
		}
		var err error
		if in, err = readStored(e, "inspect"); err != nil {
			return err
		}
	}
	type report struct {
		Source      string  `json:"source,omitempty"`
		Framed      bool    `json:"framed"`
		StoredBytes int     `json:"stored_bytes"`
		Version     uint8   `json:"version,omitempty"`
		Codec       string  `json:"codec,omitempty"`
		CodecID     *uint8  `json:"codec_id,omitempty"`
		HeaderBytes int     `json:"header_bytes,omitempty"`
		Original    uint64  `json:"original_bytes"`
		Ratio       float64 `json:"ratio,omitempty"`
		Checksum    string  `json:"crc32c,omitempty"`
		DictID      *uint64 `json:"dictionary_id,omitempty"`
		Valid       bool    `json:"valid"`
		Error       string  `json:"error,omitempty"`
	}
	r := report{Source: where, StoredBytes: len(in), Framed: codec.IsFramed(in)}
	var verr error
	if !r.Framed {
		r.Original, r.Valid = uint64(len(in)), true
	} else {
		h, err := codec.ParseHeader(in)
		if err == nil {
			id := uint8(h.ID)
			r.Version, r.Codec, r.CodecID, r.HeaderBytes, r.Original = h.Version, h.ID.String(), &id, h.Len, h.OriginalLen
			if h.HasChecksum {
				r.Checksum = fmt.Sprintf("%08x", h.Checksum)
			}
			if h.HasDict {
				r.DictID = &h.DictID
			}
			if len(in) > 0 {
				r.Ratio = float64(h.OriginalLen) / float64(len(in))
			}
			err = decode(in)
		}
		if err != nil {
			verr, r.Error = err, err.Error()
		}
		r.Valid = err == nil
	}
	if *asJSON {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
		if verr != nil {
			return fmt.Errorf("invalid frame: %w", verr)
		}
		return nil
	}
	w := e.Stdout
	if where != "" {
		fmt.Fprintf(w, "%s: ", where)
	}
	if !r.Framed {
		fmt.Fprintf(w, "raw value (no squeeze frame): %d bytes, read as they are\n", len(in))
		return nil
	}
	fmt.Fprintf(w, "squeeze frame, %d bytes stored\n", r.StoredBytes)
	if r.CodecID != nil {
		fmt.Fprintf(w, "  version   %d\n  codec     %s (0x%02x)\n  header    %d bytes\n  original  %d bytes\n  ratio     %.2fx\n",
			r.Version, r.Codec, *r.CodecID, r.HeaderBytes, r.Original, r.Ratio)
		if r.Checksum != "" {
			fmt.Fprintf(w, "  crc32c    %s\n", r.Checksum)
		} else {
			fmt.Fprintf(w, "  crc32c    none\n")
		}
		if r.DictID != nil {
			fmt.Fprintf(w, "  dict id   %d\n", *r.DictID)
		}
	}
	if verr != nil {
		return fmt.Errorf("invalid frame: %w", verr)
	}
	fmt.Fprintf(w, "  payload   ok (decoded and verified)\n")
	return nil
}

// readFromRedis reads the stored bytes args name: KEY (a string), KEY FIELD
// (a hash field) or KEY [INDEX] (a list element, 0 by default). It returns
// them with a description of where they came from.
func readFromRedis(ctx context.Context, rdb *redis.Client, args []string) ([]byte, string, error) {
	key := args[0]
	typ, err := rdb.Type(ctx, key).Result()
	if err != nil {
		return nil, "", fmt.Errorf("TYPE %q: %w", key, err)
	}
	var v string
	where := fmt.Sprintf("%s %q", typ, key)
	switch typ {
	case "none":
		return nil, "", notFound("key %q does not exist", key)
	case "string":
		if len(args) > 1 {
			return nil, "", usageError("%q is a string: inspect takes no FIELD or INDEX for it", key)
		}
		v, err = rdb.Get(ctx, key).Result()
	case "hash":
		if len(args) < 2 {
			return nil, "", usageError("%q is a hash: name the FIELD to inspect", key)
		}
		where += fmt.Sprintf(" field %q", args[1])
		if v, err = rdb.HGet(ctx, key, args[1]).Result(); errors.Is(err, redis.Nil) {
			return nil, "", notFound("hash %q has no field %q", key, args[1])
		}
	case "list":
		idx := int64(0)
		if len(args) > 1 {
			if idx, err = strconv.ParseInt(args[1], 10, 64); err != nil {
				return nil, "", usageError("%q is a list: INDEX must be a number, got %q", key, args[1])
			}
		}
		where += fmt.Sprintf(" index %d", idx)
		if v, err = rdb.LIndex(ctx, key, idx).Result(); errors.Is(err, redis.Nil) {
			return nil, "", notFound("list %q has no element at index %d", key, idx)
		}
	default:
		return nil, "", fmt.Errorf("%q is a %s: squeeze stores values in strings, hash fields and list elements (inspect a stream entry with XRANGE and standard input)", key, typ)
	}
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", where, err)
	}
	return []byte(v), where, nil
}
