package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/dictstore"
	"github.com/squeeze-kv/squeeze/internal/units"
	"github.com/squeeze-kv/squeeze/proxy"
)

// ruleSpec is one --rule: PREFIX=CODEC[,min-size=N][,min-gain=F][,dict=ID].
// Options it does not set come from --min-size and --min-gain.
type ruleSpec struct {
	prefix  string
	alg     codec.Algorithm
	minSize int64   // -1: --min-size
	minGain float64 // -1: --min-gain
	dict    uint32  // 0: none
}

// String prints the rule as --rule takes it.
func (r ruleSpec) String() string {
	s := r.prefix + "=" + r.alg.String()
	if r.minSize >= 0 {
		s += ",min-size=" + strconv.FormatInt(r.minSize, 10)
	}
	if r.minGain >= 0 {
		s += ",min-gain=" + strconv.FormatFloat(r.minGain, 'g', -1, 64)
	}
	if r.dict != 0 {
		s += ",dict=" + strconv.FormatUint(uint64(r.dict), 10)
	}
	return s
}

// parseRule parses one rule. The prefix is everything before the first
// "=", so it cannot hold "="; nor ";", which separates rules.
func parseRule(s string) (ruleSpec, error) {
	r := ruleSpec{minSize: -1, minGain: -1}
	prefix, rest, ok := strings.Cut(s, "=")
	if !ok || prefix == "" || rest == "" || strings.Contains(prefix, ";") {
		return r, fmt.Errorf("want PREFIX=CODEC[,min-size=N][,min-gain=F][,dict=ID], got %q", s)
	}
	r.prefix = prefix
	fields := strings.Split(rest, ",")
	var err error
	if r.alg, err = codec.ParseAlgorithm(fields[0]); err != nil {
		return r, fmt.Errorf("%s: %v", prefix, err)
	}
	for _, f := range fields[1:] {
		name, value, _ := strings.Cut(f, "=")
		switch name {
		case "min-size":
			if r.minSize, err = units.ParseSize(value); err != nil || r.minSize < 0 {
				return r, fmt.Errorf("%s: min-size %q is not a size (64, 1KiB ...)", prefix, value)
			}
		case "min-gain":
			if r.minGain, err = strconv.ParseFloat(value, 64); err != nil || r.minGain < 0 || r.minGain >= 1 {
				return r, fmt.Errorf("%s: min-gain %q must be in [0, 1)", prefix, value)
			}
		case "dict":
			id, err := strconv.ParseUint(value, 10, 32)
			if err != nil || id == 0 || id > dictstore.MaxID {
				return r, fmt.Errorf("%s: dict %q must be a dictionary id in 1..%d (see squeeze dict list)", prefix, value, dictstore.MaxID)
			}
			if r.alg.ID != codec.IDZstd {
				return r, fmt.Errorf("%s: dict needs a zstd codec (dictionaries are zstd's), got %s", prefix, r.alg)
			}
			r.dict = uint32(id)
		default:
			return r, fmt.Errorf("%s: unknown option %q (min-size, min-gain or dict)", prefix, f)
		}
	}
	return r, nil
}

// ruleFlag is the repeatable --rule flag. A value may hold several rules
// separated by ";" (for SQUEEZE_RULE). Rules from a later source (the
// environment over the config file, the command line over both) replace
// the earlier ones rather than adding to them: see override.
type ruleFlag struct {
	specs   []ruleSpec
	replace bool
}

func (f *ruleFlag) String() string {
	if f == nil {
		return ""
	}
	parts := make([]string, len(f.specs))
	for i, r := range f.specs {
		parts[i] = r.String()
	}
	return strings.Join(parts, ";")
}

func (f *ruleFlag) Set(v string) error {
	if f.replace {
		f.specs, f.replace = nil, false
	}
	for _, part := range strings.Split(v, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		r, err := parseRule(part)
		if err != nil {
			return err
		}
		for _, o := range f.specs {
			if o.prefix == r.prefix {
				return fmt.Errorf("two rules for prefix %q", r.prefix)
			}
		}
		f.specs = append(f.specs, r)
	}
	return nil
}

// needDicts reports whether a rule names a dictionary.
func (f *ruleFlag) needDicts() bool {
	for _, r := range f.specs {
		if r.dict != 0 {
			return true
		}
	}
	return false
}

// override makes the next Set replace the rules so far.
func (f *ruleFlag) override() { f.replace = len(f.specs) > 0 }

// overrider is a repeatable flag whose values from one source replace
// those from an earlier one.
type overrider interface{ override() }

// buildRules makes the proxy's rules, with their dictionaries loaded by
// load (nil when no rule names one).
func (p *proxyFlags) buildRules(ctx context.Context, load dictLoader) ([]proxy.Rule, error) {
	var rules []proxy.Rule
	for _, r := range p.rules.specs {
		minSize, minGain := int64(p.minSize), p.minGain
		if r.minSize >= 0 {
			minSize = r.minSize
		}
		if r.minGain >= 0 {
			minGain = r.minGain
		}
		opts := []codec.EncoderOption{codec.WithMinSize(int(minSize)), codec.WithMinGain(minGain)}
		if r.dict != 0 {
			if load == nil {
				return nil, fmt.Errorf("--rule %s: no dictionary store", r.prefix)
			}
			d, err := load(ctx, r.dict)
			if err != nil {
				return nil, fmt.Errorf("--rule %s: dict %d: %w", r.prefix, r.dict, err)
			}
			opts = append(opts, codec.WithDictionary(d))
		}
		enc, err := codec.NewEncoder(r.alg, append(opts, proxyConcurrency())...)
		if err != nil {
			return nil, usageError("--rule %s: %v", r.prefix, err)
		}
		rules = append(rules, proxy.Rule{Prefix: r.prefix, Encoder: enc})
	}
	return rules, nil
}
