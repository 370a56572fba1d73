package rediscmd

import "testing"

// TestLookup: any case finds the command; unknown and over-long names find
// nothing; looking up allocates nothing.
func TestLookup(t *testing.T) {
	for _, tt := range []struct {
		name string
		want string // "" for none
	}{
		{"GET", "GET"},
		{"get", "GET"},
		{"hGetAll", "HGETALL"},
		{"del", "DEL"},
		{"restore-asking", "RESTORE-ASKING"},
		{"nosuchcommand", ""},
		{"", ""},
		{"averyveryverylongcommandname", ""},
	} {
		got := LookupString(tt.name)
		switch {
		case got == nil && tt.want != "":
			t.Errorf("%q: not found, want %s", tt.name, tt.want)
		case got != nil && got.Name != tt.want:
			t.Errorf("%q: found %s, want %q", tt.name, got.Name, tt.want)
		}
	}
	name := []byte("hset")
	if n := testing.AllocsPerRun(100, func() { Lookup(name) }); n != 0 {
		t.Errorf("Lookup: %v allocations", n)
	}
}

// TestSpec_ReplyFor: options that change where values sit (HRANDFIELD
// WITHVALUES, HSCAN NOVALUES, XCLAIM and XAUTOCLAIM JUSTID) count only
// where they are options, not as a pattern, a group or a consumer.
func TestSpec_ReplyFor(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want Reply
	}{
		{[]string{"HSCAN", "h", "0"}, ReplyScanPairs},
		{[]string{"HSCAN", "h", "0", "COUNT", "10"}, ReplyScanPairs},
		{[]string{"HSCAN", "h", "0", "NOVALUES"}, ReplyNone},
		{[]string{"hscan", "h", "0", "match", "f*", "novalues"}, ReplyNone},
		{[]string{"HSCAN", "h", "0", "MATCH", "NOVALUES"}, ReplyScanPairs},
		{[]string{"HSCAN"}, ReplyScanPairs},
		{[]string{"HRANDFIELD", "h", "2", "WITHVALUES"}, ReplyPairs},
		{[]string{"HRANDFIELD", "h", "2"}, ReplyNone},
		{[]string{"XCLAIM", "x", "g", "c", "0", "1-1", "JUSTID"}, ReplyNone},
		{[]string{"XCLAIM", "x", "JUSTID", "JUSTID", "0", "1-1"}, ReplyEntries},
		{[]string{"XAUTOCLAIM", "x", "g", "JUSTID", "0", "0-0"}, ReplyAutoClaim},
		{[]string{"XAUTOCLAIM", "x", "g", "c", "0", "0-0", "COUNT", "2", "JUSTID"}, ReplyNone},
		{[]string{"GET", "NOVALUES"}, ReplyValue},
	} {
		if got := LookupString(tt.args[0]).ReplyFor(argv(tt.args...)); got != tt.want {
			t.Errorf("%q: reply %d, want %d", tt.args, got, tt.want)
		}
	}
}

// TestSpec_BlocksAndPins: blocking commands block and pin; XREAD and
// XREADGROUP only with BLOCK; connection commands pin without blocking.
func TestSpec_BlocksAndPins(t *testing.T) {
	for _, tt := range []struct {
		args         []string
		blocks, pins bool
	}{
		{[]string{"BLPOP", "l", "0"}, true, true},
		{[]string{"WAIT", "1", "0"}, true, true},
		{[]string{"XREAD", "STREAMS", "s", "0"}, false, false},
		{[]string{"xread", "block", "0", "STREAMS", "s", "$"}, true, true},
		{[]string{"XREADGROUP", "GROUP", "g", "c", "BLOCK", "10", "STREAMS", "s", ">"}, true, true},
		{[]string{"XREAD"}, false, false},
		{[]string{"SELECT", "1"}, false, true},
		{[]string{"SUBSCRIBE", "ch"}, false, true},
		{[]string{"GET", "BLOCK"}, false, false},
	} {
		spec, args := LookupString(tt.args[0]), argv(tt.args...)
		if got := spec.Blocks(args); got != tt.blocks {
			t.Errorf("%q: blocks %v, want %v", tt.args, got, tt.blocks)
		}
		if got := spec.Pins(args); got != tt.pins {
			t.Errorf("%q: pins %v, want %v", tt.args, got, tt.pins)
		}
	}
}

// TestSpec_MoveEnds: the ends an element left and went to, for the
// commands that move one between lists, and none for the others.
func TestSpec_MoveEnds(t *testing.T) {
	for _, tt := range []struct {
		args     []string
		from, to string
		ok       bool
	}{
		{[]string{"LMOVE", "a", "b", "LEFT", "RIGHT"}, "LEFT", "RIGHT", true},
		{[]string{"blmove", "a", "b", "right", "left", "0"}, "right", "left", true},
		{[]string{"RPOPLPUSH", "a", "b"}, "RIGHT", "LEFT", true},
		{[]string{"BRPOPLPUSH", "a", "b", "0"}, "RIGHT", "LEFT", true},
		{[]string{"LMOVE", "a", "b"}, "", "", false},
		{[]string{"LPOP", "a"}, "", "", false},
	} {
		from, to, ok := LookupString(tt.args[0]).MoveEnds(argv(tt.args...))
		if string(from) != tt.from || string(to) != tt.to || ok != tt.ok {
			t.Errorf("%q: %q, %q, %v; want %q, %q, %v", tt.args, from, to, ok, tt.from, tt.to, tt.ok)
		}
	}
}

// TestTable_Consistent: the facts that go together do.
func TestTable_Consistent(t *testing.T) {
	for _, s := range All() {
		switch {
		case s.Has(Blocking) && !s.Has(Pin):
			t.Errorf("%s blocks but does not pin", s.Name)
		case s.Has(Other) && (s.Values != ValuesNone || s.Reply != ReplySniff):
			t.Errorf("%s is Other but carries values or a reply kind", s.Name)
		case s.Reply == ReplySniff && !s.Has(Other):
			t.Errorf("%s has its replies searched but is not Other", s.Name)
		case s.Has(Inspect) && s.Arity == 0:
			t.Errorf("%s looks inside values but has no arity", s.Name)
		case (s.Has(ReadOnly) || s.Has(HeadOnly) || s.Has(Compare)) && !s.Has(Inspect):
			t.Errorf("%s has inspect facts but is not Inspect", s.Name)
		case s.Has(SetsValue) && s.Values == ValuesNone:
			t.Errorf("%s sets values but has none", s.Name)
		}
		if LookupString(s.Name) != s {
			t.Errorf("%s: Lookup finds another entry", s.Name)
		}
	}
}
