package proxy

import (
	"fmt"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/squeeze-kv/squeeze/codec"
)

// A Rule gives the values of the keys that begin with Prefix their own
// write policy: the codec, level, min size, min gain and dictionary of
// Encoder, in place of the Server's Encoder. One proxy can so keep session
// blobs in zstd:3, JSON documents in s2 and images raw (an Encoder for
// codec.IDNone), as squeeze advise recommends per prefix.
//
// The longest matching prefix wins; keys that no rule matches use the
// Server's Encoder. For MSET and MSETNX each value follows its own key.
// Reads need no rules: every frame names its codec and dictionary.
type Rule struct {
	Prefix  string
	Encoder *codec.Encoder
}

// policy is a write policy in force: a rule, or the default, with its
// byte counters resolved once.
type policy struct {
	prefix       string
	enc          *codec.Encoder
	orig, stored prometheus.Counter // nil without metrics
}

// initPolicies checks the rules and orders them longest prefix first. A nil
// Encoder stores values as they are: only a value that would read as a
// frame is wrapped in a none frame, so that it reads back as it was.
func (s *Server) initPolicies() error {
	enc := s.Encoder
	if enc == nil {
		var err error
		if enc, err = codec.NewEncoder(codec.MustParseAlgorithm("none")); err != nil {
			return err
		}
	}
	s.def = s.newPolicy("", enc)
	seen := map[string]bool{}
	for _, r := range s.Rules {
		switch {
		case r.Prefix == "":
			return fmt.Errorf("proxy: a rule needs a key prefix (the Server's Encoder covers every key)")
		case r.Encoder == nil:
			return fmt.Errorf("proxy: the rule for prefix %q has no Encoder", r.Prefix)
		case seen[r.Prefix]:
			return fmt.Errorf("proxy: two rules for prefix %q", r.Prefix)
		}
		seen[r.Prefix] = true
		s.rules = append(s.rules, s.newPolicy(r.Prefix, r.Encoder))
	}
	sort.SliceStable(s.rules, func(i, j int) bool { return len(s.rules[i].prefix) > len(s.rules[j].prefix) })
	return nil
}

func (s *Server) newPolicy(prefix string, enc *codec.Encoder) *policy {
	p := &policy{prefix: prefix, enc: enc}
	if s.metrics != nil {
		p.orig, p.stored = s.metrics.byteCounters(enc.Algorithm().String())
	}
	return p
}

// policyFor returns the write policy of key's values.
func (s *Server) policyFor(key []byte) *policy {
	for _, p := range s.rules {
		if len(key) >= len(p.prefix) && string(key[:len(p.prefix)]) == p.prefix {
			return p
		}
	}
	return s.def
}

// encode appends to dst what the policy stores for value, and counts it.
func (p *policy) encode(m *Metrics, dst, value []byte) []byte {
	start := len(dst)
	dst, out := p.enc.AppendEncodeOutcome(dst, value)
	if m != nil {
		m.encoded(out)
		p.orig.Add(float64(len(value)))
		p.stored.Add(float64(len(dst) - start))
	}
	return dst
}
