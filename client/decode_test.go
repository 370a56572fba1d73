package client

import "testing"

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
