package proxy

import (
	"fmt"
	"runtime"
	"sort"
	"sync"

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

// policies is the write policy in force: the rules, longest prefix first,
// and the default for keys no rule matches. SetWritePolicy replaces it as
// a whole.
type policies struct {
	def   *policy
	rules []*policy
	plain *policy // keys scripts use: stored as written (keyPolicy)
}

// initPolicies puts the Server's Encoder and Rules in force.
func (s *Server) initPolicies() error {
	ps, err := s.buildPolicies(s.Encoder, s.Rules)
	if err != nil {
		return err
	}
	s.policies.Store(ps)
	return nil
}

// SetWritePolicy replaces the Encoder and Rules in force, for example on
// a configuration reload (squeeze proxy on SIGHUP): values written from
// then on follow them; values already stored keep their frames, which name
// their codec. The arguments mean what the fields do. On an error nothing
// changes.
func (s *Server) SetWritePolicy(enc *codec.Encoder, rules []Rule) error {
	if err := s.init(); err != nil {
		return err
	}
	ps, err := s.buildPolicies(enc, rules)
	if err != nil {
		return err
	}
	s.policies.Store(ps)
	return nil
}

// buildPolicies checks the rules and orders them longest prefix first. A
// nil enc stores values as they are: only a value that would read as a
// frame is wrapped in a none frame, so that it reads back as it was.
func (s *Server) buildPolicies(enc *codec.Encoder, rules []Rule) (*policies, error) {
	if enc == nil {
		var err error
		if enc, err = codec.NewEncoder(codec.MustParseAlgorithm("none")); err != nil {
			return nil, err
		}
	}
	none, err := codec.NewEncoder(codec.MustParseAlgorithm("none"))
	if err != nil {
		return nil, err
	}
	ps := &policies{def: s.newPolicy("", enc), plain: s.newPolicy("", none)}
	seen := map[string]bool{}
	for _, r := range rules {
		switch {
		case r.Prefix == "":
			return nil, fmt.Errorf("proxy: a rule needs a key prefix (the Server's Encoder covers every key)")
		case r.Encoder == nil:
			return nil, fmt.Errorf("proxy: the rule for prefix %q has no Encoder", r.Prefix)
		case seen[r.Prefix]:
			return nil, fmt.Errorf("proxy: two rules for prefix %q", r.Prefix)
		}
		seen[r.Prefix] = true
		ps.rules = append(ps.rules, s.newPolicy(r.Prefix, r.Encoder))
	}
	sort.SliceStable(ps.rules, func(i, j int) bool { return len(ps.rules[i].prefix) > len(ps.rules[j].prefix) })
	return ps, nil
}

func (s *Server) newPolicy(prefix string, enc *codec.Encoder) *policy {
	p := &policy{prefix: prefix, enc: enc}
	if s.metrics != nil {
		p.orig, p.stored = s.metrics.byteCounters(enc.Algorithm().String())
	}
	return p
}

// writePolicy returns the write policy in force.
func (s *Server) writePolicy() *policies { return s.policies.Load() }

// lookup returns the write policy of key's values.
func (ps *policies) lookup(key []byte) *policy {
	for _, p := range ps.rules {
		if len(key) >= len(p.prefix) && string(key[:len(p.prefix)]) == p.prefix {
			return p
		}
	}
	return ps.def
}

// policyFor returns the write policy of key's values under the policy in
// force now.
func (s *Server) policyFor(key []byte) *policy { return s.keyPolicy(s.writePolicy(), key) }

// keyPolicy returns the write policy of key's values under ps: ps's own,
// or none for a key under a prefix scripts use (scriptkeys.go), so that
// scripts read it as it was written.
func (s *Server) keyPolicy(ps *policies, key []byte) *policy {
	if s.scriptKeys.uses(key) {
		return ps.plain
	}
	return ps.lookup(key)
}

// storesAsIs reports whether encode surely stores value as it is (a
// value that compresses too little is stored as it is too, but only
// compressing it tells).
func (p *policy) storesAsIs(value []byte) bool {
	return !codec.IsFramed(value) && (p.enc.Algorithm().ID == codec.IDNone || len(value) < p.enc.MinSize())
}

// countAsIs counts a value of n bytes stored as it is, as encode does.
func (p *policy) countAsIs(m *Metrics, n int) {
	if m != nil {
		m.encoded(codec.StoredRaw)
		p.orig.Add(float64(n))
		p.stored.Add(float64(n))
	}
}

// encode appends to dst what the policy stores for value, and counts it.
func (p *policy) encode(m *Metrics, dst, value []byte) ([]byte, codec.Outcome) {
	start := len(dst)
	if len(value) >= codec.ParallelMinSize && p.enc.Algorithm().ID != codec.IDNone {
		// A value its encoder may compress on several cores: give Go
		// code a thread more meanwhile (bigreply.go), or with the
		// default --procs of half the CPUs the sections would take
		// turns on one thread.
		defer takeExtraProc()()
	}
	dst, out := p.enc.AppendFrame(dst, value)
	if m != nil {
		m.encoded(out)
		p.orig.Add(float64(len(value)))
		stored := len(dst) - start
		if out == codec.StoredRaw {
			stored = len(value)
		}
		p.stored.Add(float64(stored))
	}
	return dst, out
}

// bigEncodes admits the rewriting of commands too large for an event loop
// (maxLoopCommand and up: compressing their values), which client
// goroutines run (client.appendRequest): at most as
// many at once as Go has threads (GOMAXPROCS when the first one came).
// Without it, 50 clients each sending 1 MiB values made 50 goroutines
// runnable at once, and the event loop, woken for another client's PING,
// waited its turn among them: 10-150 ms per PING on one thread. The
// values wait their turn in the order they came, each under its order
// barrier, which holds only the requests on its keys (orderscope.go), and
// take their batch buffer only once it is their turn: waiting, a client
// holds the command in its read buffer only.
var bigEncodes = struct {
	once sync.Once
	sem  chan struct{}
}{}

// takeBigEncode waits for a turn to compress a large value; the returned
// function ends it.
func takeBigEncode() (release func()) {
	bigEncodes.once.Do(func() { bigEncodes.sem = make(chan struct{}, max(1, runtime.GOMAXPROCS(0))) })
	bigEncodes.sem <- struct{}{}
	return func() { <-bigEncodes.sem }
}
