package resp

import "bytes"

// ReadCommand parses one client command from the start of b, as redis-server
// does: a multibulk array of bulk strings when b starts with '*', otherwise an
// inline command (space-separated words up to "\n", with "double" and 'single'
// quoted words).
//
// It appends the arguments to args[:0] and returns them with the number of
// bytes consumed. The arguments alias b; parsing an inline command with
// escapes in quotes rewrites that line of b in place. An empty command (an
// empty inline line or "*0\r\n") returns zero arguments and n > 0: skip it.
//
// It returns ErrIncomplete when b holds a prefix of a valid command, and a
// *ProtocolError with Redis's wording on malformed input; Redis then closes
// the connection. maxBulk is proto-max-bulk-len (0 means DefaultMaxBulk).
func ReadCommand(args [][]byte, b []byte, maxBulk int64) (_ [][]byte, n int, err error) {
	args = args[:0]
	if len(b) == 0 {
		return args, 0, ErrIncomplete
	}
	if maxBulk <= 0 {
		maxBulk = DefaultMaxBulk
	}
	if b[0] != '*' {
		return readInline(args, b)
	}
	// Multibulk count line. Like Redis, look for the first '\r' and skip
	// two bytes without checking the '\n'.
	nl := bytes.IndexByte(b, '\r')
	if nl < 0 || nl+1 >= len(b) {
		if len(b) > InlineMax {
			return args, 0, ErrTooBigMbulkCount
		}
		return args, 0, ErrIncomplete
	}
	count, ok := parseInt(b[1:nl])
	if !ok || count > 1<<31-1 {
		return args, 0, ErrInvalidMultibulkLength
	}
	pos := nl + 2
	if count <= 0 {
		return args, pos, nil
	}
	args, n, err = ReadBulks(args, b[pos:], count, maxBulk)
	if err != nil {
		return args, 0, err
	}
	return args, pos + n, nil
}

// ReadBulks parses count bulk strings from b, the arguments of a multibulk
// command after its count line, appending them to args (slices of b), and
// returns the bytes they take. Its errors are ReadCommand's: ErrIncomplete
// when b ends before the last one.
func ReadBulks(args [][]byte, b []byte, count, maxBulk int64) (_ [][]byte, n int, err error) {
	if maxBulk <= 0 {
		maxBulk = DefaultMaxBulk
	}
	pos := 0
	for i := int64(0); i < count; i++ {
		rest := b[pos:]
		nl := bytes.IndexByte(rest, '\r')
		if nl < 0 || nl+1 >= len(rest) {
			if len(rest) > InlineMax {
				return args, 0, ErrTooBigBulkCount
			}
			return args, 0, ErrIncomplete
		}
		if rest[0] != '$' {
			return args, 0, expectedDollar(rest[0])
		}
		size, ok := parseInt(rest[1:nl])
		if !ok || size < 0 || size > maxBulk {
			return args, 0, ErrInvalidBulkLength
		}
		start := pos + nl + 2
		if int64(len(b)-start) < size+2 {
			return args, 0, ErrIncomplete
		}
		end := start + int(size)
		args = append(args, b[start:end:end])
		pos = end + 2 // Redis skips the two bytes after the data unchecked.
	}
	return args, pos, nil
}

// ReadCommandHead parses the start of a multibulk command of which b holds
// only a part that ends inside the data of one of its bulk arguments: it
// appends the arguments before that one to args and returns the command's
// argument count, the offset in b where the pending argument's data begins
// and its size. ok is false when b holds a whole command, ends within a
// header line, or is not well-formed multibulk input within maxBulk (then
// ReadCommand has the answer). A proxy uses it to pass a large value on
// before the whole of it has arrived.
func ReadCommandHead(args [][]byte, b []byte, maxBulk int64) (_ [][]byte, count int64, dataAt int, size int64, ok bool) {
	args = args[:0]
	if maxBulk <= 0 {
		maxBulk = DefaultMaxBulk
	}
	if len(b) == 0 || b[0] != '*' {
		return args, 0, 0, 0, false
	}
	nl := bytes.IndexByte(b, '\r')
	if nl < 0 || nl+1 >= len(b) {
		return args, 0, 0, 0, false
	}
	count, okc := parseInt(b[1:nl])
	if !okc || count <= 0 || count > 1<<31-1 {
		return args, 0, 0, 0, false
	}
	pos := nl + 2
	for i := int64(0); i < count; i++ {
		rest := b[pos:]
		nl := bytes.IndexByte(rest, '\r')
		if nl < 0 || nl+1 >= len(rest) || rest[0] != '$' {
			return args, 0, 0, 0, false
		}
		size, oks := parseInt(rest[1:nl])
		if !oks || size < 0 || size > maxBulk {
			return args, 0, 0, 0, false
		}
		start := pos + nl + 2
		if int64(len(b)-start) < size+2 {
			return args, count, start, size, true
		}
		end := start + int(size)
		args = append(args, b[start:end:end])
		pos = end + 2
	}
	return args, 0, 0, 0, false
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// readInline parses an inline command like Redis's processInlineBuffer and
// sdssplitargs, unescaping quoted words in place.
func readInline(args [][]byte, b []byte) ([][]byte, int, error) {
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		if len(b) > InlineMax {
			return args, 0, ErrTooBigInline
		}
		return args, 0, ErrIncomplete
	}
	n := nl + 1
	line := b[:nl]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	// sdssplitargs works on a C string: a NUL ends it.
	if i := bytes.IndexByte(line, 0); i >= 0 {
		line = line[:i]
	}
	p := 0
	at := func(i int) byte { // the C string's byte at i, NUL past the end
		if i < len(line) {
			return line[i]
		}
		return 0
	}
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p >= len(line) {
			return args, n, nil
		}
		w := p // write position: unescaped bytes never outrun p
		start := w
		inq, insq := false, false
		for done := false; !done; {
			c := at(p)
			switch {
			case inq:
				if c == '\\' && at(p+1) == 'x' {
					hi, ok1 := hexVal(at(p + 2))
					lo, ok2 := hexVal(at(p + 3))
					if ok1 && ok2 {
						line[w] = hi<<4 | lo
						w++
						p += 3
						break
					}
				}
				if c == '\\' && at(p+1) != 0 {
					p++
					e := line[p]
					switch e {
					case 'n':
						e = '\n'
					case 'r':
						e = '\r'
					case 't':
						e = '\t'
					case 'b':
						e = '\b'
					case 'a':
						e = '\a'
					}
					line[w] = e
					w++
				} else if c == '"' {
					if nx := at(p + 1); nx != 0 && !isSpace(nx) {
						return args, 0, ErrUnbalancedQuotes
					}
					done = true
				} else if c == 0 {
					return args, 0, ErrUnbalancedQuotes
				} else {
					line[w] = c
					w++
				}
			case insq:
				if c == '\\' && at(p+1) == '\'' {
					p++
					line[w] = '\''
					w++
				} else if c == '\'' {
					if nx := at(p + 1); nx != 0 && !isSpace(nx) {
						return args, 0, ErrUnbalancedQuotes
					}
					done = true
				} else if c == 0 {
					return args, 0, ErrUnbalancedQuotes
				} else {
					line[w] = c
					w++
				}
			default:
				switch c {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					line[w] = c
					w++
				}
			}
			if p < len(line) {
				p++
			}
		}
		args = append(args, line[start:w:w])
	}
}

// PendingBulkEnd returns, for b holding the start of a multibulk command that
// ends inside (or just before the data of) one of its bulk arguments, the
// length b must reach to hold that argument and its CRLF; otherwise 0 (b
// holds a whole command, an inline command, malformed input, or ends within
// a header line). The sizes are not checked against any limit: ReadCommand
// does that.
func PendingBulkEnd(b []byte) int {
	if len(b) == 0 || b[0] != '*' {
		return 0
	}
	nl := bytes.IndexByte(b, '\r')
	if nl < 0 || nl+1 >= len(b) {
		return 0
	}
	count, ok := parseInt(b[1:nl])
	if !ok || count <= 0 || count > 1<<31-1 { // as ReadCommand
		return 0
	}
	pos := nl + 2
	for i := int64(0); i < count; i++ {
		rest := b[pos:]
		nl := bytes.IndexByte(rest, '\r')
		if nl < 0 || nl+1 >= len(rest) || rest[0] != '$' {
			return 0
		}
		size, ok := parseInt(rest[1:nl])
		if !ok || size < 0 || size > 1<<40 {
			return 0
		}
		end := int64(pos+nl+2) + size + 2
		if end > int64(len(b)) {
			return int(end)
		}
		pos = int(end)
	}
	return 0
}
