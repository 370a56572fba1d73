package resp

import "strconv"

// AppendBulk appends b as a bulk string.
func AppendBulk(dst, b []byte) []byte {
	dst = AppendHeader(dst, BulkString, len(b))
	dst = append(dst, b...)
	return append(dst, '\r', '\n')
}

// AppendBulkString appends s as a bulk string.
func AppendBulkString(dst []byte, s string) []byte {
	dst = AppendHeader(dst, BulkString, len(s))
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// AppendHeader appends a type byte and a length or count line: "*3\r\n",
// "$5\r\n". For maps and attributes n is the number of entries (pairs).
func AppendHeader(dst []byte, t Type, n int) []byte {
	// Most headers count fewer than 100 (the arguments of a command, small
	// values): written without a call to strconv.
	switch {
	case 0 <= n && n < 10:
		return append(dst, byte(t), byte('0'+n), '\r', '\n')
	case 10 <= n && n < 100:
		return append(dst, byte(t), byte('0'+n/10), byte('0'+n%10), '\r', '\n')
	}
	dst = append(dst, byte(t))
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

// AppendArray appends the header of an array of n elements.
func AppendArray(dst []byte, n int) []byte { return AppendHeader(dst, Array, n) }

// AppendInt appends an integer reply.
func AppendInt(dst []byte, n int64) []byte {
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, '\r', '\n')
}

// AppendSimple appends a simple string; s must not contain CR or LF.
func AppendSimple(dst []byte, s string) []byte {
	dst = append(dst, '+')
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// AppendError appends an error reply. msg should start with an error code
// such as "ERR "; CR and LF in msg are replaced by spaces, as Redis does.
func AppendError(dst []byte, msg string) []byte {
	dst = append(dst, '-')
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		dst = append(dst, c)
	}
	return append(dst, '\r', '\n')
}

// AppendNullBulk appends the RESP2 null bulk string "$-1\r\n"; RESP3
// clients accept it too, but AppendNull is their native form.
func AppendNullBulk(dst []byte) []byte { return append(dst, "$-1\r\n"...) }

// AppendNull appends the RESP3 null "_\r\n".
func AppendNull(dst []byte) []byte { return append(dst, "_\r\n"...) }

// AppendCommand appends a command as a multibulk array of bulk strings.
func AppendCommand(dst []byte, args ...[]byte) []byte {
	dst = AppendArray(dst, len(args))
	for _, a := range args {
		dst = AppendBulk(dst, a)
	}
	return dst
}
