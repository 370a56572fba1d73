package proxy

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/bufpool"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/resp"
)

// rewriter holds the per-connection scratch space of the rewrite functions,
// so that steady-state rewriting allocates nothing.
type rewriter struct {
	s       *Server
	scratch []byte
	// cur is the call whose reply appendReply is rewriting, and inAgg
	// whether that reply is an aggregate: a value that does not decode
	// then becomes an error element in its place, and its neighbours
	// (MGET's other keys, EXEC's other commands, LPOP's other elements)
	// still reach the client.
	cur   *call
	inAgg bool
	// elemCmd names the queued command whose reply inside EXEC is being
	// rewritten, "" outside EXEC.
	elemCmd string
	// key is the key a reply of [key, value] or [key, [values]] names
	// (BLPOP, LMPOP: rediscmd.ReplyKeyValue, ReplyKeyValues) while its
	// values are rewritten: the key a value that does not decode came
	// from.
	key []byte
}

// appendRequest appends the command args to dst as a multibulk request, with
// the values that rule designates compressed by the write policy of their
// key (a Rule's, or the Server's Encoder).
func (r *rewriter) appendRequest(dst []byte, info *cmdInfo, args [][]byte) []byte {
	first, step, end := 0, 0, 0
	var ps *policies
	var pol *policy
	if info.vals != rediscmd.ValuesNone && len(args) > 1 {
		first, step, end = valueArgs(info.vals, args)
		ps = r.s.writePolicy() // one policy for the whole command
		pol = r.s.keyPolicy(ps, args[1])
	}
	perKey := ps != nil && (info.vals == rediscmd.ValuesEvery2 || info.vals == rediscmd.ValuesMsetex) && len(ps.rules) > 0 // MSET k1 v1 k2 v2
	dst = resp.AppendArray(dst, len(args))
	for i, a := range args {
		if step == 0 || i < first || i >= end || (i-first)%step != 0 {
			dst = resp.AppendBulk(dst, a)
			continue
		}
		if perKey {
			pol = r.s.keyPolicy(ps, args[i-1])
		}
		dst = r.appendStored(dst, r.s.metrics, pol, a)
	}
	if cap(r.scratch) > maxPooledReply {
		r.scratch = nil
	}
	return dst
}

// forwardsAsIs reports whether appendRequest would write raw itself: raw is
// the command as the client sent it and args its arguments, in place in
// raw, in the one encoding appendRequest writes, byte for byte (every
// separator a real "\r\n"), and every value in it is one the write policy
// stores as it is. It then counts those values as encode would. A large
// command forwarded as it is is not copied into the batch (client.handle).
//
// The proxy's parser, like Redis's, does not look at the byte after each
// "\r"; Valkey 9 does, and answers a protocol error and closes the
// connection. A command with other separators is therefore re-encoded, as
// smaller commands are, never forwarded: the upstream connection it shares
// with other clients sees only well-formed RESP.
func (r *rewriter) forwardsAsIs(info *cmdInfo, args [][]byte, raw []byte) bool {
	if len(raw) == 0 || !isHeader(raw, resp.Array, len(args)) {
		return false
	}
	pos := headerLen(len(args))
	for _, a := range args {
		if !isHeader(raw[pos:], resp.BulkString, len(a)) {
			return false
		}
		pos += headerLen(len(a))
		end := pos + len(a)
		if end+2 > len(raw) || (len(a) > 0 && &a[0] != &raw[pos]) || raw[end] != '\r' || raw[end+1] != '\n' {
			return false
		}
		pos = end + 2
	}
	if pos != len(raw) {
		return false
	}
	if info.vals == rediscmd.ValuesNone || len(args) < 2 {
		return true
	}
	first, step, end := valueArgs(info.vals, args)
	if step == 0 {
		return true
	}
	ps := r.s.writePolicy()
	perKey := (info.vals == rediscmd.ValuesEvery2 || info.vals == rediscmd.ValuesMsetex) && len(ps.rules) > 0
	pol := r.s.keyPolicy(ps, args[1])
	for i := first; i < end; i += step {
		if perKey {
			pol = r.s.keyPolicy(ps, args[i-1])
		}
		if !pol.storesAsIs(args[i]) {
			return false
		}
	}
	for i := first; i < end; i += step {
		if perKey {
			pol = r.s.keyPolicy(ps, args[i-1])
		}
		pol.countAsIs(r.s.metrics, len(args[i]))
	}
	return true
}

// isHeader reports whether b begins with the RESP header line of type t and
// count or length n, as resp.AppendHeader writes it.
func isHeader(b []byte, t resp.Type, n int) bool {
	var buf [24]byte
	h := resp.AppendHeader(buf[:0], t, n)
	return len(b) >= len(h) && string(b[:len(h)]) == string(h)
}

// headerLen is the length of the RESP header line of a count or length n.
func headerLen(n int) int {
	d := 1
	for ; n >= 10; n /= 10 {
		d++
	}
	return 1 + d + 2
}

// appendStored appends, as a bulk string, what pol stores for value
// (counted in m, when not nil): its frame, built in scratch, or value
// itself, without a copy through scratch (a large value left raw is copied
// once, not twice).
func (r *rewriter) appendStored(dst []byte, m *Metrics, pol *policy, value []byte) []byte {
	if need := len(value) + len(value)/5 + 1024; cap(r.scratch) < need && need >= bufpool.MinSize && !pol.storesAsIs(value) {
		// Room for the frame from the free lists (more than any codec's
		// bound): an idle client gives its scratch back (trimReader), and
		// a new one allocated and zeroed for each 47.5 kB document was a
		// fifth of the proxy's CPU.
		bufpool.Put(r.scratch)
		r.scratch = bufpool.Get(need)
	}
	var out codec.Outcome
	r.scratch, out = pol.encode(m, r.scratch[:0], value)
	if out == codec.StoredRaw {
		return resp.AppendBulk(dst, value)
	}
	return resp.AppendBulk(dst, r.scratch)
}

// DecodeError is the failure to decode a stored value; the client gets it as
// an -ERR reply naming the key, and the connection stays open.
type DecodeError struct {
	Cmd string // command whose reply carried the value
	Key []byte // the key, when the proxy knows it
	Err error
	// Kept names the quarantine key that holds the stored bytes of a value
	// the command took out of Redis (see quarantine.go).
	Kept string
	// Moved says, for a command that moved the value from one list to
	// another, whether the move was undone or where the value is.
	Moved string
}

func (e *DecodeError) Error() string {
	kept := ""
	if e.Kept != "" {
		kept = fmt.Sprintf("; its stored bytes are kept under %q", e.Kept)
	}
	if e.Moved != "" {
		kept += "; " + e.Moved
	}
	if e.Key != nil {
		return fmt.Sprintf("squeeze: %s: stored value of key %q cannot be decoded: %v%s", e.Cmd, e.Key, e.Err, kept)
	}
	return fmt.Sprintf("squeeze: %s: stored value cannot be decoded: %v%s", e.Cmd, e.Err, kept)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// appendReply appends the reply of c as the client must see it: values
// decoded where c's shape says they are. On a decode failure it appends an
// error naming the key instead. dst is the client's output, which
// appendReply may move to a buffer from the free lists, giving dst's
// back.
func (r *rewriter) appendReply(dst []byte, c *call) []byte {
	if len(c.reply) > 0 && c.reply[0] == '-' {
		if out, ok := r.s.redirect(dst, c.reply); ok { // Redis Cluster
			return out
		}
	}
	// Replies that go out as they came: into room from the free lists when
	// they need 16 KiB or more of it (dst is the client's output, which it
	// gives back when it waits: see client.trimWriter).
	if c.kind == shapeNone || c.kind == shapeRelay || c.local ||
		c.kind == shapeSniff && !bytes.Contains(c.reply, magic) {
		return appendBig(dst, c.reply)
	}
	if c.kind == shapeValue && len(c.reply) > 0 && c.reply[0] == '$' {
		// One bulk string (GET and the like) that is not a frame goes out
		// as it came, without parsing it again.
		if i := bytes.IndexByte(c.reply[:min(len(c.reply), 24)], '\n'); i > 0 && !codec.IsFramed(c.reply[i+1:]) {
			return appendBig(dst, c.reply)
		}
	}
	v, _, err := resp.ReadValue(c.reply)
	if err != nil { // the upstream reader framed it; cannot happen
		return append(dst, c.reply...)
	}
	mark := len(dst)
	if v.Type == resp.Attribute { // the attribute, then the value it describes
		dst = append(dst, v.Raw...)
		if v, _, err = resp.ReadValue(c.reply[len(v.Raw):]); err != nil {
			return append(dst, c.reply[len(dst)-mark:]...)
		}
	}
	r.cur, r.inAgg = c, v.Type.IsAggregate()
	dst, err = r.walk(dst, v, c.kind, c, c.tx)
	r.cur, r.inAgg = nil, false
	if err != nil {
		r.s.metrics.decodeError()
		var de *DecodeError
		if !errors.As(err, &de) {
			de = &DecodeError{Cmd: c.cmd, Err: err}
		}
		if de.Cmd == "" {
			de.Cmd = c.cmd
		}
		return resp.AppendError(dst[:mark], "ERR "+de.Error())
	}
	return dst
}

// keyOf names the key of element i of a reply to c, for error messages.
func keyOf(c *call, i int) []byte {
	if c == nil {
		return nil
	}
	if c.cmd == "MGET" {
		return c.arg(i + 1)
	}
	return c.arg(1)
}

// value appends v, decoded when it is a compressed bulk string.
func (r *rewriter) value(dst []byte, v resp.Value, c *call, i int) ([]byte, error) {
	if v.Type != resp.BulkString || v.N < 0 || !codec.IsFramed(v.Str) {
		if v.Type.IsAggregate() {
			// LPOP with a count and the like: an array of values.
			return r.each(dst, v, shapeValue, c)
		}
		return append(dst, v.Raw...), nil
	}
	return r.decode(dst, v.Str, c, i)
}

// decode appends the frame's original bytes as a bulk string.
func (r *rewriter) decode(dst, frame []byte, c *call, i int) ([]byte, error) {
	start := len(dst)
	out, err := r.decodeValue(dst, frame, c, i)
	if err == nil {
		return out, nil
	}
	de := err.(*DecodeError)
	if r.key != nil {
		de.Key = r.key
	}
	if r.cur != nil {
		de.Cmd = r.cur.cmd
		if r.elemCmd != "" {
			de.Cmd = r.elemCmd
		}
		spec := rediscmd.LookupString(de.Cmd)
		switch {
		case spec == nil:
		case spec.Has(rediscmd.Destructive):
			de.Kept = r.s.quarantine(r.cur.db, de.Cmd, de.Key, frame, de.Err)
		case spec.Has(rediscmd.Moves) && r.elemCmd != "":
			de.Moved = "it was moved: the transaction ran as a whole"
		case spec.Has(rediscmd.Moves):
			de.Moved = r.s.undoMove(r.cur.db, r.cur, frame)
		}
	}
	if !r.inAgg {
		return out, err
	}
	// One element of an aggregate reply: an error element in its place,
	// as Redis puts the error of one command inside EXEC's array.
	r.s.metrics.decodeError()
	return resp.AppendError(out[:start], "ERR "+de.Error()), nil
}

// decodeValue appends frame decoded as a bulk string, or fails with a
// DecodeError naming the key of element i of c's reply.
func (r *rewriter) decodeValue(dst, frame []byte, c *call, i int) ([]byte, error) {
	h, err := codec.ParseHeader(frame)
	if err != nil {
		return dst, &DecodeError{Key: keyOf(c, i), Err: err}
	}
	if max := r.s.decoder().MaxDecodedSize(); max > 0 && h.OriginalLen > uint64(max) {
		return dst, &DecodeError{Key: keyOf(c, i), Err: fmt.Errorf("%w: %d bytes, --max-value is %d", codec.ErrTooLarge, h.OriginalLen, max)}
	}
	dst = resp.AppendHeader(dst, resp.BulkString, int(h.OriginalLen))
	if need := len(dst) + int(h.OriginalLen) + 2; need > cap(dst) && need >= bufpool.MinSize {
		// A large value: decode into a reused buffer (internal/bufpool)
		// rather than one allocated and zeroed for it.
		dst = append(bufpool.Get(need), dst...)
	}
	n := len(dst)
	out, err := r.s.decodeValue(dst, frame, &h)
	if err != nil {
		return dst[:n], &DecodeError{Key: keyOf(c, i), Err: err}
	}
	// AppendDecode may return its result with the capacity cut to the
	// length; when it wrote into dst's array, keep dst's capacity so that
	// the CRLF below does not reallocate.
	if cap(dst) >= len(out) && &dst[:1][0] == &out[:1][0] {
		dst = dst[:len(out)]
	} else {
		dst = out
	}
	if uint64(len(dst)-n) != h.OriginalLen {
		return dst, &DecodeError{Key: keyOf(c, i), Err: fmt.Errorf("%w: decoded %d bytes, header says %d", codec.ErrCorrupt, len(dst)-n, h.OriginalLen)}
	}
	r.s.metrics.decoded(h.ID, len(frame), int(h.OriginalLen))
	return append(dst, '\r', '\n'), nil
}

// each appends aggregate v with every element rewritten with shape sh.
func (r *rewriter) each(dst []byte, v resp.Value, sh shape, c *call) ([]byte, error) {
	dst = append(dst, v.Header()...)
	it := v.Elements()
	var err error
	for i := 0; ; i++ {
		e, ok := it.Next()
		if !ok {
			return dst, nil
		}
		if dst, err = r.walk(dst, e, sh, c, nil); err != nil {
			return dst, err
		}
	}
}

// walk appends v rewritten according to shape sh: it dispatches on sh to
// the helper that knows where that shape's values sit, and those call walk
// again for the elements they hold. What a shape does not reach into (a
// nil, an error, an empty aggregate, a lone attribute, every value of
// shapeNone) goes out as it came. appendReply calls it for a whole reply,
// and the helpers for its parts.
func (r *rewriter) walk(dst []byte, v resp.Value, sh shape, c *call, tx []shape) ([]byte, error) {
	if v.Type == resp.Attribute { // metadata about the next value: keep as is
		return append(dst, v.Raw...), nil
	}
	agg := v.Type.IsAggregate() && v.N > 0
	switch sh {
	case shapeValue:
		return r.value(dst, v, c, 0)
	case shapeValues:
		if agg {
			return r.values(dst, v, c)
		}
	case shapePairs:
		if agg {
			return r.pairs(dst, v, c)
		}
	case shapeKeyValue:
		return r.keyed(dst, v, c, shapeValue)
	case shapeKeyValues:
		return r.keyed(dst, v, c, shapeValues)
	case shapeScanPairs:
		return r.positional(dst, v, c, shapeNone, shapePairs)
	case shapeEntries:
		if agg {
			return r.entries(dst, v, c)
		}
	case shapeStreams:
		if agg {
			return r.streams(dst, v, c)
		}
	case shapeStreamPair, shapeAutoClaim:
		return r.positional(dst, v, c, shapeNone, shapeEntries)
	case shapeSniff:
		if agg {
			return r.each(dst, v, shapeSniff, c)
		}
		return r.sniff(dst, v, c), nil
	case shapeAny:
		if agg {
			return r.each(dst, v, shapeAny, c)
		}
		// Every frame is a value here, and must decode. (Inline: this runs
		// for every element of a script's reply.)
		if v.Type == resp.BulkString && v.N >= 0 && codec.IsFramed(v.Str) {
			return r.decode(dst, v.Str, c, 0)
		}
	case shapeInspect, shapeInspect3:
		return r.inspected(dst, v, sh), nil
	case shapeClusterSlots, shapeClusterShards, shapeClusterNodes:
		return r.clusterReply(dst, v, sh), nil
	case shapeExec:
		if agg && len(tx) == v.N {
			return r.exec(dst, v, c, tx)
		}
	}
	return append(dst, v.Raw...), nil
}

// values appends v, a non-empty aggregate of values (MGET, HVALS,
// LRANGE), with each element decoded where it is a frame. walk's
// shapeValues.
func (r *rewriter) values(dst []byte, v resp.Value, c *call) ([]byte, error) {
	dst = append(dst, v.Header()...)
	it := v.Elements()
	var err error
	for i := 0; ; i++ {
		e, ok := it.Next()
		if !ok {
			return dst, nil
		}
		if dst, err = r.value(dst, e, c, i); err != nil {
			return dst, err
		}
	}
}

// pairs appends v, a non-empty aggregate of fields and values (HGETALL:
// flat, a RESP3 map, or RESP3 HRANDFIELD's array of [field, value]), with
// the values decoded and the fields as they came. walk's shapePairs.
func (r *rewriter) pairs(dst []byte, v resp.Value, c *call) ([]byte, error) {
	dst = append(dst, v.Header()...)
	it := v.Elements()
	var err error
	for i := 0; ; i++ {
		e, ok := it.Next()
		if !ok {
			return dst, nil
		}
		switch {
		case e.Type.IsAggregate(): // RESP3 HRANDFIELD: [[field, value], ...]
			dst, err = r.positional(dst, e, c, shapeNone, shapeValue)
		case i%2 == 1:
			dst, err = r.value(dst, e, c, 0)
		default:
			dst = append(dst, e.Raw...)
		}
		if err != nil {
			return dst, err
		}
	}
}

// entries appends v, a non-empty aggregate of stream entries (XRANGE),
// with the values of each entry's fields decoded. walk's shapeEntries.
func (r *rewriter) entries(dst []byte, v resp.Value, c *call) ([]byte, error) {
	// Each entry is [id, [field, value, ...]] (or nil, or an id for JUSTID).
	dst = append(dst, v.Header()...)
	it := v.Elements()
	var err error
	for {
		e, ok := it.Next()
		if !ok {
			return dst, nil
		}
		if dst, err = r.positional(dst, e, c, shapeNone, shapePairs); err != nil {
			return dst, err
		}
	}
}

// streams appends v, XREAD's non-empty reply: a RESP3 map of stream names
// to entries, or an array of [stream, entries], with the entries' values
// decoded. walk's shapeStreams.
func (r *rewriter) streams(dst []byte, v resp.Value, c *call) ([]byte, error) {
	if v.Type != resp.Map {
		return r.each(dst, v, shapeStreamPair, c)
	}
	dst = append(dst, v.Header()...) // RESP3: {stream: entries}
	it := v.Elements()
	var err error
	for i := 0; ; i++ {
		e, ok := it.Next()
		if !ok {
			return dst, nil
		}
		if i%2 == 0 {
			dst = append(dst, e.Raw...)
		} else if dst, err = r.walk(dst, e, shapeEntries, c, nil); err != nil {
			return dst, err
		}
	}
}

// sniff appends v, a value that is not an aggregate in the reply of a
// command the proxy does not know: decoded if it is a frame that decodes,
// else as it came, for a bulk string that only begins like a frame (a
// binary key or member) is not a value. walk's shapeSniff.
func (r *rewriter) sniff(dst []byte, v resp.Value, c *call) []byte {
	// A frame that does not decode (SLOWLOG GET cuts arguments to 128
	// bytes) is not taken for a value either.
	if v.Type == resp.BulkString && v.N >= 0 && codec.IsFramed(v.Str) {
		if _, err := codec.ParseHeader(v.Str); err == nil {
			mark := len(dst)
			if out, err := r.decodeValue(dst, v.Str, c, 0); err == nil {
				return out
			}
			dst = dst[:mark]
		}
	}
	return append(dst, v.Raw...)
}

// inspected appends v, the reply of an inspect script queued in MULTI
// (shapeInspect, or shapeInspect3 for a RESP3 client, sh): the marker of a
// command that could not run inside MULTI becomes its error, an exact
// BITFIELD's reply Redis's own, and a RESP3 client gets LCS IDX's map.
// walk's shapeInspect and shapeInspect3.
func (r *rewriter) inspected(dst []byte, v resp.Value, sh shape) []byte {
	if isMarker(v) {
		return resp.AppendError(dst, "ERR squeeze: a command queued in MULTI must look inside a compressed value, which only works outside MULTI/EXEC; the other queued commands ran")
	}
	if isBitfieldMarker(v) {
		proto := 2
		if sh == shapeInspect3 {
			proto = 3
		}
		return append(dst, exactBitfieldReply(v.Raw, proto)...)
	}
	if sh == shapeInspect3 {
		mark := len(dst)
		dst = append(dst, v.Raw...)
		fixResp3(dst[mark:], 3)
		return dst
	}
	return append(dst, v.Raw...)
}

// exec appends v, EXEC's non-empty reply with as many elements as tx has
// shapes, element i rewritten with shape tx[i]. While it walks element i,
// elemCmd names the queued command, for the error of a value that does not
// decode. walk's shapeExec.
func (r *rewriter) exec(dst []byte, v resp.Value, c *call, tx []shape) ([]byte, error) {
	dst = append(dst, v.Header()...)
	it := v.Elements()
	var err error
	for i := 0; ; i++ {
		e, ok := it.Next()
		if !ok {
			return dst, nil
		}
		if c != nil && i < len(c.txNames) {
			r.elemCmd = c.txNames[i]
		}
		dst, err = r.walk(dst, e, tx[i], nil, nil)
		r.elemCmd = ""
		if err != nil {
			return dst, err
		}
	}
}

// keyed rewrites v, a reply of [key, value] (second is shapeValue) or
// [key, [values]] (shapeValues), with key set to the key it names.
func (r *rewriter) keyed(dst []byte, v resp.Value, c *call, second shape) ([]byte, error) {
	if v.Type.IsAggregate() && v.N >= 2 {
		it := v.Elements()
		if k, ok := it.Next(); ok && k.Type == resp.BulkString && k.N >= 0 {
			r.key = k.Str
			defer func() { r.key = nil }()
		}
	}
	return r.positional(dst, v, c, shapeNone, second)
}

// positional rewrites a two-or-more element aggregate whose element 0 has
// shape first and element 1 shape second; further elements pass through.
func (r *rewriter) positional(dst []byte, v resp.Value, c *call, first, second shape) ([]byte, error) {
	if !v.Type.IsAggregate() || v.N <= 0 {
		return append(dst, v.Raw...), nil
	}
	dst = append(dst, v.Header()...)
	it := v.Elements()
	var err error
	for i := 0; ; i++ {
		e, ok := it.Next()
		if !ok {
			return dst, nil
		}
		sh := shapeNone
		switch i {
		case 0:
			sh = first
		case 1:
			sh = second
		}
		if dst, err = r.walk(dst, e, sh, c, nil); err != nil {
			return dst, err
		}
	}
}
