package abuse

import (
	"bytes"
	"net"
	"testing"
)

func TestTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows [][]string
		want string
	}{
		{"aligned", [][]string{{"what", "p99"}, {"PING through the proxy", "1.0 ms"}, {"GET", "12.5 ms"}},
			"  what                    p99\n" +
				"  PING through the proxy  1.0 ms\n" +
				"  GET                     12.5 ms\n"},
		{"header only", [][]string{{"a", "b"}}, "  a  b\n"},
		{"short row, no trailing spaces", [][]string{{"a", "b", "c"}, {"long cell"}, {"x", "", "z"}},
			"  a          b  c\n" +
				"  long cell\n" +
				"  x             z\n"},
		{"wide characters count once", [][]string{{"é", "x"}, {"ab", "y"}}, "  é   x\n  ab  y\n"},
	} {
		tb := newTable(tc.rows[0]...)
		for _, r := range tc.rows[1:] {
			tb.add(r...)
		}
		var out bytes.Buffer
		tb.writeTo(&out)
		if out.String() != tc.want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.name, out.String(), tc.want)
		}
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"+OK", 40, `"+OK"`},
		{"\x16\xa9 bytes", 40, `"\x16\xa9 bytes"`},
		{"-ERR Protocol error: too big inline request", 20, `"-ERR Protocol e..."`},
		{"", 10, `""`},
	} {
		got := clip(tc.in, tc.n)
		if got != tc.want || len(got) > tc.n {
			t.Errorf("clip(%q, %d) = %s, want %s", tc.in, tc.n, got, tc.want)
		}
	}
}

// TestSendHostile: the watcher tells a server that answers and closes
// from one that keeps the connection (after hostileWatch). The server is
// a plain listener: what is tested is the watching.
func TestSendHostile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply string
		close bool
		want  string
	}{
		{"closes", "-ERR Protocol error: invalid multibulk length\r\n", true, `"-ERR Protocol error: invalid multib...", closed`},
		{"keeps", "+FULLRESYNC\r\n\n", false, `"+FULLRESYNC", open`},
		{"closes silently", "", true, "no reply, closed"},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			c.Read(make([]byte, 64))
			c.Write([]byte(tc.reply))
			if !tc.close {
				c.Read(make([]byte, 64)) // until the watcher closes
			}
		}()
		o, err := sendHostile(ln.Addr().String(), []byte("*4294967296\r\n"))
		ln.Close()
		<-done
		if err != nil || o.String() != tc.want {
			t.Errorf("%s: %s, %v; want %s", tc.name, o, err, tc.want)
		}
	}
}
