package client

import (
	"context"
	"unsafe"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
)

// replyShape says where the values are in a command's reply.
type replyShape uint8

const (
	shapeNone      replyShape = iota // nothing to decode
	shapeValues                      // the reply is a value, or an array of values
	shapePairs                       // field/value pairs (flat array or map): decode the values
	shapeScan                        // [cursor, [field, value, ...]]
	shapeKeyVal                      // [key, value] (BLPOP, BRPOP)
	shapeKeyVals                     // [key, [value, ...]] (LMPOP, BLMPOP)
	shapeEntries                     // [[id, [field, value, ...]], ...] (XRANGE, XCLAIM)
	shapeStreams                     // [[key, entries], ...] or {key: entries} (XREAD)
	shapeAutoClaim                   // [next, entries, deleted] (XAUTOCLAIM)
	shapeAny                         // any string may be a value (XINFO; scripts with AllowScripts)
	shapeSniff                       // none expected: a frame that decodes is decoded, others left
)

// shapes gives the hook's decoding of each of the command table's reply
// kinds. ReplySniff is the table's Other commands, and the hook's for
// commands the table does not know; EXEC sent with Do is sniffed too (the
// hook does not see what was queued).
var shapes = [rediscmd.NumReplies]replyShape{
	rediscmd.ReplyValue: shapeValues, rediscmd.ReplyValues: shapeValues,
	rediscmd.ReplyPairs: shapePairs, rediscmd.ReplyScanPairs: shapeScan,
	rediscmd.ReplyKeyValue: shapeKeyVal, rediscmd.ReplyKeyValues: shapeKeyVals,
	rediscmd.ReplyEntries: shapeEntries, rediscmd.ReplyStreams: shapeStreams,
	rediscmd.ReplyAutoClaim: shapeAutoClaim, rediscmd.ReplyAny: shapeAny,
	rediscmd.ReplySniff: shapeSniff, rediscmd.ReplyExec: shapeSniff,
}

// shapeOf returns where cmd's reply holds values, as the command table
// says for its arguments.
func shapeOf(name string, args []any) replyShape {
	spec := rediscmd.LookupString(name)
	if spec == nil {
		return shapeSniff
	}
	if !spec.Has(rediscmd.ReplyOptions) {
		return shapes[spec.Reply]
	}
	var buf [16][]byte
	return shapes[spec.ReplyFor(argWords(buf[:0], args))]
}

// decodeString returns the value stored as s: s itself when it is not a
// frame, else the decoded bytes (in a new string).
func (h *Hook) decodeString(s string) (string, error) {
	if !codec.IsFramed(unsafe.Slice(unsafe.StringData(s), len(s))) {
		return s, nil
	}
	out, err := h.appendDecode(nil, unsafe.Slice(unsafe.StringData(s), len(s)))
	if err != nil {
		return "", err
	}
	if len(out) == 0 {
		return "", nil
	}
	return unsafe.String(&out[0], len(out)), nil // out is ours alone
}

// appendDecode appends the value the frame src encodes to dst.
func (h *Hook) appendDecode(dst, src []byte) ([]byte, error) {
	if h.dicts != nil {
		// Loads a dictionary the frame names, the first time one is seen.
		return h.dicts.AppendDecode(context.Background(), dst, src)
	}
	return h.dec.AppendDecode(dst, src)
}

// value returns the value stored as s. Where no value is expected
// (lenient: shapeSniff), a frame that does not decode is not taken for a
// value and stays as it is (SLOWLOG GET cuts arguments short), as through
// the proxy.
func (h *Hook) value(s string, lenient bool) (string, error) {
	d, err := h.decodeString(s)
	if err != nil && lenient {
		return s, nil
	}
	return d, err
}

// decodeReply decodes the values in cmd's reply in place. A reply type it
// has no decoder for is checked for frames instead (see classOf).
func (h *Hook) decodeReply(cmd redis.Cmder, p prepared) error {
	shape := shapeOf(p.name, cmd.Args())
	if shape == shapeNone {
		return nil
	}
	lenient := shape == shapeSniff
	switch c := cmd.(type) {
	case *redis.StringCmd:
		v, err := h.value(c.Val(), lenient)
		c.SetVal(v)
		return err
	case *redis.StatusCmd: // SET ... GET
		v, err := h.value(c.Val(), lenient)
		c.SetVal(v)
		return err
	case *redis.SliceCmd: // MGET, HMGET
		vals := c.Val()
		for i, v := range vals {
			if p.rawIdx != nil && i < len(p.rawIdx) && p.rawIdx[i] {
				continue
			}
			d, err := h.decodeAny(v, shapeAny, lenient, p)
			if err != nil {
				return err
			}
			vals[i] = d
		}
	case *redis.StringSliceCmd:
		vals := c.Val()
		start := 0
		if shape == shapeKeyVal {
			if len(vals) != 2 || h.isRaw(vals[0]) {
				return nil
			}
			start = 1
		}
		for i := start; i < len(vals); i++ {
			d, err := h.value(vals[i], lenient)
			if err != nil {
				return err
			}
			vals[i] = d
		}
	case *redis.MapStringStringCmd:
		m := c.Val()
		for k, v := range m {
			d, err := h.value(v, lenient)
			if err != nil {
				return err
			}
			m[k] = d
		}
	case *redis.MapStringInterfaceCmd:
		m := c.Val()
		for k, v := range m {
			d, err := h.decodeAny(v, shapeAny, lenient, p)
			if err != nil {
				return err
			}
			m[k] = d
		}
	case *redis.ScanCmd:
		page, cursor := c.Val()
		for i := 0; i < len(page); i++ {
			if i%2 == 0 && shape == shapeScan {
				continue // a field
			}
			d, err := h.value(page[i], lenient)
			if err != nil {
				return err
			}
			page[i] = d
		}
		c.SetVal(page, cursor)
	case *redis.KeyValueSliceCmd:
		kvs := c.Val()
		for i := range kvs {
			d, err := h.value(kvs[i].Value, lenient)
			if err != nil {
				return err
			}
			kvs[i].Value = d
		}
	case *redis.KeyValuesCmd:
		key, vals := c.Val()
		if h.isRaw(key) {
			return nil
		}
		for i, v := range vals {
			d, err := h.value(v, lenient)
			if err != nil {
				return err
			}
			vals[i] = d
		}
	case *redis.XMessageSliceCmd:
		return h.decodeMessages(c.Val(), lenient)
	case *redis.XStreamSliceCmd:
		for _, st := range c.Val() {
			if h.isRaw(st.Stream) {
				continue
			}
			if err := h.decodeMessages(st.Messages, lenient); err != nil {
				return err
			}
		}
	case *redis.XAutoClaimCmd:
		msgs, _ := c.Val()
		return h.decodeMessages(msgs, lenient)
	case *redis.XAutoClaimWithDeletedCmd:
		msgs, _, _ := c.Val()
		return h.decodeMessages(msgs, lenient)
	case *redis.XInfoStreamCmd:
		if info := c.Val(); info != nil {
			return h.decodeMessages([]redis.XMessage{info.FirstEntry, info.LastEntry}, lenient)
		}
	case *redis.XInfoStreamFullCmd:
		if info := c.Val(); info != nil {
			return h.decodeMessages(info.Entries, lenient)
		}
	case *redis.SlowLogCmd:
		for _, e := range c.Val() {
			for i, a := range e.Args {
				// Arguments are cut at 128 bytes: only whole frames decode.
				e.Args[i], _ = h.value(a, true)
			}
		}
	case *redis.FunctionListCmd:
		libs := c.Val()
		for i := range libs {
			libs[i].Code = unwrapLibrary(libs[i].Code)
		}
	case *redis.Cmd:
		v, err := h.decodeAny(c.Val(), shape, lenient, p)
		if err != nil {
			return err
		}
		if p.name == "function" {
			unwrapLibraries(v) // FUNCTION LIST WITHCODE
		}
		c.SetVal(v)
	default:
		switch classOf(cmd) {
		case classNoValues:
			return nil
		case classRefused:
			if c, ok := cmd.(*redis.RawCmd); ok {
				return h.checkRaw(c)
			}
			return nil // RawWriteToCmd: refused by prepare where it matters
		}
		return h.checkFrames(cmd)
	}
	return nil
}

func (h *Hook) decodeMessages(msgs []redis.XMessage, lenient bool) error {
	for _, m := range msgs {
		for k, v := range m.Values {
			if s, ok := v.(string); ok {
				d, err := h.value(s, lenient)
				if err != nil {
					return err
				}
				m.Values[k] = d
			}
		}
	}
	return nil
}

// maxDepth bounds how deep the hook looks into nested replies.
const maxDepth = 16

// decodeAny decodes the generic reply of Do by shape. RESP3 maps appear as
// map[any]any. shapeAny and shapeSniff decode every string, at any depth.
func (h *Hook) decodeAny(v any, shape replyShape, lenient bool, p prepared) (any, error) {
	switch shape {
	case shapeValues:
		switch t := v.(type) {
		case string:
			return h.value(t, lenient)
		case []any:
			for i, e := range t {
				if s, ok := e.(string); ok && (p.rawIdx == nil || i >= len(p.rawIdx) || !p.rawIdx[i]) {
					d, err := h.value(s, lenient)
					if err != nil {
						return nil, err
					}
					t[i] = d
				}
			}
		}
	case shapePairs:
		return h.decodePairs(v, lenient)
	case shapeScan:
		if t, ok := v.([]any); ok && len(t) == 2 {
			d, err := h.decodePairs(t[1], lenient)
			t[1] = d
			return t, err
		}
	case shapeKeyVal:
		if t, ok := v.([]any); ok && len(t) == 2 {
			if k, _ := t[0].(string); h.isRaw(k) {
				return v, nil
			}
			return t, h.decodeIndex(t, 1, lenient)
		}
	case shapeKeyVals:
		if t, ok := v.([]any); ok && len(t) == 2 {
			if k, _ := t[0].(string); h.isRaw(k) {
				return v, nil
			}
			if vals, ok := t[1].([]any); ok {
				for i := range vals {
					if err := h.decodeIndex(vals, i, lenient); err != nil {
						return nil, err
					}
				}
			}
		}
	case shapeEntries:
		return v, h.decodeEntries(v, lenient)
	case shapeAutoClaim:
		if t, ok := v.([]any); ok && len(t) >= 2 {
			return v, h.decodeEntries(t[1], lenient)
		}
	case shapeStreams:
		switch t := v.(type) {
		case []any:
			for _, st := range t {
				if pair, ok := st.([]any); ok && len(pair) == 2 {
					if k, _ := pair[0].(string); h.isRaw(k) {
						continue
					}
					if err := h.decodeEntries(pair[1], lenient); err != nil {
						return nil, err
					}
				}
			}
		case map[any]any:
			for k, entries := range t {
				if ks, _ := k.(string); h.isRaw(ks) {
					continue
				}
				if err := h.decodeEntries(entries, lenient); err != nil {
					return nil, err
				}
			}
		}
	case shapeAny, shapeSniff:
		return h.decodeEvery(v, lenient, 0)
	}
	return v, nil
}

// decodeEvery decodes every string in v, at any depth (map keys are left
// as they are, as field names).
func (h *Hook) decodeEvery(v any, lenient bool, depth int) (any, error) {
	if depth > maxDepth {
		return v, nil
	}
	switch t := v.(type) {
	case string:
		return h.value(t, lenient)
	case []any:
		for i, e := range t {
			d, err := h.decodeEvery(e, lenient, depth+1)
			if err != nil {
				return nil, err
			}
			t[i] = d
		}
	case map[any]any:
		for k, e := range t {
			d, err := h.decodeEvery(e, lenient, depth+1)
			if err != nil {
				return nil, err
			}
			t[k] = d
		}
	case map[string]any:
		for k, e := range t {
			d, err := h.decodeEvery(e, lenient, depth+1)
			if err != nil {
				return nil, err
			}
			t[k] = d
		}
	}
	return v, nil
}

func (h *Hook) decodeIndex(t []any, i int, lenient bool) error {
	if s, ok := t[i].(string); ok {
		d, err := h.value(s, lenient)
		if err != nil {
			return err
		}
		t[i] = d
	}
	return nil
}

// decodePairs decodes the values of field/value pairs given as a flat
// array, an array of [field, value] arrays (RESP3 HRANDFIELD), or a map.
func (h *Hook) decodePairs(v any, lenient bool) (any, error) {
	switch t := v.(type) {
	case []any:
		for i := 0; i < len(t); i++ {
			if pair, ok := t[i].([]any); ok && len(pair) == 2 {
				if err := h.decodeIndex(pair, 1, lenient); err != nil {
					return nil, err
				}
				continue
			}
			if i%2 == 1 {
				if err := h.decodeIndex(t, i, lenient); err != nil {
					return nil, err
				}
			}
		}
	case map[any]any:
		for k, e := range t {
			if s, ok := e.(string); ok {
				d, err := h.value(s, lenient)
				if err != nil {
					return nil, err
				}
				t[k] = d
			}
		}
	}
	return v, nil
}

// decodeEntries decodes stream entries [[id, [field, value, ...]], ...]
// (with XREADGROUP ... CLAIM, Redis 8.4, an entry has the idle time and the
// delivery count after its fields).
func (h *Hook) decodeEntries(v any, lenient bool) error {
	entries, ok := v.([]any)
	if !ok {
		return nil
	}
	for _, e := range entries {
		if ent, ok := e.([]any); ok && len(ent) >= 2 {
			if _, err := h.decodePairs(ent[1], lenient); err != nil {
				return err
			}
		}
	}
	return nil
}
