package proxy

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/resp"
)

func newTestServer(t testing.TB, opts ...envOpt) *Server {
	enc, err := codec.NewEncoder(codec.DefaultAlgorithm, codec.WithMinSize(0))
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Upstream: "redis://127.0.0.1:1", Encoder: enc}
	for _, o := range opts {
		o(s)
	}
	if err := s.init(); err != nil {
		t.Fatal(err)
	}
	return s
}

func argv(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// TestRewrite_Allocs: parsing, request rewriting with compression (under
// per-prefix rules, with metrics), and reply rewriting with decompression
// allocate nothing in steady state.
func TestRewrite_Allocs(t *testing.T) {
	s := newTestServer(t, func(s *Server) {
		s.Metrics = NewMetrics(prometheus.NewRegistry(), codec.DefaultAlgorithm)
		s.Rules = []Rule{{Prefix: "doc:", Encoder: mustEnc(t, "zstd:1", codec.WithMinSize(0))}, {Prefix: "k", Encoder: mustEnc(t, "lz4")}}
	})
	r := &rewriter{s: s}
	value := []byte(compressible(4096, 1))
	in := resp.AppendCommand(nil, []byte("SET"), []byte("key"), value)
	in = resp.AppendCommand(in, []byte("MSET"), []byte("doc:1"), value, []byte("other"), value)
	in = resp.AppendCommand(in, []byte("HSETEX"), []byte("doc:2"), []byte("FXX"), []byte("EX"), []byte("60"), []byte("FIELDS"), []byte("1"), []byte("f"), value)
	in = resp.AppendCommand(in, []byte("MSETEX"), []byte("2"), []byte("doc:3"), value, []byte("k"), value, []byte("PX"), []byte("1000"))
	frame := s.Encoder.AppendEncode(nil, value)
	replies := map[shape][]byte{
		shapeValue:   resp.AppendBulk(nil, frame),
		shapeValues:  resp.AppendBulk(resp.AppendArray(nil, 2), frame),
		shapePairs:   resp.AppendBulk(resp.AppendBulkString(resp.AppendHeader(nil, resp.Map, 1), "f"), frame),
		shapeEntries: resp.AppendBulk(resp.AppendBulkString(resp.AppendArray(resp.AppendBulkString(resp.AppendArray(resp.AppendArray(nil, 1), 2), "1-1"), 2), "f"), frame),
	}
	replies[shapeValues] = resp.AppendNullBulk(replies[shapeValues])
	args := make([][]byte, 0, 10)
	req := make([]byte, 0, 64<<10)
	out := make([]byte, 0, 64<<10)
	c := newCall()
	c.cmd = "GET"
	c.saveArgs(argv("GET", "key"))
	for sh, reply := range replies {
		c.kind = sh
		c.reply = append(c.reply[:0], reply...)
		if got := r.appendReply(out[:0], c); string(got) == string(reply) || len(got) < len(value) {
			t.Fatalf("shape %d: reply not decoded: %.80q", sh, got)
		}
	}
	n := testing.AllocsPerRun(200, func() {
		req = req[:0]
		for off := 0; off < len(in); {
			var err error
			var m int
			args, m, err = resp.ReadCommand(args, in[off:], 0)
			if err != nil {
				t.Fatal(err)
			}
			off += m
			req = r.appendRequest(req, lookup(args[0]), args)
		}
		for sh, reply := range replies {
			c.kind = sh
			c.reply = append(c.reply[:0], reply...)
			out = r.appendReply(out[:0], c)
		}
	})
	if n != 0 && !raceEnabled {
		t.Fatalf("%v allocations per command, want 0", n)
	}
}

func BenchmarkRewrite(b *testing.B) {
	s := newTestServer(b)
	r := &rewriter{s: s}
	value := []byte(compressible(4096, 1))
	in := resp.AppendCommand(nil, []byte("SET"), []byte("key"), value)
	c := newCall()
	c.kind = shapeValue
	c.reply = resp.AppendBulk(nil, s.Encoder.AppendEncode(nil, value))
	args := make([][]byte, 0, 8)
	var req, out []byte
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		args, _, _ = resp.ReadCommand(args, in, 0)
		req = r.appendRequest(req[:0], lookup(args[0]), args)
		out = r.appendReply(out[:0], c)
	}
}

// FuzzAppendReply rewrites arbitrary replies (and replies with frames and
// corrupt frames spliced in) with every shape: it must never panic, and it
// must return exactly one RESP value.
func FuzzAppendReply(f *testing.F) {
	s := newTestServer(f)
	frame := s.Encoder.AppendEncode(nil, []byte(compressible(300, 1)))
	bad := append([]byte(nil), frame...)
	bad[len(bad)-1] ^= 1
	for _, seed := range [][]byte{
		resp.AppendBulk(nil, frame),
		resp.AppendBulk(resp.AppendArray(nil, 2), frame),
		[]byte("*2\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$-1\r\n_\r\n"),
		[]byte("%1\r\n$1\r\nk\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*0\r\n"),
		[]byte("|1\r\n+a\r\n+b\r\n$1\r\nx\r\n"),
		resp.AppendBulk(resp.AppendArray(nil, 1), bad),
	} {
		f.Add(seed, uint8(0))
	}
	f.Fuzz(func(t *testing.T, b []byte, sh uint8) {
		// Splice a real frame in place of a marker so decoding runs.
		b = []byte(strings.ReplaceAll(string(b), "$4\r\nFRAM\r\n", string(resp.AppendBulk(nil, frame))))
		v, _, err := resp.ReadValue(b)
		if err != nil {
			return
		}
		r := &rewriter{s: s}
		c := newCall()
		defer c.release()
		c.cmd = "GET"
		c.reply = append(c.reply, v.Raw...)
		c.kind = shape(sh % uint8(shapeSniff+1))
		c.saveArgs(argv("GET", "k"))
		out := r.appendReply(nil, c)
		if _, rest, err := resp.ReadValue(out); err != nil || len(rest) != 0 {
			t.Fatalf("shape %d: output is not one value: %v, %d bytes left: %q", c.kind, err, len(rest), out)
		}
	})
}

// FuzzAppendRequest rewrites arbitrary commands (the arguments are the
// fuzz input split at zero bytes, the name one of the commands that carry
// values, or any): the request must be one RESP command with as many
// arguments, each either the client's own bytes or, at a position the
// command's rule names as a value, a frame that decodes to them (and
// never a value that begins with the magic left as it is).
func FuzzAppendRequest(f *testing.F) {
	s := newTestServer(f, func(s *Server) {
		s.Rules = []Rule{{Prefix: "z", Encoder: mustEnc(f, "zstd:1", codec.WithMinSize(0))}}
	})
	dec, err := codec.NewDecoder()
	if err != nil {
		f.Fatal(err)
	}
	var names []string
	for name, info := range commandTable {
		if info.vals != rediscmd.ValuesNone {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	doc := compressible(300, 1)
	for _, seed := range [][]string{
		{"hsetex", "h", "FIELDS", "2", "f", doc, "g", doc},
		{"hsetex", "h", "NX", "FXX", "PX", "100", "FIELDS", "1", "f", doc},
		{"hsetex", "h", "EX", "FIELDS", "FIELDS", "1", "f", doc},
		{"xadd", "s", "MAXLEN", "~", "10", "*", "f", doc},
		{"xadd", "s", "KEEPREF", "IDMP", "p", "i", "*", "f", doc},
		{"xadd", "s", "IDMPAUTO", "p", "ACKED", "1-1", doc, doc},
		{"mset", "a", doc, "z", doc, "b"},
		{"msetex", "2", "a", doc, "z", doc, "EX", "10"},
		{"msetex", "3", "a", doc, "KEEPTTL"},
		{"linsert", "l", "BEFORE", doc, doc},
		{"set", "k", codec.Magic + doc},
	} {
		sel := uint8(slices.Index(names, seed[0]))
		f.Add(sel, []byte(strings.Join(seed[1:], "\x00")))
	}
	f.Fuzz(func(t *testing.T, sel uint8, b []byte) {
		args := [][]byte{nil}
		if len(b) > 0 {
			args = append(args, bytes.Split(b, []byte{0})...)
		}
		if int(sel) < len(names) {
			args[0] = []byte(names[sel])
		} else if len(args) > 1 {
			args = args[1:] // the name is the fuzzer's own
		}
		info := lookup(args[0])
		first, step, end := valueArgs(info.vals, args)
		r := &rewriter{s: s}
		req := r.appendRequest(nil, info, args)
		got, n, err := resp.ReadCommand(nil, req, 0)
		if err != nil || n != len(req) || len(got) != len(args) {
			t.Fatalf("%q: request is not one command of %d arguments: %v, %d of %d bytes, %d arguments", args, len(args), err, n, len(req), len(got))
		}
		for i, a := range got {
			isValue := step != 0 && i >= first && i < end && (i-first)%step == 0
			switch {
			case !isValue && !bytes.Equal(a, args[i]):
				t.Fatalf("%q: argument %d changed, but it is not a value: %q", args, i, a)
			case !isValue:
				continue
			case bytes.Equal(a, args[i]) && bytes.HasPrefix(a, magic):
				t.Fatalf("%q: value %d begins with the magic and is stored as it is, not wrapped", args, i)
			case bytes.Equal(a, args[i]):
				continue // stored raw
			}
			v, err := dec.AppendDecode(nil, a)
			if err != nil || !bytes.Equal(v, args[i]) {
				t.Fatalf("%q: value %d does not decode to the client's bytes: %v", args, i, err)
			}
		}
	})
}

// walkCase is a reply for walk in a template: {V} is a value stored as a
// frame, which walk must decode; {F} is a frame where no value sits (a key,
// a field, an id), which walk must leave as it is; {B} is a frame whose
// header parses but whose data does not decode; {M} is a bulk string that
// only begins with the magic.
type walkCase struct {
	name    string
	sh      shape
	tx      []shape
	reply   string
	wantErr bool
}

// expandWalk returns tmpl with its tokens as walk reads them (in) and as it
// must write them (want).
func expandWalk(tmpl string, value, frame, bad []byte) (in, want []byte) {
	bulk := func(b []byte) string { return string(resp.AppendBulk(nil, b)) }
	junk := bulk(append([]byte(codec.Magic), "not a frame"...))
	in = []byte(strings.NewReplacer("{V}", bulk(frame), "{F}", bulk(frame), "{B}", bulk(bad), "{M}", junk).Replace(tmpl))
	want = []byte(strings.NewReplacer("{V}", bulk(value), "{F}", bulk(frame), "{B}", bulk(bad), "{M}", junk).Replace(tmpl))
	return in, want
}

// walkCases are the shapes of walk, each with the forms of reply it meets.
var walkCases = []walkCase{
	{name: "none", sh: shapeNone, reply: "*2\r\n{F}{F}"},
	{name: "relay", sh: shapeRelay, reply: "{F}"},
	{name: "attribute", sh: shapeValue, reply: "|1\r\n+a\r\n+b\r\n"},
	{name: "value", sh: shapeValue, reply: "{V}"},
	{name: "value/null", sh: shapeValue, reply: "$-1\r\n"},
	{name: "value/count", sh: shapeValue, reply: "*2\r\n{V}{V}"},
	{name: "value/junk", sh: shapeValue, reply: "{M}", wantErr: true},
	{name: "values", sh: shapeValues, reply: "*3\r\n{V}$-1\r\n{V}"},
	{name: "values/empty", sh: shapeValues, reply: "*0\r\n"},
	{name: "values/error", sh: shapeValues, reply: "-ERR no\r\n"},
	{name: "values/bad", sh: shapeValues, reply: "*2\r\n{V}{B}", wantErr: true},
	{name: "pairs", sh: shapePairs, reply: "*4\r\n{F}{V}{F}{V}"},
	{name: "pairs/map", sh: shapePairs, reply: "%1\r\n{F}{V}"},
	{name: "pairs/nested", sh: shapePairs, reply: "*2\r\n*2\r\n{F}{V}*2\r\n{F}{V}"},
	{name: "pairs/null", sh: shapePairs, reply: "*-1\r\n"},
	{name: "keyvalue", sh: shapeKeyValue, reply: "*2\r\n{F}{V}"},
	{name: "keyvalues", sh: shapeKeyValues, reply: "*2\r\n{F}*2\r\n{V}{V}"},
	{name: "scanpairs", sh: shapeScanPairs, reply: "*2\r\n$1\r\n0\r\n*4\r\n{F}{V}{F}{V}"},
	{name: "entries", sh: shapeEntries, reply: "*3\r\n*2\r\n$3\r\n1-1\r\n*2\r\n{F}{V}*-1\r\n$3\r\n1-2\r\n"},
	{name: "entries/empty", sh: shapeEntries, reply: "*0\r\n"},
	{name: "streams", sh: shapeStreams, reply: "*1\r\n*2\r\n{F}*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n{F}{V}"},
	{name: "streams/map", sh: shapeStreams, reply: "%2\r\n{F}*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n{F}{V}$1\r\ns\r\n*0\r\n"},
	{name: "streams/null", sh: shapeStreams, reply: "*-1\r\n"},
	{name: "streampair", sh: shapeStreamPair, reply: "*2\r\n{F}*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n{F}{V}"},
	{name: "autoclaim", sh: shapeAutoClaim, reply: "*3\r\n$3\r\n0-0\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n{F}{V}*1\r\n{F}"},
	{name: "any", sh: shapeAny, reply: "*3\r\n{V}*1\r\n{V}:1\r\n"},
	{name: "any/scalar", sh: shapeAny, reply: "{V}"},
	{name: "any/bad", sh: shapeAny, reply: "*1\r\n{B}", wantErr: true},
	{name: "sniff", sh: shapeSniff, reply: "*4\r\n{V}{B}{M}*1\r\n{V}"},
	{name: "sniff/scalar", sh: shapeSniff, reply: "{B}"},
	{name: "inspect", sh: shapeInspect, reply: "*4\r\n$7\r\nmatches\r\n*0\r\n$3\r\nlen\r\n:0\r\n"},
	{name: "inspect3", sh: shapeInspect3, reply: "*4\r\n$7\r\nmatches\r\n*0\r\n$3\r\nlen\r\n:0\r\n"},
	{name: "exec", sh: shapeExec, tx: []shape{shapeValue, shapeNone, shapePairs}, reply: "*3\r\n{V}{F}*2\r\n{F}{V}"},
	{name: "exec/mismatch", sh: shapeExec, tx: []shape{shapeValue}, reply: "*2\r\n{F}{F}"},
	{name: "exec/aborted", sh: shapeExec, tx: []shape{shapeValue}, reply: "*-1\r\n"},
}

// TestRewrite_WalkShapes: walk decodes the values each shape says a reply
// holds, and only those; what a shape does not reach into goes out as it
// came.
func TestRewrite_WalkShapes(t *testing.T) {
	s := newTestServer(t)
	value := []byte(compressible(300, 1))
	frame := s.Encoder.AppendEncode(nil, value)
	bad := bytes.Clone(frame)
	bad[len(bad)-1] ^= 1
	r := &rewriter{s: s}
	c := newCall()
	c.cmd = "GET"
	c.saveArgs(argv("GET", "k"))
	for _, tc := range walkCases {
		in, want := expandWalk(tc.reply, value, frame, bad)
		if tc.sh == shapeInspect3 {
			want = append([]byte("%2\r\n"), want[4:]...)
		}
		v, rest, err := resp.ReadValue(in)
		if err != nil || len(rest) != 0 {
			t.Fatalf("%s: bad template: %v", tc.name, err)
		}
		got, err := r.walk([]byte("prefix"), v, tc.sh, c, tc.tx)
		if tc.wantErr {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Errorf("%s: error %v, want a DecodeError", tc.name, err)
			}
			continue
		}
		if err != nil || string(got) != "prefix"+string(want) {
			t.Errorf("%s: walk = %.200q, %v\nwant %.200q", tc.name, got, err, "prefix"+string(want))
		}
	}
}

// TestRewrite_WalkExecNamesCommand: a value in EXEC's reply that does not
// decode becomes an error element naming the queued command it answers,
// and the name does not stay for what follows.
func TestRewrite_WalkExecNamesCommand(t *testing.T) {
	s := newTestServer(t)
	value := []byte(compressible(300, 1))
	frame := s.Encoder.AppendEncode(nil, value)
	bad := bytes.Clone(frame)
	bad[len(bad)-1] ^= 1
	in, _ := expandWalk("*2\r\n{B}{V}", value, frame, bad)
	v, _, _ := resp.ReadValue(in)
	c := newCall()
	c.cmd, c.txNames = "EXEC", []string{"HGET", "GET"}
	r := &rewriter{s: s, cur: c, inAgg: true}
	got, err := r.walk(nil, v, shapeExec, c, []shape{shapeValue, shapeValue})
	if err != nil || !strings.HasPrefix(string(got), "*2\r\n-ERR squeeze: HGET: stored value cannot be decoded") || !strings.HasSuffix(string(got), string(resp.AppendBulk(nil, value))) {
		t.Fatalf("walk = %.200q, %v", got, err)
	}
	if r.elemCmd != "" {
		t.Fatalf("elemCmd %q left after EXEC's reply", r.elemCmd)
	}
}

// BenchmarkWalk measures walk on the reply shapes that recurse, with small
// values left raw (the cost of walking itself) and with values stored as
// frames (walking and decoding).
//
//	go test ./proxy -run '^$' -bench Walk -count 6
func BenchmarkWalk(b *testing.B) {
	s := newTestServer(b)
	value := []byte(compressible(300, 1))
	frame := s.Encoder.AppendEncode(nil, value)
	raw := []byte("small")
	for _, bc := range []struct {
		name string
		sh   shape
		tx   []shape
		tmpl string
	}{
		{"values", shapeValues, nil, "*8\r\n" + strings.Repeat("{V}", 8)},
		{"pairs", shapePairs, nil, "*8\r\n" + strings.Repeat("{F}{V}", 4)},
		{"entries", shapeEntries, nil, "*4\r\n" + strings.Repeat("*2\r\n$3\r\n1-1\r\n*4\r\n{F}{V}{F}{V}", 4)},
		{"streams", shapeStreams, nil, "*2\r\n" + strings.Repeat("*2\r\n{F}*2\r\n"+strings.Repeat("*2\r\n$3\r\n1-1\r\n*2\r\n{F}{V}", 2), 2)},
		{"any", shapeAny, nil, "*4\r\n{V}:1\r\n*2\r\n{V}{V}$-1\r\n"},
		{"exec", shapeExec, []shape{shapeValue, shapeValues, shapePairs, shapeNone}, "*4\r\n{V}*2\r\n{V}{V}*2\r\n{F}{V}+OK\r\n"},
	} {
		for _, stored := range []string{"raw", "framed"} {
			val := raw
			if stored == "framed" {
				val = frame
			}
			in, _ := expandWalk(bc.tmpl, nil, val, nil)
			v, _, err := resp.ReadValue(in)
			if err != nil {
				b.Fatal(err)
			}
			c := newCall()
			c.cmd = "GET"
			c.saveArgs(argv("GET", "k"))
			b.Run(bc.name+"/"+stored, func(b *testing.B) {
				r := &rewriter{s: s, cur: c, inAgg: true}
				var out []byte
				b.ReportAllocs()
				for b.Loop() {
					out, err = r.walk(out[:0], v, bc.sh, c, bc.tx)
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestRewrite_Inspected: the reply of an inspect script queued in MULTI
// becomes what the client is owed: the marker of a command that could not
// run there its error, an exact BITFIELD's reply Redis's for the client's
// protocol, LCS IDX's array a map for a RESP3 client, anything else as it
// came.
func TestRewrite_Inspected(t *testing.T) {
	r := &rewriter{s: newTestServer(t)}
	bulk := func(s string) string { return string(resp.AppendBulk(nil, []byte(s))) }
	lcs := "*4\r\n$7\r\nmatches\r\n*0\r\n$3\r\nlen\r\n:0\r\n"
	bitfield := "*3\r\n" + bulk(string(bitfieldMagic)) + "*3\r\n:0\r\n:0\r\n" + bulk("u8") + "$-1\r\n"
	for _, tc := range []struct {
		reply string
		sh    shape
		want  string
	}{
		{"*2\r\n" + bulk(codec.Magic) + ":1\r\n", shapeInspect, "-ERR squeeze: a command queued in MULTI must look inside a compressed value, which only works outside MULTI/EXEC; the other queued commands ran\r\n"},
		{bitfield, shapeInspect, "*2\r\n:0\r\n$-1\r\n"},
		{bitfield, shapeInspect3, "*2\r\n:0\r\n_\r\n"},
		{lcs, shapeInspect, lcs},
		{lcs, shapeInspect3, "%2" + lcs[2:]},
		{":5\r\n", shapeInspect3, ":5\r\n"},
	} {
		v, _, err := resp.ReadValue([]byte(tc.reply))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.inspected([]byte("x"), v, tc.sh); string(got) != "x"+tc.want {
			t.Errorf("inspected(%q, %d) = %q, want %q", tc.reply, tc.sh, got, "x"+tc.want)
		}
	}
}

// TestRewrite_Sniff: in the reply of a command the proxy does not know, a
// frame that decodes is a value; one that does not (cut, corrupt) and a
// string that only begins with the magic stay as they came.
func TestRewrite_Sniff(t *testing.T) {
	s := newTestServer(t)
	value := []byte(compressible(300, 1))
	frame := s.Encoder.AppendEncode(nil, value)
	r := &rewriter{s: s}
	for _, tc := range []struct {
		in   []byte
		want []byte
	}{
		{frame, value},
		{frame[:len(frame)-1], frame[:len(frame)-1]},
		{frame[:len(codec.Magic)+1], frame[:len(codec.Magic)+1]},
		{[]byte("plain"), []byte("plain")},
	} {
		v, _, _ := resp.ReadValue(resp.AppendBulk(nil, tc.in))
		if got := r.sniff([]byte("x"), v, nil); string(got) != "x"+string(resp.AppendBulk(nil, tc.want)) {
			t.Errorf("sniff(%.40q) = %.80q", tc.in, got)
		}
	}
	v, _, _ := resp.ReadValue([]byte(":7\r\n"))
	if got := r.sniff(nil, v, nil); string(got) != ":7\r\n" {
		t.Errorf("sniff(:7) = %q", got)
	}
}
