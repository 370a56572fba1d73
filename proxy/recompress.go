package proxy

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strconv"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/internal/valuescript"
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
const casScript = valuescript.CAS

var casSHA = valuescript.CASSHA

var recompressMagic = []byte(valuescript.RecompressMarker)

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
// write policy compresses it, and appends the reply of the client's
// command cmd to dst.
func (c *client) recompress(cmd string, key []byte, v resp.Value, dst []byte) []byte {
	it := v.Elements()
	it.Next()
	reply, _ := it.Next()
	val, _ := it.Next()
	dst = append(dst, reply.Raw...)
	if key == nil || val.Type != resp.BulkString {
		return dst
	}
	enc, o := c.s.policyFor(key).encode(c.s.metrics, nil, val.Str)
	if o == codec.StoredRaw {
		return dst // as the script left it
	}
	// Compressed, or a result that begins with the frame magic, wrapped.
	c.casStore(cmd, key, val.Str, enc).release() // 0: another client changed the key; its value stands
	return dst
}

// casStore stores enc at key with casScript if the key still holds read,
// after the client's command cmd, and returns the script's call (see
// scriptCall) for the caller to release.
func (c *client) casStore(cmd string, key, read, enc []byte) *call {
	sum := sha1.Sum(read)
	byName := true
	r, _ := c.scriptCall(cmd, c.roundtripScript, &byName, func(byName bool) []byte {
		req := resp.AppendArray(nil, 6)
		req = appendScript(req, casScript, casSHA, byName)
		req = resp.AppendBulkString(req, "1")
		req = resp.AppendBulk(req, key)
		req = resp.AppendBulkString(req, hex.EncodeToString(sum[:]))
		return resp.AppendBulk(req, enc)
	})
	return r
}

// Inside MULTI the inspect script cannot hand its result back: the reply
// is one element of EXEC's, and what the client sees must be Redis's. So
// the proxy notes, as it queues them, the commands of the transaction that
// may leave a decoded value raw (the write commands of the inspect script
// on strings: APPEND, SETRANGE, SETBIT, BITFIELD, BITOP) and the key each
// writes. Once EXEC's reply has been written to the client,
// and before the client's next command runs, it recompresses each such key
// whose command succeeded (its element of EXEC's reply is not an error or
// the "framed" marker): it reads the key with probeRawScript (GETEX, which
// does not make Redis track the key), decodes it if it is the none frame
// the inspect script wraps a result that begins with the magic in,
// encodes what it read under the
// key's write policy and stores the result with casScript, only if the
// key still holds exactly those bytes, TTL kept. An EXEC that did not run
// (WATCH failed: a null reply; EXECABORT) writes nothing. Nor is anything
// done after a transaction that selects another database (its keys would
// be in either).

// probeRawScript returns the string at KEYS[1] if it is at least ARGV[1]
// bytes long and either not a frame or a none frame without checksum or
// dictionary id (the form the inspect script wraps a result that begins
// with the magic in), else nil.
const probeRawScript = `local v = redis.pcall('GETEX', KEYS[1])
if type(v) ~= 'string' or #v < tonumber(ARGV[1]) then return false end
local h = string.sub(v, 1, 6)
if string.sub(h, 1, 3) ~= '` + luaMagic + `' or h == '` + luaMagic + `\1\0\0' then return v end
return false`

var probeRawSHA = scriptSHA(probeRawScript)

// txRecompress is what the open transaction will have to recompress: the
// place in the transaction of each noted command, and its key.
type txRecompress struct {
	at   []int
	keys [][]byte
}

// reset forgets the commands of an earlier transaction (MULTI).
func (t *txRecompress) reset() { t.at, t.keys = t.at[:0], t.keys[:0] }

// note records command number i of the transaction, if it is a string
// write of the inspect script whose key the write policy compresses.
func (t *txRecompress) note(s *Server, i int, info *cmdInfo, args [][]byte) {
	if info.flags&rediscmd.Inspect == 0 || info.compare {
		return
	}
	wk := writtenKey(info, args)
	if wk == nil {
		return
	}
	if pol := s.policyFor(wk); pol.enc == nil || pol.enc.Algorithm().ID == codec.IDNone {
		return
	}
	t.at, t.keys = append(t.at, i), append(t.keys, bytes.Clone(wk))
}

// execRecompress is the recompression owed after one EXEC: the keys noted
// in its transaction, and, once its reply has come, which of them to
// recompress (their commands ran and succeeded).
type execRecompress struct {
	seq  uint64 // EXEC's call
	at   []int
	keys [][]byte
	ran  []bool // by place in at; set when EXEC's reply has come
}

// arm hands the noted commands to EXEC's call cl, whose transaction has n
// commands, and clears t. It returns nil where nothing is owed: no noted
// command, no reply to wait for, or a SELECT queued in the transaction.
func (t *txRecompress) arm(cl *call, n int, dbQueued bool) *execRecompress {
	defer t.reset()
	if len(t.at) == 0 || cl == nil || cl.seq == 0 || dbQueued {
		return nil
	}
	x := &execRecompress{seq: cl.seq, at: slices.Clone(t.at), keys: slices.Clone(t.keys)}
	prev := cl.onFinish
	cl.onFinish = func() {
		if prev != nil {
			prev()
		}
		if cl.err == nil {
			x.ran = execSucceeded(cl.reply, n, x.at)
		}
	}
	return x
}

// execSucceeded reports, for each place in at, whether EXEC's reply (of a
// transaction of n commands) holds a reply that is no error there; all
// false if the transaction did not run.
func execSucceeded(reply []byte, n int, at []int) []bool {
	ok := make([]bool, len(at))
	v, _, err := resp.ReadValue(reply)
	if err != nil || v.Type != resp.Array || v.N != n {
		return ok
	}
	it := v.Elements()
	j := 0
	for i := 0; j < len(at); i++ {
		e, more := it.Next()
		if !more {
			break
		}
		for j < len(at) && at[j] == i {
			ok[j] = e.Type != resp.Error && e.Type != resp.BulkError && !isMarker(e)
			j++
		}
	}
	return ok
}

// recompressAfterExec waits until EXEC's reply is written to the client,
// then recompresses the keys x owes (see txRecompress).
func (c *client) recompressAfterExec(x *execRecompress) {
	c.flush()
	c.waitWritten(x.seq)
	var pinSeq uint64
	done := map[string]bool{}
	for j, key := range x.keys {
		if j >= len(x.ran) || !x.ran[j] || done[string(key)] {
			continue
		}
		done[string(key)] = true
		pinSeq = max(pinSeq, c.recompressKey(key))
	}
	// Pushes that came while the scripts ran (EXEC's reply is written)
	// may go out now.
	if pinSeq > 0 {
		c.noteRoundtripPin(pinSeq)
		c.wake()
	}
}

// recompressKey stores the raw value at key compressed, if it is one the
// write policy compresses and nobody changes it meanwhile; it returns the
// last script's place among the private connection's replies.
func (c *client) recompressKey(key []byte) uint64 {
	pol := c.s.policyFor(key)
	byName := true
	r, ok := c.scriptCall("EXEC", c.roundtripScript, &byName, func(byName bool) []byte {
		req := resp.AppendArray(nil, 5)
		req = appendScript(req, probeRawScript, probeRawSHA, byName)
		req = resp.AppendBulkString(req, "1")
		req = resp.AppendBulk(req, key)
		return resp.AppendBulkString(req, strconv.Itoa(pol.enc.MinSize()))
	})
	defer r.release()
	pinSeq := r.pinSeq
	if !ok {
		return pinSeq // EXEC's reply is written already: the key stays raw
	}
	v, _, err := resp.ReadValue(r.reply)
	if err != nil || v.Type != resp.BulkString || v.N < 0 {
		return pinSeq // nothing to do: missing, short, a frame, another type
	}
	orig := v.Str
	if codec.IsFramed(orig) {
		// A result that begins with the magic, wrapped by the script.
		if orig, err = c.s.decoder().AppendDecode(nil, v.Str); err != nil {
			return pinSeq
		}
	}
	enc, o := pol.encode(c.s.metrics, nil, orig)
	if o != codec.Compressed {
		return pinSeq
	}
	w := c.casStore("EXEC", key, v.Str, enc) // 0: another client changed the key; its value stands
	pinSeq = max(pinSeq, w.pinSeq)
	w.release()
	return pinSeq
}
