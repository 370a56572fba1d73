package proxy

import (
	"testing"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
)

// TestShape_TableKinds: the proxy's first shapes are the command table's
// reply kinds, by the same numbers, and its own come after them.
func TestShape_TableKinds(t *testing.T) {
	for _, tt := range []struct {
		sh   shape
		kind rediscmd.Reply
	}{
		{shapeNone, rediscmd.ReplyNone},
		{shapeValue, rediscmd.ReplyValue},
		{shapeValues, rediscmd.ReplyValues},
		{shapePairs, rediscmd.ReplyPairs},
		{shapeKeyValue, rediscmd.ReplyKeyValue},
		{shapeKeyValues, rediscmd.ReplyKeyValues},
		{shapeScanPairs, rediscmd.ReplyScanPairs},
		{shapeEntries, rediscmd.ReplyEntries},
		{shapeStreams, rediscmd.ReplyStreams},
		{shapeAutoClaim, rediscmd.ReplyAutoClaim},
		{shapeAny, rediscmd.ReplyAny},
		{shapeExec, rediscmd.ReplyExec},
		{shapeSniff, rediscmd.ReplySniff},
	} {
		if tt.sh != shape(tt.kind) {
			t.Errorf("shape %d stands for reply kind %d", tt.sh, tt.kind)
		}
	}
	if int(rediscmd.NumReplies) != int(shapeSniff)+1 {
		t.Errorf("the table has %d reply kinds, the proxy names %d", rediscmd.NumReplies, shapeSniff+1)
	}
	if shapeInspect < shape(rediscmd.NumReplies) {
		t.Errorf("the proxy's own shapes overlap the table's")
	}
}
