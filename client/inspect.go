package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/internal/valuescript"
)

// Commands that look inside stored bytes (APPEND, SETRANGE, the bit
// commands, LCS) or compare list elements with an argument (LINSERT, LREM,
// LPOS), and SORT with ALPHA or patterns, run inside the proxy's own Lua
// scripts (package valuescript), so that their replies are Redis's on the
// values, atomically, as through the proxy:
//
//   - the bit commands, LCS, and APPEND and SETRANGE in a pipeline run in
//     valuescript.Inspect: where a key holds a frame, the script stores the
//     decoded bytes, runs the command and puts the frame back (read-only
//     commands), or leaves the result uncompressed (writes; SETBIT,
//     BITFIELD and BITOP on a compressed value then compress it again,
//     by compare-and-set, see valuescript.CAS);
//   - APPEND and SETRANGE sent alone run in valuescript.Grow: the hook
//     decodes the value, applies the command, and stores the result
//     compressed under the key's policy, by compare-and-set;
//   - LINSERT, LREM and LPOS run in valuescript.ListSearch, which finds
//     the elements holding the value in any stored form;
//   - SORT and SORT_RO with ALPHA, BY or GET patterns run in
//     valuescript.SortCheck, which refuses to order, or name keys after,
//     compressed bytes (an error wrapping ErrUnsupported), and sorts
//     otherwise.
//
// Where a key holds a frame the script needs decoded, it changes nothing
// and returns it; the hook decodes it and sends the script again: a second
// round trip, which it makes for a command sent alone. In a pipeline or
// transaction there is no second round: such a command fails with an
// error wrapping ErrUnsupported and changes nothing (SortCheck needs no
// second round, and runs there too).

// opKind is the script a valueOp runs.
type opKind uint8

const (
	opInspect opKind = iota + 1
	opGrow
	opListSearch
	opSort
)

// valueOp is a command the hook runs through one of valuescript's scripts.
type valueOp struct {
	kind opKind
	name string // lower case
	key  string // the key errors name
	// words are the command's words as go-redis would send them (list
	// search: with its values in their stored form).
	words [][]byte
	// inspect: the script's call, without Command and Candidates.
	inspect valuescript.InspectCall
	// list search: the call, without Forms.
	search valuescript.ListSearchCall
	// sort: SortNeedsCheck's results.
	by              []byte
	alpha, patterns bool
}

// maxValueRetries bounds the rounds of one command while other clients
// keep changing its keys in between (the proxy's maxInspectRetries).
const maxValueRetries = 16

// maxGrowRetries bounds the compare-and-set rounds of one APPEND or
// SETRANGE; past them it runs in the inspect script, atomic, leaving the
// result uncompressed (the proxy's maxGrowRetries).
const maxGrowRetries = 64

// maxBulk is Redis's default proto-max-bulk-len: a result past it is left
// to Redis's own command, for Redis's own error.
const maxBulk = 512 << 20

// prepareValueOp returns the script run of a command that looks inside
// stored values, or nil where it goes as it is: every key it reads is raw
// (Config.Raw), its arguments are not a call Redis accepts (Redis's own
// error), or a SORT that needs no check (numbers are stored raw).
func (h *Hook) prepareValueOp(name string, args []any) *valueOp {
	spec := rediscmd.LookupString(name)
	if spec == nil || !spec.ArityOK(len(args)) {
		return nil
	}
	words := argWords(nil, args)
	op := &valueOp{name: name, words: words, key: string(words[1])}
	switch {
	case spec.Has(rediscmd.Inspect):
		first, end := valuescript.InspectKeys(spec.Keys, len(words))
		raw := true
		for _, k := range words[first:end] {
			raw = raw && h.isRaw(string(k))
		}
		written := valuescript.WrittenKey(spec.Has(rediscmd.ReadOnly), false, spec.Keys, words)
		if raw && (written == nil || h.isRaw(string(written))) {
			return nil
		}
		op.kind = opInspect
		op.inspect = valuescript.InspectCall{
			Mode:          valuescript.InspectMode(spec.Has(rediscmd.ReadOnly), false, false),
			Keys:          words[first:end],
			Written:       written,
			RecompressMin: -1,
		}
		if _, _, _, ok := valuescript.GrowArgs(words); ok {
			op.kind = opGrow
		}
		if sargs, ok := valuescript.ExactBitfield(words); ok {
			op.inspect.Mode = valuescript.InspectMode(spec.Has(rediscmd.ReadOnly), false, true)
			op.words = sargs
		}
		if written != nil && first < end {
			op.key = string(written)
		}
		return op
	case spec.Has(rediscmd.ListSearch):
		ai := valuescript.SearchArg(words)
		if ai == 0 || h.isRaw(op.key) {
			return nil
		}
		// The command's values in their stored form, the searched one
		// (e0) compared by the script as the command sends it.
		cmd := make([][]byte, len(words))
		copy(cmd, words)
		first, step, end := spec.Values.Find(words)
		enc := h.encoderFor(op.key)
		for i := first; step > 0 && i < end; i += step {
			if frame, o := enc.AppendFrame(nil, words[i]); o != codec.StoredRaw {
				cmd[i] = frame
			}
		}
		op.kind, op.words = opListSearch, cmd
		op.search = valuescript.ListSearchCall{Key: words[1], E0: cmd[ai], Raw: words[ai], Mode: valuescript.SearchMode(words[0]), Command: cmd}
		return op
	}
	by, alpha, patterns, ok := valuescript.SortNeedsCheck(words)
	if !ok || h.isRaw(op.key) {
		return nil
	}
	op.kind, op.by, op.alpha, op.patterns = opSort, by, alpha, patterns
	return op
}

// pipelined returns the command sent in a pipeline or transaction: the
// script by its text (a NOSCRIPT error could not be retried), without
// candidates.
func (op *valueOp) pipelined(ctx context.Context) *redis.Cmd {
	return redis.NewCmd(ctx, anyWords(op.callWords(false, nil, nil))...)
}

// callWords returns the words of one call of the op's script: by name or
// with its body, with the candidates and forms found so far.
func (op *valueOp) callWords(byName bool, cands []valuescript.Candidate, forms *valuescript.Forms) [][]byte {
	switch op.kind {
	case opListSearch:
		c := op.search
		c.Forms = forms
		return c.Words(nil, byName)
	case opSort:
		return valuescript.SortCheckWords(nil, op.by, op.alpha, op.patterns, op.words)
	}
	c := op.inspect
	c.Candidates, c.Command = cands, op.words
	return c.Words(nil, byName)
}

// anyWords returns words as go-redis arguments.
func anyWords(words [][]byte) []any {
	out := make([]any, len(words))
	for i, w := range words {
		out[i] = w
	}
	return out
}

// scriptRunner sends the calls of one command's script alone: by its SHA-1
// first, and on NOSCRIPT (a new or restarted server, SCRIPT FLUSH) with its
// body from then on.
type scriptRunner struct {
	ctx    context.Context
	next   redis.ProcessHook
	byName bool
}

// run sends the call words(byName) and returns it, sent.
func (r *scriptRunner) run(words func(byName bool) [][]byte) *redis.Cmd {
	for {
		sub := redis.NewCmd(r.ctx, anyWords(words(r.byName))...)
		if err := r.next(r.ctx, sub); err != nil && sub.Err() == nil {
			sub.SetErr(err)
		}
		if err := sub.Err(); r.byName && err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			r.byName = false
			continue
		}
		return sub
	}
}

// runValueOp runs op for cmd, sent alone, and sets cmd's reply.
func (h *Hook) runValueOp(ctx context.Context, next redis.ProcessHook, cmd redis.Cmder, op *valueOp) {
	r := &scriptRunner{ctx: ctx, next: next, byName: true}
	var sub *redis.Cmd
	var err error
	switch op.kind {
	case opGrow:
		sub, err = h.runGrow(r, op)
		if sub == nil && err == nil {
			sub, err = h.runInspect(r, op) // unusual arguments, or contention
		}
	case opInspect:
		sub, err = h.runInspect(r, op)
	case opListSearch:
		sub, err = h.runListSearch(r, op)
	case opSort:
		sub = r.run(func(bool) [][]byte { return op.callWords(false, nil, nil) })
	}
	if err != nil {
		cmd.SetErr(err)
		return
	}
	h.finishValueOp(cmd, op, sub)
}

// marker returns the elements after the magic of a script's marker reply
// (frames to decode), if sub's reply is one.
func marker(sub *redis.Cmd, magic string) ([]any, bool) {
	if sub.Err() != nil {
		return nil, false
	}
	a, ok := sub.Val().([]any)
	if !ok || len(a) == 0 || a[0] != magic {
		return nil, false
	}
	return a[1:], true
}

// opError is the error of op's command about its key.
func (op *valueOp) error(err error) error {
	return &Error{Command: op.name, Key: op.key, Err: err}
}

var errContended = errors.New("the keys kept changing under concurrent writes; try again")

// runInspect runs op in valuescript.Inspect until no frame is missing a
// candidate, then compresses again what a write left uncompressed.
func (h *Hook) runInspect(r *scriptRunner, op *valueOp) (*redis.Cmd, error) {
	var cands []valuescript.Candidate
	rmin := -1
	if w := op.inspect.Written; w != nil && !h.isRaw(string(w)) {
		if enc := h.encoderFor(string(w)); enc.Algorithm().ID != codec.IDNone {
			rmin = enc.MinSize()
		}
	}
	for range maxValueRetries {
		sub := r.run(func(byName bool) [][]byte {
			c := op.inspect
			c.Candidates, c.Command, c.RecompressMin = cands, op.words, rmin
			return c.Words(nil, byName)
		})
		if back, ok := marker(sub, valuescript.RecompressMarker); ok && len(back) == 2 {
			h.recompress(r, op, back[1])
			sub.SetVal(back[0])
			return sub, nil
		}
		found, ok := marker(sub, valuescript.Marker)
		if !ok {
			return sub, nil
		}
		cands = cands[:0]
		for i := 0; i+1 < len(found); i += 2 {
			k, _ := found[i].(string)
			f, _ := found[i+1].(string)
			d, err := h.decodeString(f)
			if err != nil {
				return nil, &Error{Command: op.name, Key: k, Err: err}
			}
			cands = append(cands, valuescript.Candidate{Key: []byte(k), Frame: []byte(f), Dec: []byte(d)})
		}
	}
	return nil, op.error(errContended)
}

// recompress stores the value a write on compressed values left
// uncompressed (v) in the written key's compressed form, if the key still
// holds it: another client's write in between stands.
func (h *Hook) recompress(r *scriptRunner, op *valueOp, v any) {
	s, ok := v.(string)
	key := string(op.inspect.Written)
	if !ok || key == "" {
		return
	}
	frame, o := h.encoderFor(key).AppendFrame(nil, unsafe.Slice(unsafe.StringData(s), len(s)))
	if o == codec.StoredRaw {
		return
	}
	r.run(func(byName bool) [][]byte {
		w := valuescript.Words(nil, valuescript.CAS, valuescript.CASSHA, byName)
		return append(w, []byte("1"), []byte(key), []byte(sha1hex(s)), frame)
	}) // 0: another client changed the key; its value stands
}

// runGrow runs APPEND or SETRANGE in valuescript.Grow, storing the result
// compressed; nil, nil where the inspect script must run it instead.
func (h *Hook) runGrow(r *scriptRunner, op *valueOp) (*redis.Cmd, error) {
	kind, off, x, _ := valuescript.GrowArgs(op.words)
	enc := h.encoderFor(op.key)
	if enc.Algorithm().ID == codec.IDNone || x > maxBulk {
		return nil, nil
	}
	call := valuescript.GrowCall{Key: op.words[1], Mode: valuescript.GrowProbe, MinSize: enc.MinSize(),
		Kind: valuescript.ScriptKind(kind, off, op.words), X: x, Command: op.words}
	send := func() *redis.Cmd { return r.run(func(byName bool) [][]byte { return call.Words(nil, byName) }) }
	sub := send()
	for range maxGrowRetries {
		stored, ok := marker(sub, valuescript.Marker)
		if !ok || len(stored) > 1 {
			return sub, nil // Redis's own reply: the command ran, or the new value was stored
		}
		var cur string
		if len(stored) == 1 {
			cur, _ = stored[0].(string)
		}
		if kind == 'E' { // SETRANGE of nothing: the value's length
			hdr, err := codec.ParseHeader([]byte(cur))
			if err != nil {
				return nil, op.error(err)
			}
			sub.SetVal(int64(hdr.OriginalLen))
			return sub, nil
		}
		old := cur
		if codec.IsFramed([]byte(cur)) {
			d, err := h.decodeString(cur)
			if err != nil {
				return nil, op.error(err)
			}
			old = d
		}
		val := valuescript.Grown(kind, []byte(old), off, x, op.words)
		if len(val) > maxBulk {
			return nil, nil
		}
		frame, o := enc.AppendFrame(nil, val)
		if o == codec.StoredRaw {
			frame = val
		}
		call.Mode, call.Enc, call.NewLen, call.Want = valuescript.GrowStore, frame, len(val), ""
		if len(stored) == 1 {
			call.Want = sha1hex(cur)
		}
		sub = send() // stored if the key still holds cur; else a probe's reply
	}
	return nil, nil
}

// runListSearch runs op in valuescript.ListSearch until every frame the
// script could not rule out is decoded and noted.
func (h *Hook) runListSearch(r *scriptRunner, op *valueOp) (*redis.Cmd, error) {
	var forms valuescript.Forms
	for range maxValueRetries {
		sub := r.run(func(byName bool) [][]byte { return op.callWords(byName, nil, &forms) })
		frames, ok := marker(sub, valuescript.Marker)
		if !ok {
			return sub, nil
		}
		for _, f := range frames {
			s, _ := f.(string)
			d, err := h.decodeString(s)
			if err != nil {
				return nil, op.error(err)
			}
			forms.Note([]byte(s), d == string(op.search.Raw))
		}
	}
	return nil, op.error(errContended)
}

// finishValueOp sets cmd's reply from sub, the reply of op's script, in
// the type go-redis gave cmd and as go-redis would have read the
// command's own reply.
func (h *Hook) finishValueOp(cmd redis.Cmder, op *valueOp, sub *redis.Cmd) {
	if err := sub.Err(); err != nil {
		if op.kind == opSort && strings.Contains(err.Error(), "squeeze: SORT") {
			err = op.error(fmt.Errorf("%w: %s", ErrUnsupported, strings.TrimPrefix(err.Error(), "ERR squeeze: ")))
		}
		cmd.SetErr(err)
		return
	}
	if op.kind != opSort {
		if _, ok := marker(sub, valuescript.Marker); ok { // in a pipeline or transaction: no second round
			cmd.SetErr(op.error(fmt.Errorf("%w (in a pipeline or transaction, on a compressed value: %s must decode it first; send the command alone)", ErrUnsupported, strings.ToUpper(op.name))))
			return
		}
	}
	v := sub.Val()
	if exact, ok := marker(sub, valuescript.BitfieldMarker); ok {
		v = exactBitfield(exact)
	}
	if _, ok := cmd.(*redis.Cmd); ok && h.resp3 && op.name == "lcs" {
		v = lcsMap(v)
	}
	if err := setReply(cmd, v); err != nil {
		cmd.SetErr(op.error(err))
		return
	}
	if op.kind == opSort && cmd.Err() == nil {
		if err := h.decodeReply(cmd, prepared{name: op.name}); err != nil {
			cmd.SetErr(op.error(err))
		}
	}
}

// exactBitfield turns the elements of the exact BITFIELD reply into the
// command's: the integers, nil for an OVERFLOW FAIL.
func exactBitfield(elems []any) any {
	out := make([]any, len(elems))
	for i, e := range elems {
		t, ok := e.([]any)
		if !ok || len(t) != 3 {
			continue
		}
		hi, _ := t[0].(int64)
		lo, _ := t[1].(int64)
		typ, _ := t[2].(string)
		if n, ok := valuescript.BitfieldValue(hi, lo, []byte(typ)); ok {
			out[i] = n
		}
	}
	return out
}

// nilOf returns v with a script's false (a nil reply inside a script,
// which RESP3 hands over as a boolean) as nil, in arrays too.
func nilOf(v any) any {
	switch t := v.(type) {
	case bool:
		if !t {
			return nil
		}
	case []any:
		for i, e := range t {
			t[i] = nilOf(e)
		}
	}
	return v
}

// setReply sets the reply v, as a script returned it, on cmd, as go-redis
// reads the command's own reply into cmd's type: a nil reply is redis.Nil,
// nil elements of arrays of integers and strings are 0 and "".
func setReply(cmd redis.Cmder, v any) error {
	v = nilOf(v)
	if v == nil {
		cmd.SetErr(redis.Nil)
		return nil
	}
	switch c := cmd.(type) {
	case *redis.Cmd:
		c.SetVal(v)
	case *redis.IntCmd:
		n, ok := v.(int64)
		if !ok {
			return fmt.Errorf("unexpected reply %T", v)
		}
		c.SetVal(n)
	case *redis.IntSliceCmd:
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("unexpected reply %T", v)
		}
		out := make([]int64, len(a))
		for i, e := range a {
			out[i], _ = e.(int64)
		}
		c.SetVal(out)
	case *redis.StringSliceCmd:
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("unexpected reply %T", v)
		}
		out := make([]string, len(a))
		for i, e := range a {
			out[i], _ = e.(string)
		}
		c.SetVal(out)
	case *redis.SliceCmd:
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("unexpected reply %T", v)
		}
		c.SetVal(a)
	case *redis.LCSCmd:
		m, err := lcsMatch(v)
		if err != nil {
			return err
		}
		c.SetVal(m)
	default:
		return fmt.Errorf("%w (a reply for %T)", ErrUnsupported, cmd)
	}
	return nil
}

// lcsMatch reads LCS's reply as go-redis's LCSCmd does: the string, the
// length (LEN), or the matches and length (IDX), which a script hands over
// as an array ["matches", [...], "len", n].
func lcsMatch(v any) (*redis.LCSMatch, error) {
	switch t := v.(type) {
	case string:
		return &redis.LCSMatch{MatchString: t}, nil
	case int64:
		return &redis.LCSMatch{Len: t}, nil
	case []any:
		m := &redis.LCSMatch{}
		for i := 0; i+1 < len(t); i += 2 {
			switch t[i] {
			case "len":
				m.Len, _ = t[i+1].(int64)
			case "matches":
				ms, _ := t[i+1].([]any)
				m.Matches = make([]redis.LCSMatchedPosition, len(ms))
				for j, e := range ms {
					p, _ := e.([]any)
					if len(p) < 2 {
						return nil, fmt.Errorf("unexpected LCS match %v", e)
					}
					m.Matches[j].Key1, m.Matches[j].Key2 = lcsPosition(p[0]), lcsPosition(p[1])
					if len(p) > 2 {
						m.Matches[j].MatchLen, _ = p[2].(int64)
					}
				}
			}
		}
		return m, nil
	}
	return nil, fmt.Errorf("unexpected LCS reply %T", v)
}

// lcsMap returns LCS ... IDX's reply, which a script hands over as an
// array ["matches", [...], "len", n], as the map RESP3 replies with.
func lcsMap(v any) any {
	a, ok := v.([]any)
	if !ok || len(a) != 4 || a[0] != "matches" || a[2] != "len" {
		return v
	}
	return map[any]any{a[0]: a[1], a[2]: a[3]}
}

func lcsPosition(v any) redis.LCSPosition {
	p, _ := v.([]any)
	var out redis.LCSPosition
	if len(p) == 2 {
		out.Start, _ = p[0].(int64)
		out.End, _ = p[1].(int64)
	}
	return out
}
