package proxy

import (
	"bytes"
	"strconv"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/resp"
)

// Commands that look inside stored bytes (STRLEN, GETRANGE, APPEND, SETBIT,
// INCRBYFLOAT, LCS, HSTRLEN ...) run through two small Lua scripts, which
// makes each step atomic with respect to other clients:
//
//  1. checkScript looks at the keys the command reads. If none holds a
//     compressed frame it runs the command itself and returns its reply:
//     one round trip, the common case. Otherwise it returns a marker with
//     the frames (or only their headers, for STRLEN and HSTRLEN).
//  2. For frames, the proxy decodes them and runs unwrapScript: if the keys
//     still hold exactly those frames it stores the decoded bytes, runs the
//     command, and for read-only commands puts the frames back. If a key
//     changed in between it returns a retry marker and the proxy starts over.
//
// Write commands (APPEND, SETRANGE, SETBIT, BITFIELD, BITOP, INCRBYFLOAT,
// HINCRBYFLOAT) leave the value uncompressed; the next SET compresses it.
const checkScript = `local field, head = ARGV[1], ARGV[2] == '1'
local out
for _, k in ipairs(KEYS) do
  local v
  if field ~= '' then v = redis.pcall('HGET', k, field) else v = redis.pcall('GETRANGE', k, 0, 2) end
  if type(v) == 'string' and string.sub(v, 1, 3) == '\193SQ' then
    if field == '' then
      if head then v = redis.call('GETRANGE', k, 0, 63) else v = redis.call('GET', k) end
    elseif head then v = string.sub(v, 1, 64) end
    out = out or {'\193SQ'}
    out[#out+1] = k
    out[#out+1] = v
  end
end
if out then return out end
return redis.pcall(unpack(ARGV, 3))`

const unwrapScript = `local restore, field, n = ARGV[1] == '1', ARGV[2], #KEYS
local function get(k) if field ~= '' then return redis.pcall('HGET', k, field) end return redis.pcall('GET', k) end
local function put(k, v) if field ~= '' then redis.call('HSET', k, field, v) else redis.call('SET', k, v, 'KEEPTTL') end end
for i, k in ipairs(KEYS) do
  if get(k) ~= ARGV[1 + 2*i] then return {'\193SQ', 'retry'} end
end
for i, k in ipairs(KEYS) do put(k, ARGV[2 + 2*i]) end
local r = redis.pcall(unpack(ARGV, 3 + 2*n))
if restore then for i, k in ipairs(KEYS) do put(k, ARGV[1 + 2*i]) end end
return r`

var magic = []byte("\xC1SQ")

// isMarker reports whether v is the scripts' marker array.
func isMarker(v resp.Value) bool {
	if v.Type != resp.Array || v.N < 2 {
		return false
	}
	it := v.Elements()
	e, _ := it.Next()
	return e.Type == resp.BulkString && bytes.Equal(e.Str, magic)
}

// inspectKeyArgs returns the indexes of the keys an inspect command reads.
func inspectKeyArgs(info *cmdInfo, args [][]byte) (first, end int) {
	switch info.keys {
	case keysTwo:
		return 1, min(3, len(args))
	case keysFrom3:
		return min(3, len(args)), len(args)
	default:
		return 1, min(2, len(args))
	}
}

// appendCheckScript appends EVAL checkScript for the command.
func (r *rewriter) appendCheckScript(dst []byte, info *cmdInfo, args [][]byte) []byte {
	first, end := inspectKeyArgs(info, args)
	nkeys := end - first
	dst = resp.AppendArray(dst, 3+nkeys+2+len(args))
	dst = resp.AppendBulkString(dst, "EVAL")
	dst = resp.AppendBulkString(dst, checkScript)
	dst = resp.AppendBulk(dst, strconv.AppendInt(r.scratch[:0], int64(nkeys), 10))
	for _, k := range args[first:end] {
		dst = resp.AppendBulk(dst, k)
	}
	if info.keys == keysHash && len(args) > 2 {
		dst = resp.AppendBulk(dst, args[2])
	} else {
		dst = resp.AppendBulkString(dst, "")
	}
	if info.headOnly {
		dst = resp.AppendBulkString(dst, "1")
	} else {
		dst = resp.AppendBulkString(dst, "0")
	}
	for _, a := range args {
		dst = resp.AppendBulk(dst, a)
	}
	return dst
}

// maxInspectRetries bounds the retries when other clients keep changing
// the keys between the two scripts.
const maxInspectRetries = 16

// inspect runs a command that looks inside stored bytes, synchronously on
// the client's connection, and returns a finished call with its reply.
func (c *client) inspect(info *cmdInfo, args [][]byte) *call {
	fail := func(msg string) *call {
		return c.localCall(info.name, resp.AppendError(nil, "ERR squeeze: "+info.name+": "+msg))
	}
	for attempt := 0; attempt < maxInspectRetries; attempt++ {
		req := c.rw.appendCheckScript(nil, info, args)
		r := c.roundtrip(req)
		if r.err != nil {
			err := r.err
			r.release()
			return fail("upstream: " + err.Error())
		}
		v, _, err := resp.ReadValue(r.reply)
		if err != nil || !isMarker(v) {
			r.cmd, r.local = info.name, true
			r.finish()
			return r
		}
		// Compressed values: elements after the magic are key, frame pairs.
		it := v.Elements()
		it.Next()
		var keys, frames [][]byte
		for {
			k, ok := it.Next()
			if !ok {
				break
			}
			f, _ := it.Next()
			keys = append(keys, k.Str)
			frames = append(frames, f.Str)
		}
		if info.headOnly {
			h, err := codec.ParseHeader(frames[0])
			r.release()
			if err != nil {
				c.s.metrics.decodeError()
				return c.localCall(info.name, resp.AppendError(nil, "ERR "+(&DecodeError{Cmd: info.name, Key: keys[0], Err: err}).Error()))
			}
			return c.localCall(info.name, resp.AppendInt(nil, int64(h.OriginalLen)))
		}
		// Decode each frame and unwrap atomically.
		req = req[:0]
		n := 2 + 1 + len(keys) + 2 + 2*len(keys) + len(args)
		req = resp.AppendArray(req, n)
		req = resp.AppendBulkString(req, "EVAL")
		req = resp.AppendBulkString(req, unwrapScript)
		req = resp.AppendBulkString(req, strconv.Itoa(len(keys)))
		for _, k := range keys {
			req = resp.AppendBulk(req, k)
		}
		if info.readOnly {
			req = resp.AppendBulkString(req, "1")
		} else {
			req = resp.AppendBulkString(req, "0")
		}
		if info.keys == keysHash && len(args) > 2 {
			req = resp.AppendBulk(req, args[2])
		} else {
			req = resp.AppendBulkString(req, "")
		}
		for i, f := range frames {
			dec, err := c.s.decoder().AppendDecode(nil, f)
			if err != nil {
				r.release()
				c.s.metrics.decodeError()
				return c.localCall(info.name, resp.AppendError(nil, "ERR "+(&DecodeError{Cmd: info.name, Key: keys[i], Err: err}).Error()))
			}
			req = resp.AppendBulk(req, f)
			req = resp.AppendBulk(req, dec)
		}
		for _, a := range args {
			req = resp.AppendBulk(req, a)
		}
		r.release()
		r2 := c.roundtrip(req)
		if r2.err != nil {
			err := r2.err
			r2.release()
			return fail("upstream: " + err.Error())
		}
		v2, _, err := resp.ReadValue(r2.reply)
		if err == nil && isMarker(v2) {
			r2.release()
			continue // a key changed between the scripts
		}
		r2.cmd, r2.local = info.name, true
		r2.finish()
		return r2
	}
	return fail("the keys kept changing under concurrent writes; try again")
}
