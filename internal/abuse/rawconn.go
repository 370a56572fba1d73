package abuse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/squeeze-kv/squeeze/resp"
)

// reply is one RESP reply as the suite needs it: its type byte, the text
// of a simple string, error or number, the bytes of a bulk string, and the
// elements of an aggregate. A null bulk or array has null set.
type reply struct {
	kind  byte
	text  string
	bulk  []byte
	elems []reply
	null  bool
}

// isError reports whether the reply is an error reply.
func (r reply) isError() bool { return r.kind == '-' || r.kind == '!' }

// conn is a client connection that speaks RESP by hand, so that the suite
// controls exactly what is sent and when it is read.
type conn struct {
	nc  net.Conn
	br  *bufio.Reader
	out []byte
}

// dial connects to addr; rcvbuf > 0 sets the socket's receive buffer
// (SO_RCVBUF) before the connection is made, as a slow client would.
func dial(addr string, timeout time.Duration, rcvbuf int) (*conn, error) {
	d := net.Dialer{Timeout: timeout}
	if rcvbuf > 0 {
		d.Control = setReceiveBuffer(rcvbuf)
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &conn{nc: nc, br: newReader(nc)}, nil
}

// newReader buffers a connection's replies.
func newReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 64<<10) }

func (c *conn) Close() error { return c.nc.Close() }

// send writes commands without reading their replies.
func (c *conn) send(cmds ...[]string) error {
	c.out = c.out[:0]
	for _, cmd := range cmds {
		args := make([][]byte, len(cmd))
		for i, a := range cmd {
			args[i] = []byte(a)
		}
		c.out = resp.AppendCommand(c.out, args...)
	}
	_, err := c.nc.Write(c.out)
	return err
}

// do sends one command and reads its reply within timeout.
func (c *conn) do(timeout time.Duration, args ...string) (reply, error) {
	c.nc.SetDeadline(time.Now().Add(timeout))
	if err := c.send(args); err != nil {
		return reply{}, err
	}
	return c.read()
}

// maxBulk bounds the bulk strings the suite accepts from a server: larger
// than any value it stores (the 400 MiB bomb decoded), smaller than a
// length that would exhaust memory.
const maxBulk = 1 << 30

// maxElems bounds the elements of one aggregate reply.
const maxElems = 1 << 20

// read reads one reply.
func (c *conn) read() (reply, error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return reply{}, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return reply{}, fmt.Errorf("malformed reply line %.40q", line)
	}
	r := reply{kind: line[0], text: string(line[1 : len(line)-2])}
	switch r.kind {
	case '+', '-', ':', ',', '(', '#', '_':
		r.null = r.kind == '_'
		return r, nil
	case '$', '!', '=':
		n, err := strconv.Atoi(r.text)
		if err != nil || n > maxBulk {
			return reply{}, fmt.Errorf("bad bulk length %q", r.text)
		}
		if n < 0 {
			r.null = true
			return r, nil
		}
		r.bulk = make([]byte, n+2)
		if _, err := io.ReadFull(c.br, r.bulk); err != nil {
			return reply{}, err
		}
		r.bulk = r.bulk[:n]
		if r.kind == '!' {
			r.text = string(r.bulk)
		}
		return r, nil
	case '*', '>', '~', '%', '|':
		n, err := strconv.Atoi(r.text)
		if err != nil || n > maxElems {
			return reply{}, fmt.Errorf("bad aggregate length %q", r.text)
		}
		if n < 0 {
			r.null = true
			return r, nil
		}
		if r.kind == '%' || r.kind == '|' {
			n *= 2
		}
		for range n {
			e, err := c.read()
			if err != nil {
				return reply{}, err
			}
			r.elems = append(r.elems, e)
		}
		return r, nil
	}
	return reply{}, fmt.Errorf("unknown reply type %q", r.kind)
}

// errReply turns an error reply into a Go error, and passes other errors.
func errReply(r reply, err error) error {
	if err != nil {
		return err
	}
	if r.isError() {
		return errors.New(r.text)
	}
	return nil
}

// readZeroBulk reads one reply that should be a bulk string of zeros,
// streaming it in 1 MiB pieces instead of holding it: its length, the text
// of an error reply, and whether every byte was zero.
func (c *conn) readZeroBulk() (n int, errText string, zero bool, err error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, "", false, err
	}
	if len(line) < 3 {
		return 0, "", false, fmt.Errorf("malformed reply line %.40q", line)
	}
	text := string(line[1 : len(line)-2])
	switch line[0] {
	case '-':
		return 0, text, false, nil
	case '$':
	default:
		return 0, "", false, fmt.Errorf("want a bulk string, got %.40q", line)
	}
	if n, err = strconv.Atoi(text); err != nil || n > maxBulk {
		return 0, "", false, fmt.Errorf("bad bulk length %q", text)
	}
	if n < 0 {
		return n, "", false, nil
	}
	buf := make([]byte, 1<<20)
	zeros := make([]byte, len(buf))
	zero = true
	for left := n + 2; left > 0; {
		k, err := io.ReadFull(c.br, buf[:min(left, len(buf))])
		left -= k
		piece := buf[:k]
		if left < 2 { // the CRLF's bytes are in this piece
			piece = piece[:max(0, k-(2-left))]
		}
		// Compared whole (vectorised), not byte by byte: a check at a
		// byte a nanosecond took a core for 2.4 GB of bomb replies, and
		// on two CPUs that starved the proxy the suite measures.
		if zero && !bytes.Equal(piece, zeros[:len(piece)]) {
			zero = false
		}
		if err != nil {
			return 0, "", false, err
		}
	}
	return n, "", zero, nil
}
