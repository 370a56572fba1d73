package resp

import "bytes"

// Value is one RESP value read from a byte slice. It aliases the slice it
// was read from and is valid as long as that slice is.
type Value struct {
	Type Type
	// Str is the payload of a non-aggregate value: the text of simple
	// strings, errors, integers, doubles, big numbers and booleans, the data
	// of bulk strings, bulk errors and verbatim strings (including the
	// "txt:" prefix). Nil for aggregates and nulls.
	Str []byte
	// N is the number of values that follow an aggregate's header (twice
	// the entry count for maps and attributes); -1 for the RESP2 null bulk
	// string and null array.
	N int
	// Raw is the whole encoding of the value, nested values included.
	Raw []byte
	hdr int // length of the header line (and, for blobs, the data)
}

// IsNull reports whether v is a RESP2 null ($-1 or *-1) or a RESP3 null.
func (v Value) IsNull() bool { return v.Type == Null || v.N < 0 }

// Header returns the encoding of v without its nested values: the type
// byte and count line of an aggregate, all of Raw otherwise.
func (v Value) Header() []byte { return v.Raw[:v.hdr] }

// Elements returns an iterator over the values nested directly in v.
func (v Value) Elements() Iter {
	if !v.Type.IsAggregate() || v.N <= 0 {
		return Iter{}
	}
	return Iter{rest: v.Raw[v.hdr:], left: v.N}
}

// Iter walks the elements of an aggregate Value; see Value.Elements.
type Iter struct {
	rest []byte
	left int
}

// Next returns the next element, or false when there is none left.
func (it *Iter) Next() (Value, bool) {
	if it.left <= 0 {
		return Value{}, false
	}
	v, rest, err := ReadValue(it.rest)
	if err != nil { // cannot happen: the aggregate was read whole
		return Value{}, false
	}
	it.rest = rest
	it.left--
	return v, true
}

// Len returns the number of elements not yet returned by Next.
func (it *Iter) Len() int { return it.left }

// maxLine bounds header lines of server replies, like Redis's own client
// (hiredis) does not; 64 KiB is ample for any length or simple string header.
const maxLine = 1 << 20

// readHeader reads the header of one value: its type and line, the
// payload for blobs. It does not descend into aggregates.
func readHeader(b []byte) (v Value, n int, err error) {
	if len(b) == 0 {
		return v, 0, ErrIncomplete
	}
	t := Type(b[0])
	k := kind[b[0]]
	if k == 0 {
		return v, 0, errBadType
	}
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		if len(b) > maxLine {
			return v, 0, errBadLine
		}
		return v, 0, ErrIncomplete
	}
	if nl < 1 || b[nl-1] != '\r' {
		return v, 0, errBadLine
	}
	line := b[1 : nl-1]
	n = nl + 1
	v.Type = t
	switch k {
	case 1:
		v.Str = line
		if t == Null && len(line) != 0 {
			return v, 0, errBadLength
		}
		return v, n, nil
	case 2:
		size, ok := parseInt(line)
		if !ok || size < -1 || (size == -1 && t != BulkString) {
			return v, 0, errBadLength
		}
		if size == -1 {
			v.N = -1
			return v, n, nil
		}
		if int64(len(b)-n) < size+2 {
			return v, 0, ErrIncomplete
		}
		end := n + int(size)
		if b[end] != '\r' || b[end+1] != '\n' {
			return v, 0, errBadLine
		}
		v.Str = b[n:end:end]
		return v, end + 2, nil
	default:
		count, ok := parseInt(line)
		if !ok || count < -1 || (count == -1 && t != Array) || count > 1<<31-1 {
			return v, 0, errBadLength
		}
		if k == 4 && count > 0 {
			count *= 2
		}
		v.N = int(count)
		return v, n, nil
	}
}

// ReadValue reads one complete value from the start of b and returns it with
// the bytes after it. Nesting depth is not limited and costs no stack: the
// reader counts the values still owed instead of recursing. It returns
// ErrIncomplete when b ends inside the value and a *ProtocolError when b is
// not RESP.
func ReadValue(b []byte) (v Value, rest []byte, err error) {
	v, n, err := readHeader(b)
	if err != nil {
		return Value{}, b, err
	}
	v.hdr = n
	if v.Type.IsAggregate() && v.N > 0 {
		owed := v.N
		for owed > 0 {
			e, m, err := readHeader(b[n:])
			if err != nil {
				return Value{}, b, err
			}
			n += m
			owed--
			if e.Type.IsAggregate() && e.N > 0 {
				owed += e.N
			}
		}
	}
	v.Raw = b[:n:n]
	return v, b[n:], nil
}

// ValueLen returns the encoded length of the value at the start of b, with
// the same errors as ReadValue.
func ValueLen(b []byte) (int, error) {
	v, _, err := ReadValue(b)
	return len(v.Raw), err
}

// PendingValueEnd returns, for b holding the start of a bulk string, bulk
// error or verbatim string reply whose data has not all arrived, the length
// b must reach to hold it; otherwise 0 (other types, whose parts are small
// or of unknown total size, and malformed or complete input).
func PendingValueEnd(b []byte) int {
	if len(b) == 0 || (b[0] != byte(BulkString) && b[0] != byte(BulkError) && b[0] != byte(Verbatim)) {
		return 0
	}
	// The header line as readHeader finds it: up to the first '\n', which
	// must follow a '\r'.
	nl := bytes.IndexByte(b, '\n')
	if nl < 1 || b[nl-1] != '\r' {
		return 0
	}
	size, ok := parseInt(b[1 : nl-1])
	if !ok || size < 0 || size > 1<<40 {
		return 0
	}
	if end := int64(nl+1) + size + 2; end > int64(len(b)) {
		return int(end)
	}
	return 0
}
