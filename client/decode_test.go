package client

import (
	"testing"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
)

// TestShapeOf_Options: the options that turn values off (HSCAN NOVALUES,
// XCLAIM and XAUTOCLAIM JUSTID) count only where they are options, not as
// a MATCH pattern, a group or a consumer.
func TestShapeOf_Options(t *testing.T) {
	for _, c := range []struct {
		args []any
		want replyShape
	}{
		{[]any{"hscan", "h", "0"}, shapeScan},
		{[]any{"hscan", "h", "0", "NOVALUES"}, shapeNone},
		{[]any{"hscan", "h", "0", "match", "f*", "novalues"}, shapeNone},
		{[]any{"hscan", "h", "0", "MATCH", "NOVALUES"}, shapeScan},
		{[]any{"xclaim", "x", "g", "c", "0", "1-1", "JUSTID"}, shapeNone},
		{[]any{"xclaim", "x", "JUSTID", "JUSTID", "0", "1-1"}, shapeEntries},
		{[]any{"xautoclaim", "x", "g", "JUSTID", "0", "0-0"}, shapeAutoClaim},
		{[]any{"xautoclaim", "x", "g", "c", "0", "0-0", "COUNT", "2", "JUSTID"}, shapeNone},
		{[]any{"hrandfield", "h", "2", "WITHVALUES"}, shapePairs},
		{[]any{"hrandfield", "h", "2"}, shapeNone},
	} {
		if got := shapeOf(c.args[0].(string), c.args); got != c.want {
			t.Errorf("%v: shape %v, want %v", c.args, got, c.want)
		}
	}
}

// TestArgWords_Xadd: the hook finds XADD's values where the command table
// says, in go-redis's arguments (numbers as ints): past every option
// (Redis 8.2's KEEPREF, DELREF and ACKED, Redis 8.6's IDMPAUTO and IDMP
// included); none for an option it does not know or args without an id.
func TestArgWords_Xadd(t *testing.T) {
	for _, c := range []struct {
		args []any
		want int // the first value's place, 0 for none
	}{
		{[]any{"xadd", "s", "*", "f", "v"}, 4},
		{[]any{"xadd", "s", "NOMKSTREAM", "MAXLEN", "~", 10, "LIMIT", 5, "1-1", "f", "v"}, 10},
		{[]any{"xadd", "s", "minid", "0", "*", "f", "v"}, 6},
		{[]any{"xadd", "s", "KEEPREF", "*", "f", "v"}, 5},
		{[]any{"xadd", "s", "acked", "maxlen", "=", 5, 7, "f", "v"}, 8},
		{[]any{"xadd", "s", "DELREF", "IDMPAUTO", "p1", "*", "f", "v"}, 7},
		{[]any{"xadd", "s", "IDMP", "p1", "i1", "2-*", "f", "v"}, 7},
		{[]any{"xadd", "s", int64(5), "f", "v"}, 4},
		{[]any{"xadd", "s", "NEWOPTION", "*", "f", "v"}, 0},
		{[]any{"xadd", "s", "MAXLEN", "5"}, 0},
		{[]any{"xadd", "s", "IDMP", "p"}, 0}, // cut short: Redis's error
	} {
		if got, _, _ := rediscmd.ValuesXadd.Find(argWords(nil, c.args)); got != c.want {
			t.Errorf("%v: first value at %d, want %d", c.args, got, c.want)
		}
	}
}
