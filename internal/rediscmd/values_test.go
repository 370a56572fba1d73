package rediscmd

import (
	"bytes"
	"slices"
	"testing"
)

func argv(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// positions lists the arguments Find says are values.
func positions(v Values, args [][]byte) []int {
	first, step, end := v.Find(args)
	var got []int
	for i := range args {
		if step != 0 && i >= first && i < end && (i-first)%step == 0 {
			got = append(got, i)
		}
	}
	return got
}

// TestValues_Find: the values of each command that carries some, past
// every option a server version has; none where an option is unknown or a
// count does not fit (the server answers those with its own error).
func TestValues_Find(t *testing.T) {
	tests := []struct {
		args []string
		want []int // indexes compressed
	}{
		{[]string{"SET", "k", "v", "EX", "10"}, []int{2}},
		{[]string{"SETEX", "k", "10", "v"}, []int{3}},
		{[]string{"MSET", "a", "1", "b", "2"}, []int{2, 4}},
		{[]string{"HSET", "h", "f", "v", "g", "w"}, []int{3, 5}},
		{[]string{"LPUSH", "l", "a", "b"}, []int{2, 3}},
		{[]string{"LINSERT", "l", "BEFORE", "p", "e"}, []int{3, 4}},
		{[]string{"LPOS", "l", "e", "RANK", "2"}, []int{2}},
		{[]string{"LREM", "l", "0", "e"}, []int{3}},
		{[]string{"XADD", "s", "*", "f", "v", "g", "w"}, []int{4, 6}},
		{[]string{"XADD", "s", "NOMKSTREAM", "MAXLEN", "~", "10", "LIMIT", "5", "1-1", "f", "v"}, []int{10}},
		{[]string{"XADD", "s", "MINID", "0", "*", "f", "v"}, []int{6}},
		{[]string{"XADD", "s", "KEEPREF", "*", "f", "v"}, []int{5}},                            // Redis 8.2
		{[]string{"XADD", "s", "nomkstream", "acked", "maxlen", "5", "1", "f", "v"}, []int{8}}, // Redis 8.2
		{[]string{"XADD", "s", "DELREF", "IDMPAUTO", "p1", "*", "f", "v"}, []int{7}},           // Redis 8.6
		{[]string{"XADD", "s", "IDMP", "p1", "i1", "MINID", "=", "0", "2-*", "f", "v"}, []int{10}},
		{[]string{"XADD", "s", "NEWOPTION", "*", "f", "v"}, nil}, // unknown: nothing compressed
		{[]string{"XADD", "s", "MAXLEN", "5"}, nil},              // no id
		{[]string{"XADD", "s", "IDMP", "p"}, nil},                // IDMP cut short: Redis's error
		{[]string{"HSETEX", "h", "FIELDS", "2", "f", "v", "g", "w"}, []int{5, 7}},
		{[]string{"HSETEX", "h", "FXX", "EX", "100", "FIELDS", "1", "f", "v"}, []int{8}},
		{[]string{"hsetex", "h", "fnx", "keepttl", "fields", "1", "FIELDS", "v"}, []int{7}}, // a field named FIELDS
		{[]string{"HSETEX", "h", "PXAT", "FIELDS", "FIELDS", "1", "f", "v"}, []int{7}},      // a bad time: Redis's error
		{[]string{"HSETEX", "h", "NX", "FXX", "FIELDS", "1", "f", "v"}, []int{7}},           // Valkey 9's NX
		{[]string{"HSETEX", "h", "NOSUCH", "FIELDS", "1", "f", "v"}, nil},                   // not an option: Redis's error
		{[]string{"HSETEX", "h", "FIELDS"}, nil},
		{[]string{"MSETEX", "2", "a", "v", "b", "w"}, []int{3, 5}},
		{[]string{"MSETEX", "1", "a", "v", "XX", "EX", "100"}, []int{3}}, // not the options
		{[]string{"MSETEX", "2", "a", "v", "KEEPTTL"}, nil},              // too few pairs: Redis's error
		{[]string{"MSETEX", "0", "a", "v"}, nil},
		{[]string{"MSETEX", "x", "a", "v"}, nil},
		{[]string{"MSETEX"}, nil},
		{[]string{"GET", "k"}, nil},
	}
	for _, tt := range tests {
		spec := LookupString(tt.args[0])
		if spec == nil {
			t.Fatalf("%s: not in the table", tt.args[0])
		}
		if got := positions(spec.Values, argv(tt.args...)); !slices.Equal(got, tt.want) {
			t.Errorf("%q: values at %v, want %v", tt.args, got, tt.want)
		}
	}
}

// TestValues_KeyOf: a value belongs to the key before it for commands of
// key, value pairs, else to the command's key.
func TestValues_KeyOf(t *testing.T) {
	for _, tt := range []struct {
		args []string
		keys []string // the key of each value, in order
	}{
		{[]string{"MSET", "a", "1", "b", "2"}, []string{"a", "b"}},
		{[]string{"MSETEX", "2", "a", "1", "b", "2", "EX", "5"}, []string{"a", "b"}},
		{[]string{"HSET", "h", "f", "1", "g", "2"}, []string{"h", "h"}},
		{[]string{"SET", "k", "v"}, []string{"k"}},
		{[]string{"XADD", "s", "*", "f", "1"}, []string{"s"}},
	} {
		spec, args := LookupString(tt.args[0]), argv(tt.args...)
		var keys []string
		for _, i := range positions(spec.Values, args) {
			keys = append(keys, string(spec.Values.KeyOf(args, i)))
		}
		if !slices.Equal(keys, tt.keys) {
			t.Errorf("%q: keys %q, want %q", tt.args, keys, tt.keys)
		}
	}
}

// FuzzValues_Find: for any arguments, every rule names positions inside
// them, after the name and the key.
func FuzzValues_Find(f *testing.F) {
	f.Add(uint8(ValuesXadd), []byte("s\x00MAXLEN\x00~\x0010\x00*\x00f\x00v"))
	f.Add(uint8(ValuesHsetex), []byte("h\x00EX\x0010\x00FIELDS\x001\x00f\x00v"))
	f.Add(uint8(ValuesMsetex), []byte("2\x00a\x00v\x00b\x00w\x00KEEPTTL"))
	f.Fuzz(func(t *testing.T, rule uint8, b []byte) {
		v := Values(rule % (uint8(ValuesMsetex) + 1))
		args := append([][]byte{[]byte("CMD")}, bytes.Split(b, []byte{0})...)
		first, step, end := v.Find(args)
		if step == 0 {
			return
		}
		// Every position named, first, first+step, ... before end, is an
		// argument after the name and the key (a rule may name none: a
		// first at or past end).
		if first < 2 || end > len(args) || step < 0 {
			t.Fatalf("rule %d, %q: values from %d by %d to %d", v, args, first, step, end)
		}
	})
}
