package codec

// Numeric reports whether Redis could read b as a number: whether C's
// strtod, which Redis uses for SORT's scores and weights, would consume all
// of b. That is optional leading white space, an optional sign, then a
// decimal number with an optional exponent, a hexadecimal one (0x...) with
// an optional binary exponent, or inf, infinity or nan (with or without a
// parenthesized suffix; Redis rejects NaN itself, but the value stays a
// word Redis and scripts may read).
//
// The write policy stores such values raw: a compressed number would no
// longer sort as one (SORT, SORT BY weight_*) or convert in a script
// (tonumber). Numbers are short, so the rule costs nothing in memory; it
// matters only for long digit strings that would otherwise compress.
func Numeric(b []byte) bool {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		i++
	}
	rest := b[i:]
	switch {
	case len(rest) == 0:
		return false
	case equalFold(rest, "inf"), equalFold(rest, "infinity"), equalFold(rest, "nan"):
		return true
	case len(rest) > 4 && equalFold(rest[:4], "nan(") && rest[len(rest)-1] == ')':
		for _, c := range rest[4 : len(rest)-1] {
			if !isAlnum(c) && c != '_' {
				return false
			}
		}
		return true
	case len(rest) > 2 && rest[0] == '0' && (rest[1] == 'x' || rest[1] == 'X'):
		if hexNumber(rest[2:]) {
			return true
		}
	}
	return decimalNumber(rest)
}

// decimalNumber reports whether b is digits[.digits][e[sign]digits] with at
// least one digit before the exponent.
func decimalNumber(b []byte) bool {
	i, digits := mantissa(b, isDigit)
	if digits == 0 {
		return false
	}
	return exponent(b[i:], 'e')
}

// hexNumber reports whether b (after 0x) is hexdigits[.hexdigits][p[sign]digits]
// with at least one hex digit before the exponent.
func hexNumber(b []byte) bool {
	i, digits := mantissa(b, isHex)
	if digits == 0 {
		return false
	}
	return exponent(b[i:], 'p')
}

// mantissa scans digits with at most one '.', and returns where it stopped
// and how many digits it saw.
func mantissa(b []byte, digit func(byte) bool) (i, digits int) {
	dot := false
	for ; i < len(b); i++ {
		switch c := b[i]; {
		case digit(c):
			digits++
		case c == '.' && !dot:
			dot = true
		default:
			return i, digits
		}
	}
	return i, digits
}

// exponent reports whether b is empty or an exponent marker (either case)
// followed by an optional sign and at least one decimal digit, and nothing
// more.
func exponent(b []byte, marker byte) bool {
	if len(b) == 0 {
		return true
	}
	if b[0]|0x20 != marker {
		return false
	}
	b = b[1:]
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		b = b[1:]
	}
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

func isSpace(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isHex(c byte) bool   { return isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'f' }
func isAlnum(c byte) bool { return isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'z' }

// equalFold reports whether b is s in any case (s is lower-case ASCII).
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
