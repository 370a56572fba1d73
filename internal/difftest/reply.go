package difftest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
)

// Reply is one RESP2 or RESP3 reply as a tree. Type is the RESP type byte;
// Str holds the payload of simple, bulk, number and error types; Elems the
// children of aggregates (maps and attributes as key, value, key, value).
type Reply struct {
	Type  byte
	Str   string
	Null  bool
	Elems []*Reply
}

// maxBulk bounds what the reader accepts, so that a broken peer cannot make
// the test allocate without bound.
const maxBulk = 64 << 20

// ReadReply reads one reply from r. Redis's replies are trusted here but
// still bounded.
func ReadReply(r *bufio.Reader) (*Reply, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("malformed reply line %q", line)
	}
	t, body := line[0], string(line[1:len(line)-2])
	rep := &Reply{Type: t}
	switch t {
	case '+', '-', ':', ',', '#', '(':
		rep.Str = body
	case '_':
		rep.Null = true
	case '$', '=', '!':
		n, err := strconv.Atoi(body)
		if err != nil || n > maxBulk {
			return nil, fmt.Errorf("bad bulk length %q", body)
		}
		if n < 0 {
			rep.Null = true
			return rep, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		rep.Str = string(buf[:n])
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(body)
		if err != nil || n > 1<<24 {
			return nil, fmt.Errorf("bad aggregate length %q", body)
		}
		if n < 0 {
			rep.Null = true
			return rep, nil
		}
		if t == '%' || t == '|' {
			n *= 2
		}
		rep.Elems = make([]*Reply, n)
		for i := range rep.Elems {
			if rep.Elems[i], err = ReadReply(r); err != nil {
				return nil, err
			}
		}
		if t == '|' { // an attribute precedes the reply it annotates
			next, err := ReadReply(r)
			if err != nil {
				return nil, err
			}
			next.Elems = append([]*Reply{rep}, next.Elems...)
			return next, nil
		}
	default:
		return nil, fmt.Errorf("unknown reply type %q", t)
	}
	return rep, nil
}

// String renders the reply compactly for diffs; long strings are abridged
// with their length.
func (r *Reply) String() string {
	var b bytes.Buffer
	r.render(&b)
	return b.String()
}

func (r *Reply) render(b *bytes.Buffer) {
	b.WriteByte(r.Type)
	if r.Null {
		b.WriteString("nil")
		return
	}
	if r.Elems == nil && r.Type != '*' && r.Type != '~' && r.Type != '%' && r.Type != '>' {
		if len(r.Str) > 80 {
			fmt.Fprintf(b, "%q...(%d bytes, crc %08x)", r.Str[:40], len(r.Str), crc(r.Str))
		} else {
			fmt.Fprintf(b, "%q", r.Str)
		}
		return
	}
	b.WriteByte('[')
	for i, e := range r.Elems {
		if i > 0 {
			b.WriteByte(' ')
		}
		e.render(b)
	}
	b.WriteByte(']')
}

func crc(s string) uint32 {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// Equal reports whether two replies are identical.
func Equal(a, b *Reply) bool {
	if a.Type != b.Type || a.Null != b.Null || a.Str != b.Str || len(a.Elems) != len(b.Elems) {
		return false
	}
	for i := range a.Elems {
		if !Equal(a.Elems[i], b.Elems[i]) {
			return false
		}
	}
	return true
}

// sortElems orders an aggregate's elements, in pairs when pairs is true:
// for replies whose order Redis does not define (HGETALL, HKEYS, SMEMBERS),
// which depends on the internal encoding and so on the stored value sizes.
func (r *Reply) sortElems(pairs bool) {
	if r.Null || len(r.Elems) < 2 {
		return
	}
	if !pairs || len(r.Elems)%2 != 0 {
		sort.SliceStable(r.Elems, func(i, j int) bool { return r.Elems[i].String() < r.Elems[j].String() })
		return
	}
	type pair struct{ k, v *Reply }
	ps := make([]pair, len(r.Elems)/2)
	for i := range ps {
		ps[i] = pair{r.Elems[2*i], r.Elems[2*i+1]}
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].k.String() < ps[j].k.String() })
	for i, p := range ps {
		r.Elems[2*i], r.Elems[2*i+1] = p.k, p.v
	}
}
