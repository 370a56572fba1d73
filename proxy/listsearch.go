package proxy

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/internal/valuescript"
	"github.com/squeeze-kv/squeeze/resp"
)

// LREM, LPOS and LINSERT find list elements equal to an argument (LINSERT's
// pivot). Redis compares stored bytes, and the proxy sends the argument
// encoded with its current settings, so an element stored with other
// settings (another codec or level, --min-size, --min-gain, a dictionary,
// or stored raw before the proxy was put in front of Redis) holds the same
// value in different bytes, and Redis's own search misses it.
//
// The exact search runs Redis's command inside one Lua script, atomically:
// the script first scans the list and finds the elements that hold the
// searched value in another form, rewrites them to the form the proxy sent
// (LSET, the same value), runs the command, and for LPOS, which must not
// write, puts the original bytes back. Lua cannot decompress, so the script
// decides what it can from the frame header: an element whose original
// length or CRC-32C differs cannot be equal; a none frame it compares
// itself. Any other frame it cannot rule out it returns in a marker,
// without changing anything; the proxy decodes those frames, tells the
// script by their SHA-1 which ones are equal and which are not, and sends
// the script again. With checksums on (the default), only true matches are
// ever returned, so the second round trip happens only when the list holds
// the value in another form.
//
// Server.StoredListSearch turns this off: the proxy then sends the
// commands as they are, which is faster but misses values stored in
// another form.
const listSearchScript = valuescript.ListSearch

// listSearchSHA names the script for EVALSHA: Redis keeps every script EVAL
// ran, so after the first call the proxy sends 40 bytes instead of the
// script's text, and Redis need not hash it again.
var listSearchSHA = valuescript.ListSearchSHA

// List search modes, ARGV[1] of the script.
const (
	searchProbe   = valuescript.SearchProbe   // report frames to decode, run nothing
	searchRestore = valuescript.SearchRestore // run, then put rewritten elements back (LPOS)
	searchKeep    = valuescript.SearchKeep    // run, leave rewritten elements in the sent form
)

// listSearchArg returns the index of the argument that info's command
// compares list elements with, or 0 if args cannot be a valid call (Redis
// then gives its own error).
func listSearchArg(info *cmdInfo, args [][]byte) int {
	if info.flags&rediscmd.ListSearch == 0 {
		return 0
	}
	return valuescript.SearchArg(args)
}

// searchScope is valuescript.SearchScope.
func searchScope(info *cmdInfo, args [][]byte) (dir int, need, maxlen int64) {
	return valuescript.SearchScope(args)
}

// exactListSearch reports whether the command must go through the list
// search script.
func (c *client) exactListSearch(info *cmdInfo, args [][]byte) bool {
	return info.flags&rediscmd.ListSearch != 0 && !c.s.StoredListSearch && listSearchArg(info, args) > 0
}

// listForms are the SHA-1s (hex, as redis.sha1hex writes them) of frames
// the proxy decoded: those that hold the searched value and those that do
// not.
type listForms struct{ same, differ []string }

// appendListSearch appends EVAL listSearchScript running info's command,
// or EVALSHA with byName.
func (c *client) appendListSearch(dst []byte, info *cmdInfo, args [][]byte, mode string, forms *listForms, byName bool) []byte {
	ai := listSearchArg(info, args)
	raw := args[ai]
	pol := c.s.policyFor(args[1])
	first, step, end := valueArgs(info.vals, args)
	encoded := func(i int) bool { return step != 0 && i >= first && i < end && (i-first)%step == 0 }
	params := (&valuescript.ListSearchCall{Raw: raw, Forms: &valuescript.Forms{Same: forms.same, Differ: forms.differ}, Command: args}).Params(nil)
	n := 3 + 1 + 2 + len(params) + len(args) // EVAL script 1 key, mode e0, params
	dst = resp.AppendArray(dst, n)
	dst = appendScript(dst, listSearchScript, listSearchSHA, byName)
	dst = resp.AppendBulkString(dst, "1")
	dst = resp.AppendBulk(dst, args[1])
	dst = resp.AppendBulkString(dst, mode)
	mark := len(dst)
	// e0: the searched value as the command below sends it.
	if encoded(ai) {
		dst = c.in.rw.appendStored(dst, c.s.metrics, pol, raw)
	} else {
		dst = resp.AppendBulk(dst, raw)
	}
	e0 := dst[mark:]
	for _, w := range params {
		dst = resp.AppendBulk(dst, w)
	}
	for i, a := range args {
		switch {
		case i == ai:
			dst = append(dst, e0...) // the same bytes the script compares
		case encoded(i):
			dst = c.in.rw.appendStored(dst, c.s.metrics, pol, a)
		default:
			dst = resp.AppendBulk(dst, a)
		}
	}
	if cap(c.in.rw.scratch) > maxPooledReply {
		c.in.rw.scratch = nil
	}
	return dst
}

// classify decodes the frames of a marker and records in forms whether
// each holds value. A frame that cannot be decoded is an error naming key.
func (c *client) classify(forms *listForms, key, value []byte, v resp.Value) error {
	it := v.Elements()
	it.Next() // the magic
	for {
		f, ok := it.Next()
		if !ok {
			return nil
		}
		d, err := c.s.decodeFrame(f.Str)
		if err != nil {
			return &DecodeError{Key: key, Err: err}
		}
		sum := sha1.Sum(f.Str)
		h := hex.EncodeToString(sum[:])
		if bytes.Equal(d, value) {
			forms.same = append(forms.same, h)
		} else {
			forms.differ = append(forms.differ, h)
		}
	}
}

// searchMode is how the script runs info's command.
func searchMode(info *cmdInfo) string {
	return valuescript.SearchMode([]byte(info.name))
}

// listSearch runs LREM, LPOS or LINSERT through the list search script,
// synchronously on the client's connection, and returns a finished call
// with Redis's reply.
func (c *client) listSearch(info *cmdInfo, args [][]byte) (out *call) {
	if c.s.RequireAuth && len(args) > 1 {
		switch plan, up := c.scriptRoute(args, listSearchSHA, args[1:2]); plan {
		case aclDirect:
			return c.sendAsSent(info.name, args)
		case aclShared:
			c.in.scriptUp = up
			defer func() { c.in.scriptUp = nil }()
		}
	}
	var forms listForms
	value := args[listSearchArg(info, args)]
	byName := true
	// Pushes that came while a script ran go after the reply (see
	// roundtripScript).
	var pinSeq uint64
	defer func() { out.pinSeq = max(out.pinSeq, pinSeq) }()
	for attempt := 0; attempt < maxInspectRetries; attempt++ {
		r, ok := c.scriptCall(info.name, c.roundtripScript, &byName, func(byName bool) []byte {
			return c.appendListSearch(nil, info, args, searchMode(info), &forms, byName)
		})
		pinSeq = max(pinSeq, r.pinSeq)
		if !ok {
			return r
		}
		v, _, err := resp.ReadValue(r.reply)
		if err != nil || !isMarker(v) {
			r.cmd, r.local = info.name, true
			r.notify = c.q.ready
			r.finish()
			return r
		}
		err = c.classify(&forms, args[1], value, v)
		r.release()
		if err != nil {
			de := err.(*DecodeError)
			de.Cmd = info.name
			return c.localCall(info.name, resp.AppendError(nil, "ERR "+de.Error()))
		}
	}
	return c.localCall(info.name, resp.AppendError(nil, "ERR squeeze: "+info.name+": the list kept changing under concurrent writes; try again"))
}

// appendQueuedListSearch appends the script for a command queued in MULTI
// (or sent with replies off): the frames the list holds now are decoded
// first, on a shared connection, which writes nothing and so does not
// disturb WATCH. A frame that appears by EXEC and must be decoded turns
// the command's reply into an error (shapeInspect).
func (c *client) appendQueuedListSearch(dst []byte, info *cmdInfo, args [][]byte) []byte {
	var forms listForms
	value := args[listSearchArg(info, args)]
	if up, err := c.s.pool.getDB(context.Background(), c.sess.db, int(c.id)); err == nil {
		for attempt := 0; attempt < maxInspectRetries; attempt++ {
			r := c.roundtripShared(up, c.appendListSearch(nil, info, args, searchProbe, &forms, false))
			v, _, err := resp.ReadValue(r.reply)
			if r.err != nil || err != nil || !isMarker(v) {
				r.release()
				break
			}
			err = c.classify(&forms, args[1], value, v)
			r.release()
			if err != nil {
				break // EXEC will report it
			}
		}
	}
	// By its text: a NOSCRIPT error at EXEC could not be retried.
	return c.appendListSearch(dst, info, args, searchMode(info), &forms, false)
}
