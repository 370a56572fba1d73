package proxy

import (
	"strconv"
	"strings"
	"testing"
)

// TestProxy_HyperLogLogCopy: a HyperLogLog copied with GET and SET (its
// value is a string) stays one through the proxy, so PFCOUNT, PFADD and
// PFMERGE answer as Redis does; a corrupted one gets Redis's own
// INVALIDOBJ error. Each step's reply is compared with Redis's.
func TestProxy_HyperLogLogCopy(t *testing.T) {
	e := startEnv(t)
	var got [2][]string
	for i, addr := range []string{e.redis.Addr, e.addr} {
		c := dialRaw(t, addr)
		c.do("FLUSHALL")
		add := []string{"PFADD", "hll"}
		for j := range 5000 {
			add = append(add, "member:"+strconv.Itoa(j))
		}
		c.do(add...)
		dense := c.do("GET", "hll") // 5000 members: the dense form, 12 kB of registers
		if !strings.Contains(dense, "HYLL") {
			t.Fatalf("GET of a HyperLogLog = %.40q", dense)
		}
		v := dense[strings.Index(dense, "\r\n")+2 : len(dense)-2]
		steps := [][]string{
			{"SET", "copy", v},
			{"STRLEN", "copy"},
			{"PFCOUNT", "copy"},
			{"PFADD", "copy", "new-member"},
			{"PFCOUNT", "copy"},
			{"PFMERGE", "merged", "copy", "hll"},
			{"PFCOUNT", "merged"},
			// A sparse HyperLogLog, copied the same way.
			{"PFADD", "small", "a", "b", "c"},
		}
		for _, s := range steps {
			got[i] = append(got[i], strings.Join(s[:min(2, len(s))], " ")+" = "+c.do(s...))
		}
		small := c.do("GET", "small")
		small = small[strings.Index(small, "\r\n")+2 : len(small)-2]
		for _, s := range [][]string{
			{"SET", "small2", small},
			{"PFCOUNT", "small2"},
			// A dense header with too few bytes: not a HyperLogLog.
			{"SET", "short", v[:len(v)/2]},
			{"PFCOUNT", "short"},
			// Corrupt registers: the sparse header with its cached count
			// marked stale, then runs of 16384 zero registers, more than a
			// HyperLogLog has (compressible, so a proxy that framed it would
			// answer WRONGTYPE instead).
			{"SET", "bad", small[:15] + "\x80" + strings.Repeat("\x7f\xff", 40)},
			{"PFCOUNT", "bad"},
			{"PFADD", "bad", "x"},
		} {
			got[i] = append(got[i], strings.Join(s[:min(2, len(s))], " ")+" = "+c.do(s...))
		}
	}
	for j := range got[0] {
		if got[0][j] != got[1][j] {
			t.Errorf("step %d: direct %q, proxy %q", j, got[0][j], got[1][j])
		}
	}
	if !strings.Contains(strings.Join(got[0], "\n"), "INVALIDOBJ") {
		t.Fatalf("direct replies name no INVALIDOBJ error: %q", got[0])
	}
	// The copy is stored as Redis wrote it, not as a frame.
	c := dialRaw(t, e.redis.Addr)
	if r := c.do("GETRANGE", "copy", "0", "3"); r != bulk("HYLL") {
		t.Fatalf("stored copy begins %q, want HYLL", r)
	}
}
