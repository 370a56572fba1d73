package proxy

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/resp"
)

// SETBIT, BITFIELD and BITOP on a compressed value run inside the inspect
// script on the decoded bytes, which stay in Redis uncompressed. Outside
// MULTI the script then hands the result (when it is at least the key's
// --min-size) back to the proxy with the command's reply, as
// ["\xC1SQW", reply, value]; the proxy encodes the value with the key's
// write policy and stores it with casScript, only if the key still holds
// that value, so a write by another client in between wins. The client gets
// the command's reply as Redis gave it. Between the two round trips the key
// holds the decoded value, which reads back the same; a client-side cache
// that read it meanwhile gets one more invalidation, and keyspace
// notifications show one more set.

// casScript stores ARGV[2] at KEYS[1], keeping its TTL, if the key still
// holds a value whose SHA-1 is ARGV[1]; it reads with GETEX so that Redis
// does not start tracking the key for the client.
const casScript = `local cur = redis.pcall('GETEX', KEYS[1])
if type(cur) == 'string' and redis.sha1hex(cur) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
  return 1
end
return 0`

var casSHA = scriptSHA(casScript)

var recompressMagic = []byte("\xC1SQW")

// isRecompress reports whether v is the inspect script's hand-back.
func isRecompress(v resp.Value) bool {
	if v.Type != resp.Array || v.N != 3 {
		return false
	}
	it := v.Elements()
	e, _ := it.Next()
	return e.Type == resp.BulkString && bytes.Equal(e.Str, recompressMagic)
}

// recompress stores the value of hand-back v under key compressed, if the
// write policy compresses it, and appends the command's reply to dst.
func (c *client) recompress(key []byte, v resp.Value, dst []byte) []byte {
	it := v.Elements()
	it.Next()
	reply, _ := it.Next()
	val, _ := it.Next()
	dst = append(dst, reply.Raw...)
	if key == nil || val.Type != resp.BulkString {
		return dst
	}
	enc, o := c.s.policyFor(key).encode(c.s.metrics, nil, val.Str)
	if o != codec.Compressed {
		return dst
	}
	sum := sha1.Sum(val.Str)
	send := func(byName bool) *call {
		req := resp.AppendArray(nil, 6)
		req = appendScript(req, casScript, casSHA, byName)
		req = resp.AppendBulkString(req, "1")
		req = resp.AppendBulk(req, key)
		req = resp.AppendBulkString(req, hex.EncodeToString(sum[:]))
		req = resp.AppendBulk(req, enc)
		return c.roundtripScript(req)
	}
	r := send(true)
	if r.err == nil && bytes.HasPrefix(r.reply, []byte("-NOSCRIPT")) {
		r.release()
		r = send(false)
	}
	r.release() // 0: another client changed the key; its value stands
	return dst
}
