// Package resp reads and writes the Redis serialization protocol (RESP2 and
// RESP3) on plain byte slices. It does no I/O and, on the paths a proxy runs
// for every command, no allocation: values alias the input slice, and writers
// append to a caller-owned dst.
//
// Two readers cover the two directions of a Redis connection:
//
//   - ReadCommand parses what clients send: multibulk arrays of bulk strings
//     and inline commands, with the same protocol errors redis-server gives.
//   - ReadValue parses what servers send: any RESP2 or RESP3 value, nested to
//     any depth without recursion.
//
// Both return ErrIncomplete when b holds only a prefix of the value; the
// caller reads more bytes and calls again with the longer slice.
package resp

import (
	"errors"
)

// Type is the first byte of a RESP value.
type Type byte

// The RESP2 and RESP3 types.
const (
	SimpleString Type = '+'
	Error        Type = '-'
	Integer      Type = ':'
	BulkString   Type = '$'
	Array        Type = '*'
	Null         Type = '_' // RESP3
	Boolean      Type = '#' // RESP3
	Double       Type = ',' // RESP3
	BigNumber    Type = '(' // RESP3
	BulkError    Type = '!' // RESP3
	Verbatim     Type = '=' // RESP3
	Map          Type = '%' // RESP3
	Set          Type = '~' // RESP3
	Attribute    Type = '|' // RESP3
	Push         Type = '>' // RESP3
)

// String returns the RESP3 specification's name of the type.
func (t Type) String() string {
	switch t {
	case SimpleString:
		return "simple string"
	case Error:
		return "error"
	case Integer:
		return "integer"
	case BulkString:
		return "bulk string"
	case Array:
		return "array"
	case Null:
		return "null"
	case Boolean:
		return "boolean"
	case Double:
		return "double"
	case BigNumber:
		return "big number"
	case BulkError:
		return "bulk error"
	case Verbatim:
		return "verbatim string"
	case Map:
		return "map"
	case Set:
		return "set"
	case Attribute:
		return "attribute"
	case Push:
		return "push"
	}
	return "unknown type " + string(rune(t))
}

// kind classifies type bytes: 0 unknown, 1 line, 2 length-prefixed blob,
// 3 aggregate, 4 aggregate of pairs. A table keeps dispatch branch-free.
var kind = [256]uint8{
	'+': 1, '-': 1, ':': 1, '_': 1, '#': 1, ',': 1, '(': 1,
	'$': 2, '!': 2, '=': 2,
	'*': 3, '~': 3, '>': 3,
	'%': 4, '|': 4,
}

// IsAggregate reports whether values of type t contain other values.
func (t Type) IsAggregate() bool { return kind[t] >= 3 }

// ErrIncomplete is returned when b ends before the value does.
var ErrIncomplete = errors.New("resp: incomplete value")

// ProtocolError is a malformed-input error. Its message is the text a Redis
// server replies with (after "-ERR "), so a proxy can answer exactly as Redis.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "Protocol error: " + e.Msg }

// Protocol errors, worded as redis-server 7 words them.
var (
	ErrInvalidMultibulkLength = &ProtocolError{"invalid multibulk length"}
	ErrInvalidBulkLength      = &ProtocolError{"invalid bulk length"}
	ErrTooBigMbulkCount       = &ProtocolError{"too big mbulk count string"}
	ErrTooBigBulkCount        = &ProtocolError{"too big bulk count string"}
	ErrTooBigInline           = &ProtocolError{"too big inline request"}
	ErrUnbalancedQuotes       = &ProtocolError{"unbalanced quotes in request"}
	errBadType                = &ProtocolError{"invalid type byte"}
	errBadLength              = &ProtocolError{"invalid length"}
	errBadLine                = &ProtocolError{"line not terminated by CRLF"}
)

// expectedDollar returns Redis's error for a multibulk element that is not a
// bulk string.
func expectedDollar(c byte) *ProtocolError {
	return &ProtocolError{"expected '$', got '" + string([]byte{c}) + "'"}
}

// InlineMax is the longest line redis-server accepts before a CRLF, both for
// inline commands and for multibulk and bulk headers (PROTO_INLINE_MAX_SIZE).
const InlineMax = 64 << 10

// DefaultMaxBulk is redis-server's default proto-max-bulk-len (512 MiB).
const DefaultMaxBulk = 512 << 20

// parseInt parses a decimal int64 the way Redis's string2ll does: optional
// minus, no plus, no leading zeros, no spaces. ok is false otherwise.
func parseInt(b []byte) (n int64, ok bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	neg := false
	if b[0] == '-' {
		neg = true
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	if b[0] == '0' && len(b) > 1 {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if u > (1<<64-1-d)/10 {
			return 0, false
		}
		u = u*10 + d
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}

// ParseInt parses b as Redis parses integers (string2ll): an optional minus
// sign and decimal digits, no leading zeros or spaces, within int64.
func ParseInt(b []byte) (int64, bool) { return parseInt(b) }

// indexCRLF returns the index of "\r\n" in b, or -1.
func indexCRLF(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			return i
		}
	}
	return -1
}
