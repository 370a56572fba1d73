package client

import (
	"fmt"
	"reflect"
	"strings"
	"unsafe"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/resp"
)

// cmdClass is what the hook does with the reply of a go-redis command type
// (a *redis.XxxCmd) whose command may return values.
type cmdClass uint8

const (
	// classUnknown: a type this hook was not written for (a newer
	// go-redis's). Its reply is checked like classChecked's.
	classUnknown cmdClass = iota
	// classDecoded: decodeReply decodes the values in it.
	classDecoded
	// classNoValues: it holds no value the hook compresses: numbers,
	// booleans, times, or names (keys, members, field names, ids...),
	// which are never compressed and are returned as written.
	classNoValues
	// classChecked: it may hold values, in a form the hook cannot rewrite
	// (module replies such as FT.SEARCH's documents): a frame found in it
	// fails the command with an error wrapping ErrUndecoded.
	classChecked
	// classRefused: it hands over the reply's bytes as Redis sent them
	// (DoRaw, DoRawWriteTo), which the hook does not rewrite. DoRaw's
	// reply is checked, and fails with ErrUndecoded when it holds a
	// frame; DoRawWriteTo writes the reply before the hook sees it, so a
	// command whose reply may hold values (or that the command table does
	// not know) fails with ErrUnsupported before it is sent.
	classRefused
)

// ErrUndecoded is wrapped by the error of a command whose reply holds a
// compressed value in a go-redis type the hook cannot rewrite: the frame
// is never handed over as if it were the value. Do (a *redis.Cmd) returns
// the same reply decoded.
var ErrUndecoded = fmt.Errorf("client: the reply holds a compressed value in a go-redis type the hook cannot decode")

// classOf returns the class of cmd's type. Every command type of go-redis
// v9 is listed (TestClassOf_EveryCmdType parses go-redis's source to hold
// the list complete), so that a new one is a decision, not an accident.
func classOf(cmd redis.Cmder) cmdClass {
	switch cmd.(type) {
	case *redis.Cmd, *redis.StringCmd, *redis.StatusCmd, *redis.SliceCmd,
		*redis.StringSliceCmd, *redis.MapStringStringCmd, *redis.MapStringInterfaceCmd,
		*redis.ScanCmd, *redis.KeyValueSliceCmd, *redis.KeyValuesCmd,
		*redis.XMessageSliceCmd, *redis.XStreamSliceCmd, *redis.XAutoClaimCmd,
		*redis.XAutoClaimWithDeletedCmd, *redis.XInfoStreamCmd, *redis.XInfoStreamFullCmd,
		*redis.ZeroCopyStringCmd, *redis.SlowLogCmd, *redis.FunctionListCmd:
		return classDecoded

	// Numbers, booleans, times.
	case *redis.BoolCmd, *redis.BoolSliceCmd, *redis.DurationCmd, *redis.FloatCmd,
		*redis.FloatSliceCmd, *redis.IntCmd, *redis.IntSliceCmd, *redis.IntPointerSliceCmd,
		*redis.UintCmd, *redis.UintSliceCmd, *redis.TimeCmd, *redis.DigestCmd,
		*redis.GeoPosCmd, *redis.IncrEXIntCmd, *redis.IncrEXFloatCmd,
		*redis.TSTimestampValueCmd, *redis.TSTimestampValueSliceCmd,
		*redis.HImportDiscardCmd, *redis.HImportDiscardAllCmd:
		return classNoValues
	// Names (members, ids, consumers, keys, channels) and server state.
	case *redis.ZSliceCmd, *redis.ZWithKeyCmd, *redis.ZSliceWithKeyCmd, *redis.RankWithScoreCmd,
		*redis.GeoLocationCmd, *redis.GeoSearchLocationCmd, *redis.StringStructMapCmd,
		*redis.XAutoClaimJustIDCmd, *redis.XPendingCmd, *redis.XPendingExtCmd,
		*redis.XInfoGroupsCmd, *redis.XInfoConsumersCmd, *redis.MapStringIntCmd,
		*redis.LCSCmd, // LCS runs on the decoded values (inspect.go)
		*redis.KeyFlagsCmd, *redis.ClusterSlotsCmd, *redis.ClusterShardsCmd,
		*redis.ClusterLinksCmd, *redis.CommandsInfoCmd, *redis.ClientInfoCmd,
		*redis.ACLLogCmd, *redis.LatencyCmd, *redis.HotKeysCmd, *redis.FunctionStatsCmd,
		*redis.InfoCmd, *redis.MapStringStringSliceCmd,
		*redis.MonitorCmd, // its lines quote arguments, binary bytes escaped
		*redis.HImportPrepareCmd, *redis.HImportSetCmd,
		*redis.VectorScoreSliceCmd, *redis.VectorScoreSliceSliceCmd,
		*redis.VectorAttribSliceCmd, *redis.VectorScoreAttribSliceCmd, *redis.StringSliceSliceCmd,
		*redis.BFInfoCmd, *redis.CFInfoCmd, *redis.CMSInfoCmd, *redis.TopKInfoCmd,
		*redis.TDigestInfoCmd, *redis.ScanDumpCmd, *redis.TSNRangePivotRowSliceCmd,
		*redis.FTInfoCmd, *redis.FTSpellCheckCmd, *redis.FTSynDumpCmd:
		return classNoValues

	// Values the hook cannot rewrite in place: documents of hashes
	// (RediSearch), JSON, Redis 8.8 arrays, module maps.
	case *redis.FTSearchCmd, *redis.AggregateCmd, *redis.FTHybridCmd,
		*redis.JSONCmd, *redis.JSONSliceCmd, *redis.AREntrySliceCmd,
		*redis.MapMapStringInterfaceCmd, *redis.MapStringSliceInterfaceCmd,
		*redis.MapStringInterfaceSliceCmd:
		return classChecked

	case *redis.RawCmd, *redis.RawWriteToCmd:
		return classRefused
	}
	return classUnknown
}

// checkFrames fails when cmd's reply holds a frame that decodes: a value
// the hook cannot put back in place in that type. It reads the reply with
// reflection, as go-redis keeps it (unexported fields included), and never
// looks into the command's arguments, context or error.
func (h *Hook) checkFrames(cmd redis.Cmder) error {
	v := reflect.ValueOf(cmd)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil
	}
	c := frameChecker{h: h, seen: map[uintptr]bool{}}
	if c.walk(v.Elem(), 0) {
		key := ""
		if args := cmd.Args(); len(args) > 1 {
			key = argString(args[1])
		}
		return &Error{Command: strings.ToLower(cmd.Name()), Key: key, Err: fmt.Errorf("%w (%T); Do returns it decoded", ErrUndecoded, cmd)}
	}
	return nil
}

type frameChecker struct {
	h    *Hook
	seen map[uintptr]bool
}

var anyType = reflect.TypeFor[any]()

// walk reports whether v holds a frame that decodes.
func (c *frameChecker) walk(v reflect.Value, depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch v.Kind() {
	case reflect.String:
		return c.isFrame(v.String())
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			b := v.Bytes()
			return c.isFrame(unsafe.String(unsafe.SliceData(b), len(b)))
		}
		fallthrough
	case reflect.Array:
		for i := range v.Len() {
			if c.walk(v.Index(i), depth+1) {
				return true
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if c.walk(it.Key(), depth+1) || c.walk(it.Value(), depth+1) {
				return true
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if f := t.Field(i); f.Name == "baseCmd" || f.Type.PkgPath() == "time" {
				continue // the command's arguments, context and error; times
			}
			if c.walk(v.Field(i), depth+1) {
				return true
			}
		}
	case reflect.Pointer:
		if v.IsNil() || c.seen[v.Pointer()] {
			return false
		}
		c.seen[v.Pointer()] = true
		return c.walk(v.Elem(), depth+1)
	case reflect.Interface:
		// Only values of the empty interface (replies as []any); never a
		// context, a writer or an error.
		if v.IsNil() || v.Type() != anyType {
			return false
		}
		return c.walk(v.Elem(), depth+1)
	}
	return false
}

func (c *frameChecker) isFrame(s string) bool {
	if !codec.IsFramed(unsafe.Slice(unsafe.StringData(s), len(s))) {
		return false
	}
	_, err := c.h.decodeString(s)
	return err == nil
}

// checkRaw fails when DoRaw's reply holds a frame that decodes.
func (h *Hook) checkRaw(c *redis.RawCmd) error {
	v, _, err := resp.ReadValue(c.Val())
	if err != nil || !h.respHasFrame(v, 0) {
		return nil
	}
	key := ""
	if args := c.Args(); len(args) > 1 {
		key = argString(args[1])
	}
	return &Error{Command: strings.ToLower(c.Name()), Key: key, Err: fmt.Errorf("%w (%T, the reply's bytes as Redis sent them); Do returns it decoded", ErrUndecoded, c)}
}

func (h *Hook) respHasFrame(v resp.Value, depth int) bool {
	if v.Type == resp.BulkString && v.N >= 0 {
		c := frameChecker{h: h}
		return c.isFrame(unsafe.String(unsafe.SliceData(v.Str), len(v.Str)))
	}
	if !v.Type.IsAggregate() || depth > maxDepth {
		return false
	}
	it := v.Elements()
	for {
		e, ok := it.Next()
		if !ok {
			return false
		}
		if h.respHasFrame(e, depth+1) {
			return true
		}
	}
}

// rawWriteRefused reports whether DoRawWriteTo of the command args must be
// refused: its reply may hold values (or the table does not know it).
func rawWriteRefused(name string, args []any) bool {
	spec := rediscmd.LookupString(name)
	if spec == nil {
		return true
	}
	var buf [16][]byte
	switch spec.ReplyFor(argWords(buf[:0], args)) {
	case rediscmd.ReplyNone, rediscmd.ReplySniff:
		return false
	}
	return true
}
