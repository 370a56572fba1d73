package proxy

import (
	"strings"
	"testing"
)

// TestProxy_BitfieldExact: BITFIELD and BITFIELD_RO replies with fields
// wider than 53 bits (i54..i64, u54..u63) are Redis's exact integers, on a
// plain value, on a compressed one and on a missing key, with every
// OVERFLOW mode, # offsets and a mix of narrow and wide fields; RESP2 and
// RESP3. Before, the script's doubles rounded them (9007199254740993 read
// back as ...992).
func TestProxy_BitfieldExact(t *testing.T) {
	e := startEnv(t)
	steps := [][]string{
		{"BITFIELD", "bf", "SET", "i64", "0", "9007199254740993"},
		{"BITFIELD", "bf", "GET", "i64", "0"},
		{"BITFIELD", "bf", "INCRBY", "i64", "0", "2"},
		{"BITFIELD", "bf", "GET", "i64", "0", "GET", "u63", "0", "GET", "u8", "0", "GET", "i54", "3"},
		{"BITFIELD", "bf", "SET", "i64", "0", "-9223372036854775808", "GET", "i64", "0"},
		{"BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "i64", "0", "-1", "OVERFLOW", "WRAP", "INCRBY", "i64", "0", "-1"},
		{"BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "i64", "0", "-1", "GET", "i64", "0"},
		{"BITFIELD", "bf", "SET", "u63", "#1", "9223372036854775807", "GET", "u63", "#1", "INCRBY", "u63", "#1", "1"},
		{"BITFIELD", "bf", "OVERFLOW", "FAIL", "SET", "u60", "100", "1152921504606846977", "GET", "u60", "100"},
		{"BITFIELD_RO", "bf", "GET", "i64", "0", "GET", "u63", "#1", "GET", "i60", "5"},
		{"BITFIELD", "missing", "GET", "i64", "0", "GET", "u63", "1000"},
		// A compressed value: a document, then 64-bit fields inside it.
		{"SET", "doc", compressible(2000, 4)},
		{"BITFIELD", "doc", "GET", "i64", "0", "GET", "u63", "77", "GET", "i64", "#3"},
		{"BITFIELD_RO", "doc", "GET", "u63", "8000", "GET", "i64", "15000"},
		{"BITFIELD", "doc", "SET", "i64", "64", "9007199254740993", "INCRBY", "i64", "64", "9007199254740993"},
		{"GETRANGE", "doc", "0", "40"},
		// What the exact path leaves to Redis: its errors, as they are.
		{"BITFIELD", "bf", "GET", "i65", "0"},
		{"BITFIELD", "bf", "GET", "u64", "0"},
		{"BITFIELD", "bf", "GET", "i64", "-1"},
		{"BITFIELD", "bf", "SET", "i64", "0", "1.5"},
		{"BITFIELD", "bf", "OVERFLOW", "BAD", "GET", "i64", "0"},
		{"BITFIELD_RO", "bf", "SET", "i64", "0", "1"},
		{"BITFIELD", "bf", "GET", "i64"},
		{"HSET", "h", "f", "v"},
		{"BITFIELD", "h", "GET", "i64", "0"},
	}
	for _, proto := range []string{"2", "3"} {
		var got [2][]string
		for i, addr := range []string{e.redis.Addr, e.addr} {
			c := dialRaw(t, addr)
			c.do("HELLO", proto)
			c.do("FLUSHALL")
			for _, s := range steps {
				got[i] = append(got[i], c.do(s...))
			}
		}
		for j := range got[0] {
			if got[0][j] != got[1][j] {
				t.Errorf("RESP%s %q: direct %q, proxy %q", proto, strings.Join(steps[j], " "), got[0][j], got[1][j])
			}
		}
		if !strings.Contains(got[0][1], "9007199254740993") {
			t.Fatalf("direct GET i64 = %q", got[0][1])
		}
	}
}

// TestProxy_BitfieldExactInMulti: the same inside MULTI/EXEC, on a plain
// and a compressed value, where the reply comes back inside EXEC's array.
func TestProxy_BitfieldExactInMulti(t *testing.T) {
	e := startEnv(t)
	for _, proto := range []string{"2", "3"} {
		var got [2]string
		for i, addr := range []string{e.redis.Addr, e.addr} {
			c := dialRaw(t, addr)
			c.do("HELLO", proto)
			c.do("FLUSHALL")
			c.do("SET", "doc", compressible(1000, 5))
			c.send([]string{"MULTI"},
				[]string{"BITFIELD", "bf", "SET", "i64", "0", "9007199254740993", "GET", "i64", "0"},
				[]string{"BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "u63", "#1", "9223372036854775807", "INCRBY", "i64", "0", "2"},
				[]string{"BITFIELD_RO", "doc", "GET", "i64", "8", "GET", "u63", "100"},
				[]string{"BITFIELD", "doc", "INCRBY", "i64", "8", "9007199254740993"},
				[]string{"EXEC"})
			var rs []string
			for range 6 {
				rs = append(rs, c.read())
			}
			got[i] = strings.Join(rs, "")
			// The proxy recompresses doc after EXEC's reply and before
			// this client's next command: a PING answered means it is
			// stored, so the next pass's direct writes cannot race it.
			c.do("PING")
		}
		if got[0] != got[1] {
			t.Errorf("RESP%s: direct %q\nproxy  %q", proto, got[0], got[1])
		}
		if !strings.Contains(got[0], ":9007199254740993\r\n") {
			t.Fatalf("direct EXEC = %q", got[0])
		}
	}
}

// FuzzExactBitfield: any BITFIELD arguments either run as one command or
// pass the exact path's checks with offsets in bounds, and any script
// reply becomes a reply without a panic.
func FuzzExactBitfield(f *testing.F) {
	f.Add("SET i64 0 9007199254740993 GET u63 #1", []byte("*2\r\n$5\r\n\xc1SQB\r\n*3\r\n:4294967295\r\n:1\r\n$3\r\ni64\r\n"))
	f.Add("OVERFLOW FAIL INCRBY i64 0 -1 GET u8 0", []byte("*3\r\n$5\r\n\xc1SQB\r\n$-1\r\n*3\r\n:1\r\n:2\r\n$2\r\nu8\r\n"))
	f.Add("GET i65 0", []byte("-ERR x\r\n"))
	f.Fuzz(func(t *testing.T, argLine string, reply []byte) {
		args := [][]byte{[]byte("BITFIELD"), []byte("k")}
		for _, a := range strings.Fields(argLine) {
			args = append(args, []byte(a))
		}
		if ex, sargs, ok := exactBitfield(bitfieldCmd, args); ok {
			if ex != bitfieldExact || (len(sargs)-2)%6 != 0 {
				t.Fatalf("exact form %v with %d arguments", ex.name, len(sargs))
			}
			for i := 2; i < len(sargs); i += 6 {
				if n, ok := plainOffset(sargs[i+5]); !ok || n > maxExactBitOffset {
					t.Fatalf("bit offset %q out of bounds", sargs[i+5])
				}
			}
		}
		for _, proto := range []int{2, 3} {
			exactBitfieldReply(reply, proto)
		}
	})
}
