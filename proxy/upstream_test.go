package proxy

import (
	"bytes"
	"errors"
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/squeeze-kv/squeeze/resp"
)

// TestJoinAttribute: an attribute is read with the value it travels with,
// as that value; when the value is cut, the reader waits for more.
func TestJoinAttribute(t *testing.T) {
	for _, tc := range []struct {
		in, raw string
		typ     resp.Type
		err     error
	}{
		{in: "|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n+OK\r\n", raw: "|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n", typ: resp.BulkString},
		{in: "|1\r\n+ttl\r\n:3\r\n*1\r\n:1\r\n", raw: "|1\r\n+ttl\r\n:3\r\n*1\r\n:1\r\n", typ: resp.Array},
		{in: "|1\r\n+ttl\r\n:3\r\n$1\r\n", err: resp.ErrIncomplete},
		{in: "|1\r\n+ttl\r\n:3\r\n", err: resp.ErrIncomplete},
	} {
		b := []byte(tc.in)
		v, _, err := resp.ReadValue(b)
		if err != nil || v.Type != resp.Attribute {
			t.Fatalf("%q: not an attribute: %v", tc.in, err)
		}
		attr := string(v.Raw)
		err = joinAttribute(&v, b)
		if tc.err != nil {
			if !errors.Is(err, tc.err) || string(v.Raw) != attr || v.Type != resp.Attribute {
				t.Errorf("joinAttribute of %q: error %v, v %q; want %v, v unchanged", tc.in, err, v.Raw, tc.err)
			}
			continue
		}
		if err != nil || string(v.Raw) != tc.raw || v.Type != tc.typ {
			t.Errorf("joinAttribute of %q = %q of type %q, %v; want %q of type %q", tc.in, v.Raw, v.Type, err, tc.raw, tc.typ)
		}
	}
}

// take takes the reply that begins what in holds, as readLoop does.
func (in *replyBuf) take(t *testing.T) (resp.Value, error) {
	t.Helper()
	v, _, err := resp.ReadValue(in.pending())
	if err == nil {
		in.start += len(v.Raw)
	}
	return v, err
}

// TestReplyBuf_Claim: the reader takes whole replies one by one, each
// copied into its call's buffer, and leaves a cut one pending.
func TestReplyBuf_Claim(t *testing.T) {
	in := replyBuf{buf: append(make([]byte, 0, upReadSize), "+OK\r\n$3\r\nabc\r\n$10\r\nab"...)}
	var dst []byte
	for _, want := range []string{"+OK\r\n", "$3\r\nabc\r\n"} {
		v, err := in.take(t)
		if err != nil || string(v.Raw) != want {
			t.Fatalf("take = %q, %v; want %q", v.Raw, err, want)
		}
		dst = in.claim(dst, len(v.Raw))
		if string(dst) != want || &dst[0] == &in.buf[in.start-len(want)] {
			t.Fatalf("claim = %q, want a copy of %q", dst, want)
		}
	}
	if string(in.pending()) != "$10\r\nab" {
		t.Fatalf("pending = %q", in.pending())
	}
}

// TestReplyBuf_ClaimHandsOver: a large reply is the read buffer it lies
// in, with the room after it; the reader goes on in a new buffer with what
// followed.
func TestReplyBuf_ClaimHandsOver(t *testing.T) {
	big := resp.AppendBulk(nil, bytes.Repeat([]byte("x"), handOverReply))
	buf := append(append(make([]byte, 0, 2*len(big)), big...), "+OK\r\n$2"...)
	in := replyBuf{buf: buf}
	v, err := in.take(t)
	if err != nil || len(v.Raw) != len(big) {
		t.Fatalf("take: %d bytes, %v", len(v.Raw), err)
	}
	reply := in.claim(make([]byte, 0, 16), len(v.Raw))
	if &reply[0] != &buf[0] || len(reply) != len(big) || cap(reply) != cap(buf) {
		t.Fatalf("claim: not the read buffer (len %d, cap %d of %d)", len(reply), cap(reply), cap(buf))
	}
	if string(in.buf) != "+OK\r\n$2" || in.start != 0 || cap(in.buf) != upReadSize || &in.buf[0] == &buf[len(big)] {
		t.Fatalf("after claim: %q at %d, cap %d", in.buf, in.start, cap(in.buf))
	}
}

// TestReplyBuf_MakeRoom: before a read, what is pending moves to the
// front; a full buffer grows, to the end of a large bulk string at once;
// an empty private buffer that grew goes back to the usual size, a shared
// one keeps its size.
func TestReplyBuf_MakeRoom(t *testing.T) {
	in := replyBuf{buf: append(make([]byte, 0, 64), "+OK\r\n$5\r\nab"...), start: 5}
	in.makeRoom(false)
	if string(in.buf) != "$5\r\nab" || in.start != 0 || cap(in.buf) != 64 {
		t.Fatalf("compacted: %q at %d, cap %d", in.buf, in.start, cap(in.buf))
	}

	in = replyBuf{buf: append(make([]byte, 0, 8), "*2\r\n:1\r\n"...)}
	in.makeRoom(false)
	if string(in.buf) != "*2\r\n:1\r\n" || cap(in.buf) <= 8 {
		t.Fatalf("full buffer: %q, cap %d", in.buf, cap(in.buf))
	}
	const size = 1 << 20
	head := "$" + strconv.Itoa(size) + "\r\n"
	in = replyBuf{buf: append(make([]byte, 0, len(head)), head...)}
	in.makeRoom(false)
	if cap(in.buf) < len(head)+size+2 {
		t.Fatalf("full buffer with a bulk string of %d bytes: cap %d", size, cap(in.buf))
	}

	for _, private := range []bool{true, false} {
		in = replyBuf{buf: make([]byte, 0, 4*upReadSize)}
		in.makeRoom(private)
		if want := map[bool]int{true: upReadSize, false: 4 * upReadSize}[private]; cap(in.buf) != want {
			t.Errorf("empty buffer, private %v: cap %d, want %d", private, cap(in.buf), want)
		}
	}
}

// TestReplyBuf_Reset: an emptied buffer starts over; one that grew past
// 1 MiB goes back to the usual size.
func TestReplyBuf_Reset(t *testing.T) {
	for _, size := range []int{upReadSize, 1 << 20, 2 << 20} {
		in := replyBuf{buf: append(make([]byte, 0, size), "+OK\r\n"...), start: 5}
		in.reset()
		want := size
		if size > 1<<20 {
			want = upReadSize
		}
		if len(in.buf) != 0 || in.start != 0 || cap(in.buf) != want {
			t.Errorf("reset of %d bytes: len %d, start %d, cap %d, want cap %d", size, len(in.buf), in.start, cap(in.buf), want)
		}
	}
}

// TestReplyBuf_ReadFrom: a read lands after what the buffer holds.
func TestReplyBuf_ReadFrom(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go b.Write([]byte(":1\r\n"))
	in := replyBuf{buf: append(make([]byte, 0, 64), "$3\r\n"...)}
	if n, err := in.readFrom(a); n != 4 || err != nil || string(in.buf) != "$3\r\n:1\r\n" {
		t.Fatalf("readFrom: %d, %v, buffer %q", n, err, in.buf)
	}
}

// TestUpConn_NextCall: the reply that comes next answers the call
// passReply took while it arrived, then the calls in flight in order.
func TestUpConn_NextCall(t *testing.T) {
	var c upConn
	a, b, d := &call{cmd: "A"}, &call{cmd: "B"}, &call{cmd: "D"}
	c.inflight = []*call{a, b}
	c.taken = d
	for _, want := range []*call{d, a, b, nil} {
		if got := c.nextCall(); got != want {
			t.Fatalf("nextCall = %v, want %v", got, want)
		}
	}
}

// TestUpConn_Pushed: on a private connection, push messages and relayed
// traffic go to onPush, after the calls completed, and relay mode follows
// the subscription counts; replies to calls do not.
func TestUpConn_Pushed(t *testing.T) {
	value := func(s string) *resp.Value {
		v, _, err := resp.ReadValue([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	var got []string
	var seqs []uint64
	c := upConn{onPush: func(msg []byte, seq uint64) { got, seqs = append(got, string(msg)), append(seqs, seq) }}
	c.completed = 3
	push := ">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nx\r\n"
	if !c.pushed(value(push)) || !slices.Equal(got, []string{push}) || seqs[0] != 3 {
		t.Fatalf("push message: %q at %v", got, seqs)
	}
	if c.pushed(value("+OK\r\n")) {
		t.Fatal("a reply outside relay mode went to onPush")
	}
	c.relay.Store(true)
	c.subs = 1
	msg := "*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nx\r\n"
	unsub := "*3\r\n$11\r\nunsubscribe\r\n$1\r\nc\r\n:0\r\n"
	if !c.pushed(value(msg)) || !c.pushed(value(unsub)) || len(got) != 3 || got[2] != unsub {
		t.Fatalf("relayed: %q", got)
	}
	if c.relayMode() || c.relayEnds.Load() != 1 {
		t.Fatal("relay mode did not end with the last unsubscribe")
	}
	c.relay.Store(true)
	c.inflight = []*call{{cmd: "PING"}}
	if c.pushed(value("+PONG\r\n")) {
		t.Fatal("the reply of a pending call was relayed")
	}
}
