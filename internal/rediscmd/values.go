package rediscmd

import (
	"bytes"

	"github.com/squeeze-kv/squeeze/resp"
)

// Values says which arguments of a command are values to compress.
type Values uint8

const (
	ValuesNone      Values = iota
	ValueAt2               // SET k v, SETNX, GETSET
	ValueAt3               // SETEX k s v, PSETEX, HSETNX k f v, LSET k i v, LREM k n v
	ValuesEvery2           // MSET k v k v ...: 2, 4, 6 ...
	ValuesEvery2At3        // HSET k f v f v ...: 3, 5, 7 ...
	ValuesFrom2            // LPUSH k v v ...
	ValuesLinsert          // LINSERT k BEFORE|AFTER pivot element: 3, 4
	ValueLpos              // LPOS k element ...: 2
	ValuesXadd             // XADD k [options] id f v f v ...
	ValuesHsetex           // HSETEX k [options] FIELDS n f v f v ...
	ValuesMsetex           // MSETEX n k v k v ... [options]: values up to the options
)

// Find returns where the values to compress sit among args (args[0] is
// the command's name): every step-th argument from first, before end; step
// 0 when there are none. A command whose options it cannot read (a newer
// server's, or a syntax error) has none: the server then stores what it is
// sent, or answers its own error.
func (v Values) Find(args [][]byte) (first, step, end int) {
	switch v {
	case ValueAt2:
		if len(args) > 2 {
			return 2, len(args), len(args) // only index 2
		}
	case ValueAt3:
		if len(args) > 3 {
			return 3, len(args), len(args)
		}
	case ValuesEvery2:
		return 2, 2, len(args)
	case ValuesEvery2At3:
		return 3, 2, len(args)
	case ValuesFrom2:
		return 2, 1, len(args)
	case ValuesLinsert:
		return 3, 1, len(args) // pivot and element
	case ValueLpos:
		if len(args) > 2 {
			return 2, len(args), len(args)
		}
	case ValuesXadd:
		if i := xaddID(args); i > 0 {
			return i + 2, 2, len(args) // fields from i+1, values from i+2
		}
	case ValuesHsetex:
		if i := hsetexFields(args); i > 0 {
			return i + 3, 2, len(args) // the count at i+1, fields from i+2
		}
	case ValuesMsetex:
		// MSETEX numkeys key value ... [NX|XX] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]
		// (Redis 8.4, Valkey 9.1): the values of the numkeys pairs.
		if len(args) > 1 {
			if n, ok := resp.ParseInt(args[1]); ok && n > 0 && n <= int64(len(args)-2)/2 {
				return 3, 2, 2 + 2*int(n)
			}
		}
	}
	return 0, 0, 0
}

// Paired reports whether the command takes key, value pairs (MSET): each
// value belongs to the key before it, not to the command's first key.
func (v Values) Paired() bool { return v == ValuesEvery2 || v == ValuesMsetex }

// KeyOf returns the key that the value at args[i] is stored under.
func (v Values) KeyOf(args [][]byte, i int) []byte {
	if v.Paired() {
		return args[i-1]
	}
	return args[1]
}

// xaddID returns the position of the entry id in XADD args, 0 when an
// option is one it does not know.
//
// XADD key [NOMKSTREAM] [KEEPREF|DELREF|ACKED] [IDMPAUTO pid|IDMP pid iid]
// [MAXLEN|MINID [=|~] threshold [LIMIT count]] id field value ...
// (KEEPREF, DELREF and ACKED are Redis 8.2's, IDMP Redis 8.6's.)
func xaddID(args [][]byte) int {
	for i := 2; i < len(args); {
		a := args[i]
		switch {
		case Is(a, "NOMKSTREAM"), Is(a, "KEEPREF"), Is(a, "DELREF"), Is(a, "ACKED"):
			i++
		case Is(a, "IDMPAUTO"):
			i += 2
		case Is(a, "IDMP"):
			i += 3
		case Is(a, "MAXLEN"), Is(a, "MINID"):
			i++
			if i < len(args) && (bytes.Equal(args[i], []byte("=")) || bytes.Equal(args[i], []byte("~"))) {
				i++
			}
			i++
		case Is(a, "LIMIT"):
			i += 2
		case isEntryID(a):
			return i
		default:
			return 0 // an option this table does not know: guess nothing
		}
	}
	return 0
}

// isEntryID reports whether a is an entry id XADD takes: "*", "ms",
// "ms-seq" or "ms-*". No XADD option begins with "*" or a digit.
func isEntryID(a []byte) bool {
	return len(a) > 0 && (a[0] == '*' && len(a) == 1 || a[0] >= '0' && a[0] <= '9')
}

// hsetexFields returns the position of FIELDS in HSETEX args, 0 when
// another word comes first (a syntax error, Redis's to answer).
//
// HSETEX key [NX|XX] [FNX|FXX] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL] FIELDS n
// field value ... (NX and XX, on the key, are Valkey 9's.)
func hsetexFields(args [][]byte) int {
	for i := 2; i < len(args); i++ {
		switch a := args[i]; {
		case Is(a, "NX"), Is(a, "XX"), Is(a, "FNX"), Is(a, "FXX"), Is(a, "KEEPTTL"):
		case Is(a, "EX"), Is(a, "PX"), Is(a, "EXAT"), Is(a, "PXAT"):
			i++ // the time, a number
		case Is(a, "FIELDS"):
			return i
		default:
			return 0
		}
	}
	return 0
}
