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
)

// shapes gives the hook's decoding of each of the command table's reply
// kinds; the others (scripts, SORT, XINFO) are not decoded.
var shapes = [rediscmd.NumReplies]replyShape{
	rediscmd.ReplyValue: shapeValues, rediscmd.ReplyValues: shapeValues,
	rediscmd.ReplyPairs: shapePairs, rediscmd.ReplyScanPairs: shapeScan,
	rediscmd.ReplyKeyValue: shapeKeyVal, rediscmd.ReplyKeyValues: shapeKeyVals,
	rediscmd.ReplyEntries: shapeEntries, rediscmd.ReplyStreams: shapeStreams,
	rediscmd.ReplyAutoClaim: shapeAutoClaim,
}

// shapeOf returns where cmd's reply holds values, as the command table
// says for its arguments.
func shapeOf(name string, args []any) replyShape {
	spec := rediscmd.LookupString(name)
	if spec == nil {
		return shapeNone
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

// decodeReply decodes the values in cmd's reply in place.
func (h *Hook) decodeReply(cmd redis.Cmder, p prepared) error {
	shape := shapeOf(p.name, cmd.Args())
	if shape == shapeNone {
		return nil
	}
	switch c := cmd.(type) {
	case *redis.StringCmd:
		v, err := h.decodeString(c.Val())
		c.SetVal(v)
		return err
	case *redis.StatusCmd: // SET ... GET
		v, err := h.decodeString(c.Val())
		c.SetVal(v)
		return err
	case *redis.SliceCmd: // MGET, HMGET
		vals := c.Val()
		for i, v := range vals {
			if s, ok := v.(string); ok && (p.rawIdx == nil || i >= len(p.rawIdx) || !p.rawIdx[i]) {
				d, err := h.decodeString(s)
				if err != nil {
					return err
				}
				vals[i] = d
			}
		}
	case *redis.StringSliceCmd:
		vals := c.Val()
		start, step := 0, 1
		if shape == shapeKeyVal {
			if len(vals) != 2 || h.isRaw(vals[0]) {
				return nil
			}
			start = 1
		}
		for i := start; i < len(vals); i += step {
			d, err := h.decodeString(vals[i])
			if err != nil {
				return err
			}
			vals[i] = d
		}
	case *redis.MapStringStringCmd:
		m := c.Val()
		for k, v := range m {
			d, err := h.decodeString(v)
			if err != nil {
				return err
			}
			m[k] = d
		}
	case *redis.ScanCmd:
		page, cursor := c.Val()
		for i := 1; i < len(page); i += 2 {
			d, err := h.decodeString(page[i])
			if err != nil {
				return err
			}
			page[i] = d
		}
		c.SetVal(page, cursor)
	case *redis.KeyValueSliceCmd:
		kvs := c.Val()
		for i := range kvs {
			d, err := h.decodeString(kvs[i].Value)
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
			d, err := h.decodeString(v)
			if err != nil {
				return err
			}
			vals[i] = d
		}
	case *redis.XMessageSliceCmd:
		return h.decodeMessages(c.Val())
	case *redis.XStreamSliceCmd:
		for _, st := range c.Val() {
			if h.isRaw(st.Stream) {
				continue
			}
			if err := h.decodeMessages(st.Messages); err != nil {
				return err
			}
		}
	case *redis.XAutoClaimCmd:
		msgs, _ := c.Val()
		return h.decodeMessages(msgs)
	case *redis.Cmd:
		v, err := h.decodeAny(c.Val(), shape, p)
		if err != nil {
			return err
		}
		c.SetVal(v)
	}
	return nil
}

func (h *Hook) decodeMessages(msgs []redis.XMessage) error {
	for _, m := range msgs {
		for k, v := range m.Values {
			if s, ok := v.(string); ok {
				d, err := h.decodeString(s)
				if err != nil {
					return err
				}
				m.Values[k] = d
			}
		}
	}
	return nil
}

// decodeAny decodes the generic reply of Do by shape. RESP3 maps appear as
// map[any]any.
func (h *Hook) decodeAny(v any, shape replyShape, p prepared) (any, error) {
	switch shape {
	case shapeValues:
		switch t := v.(type) {
		case string:
			return h.decodeString(t)
		case []any:
			for i, e := range t {
				if s, ok := e.(string); ok && (p.rawIdx == nil || i >= len(p.rawIdx) || !p.rawIdx[i]) {
					d, err := h.decodeString(s)
					if err != nil {
						return nil, err
					}
					t[i] = d
				}
			}
		}
	case shapePairs:
		return h.decodePairs(v)
	case shapeScan:
		if t, ok := v.([]any); ok && len(t) == 2 {
			d, err := h.decodePairs(t[1])
			t[1] = d
			return t, err
		}
	case shapeKeyVal:
		if t, ok := v.([]any); ok && len(t) == 2 {
			if k, _ := t[0].(string); h.isRaw(k) {
				return v, nil
			}
			return t, h.decodeIndex(t, 1)
		}
	case shapeKeyVals:
		if t, ok := v.([]any); ok && len(t) == 2 {
			if k, _ := t[0].(string); h.isRaw(k) {
				return v, nil
			}
			if vals, ok := t[1].([]any); ok {
				for i := range vals {
					if err := h.decodeIndex(vals, i); err != nil {
						return nil, err
					}
				}
			}
		}
	case shapeEntries:
		return v, h.decodeEntries(v)
	case shapeAutoClaim:
		if t, ok := v.([]any); ok && len(t) >= 2 {
			return v, h.decodeEntries(t[1])
		}
	case shapeStreams:
		switch t := v.(type) {
		case []any:
			for _, st := range t {
				if pair, ok := st.([]any); ok && len(pair) == 2 {
					if k, _ := pair[0].(string); h.isRaw(k) {
						continue
					}
					if err := h.decodeEntries(pair[1]); err != nil {
						return nil, err
					}
				}
			}
		case map[any]any:
			for k, entries := range t {
				if ks, _ := k.(string); h.isRaw(ks) {
					continue
				}
				if err := h.decodeEntries(entries); err != nil {
					return nil, err
				}
			}
		}
	}
	return v, nil
}

func (h *Hook) decodeIndex(t []any, i int) error {
	if s, ok := t[i].(string); ok {
		d, err := h.decodeString(s)
		if err != nil {
			return err
		}
		t[i] = d
	}
	return nil
}

// decodePairs decodes the values of field/value pairs given as a flat
// array, an array of [field, value] arrays (RESP3 HRANDFIELD), or a map.
func (h *Hook) decodePairs(v any) (any, error) {
	switch t := v.(type) {
	case []any:
		for i := 0; i < len(t); i++ {
			if pair, ok := t[i].([]any); ok && len(pair) == 2 {
				if err := h.decodeIndex(pair, 1); err != nil {
					return nil, err
				}
				continue
			}
			if i%2 == 1 {
				if err := h.decodeIndex(t, i); err != nil {
					return nil, err
				}
			}
		}
	case map[any]any:
		for k, e := range t {
			if s, ok := e.(string); ok {
				d, err := h.decodeString(s)
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
func (h *Hook) decodeEntries(v any) error {
	entries, ok := v.([]any)
	if !ok {
		return nil
	}
	for _, e := range entries {
		if ent, ok := e.([]any); ok && len(ent) >= 2 {
			if _, err := h.decodePairs(ent[1]); err != nil {
				return err
			}
		}
	}
	return nil
}
