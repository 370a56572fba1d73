package resp

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestReadCommand(t *testing.T) {
	tests := []struct {
		name string
		in   string
		args []string
		n    int
		err  error
	}{
		{"multibulk", "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", []string{"GET", "k"}, 20, nil},
		{"multibulk pipelined", "*1\r\n$4\r\nPING\r\n*1\r\n", []string{"PING"}, 14, nil},
		{"empty bulk", "*2\r\n$3\r\nSET\r\n$0\r\n\r\n", []string{"SET", ""}, 19, nil},
		{"binary bulk", "*1\r\n$4\r\n\r\n\x00\xff\r\n", []string{"\r\n\x00\xff"}, 14, nil},
		{"zero count", "*0\r\n", nil, 4, nil},
		{"negative count", "*-1\r\n", nil, 5, nil},
		{"unchecked trailer", "*1\r\n$1\r\naXY", []string{"a"}, 11, nil},
		{"incomplete count", "*2", nil, 0, ErrIncomplete},
		{"incomplete cr", "*2\r", nil, 0, ErrIncomplete},
		{"incomplete bulk", "*1\r\n$5\r\nab", nil, 0, ErrIncomplete},
		{"incomplete bulk trailer", "*1\r\n$2\r\nab\r", nil, 0, ErrIncomplete},
		{"bad count", "*x\r\n", nil, 0, ErrInvalidMultibulkLength},
		{"huge count", "*4294967296\r\n", nil, 0, ErrInvalidMultibulkLength},
		{"plus count", "*+1\r\n", nil, 0, ErrInvalidMultibulkLength},
		{"not dollar", "*1\r\n:1\r\n", nil, 0, expectedDollar(':')},
		{"bad bulk len", "*1\r\n$x\r\n", nil, 0, ErrInvalidBulkLength},
		{"negative bulk len", "*1\r\n$-1\r\n", nil, 0, ErrInvalidBulkLength},
		{"too big bulk len", "*1\r\n$536870913\r\n", nil, 0, ErrInvalidBulkLength},
		{"too big count line", "*" + strings.Repeat("1", InlineMax+1), nil, 0, ErrTooBigMbulkCount},
		{"too big bulk line", "*1\r\n$" + strings.Repeat("1", InlineMax+1), nil, 0, ErrTooBigBulkCount},
		{"inline", "SET k v\r\n", []string{"SET", "k", "v"}, 9, nil},
		{"inline lf", "PING\n", []string{"PING"}, 5, nil},
		{"inline spaces", "  GET \t k  \r\n", []string{"GET", "k"}, 13, nil},
		{"inline empty", "\r\n", nil, 2, nil},
		{"inline double quotes", `SET "a b" "\x41\n\"\z"` + "\r\n", []string{"SET", "a b", "A\n\"z"}, 24, nil},
		{"inline single quotes", `SET 'it\'s' '\n'` + "\n", []string{"SET", "it's", `\n`}, 17, nil},
		{"inline glued quote", `SET a"b c"` + "\n", []string{"SET", "ab c"}, 11, nil},
		{"inline nul ends", "GET k\x00junk\n", []string{"GET", "k"}, 11, nil},
		{"inline unbalanced", "SET \"a\n", nil, 0, ErrUnbalancedQuotes},
		{"inline quote then text", "SET \"a\"b\n", nil, 0, ErrUnbalancedQuotes},
		{"inline single unbalanced", "SET 'a\n", nil, 0, ErrUnbalancedQuotes},
		{"inline incomplete", "GET k", nil, 0, ErrIncomplete},
		{"inline too big", strings.Repeat("a", InlineMax+1), nil, 0, ErrTooBigInline},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, n, err := ReadCommand(nil, []byte(tt.in), 0)
			if !sameErr(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if n != tt.n {
				t.Errorf("n = %d, want %d", n, tt.n)
			}
			if len(args) != len(tt.args) {
				t.Fatalf("args = %q, want %q", args, tt.args)
			}
			for i := range args {
				if string(args[i]) != tt.args[i] {
					t.Errorf("arg %d = %q, want %q", i, args[i], tt.args[i])
				}
			}
		})
	}
}

func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return errors.Is(a, b) || a.Error() == b.Error()
}

func TestReadValue(t *testing.T) {
	tests := []struct {
		name string
		in   string
		typ  Type
		str  string
		n    int
		err  error
	}{
		{"simple", "+OK\r\n", SimpleString, "OK", 0, nil},
		{"error", "-ERR x\r\n", Error, "ERR x", 0, nil},
		{"int", ":-12\r\n", Integer, "-12", 0, nil},
		{"bulk", "$3\r\nabc\r\n", BulkString, "abc", 0, nil},
		{"null bulk", "$-1\r\n", BulkString, "", -1, nil},
		{"null array", "*-1\r\n", Array, "", -1, nil},
		{"array", "*2\r\n$1\r\na\r\n*1\r\n:1\r\n", Array, "", 2, nil},
		{"map", "%1\r\n+a\r\n:1\r\n", Map, "", 2, nil},
		{"set", "~1\r\n+a\r\n", Set, "", 1, nil},
		{"push", ">2\r\n+message\r\n$1\r\nx\r\n", Push, "", 2, nil},
		{"attribute", "|1\r\n+ttl\r\n:3\r\n", Attribute, "", 2, nil},
		{"null", "_\r\n", Null, "", 0, nil},
		{"double", ",1.5\r\n", Double, "1.5", 0, nil},
		{"bool", "#t\r\n", Boolean, "t", 0, nil},
		{"bignum", "(12345678901234567890\r\n", BigNumber, "12345678901234567890", 0, nil},
		{"verbatim", "=7\r\ntxt:abc\r\n", Verbatim, "txt:abc", 0, nil},
		{"bulk error", "!3\r\nERR\r\n", BulkError, "ERR", 0, nil},
		{"incomplete", "*2\r\n$1\r\na\r\n", 0, "", 0, ErrIncomplete},
		{"incomplete bulk", "$3\r\nab", 0, "", 0, ErrIncomplete},
		{"bad type", "x\r\n", 0, "", 0, errBadType},
		{"bad length", "$x\r\n", 0, "", 0, errBadLength},
		{"no cr", "+OK\n", 0, "", 0, errBadLine},
		{"bad trailer", "$1\r\naXY", 0, "", 0, errBadLine},
		{"null map", "%-1\r\n", 0, "", 0, errBadLength},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in + "+next\r\n")
			if tt.err != nil {
				in = []byte(tt.in)
			}
			v, rest, err := ReadValue(in)
			if !sameErr(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if v.Type != tt.typ || string(v.Str) != tt.str || v.N != tt.n {
				t.Errorf("got %v %q %d, want %v %q %d", v.Type, v.Str, v.N, tt.typ, tt.str, tt.n)
			}
			if string(v.Raw) != tt.in || string(rest) != "+next\r\n" {
				t.Errorf("raw %q rest %q", v.Raw, rest)
			}
		})
	}
}

func TestValue_Elements(t *testing.T) {
	in := []byte("*3\r\n$1\r\na\r\n*2\r\n:1\r\n:2\r\n%1\r\n+k\r\n$-1\r\n")
	v, _, err := ReadValue(in)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	it := v.Elements()
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		got = append(got, string(e.Raw))
	}
	want := []string{"$1\r\na\r\n", "*2\r\n:1\r\n:2\r\n", "%1\r\n+k\r\n$-1\r\n"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("elements %q, want %q", got, want)
	}
}

func TestReadValue_Deep(t *testing.T) {
	// A million nested arrays must neither overflow the stack nor be slow.
	in := bytes.Repeat([]byte("*1\r\n"), 1<<20)
	in = append(in, ":1\r\n"...)
	v, rest, err := ReadValue(in)
	if err != nil || len(rest) != 0 || len(v.Raw) != len(in) {
		t.Fatalf("deep: err %v rest %d raw %d", err, len(rest), len(v.Raw))
	}
}

func TestAppend(t *testing.T) {
	var b []byte
	b = AppendCommand(b, []byte("SET"), []byte("k"), []byte(""))
	b = AppendInt(b, -5)
	b = AppendSimple(b, "OK")
	b = AppendError(b, "ERR bad\r\nthing")
	b = AppendNullBulk(b)
	b = AppendNull(b)
	b = AppendBulkString(b, "x")
	want := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n:-5\r\n+OK\r\n-ERR bad  thing\r\n$-1\r\n_\r\n$1\r\nx\r\n"
	if string(b) != want {
		t.Fatalf("got %q\nwant %q", b, want)
	}
}

// TestAppendHeader: the short paths for counts under 100 write what
// strconv would, and the others still go through it.
func TestAppendHeader(t *testing.T) {
	for _, typ := range []Type{BulkString, Array, Map} {
		for n := -12; n <= 1200; n++ {
			want := string(byte(typ)) + strconv.Itoa(n) + "\r\n"
			if got := string(AppendHeader([]byte("x"), typ, n)); got != "x"+want {
				t.Fatalf("AppendHeader(%c, %d) = %q, want %q", typ, n, got, "x"+want)
			}
		}
	}
}

func TestAllocs(t *testing.T) {
	cmd := []byte("*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n")
	inline := []byte("SET \"a b\" c\r\n")
	reply := []byte("*2\r\n$3\r\nabc\r\n%1\r\n+k\r\n:1\r\n")
	args := make([][]byte, 0, 8)
	dst := make([]byte, 0, 256)
	n := testing.AllocsPerRun(1000, func() {
		args, _, _ = ReadCommand(args, cmd, 0)
		args, _, _ = ReadCommand(args, append(dst[:0], inline...), 0)
		v, _, _ := ReadValue(reply)
		it := v.Elements()
		for _, ok := it.Next(); ok; _, ok = it.Next() {
		}
		d := AppendCommand(dst[:0], args...)
		d = AppendInt(d, 12345)
		_ = AppendBulk(d, args[0])
	})
	if n != 0 {
		t.Fatalf("%v allocations per run, want 0", n)
	}
}

// FuzzReadValue checks that ReadValue never panics, that what it returns is
// consistent, and that ReadCommand never panics on the same bytes.
func FuzzReadValue(f *testing.F) {
	for _, s := range []string{
		"+OK\r\n", "$3\r\nabc\r\n", "*2\r\n$1\r\na\r\n:1\r\n", "%1\r\n+a\r\n_\r\n", "|1\r\n+a\r\n+b\r\n+c\r\n",
		"*1\r\n$4\r\nPING\r\n", "SET \"a\\x41\" 'b'\r\n", "=7\r\ntxt:abc\r\n", ">1\r\n*-1\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, rest, err := ReadValue(b)
		if err == nil {
			if len(v.Raw)+len(rest) != len(b) {
				t.Fatalf("raw %d + rest %d != %d", len(v.Raw), len(rest), len(b))
			}
			// Re-reading the raw bytes yields the same value.
			v2, r2, err := ReadValue(v.Raw)
			if err != nil || len(r2) != 0 || v2.Type != v.Type || v2.N != v.N {
				t.Fatalf("re-read differs: %v", err)
			}
			// Walking the elements consumes exactly the value.
			var walk func(Value) int
			walk = func(v Value) int {
				n := v.hdr
				it := v.Elements()
				for e, ok := it.Next(); ok; e, ok = it.Next() {
					n += walk(e)
				}
				return n
			}
			if n := walk(v); n != len(v.Raw) {
				t.Fatalf("walk covers %d of %d bytes", n, len(v.Raw))
			}
		}
		// PendingValueEnd only ever asks for more than b holds, and only
		// when the value is incomplete.
		if need := PendingValueEnd(b); need != 0 {
			if _, _, err := ReadValue(b); need <= len(b) || !errors.Is(err, ErrIncomplete) {
				t.Fatalf("PendingValueEnd = %d for %d bytes, ReadValue: %v", need, len(b), err)
			}
		}
		c := append([]byte(nil), b...)
		args, n, err := ReadCommand(nil, c, 1<<20)
		if err == nil && (n <= 0 || n > len(c)) {
			t.Fatalf("ReadCommand consumed %d of %d (args %d)", n, len(c), len(args))
		}
		// PendingBulkEnd only ever asks for more than b holds, and only
		// when the command cannot be read yet.
		if need := PendingBulkEnd(b); need != 0 {
			_, _, err := ReadCommand(nil, append([]byte(nil), b...), 1<<40)
			if need <= len(b) || !errors.Is(err, ErrIncomplete) {
				t.Fatalf("PendingBulkEnd = %d for %d bytes, ReadCommand: %v", need, len(b), err)
			}
		}
		// ReadCommandHead names a pending argument only where ReadCommand
		// cannot read the command yet, the arguments before it are
		// ReadCommand's once the rest arrives, and the pending data lies
		// past b's end.
		if head, count, at, size, ok := ReadCommandHead(nil, b, 1<<20); ok && count <= 1000 {
			if _, _, err := ReadCommand(nil, append([]byte(nil), b...), 1<<20); !errors.Is(err, ErrIncomplete) {
				t.Fatalf("ReadCommandHead found a pending argument, ReadCommand: %v", err)
			}
			if at > len(b) || int64(at)+size+2 <= int64(len(b)) || int64(len(head)) >= count {
				t.Fatalf("ReadCommandHead: %d of %d args, data at %d size %d, %d bytes", len(head), count, at, size, len(b))
			}
			whole := append(append([]byte(nil), b...), make([]byte, int(int64(at)+size+2)-len(b))...)
			for i := int64(len(head)) + 1; i < count; i++ {
				whole = append(whole, "$0\r\n\r\n"...)
			}
			args, n, err := ReadCommand(nil, whole, 1<<20)
			if err != nil || n != len(whole) || int64(len(args)) != count {
				t.Fatalf("completed command: %d args, %d of %d bytes, %v", len(args), n, len(whole), err)
			}
			for i := range head {
				if !bytes.Equal(head[i], args[i]) {
					t.Fatalf("argument %d: head %q, whole %q", i, head[i], args[i])
				}
			}
		}
	})
}

// TestReadCommandHead: a command cut inside a bulk's data gives the
// arguments before it, the count and where that bulk's data starts; cut
// anywhere else, or whole, it gives nothing.
func TestReadCommandHead(t *testing.T) {
	cmd := "*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n0123456789\r\n$2\r\nEX\r\n"
	// Each bulk: where its data starts, its size, the arguments before it.
	bulks := []struct {
		at, size, before int
	}{
		{strings.Index(cmd, "SET"), 3, 0},
		{strings.Index(cmd, "k\r"), 1, 1},
		{strings.Index(cmd, "0123"), 10, 2},
		{strings.Index(cmd, "EX"), 2, 3},
	}
	for n := 0; n <= len(cmd); n++ {
		head, count, dataAt, size, ok := ReadCommandHead(nil, []byte(cmd[:n]), 0)
		want := -1
		for i, b := range bulks {
			if n >= b.at && n < b.at+b.size+2 {
				want = i
			}
		}
		if want < 0 {
			if ok {
				t.Errorf("cut at %d: a pending argument of %d bytes at %d", n, size, dataAt)
			}
			continue
		}
		b := bulks[want]
		if !ok || count != 4 || dataAt != b.at || size != int64(b.size) || len(head) != b.before {
			t.Errorf("cut at %d: %q count %d at %d size %d ok %v; want bulk %d", n, head, count, dataAt, size, ok, want)
		}
		if want == 2 && string(head[1]) != "k" {
			t.Errorf("cut at %d: key %q", n, head[1])
		}
	}
	if args, n, err := ReadBulks(nil, []byte("$2\r\nEX\r\n$2\r\n10\r\nrest"), 2, 0); err != nil || n != 16 || string(args[1]) != "10" {
		t.Errorf("ReadBulks: %q %d %v", args, n, err)
	}
	if _, _, err := ReadBulks(nil, []byte("$2\r\nEX\r\n$2\r\n1"), 2, 0); !errors.Is(err, ErrIncomplete) {
		t.Errorf("ReadBulks of a cut bulk: %v", err)
	}
}

// TestPendingValueEnd: every prefix of a bulk reply that holds its header
// asks for the whole reply; other types and complete replies ask nothing.
func TestPendingValueEnd(t *testing.T) {
	for _, reply := range [][]byte{
		AppendBulk(nil, bytes.Repeat([]byte("v"), 500)),
		[]byte("=15\r\ntxt:Some string\r\n"),
		[]byte("!21\r\nSYNTAX invalid syntax\r\n"),
	} {
		hdr := bytes.Index(reply, []byte("\r\n")) + 2
		for n := 0; n <= len(reply); n++ {
			want := 0
			if n >= hdr && n < len(reply) {
				want = len(reply)
			}
			if got := PendingValueEnd(reply[:n]); got != want {
				t.Fatalf("%.12q... prefix %d of %d: PendingValueEnd = %d, want %d", reply, n, len(reply), got, want)
			}
		}
	}
	for _, b := range []string{"*1\r\n$5\r\nab", "+OK\r\n", "$-1\r\n", "$x\r\n", ":1\r\n"} {
		if got := PendingValueEnd([]byte(b)); got != 0 {
			t.Errorf("PendingValueEnd(%q) = %d, want 0", b, got)
		}
	}
}

// TestPendingBulkEnd: every prefix of a command that ends inside a bulk
// argument asks for exactly the end of that argument.
func TestPendingBulkEnd(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 1000)
	cmd := AppendCommand(nil, []byte("SET"), []byte("key"), big, []byte("EX"), []byte("100"))
	valueEnd := bytes.Index(cmd, big) + len(big) + 2
	exEnd := bytes.Index(cmd, []byte("EX\r\n")) + 4
	for n := 0; n <= len(cmd); n++ {
		got := PendingBulkEnd(cmd[:n])
		_, _, err := ReadCommand(nil, append([]byte(nil), cmd[:n]...), 0)
		var want int
		switch {
		case n == len(cmd) || !errors.Is(err, ErrIncomplete):
			want = 0
		case n >= bytes.Index(cmd, big) && n < valueEnd:
			want = valueEnd // inside the value, or its CRLF
		case n >= exEnd-4 && n < exEnd:
			want = exEnd
		default:
			if got != 0 && (got <= n || got > len(cmd)) {
				t.Fatalf("prefix %d: PendingBulkEnd = %d", n, got)
			}
			continue
		}
		if got != want {
			t.Fatalf("prefix %d of %d: PendingBulkEnd = %d, want %d", n, len(cmd), got, want)
		}
	}
	for _, b := range []string{"", "PING\r\n", "*x\r\n", "*1\r\n+a\r\n", "*1\r\n$-5\r\n", "*1\r\n$3"} {
		if got := PendingBulkEnd([]byte(b)); got != 0 {
			t.Errorf("PendingBulkEnd(%q) = %d, want 0", b, got)
		}
	}
}

// BenchmarkReadCommand parses a pipeline of 16 GETs, as the proxy reads
// them from a client.
//
//	go test ./resp -run '^$' -bench 'Read(Command|Value)' -count 6
func BenchmarkReadCommand(b *testing.B) {
	var in []byte
	for range 16 {
		in = AppendCommand(in, []byte("GET"), []byte("key:000000000042"))
	}
	args := make([][]byte, 0, 8)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		for rest := in; len(rest) > 0; {
			var n int
			var err error
			args, n, err = ReadCommand(args, rest, 0)
			if err != nil {
				b.Fatal(err)
			}
			rest = rest[n:]
		}
	}
}

// BenchmarkReadValue parses 16 bulk replies of 3 bytes, as the proxy reads
// them from Redis.
func BenchmarkReadValue(b *testing.B) {
	var in []byte
	for range 16 {
		in = AppendBulk(in, []byte("xxx"))
	}
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		for rest := in; len(rest) > 0; {
			v, _, err := ReadValue(rest)
			if err != nil {
				b.Fatal(err)
			}
			rest = rest[len(v.Raw):]
		}
	}
}
