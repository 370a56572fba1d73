package abuse

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/codec"
)

func TestParseKB(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"\t  123456 kB", 123456 << 10, false},
		{" 0 kB", 0, false},
		{" 12 MB", 0, true},
		{" kB", 0, true},
		{" -1 kB", 0, true},
		{" 1 2 kB", 0, true},
	} {
		got, err := parseKB(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("parseKB(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestReadMemory(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		rss, peak    int64
		bad          bool
	}{
		{"both", "Name:\tsqueeze\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads:\t4\n", 1 << 20, 2 << 20, false},
		{"no peak", "VmRSS:\t  1024 kB\n", 0, 0, true},
		{"garbled", "VmRSS:\t  lots\nVmHWM:\t 1 kB\n", 0, 0, true},
	} {
		path := filepath.Join(t.TempDir(), "status")
		os.WriteFile(path, []byte(tc.status), 0o644)
		rss, peak, err := readMemory(path)
		if (err != nil) != tc.bad || rss != tc.rss || peak != tc.peak {
			t.Errorf("%s: got %d, %d, %v; want %d, %d, error %v", tc.name, rss, peak, err, tc.rss, tc.peak, tc.bad)
		}
	}
	// This process's own figures: the peak is at least the resident set.
	rss, peak, err := readMemory("/proc/self/status")
	if err != nil {
		t.Skip("no /proc:", err)
	}
	if rss <= 0 || peak < rss {
		t.Errorf("own VmRSS %d, VmHWM %d", rss, peak)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // unsorted on purpose
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		q    float64
		want time.Duration
	}{
		{"none", nil, 0.99, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"p99 of 100", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"max of 100", ms(hundred...), 1, 100 * time.Millisecond},
		{"p50 of 4", ms(4, 1, 3, 2), 0.5, 2 * time.Millisecond},
	} {
		if got := percentile(tc.in, tc.q); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestFlagValue(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
		ok   bool
	}{
		{[]string{"--client-buffer", "1MiB", "--max-memory", "512MiB"}, "512MiB", true},
		{[]string{"-max-memory=1GiB"}, "1GiB", true},
		{[]string{"--max-memory"}, "", false},
		{[]string{"--max-memory-x", "1"}, "", false},
		{nil, "", false},
	} {
		got, ok := flagValue(tc.args, "max-memory")
		if got != tc.want || ok != tc.ok {
			t.Errorf("flagValue(%q) = %q, %v; want %q, %v", tc.args, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseSamples(t *testing.T) {
	text := "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 16\n" +
		"squeeze_proxy_commands_total{cmd=\"GET\"} 3\nprocess_open_fds 1.2e+01\n\n"
	m, err := parseSamples(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if m["go_goroutines"] != 16 || m["process_open_fds"] != 12 || len(m) != 2 {
		t.Errorf("samples %v", m)
	}
	if _, err := parseSamples(strings.NewReader("go_goroutines many\n")); err == nil {
		t.Error("a bad value parsed")
	}
}

func TestIEC(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{512, "512 B"}, {8 << 20, "8.0 MiB"}, {1536, "1.5 KiB"}, {2900 << 20, "2.8 GiB"}} {
		if got := iec(tc.n); got != tc.want {
			t.Errorf("iec(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestValueFor: values are a function of their key alone, distinct, and
// the even ones are compressed by the proxy's default codec (above the
// minimum size, and they shrink), the odd ones left raw (below it).
func TestValueFor(t *testing.T) {
	enc, err := codec.NewEncoder(codec.DefaultAlgorithm)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for seq := range 20 {
		v := valueFor(5, 3, seq)
		if !bytes.Equal(v, valueFor(5, 3, seq)) {
			t.Fatalf("seq %d: not the same value twice", seq)
		}
		if seen[string(v)] {
			t.Fatalf("seq %d: a value repeats", seq)
		}
		seen[string(v)] = true
		_, out := enc.AppendEncodeOutcome(nil, v)
		if want := map[bool]codec.Outcome{true: codec.Compressed, false: codec.StoredRaw}[seq%2 == 0]; out != want {
			t.Errorf("seq %d (%d bytes): %s, want %s", seq, len(v), out, want)
		}
	}
}

// TestMutatedSequence: the mutations stay bounded and vary.
func TestMutatedSequence(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	distinct := map[string]bool{}
	for range 500 {
		b := mutatedSequence(r)
		if len(b) == 0 || len(b) > 1000 {
			t.Fatalf("sequence of %d bytes", len(b))
		}
		distinct[string(b)] = true
	}
	if len(distinct) < 300 {
		t.Errorf("only %d distinct sequences of 500", len(distinct))
	}
}

// serve answers one connection with canned bytes.
func serve(t *testing.T, out string) *conn {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	go func() { b.Write([]byte(out)); b.Close() }()
	c := &conn{nc: a}
	c.br = newReader(a)
	return c
}

func TestConnRead(t *testing.T) {
	for _, tc := range []struct {
		in      string
		kind    byte
		text    string
		bulk    string
		elems   int
		null    bool
		isError bool
		bad     bool
	}{
		{in: "+OK\r\n", kind: '+', text: "OK"},
		{in: "-ERR no\r\n", kind: '-', text: "ERR no", isError: true},
		{in: "$3\r\nabc\r\n", kind: '$', text: "3", bulk: "abc"},
		{in: "$-1\r\n", kind: '$', text: "-1", null: true},
		{in: "*2\r\n$1\r\na\r\n:5\r\n", kind: '*', text: "2", elems: 2},
		{in: "%1\r\n+a\r\n+b\r\n", kind: '%', text: "1", elems: 2},
		{in: "_\r\n", kind: '_', null: true},
		{in: "$99999999999\r\n", bad: true},
		{in: "?x\r\n", bad: true},
		{in: "+OK\n", bad: true},
		{in: "$5\r\nab", bad: true},
	} {
		r, err := serve(t, tc.in).read()
		if tc.bad {
			if err == nil {
				t.Errorf("%q: no error", tc.in)
			}
			continue
		}
		if err != nil || r.kind != tc.kind || r.text != tc.text || string(r.bulk) != tc.bulk || len(r.elems) != tc.elems || r.null != tc.null || r.isError() != tc.isError {
			t.Errorf("%q: got %+v, %v", tc.in, r, err)
		}
	}
}

func TestConnReadZeroBulk(t *testing.T) {
	big := "$" + "3000000" + "\r\n" + strings.Repeat("\x00", 3000000) + "\r\n"
	for _, tc := range []struct {
		name, in string
		n        int
		errText  string
		zero     bool
		bad      bool
	}{
		{"zeros across pieces", big, 3000000, "", true, false},
		{"a one", "$3\r\n\x00\x01\x00\r\n", 3, "", false, false},
		{"the CRLF is not data", "$2\r\n\x00\x00\r\n", 2, "", true, false},
		{"error", "-ERR too large\r\n", 0, "ERR too large", false, false},
		{"not a bulk", ":1\r\n", 0, "", false, true},
		{"cut short", "$10\r\n\x00\x00", 0, "", false, true},
	} {
		n, errText, zero, err := serve(t, tc.in).readZeroBulk()
		if (err != nil) != tc.bad || (!tc.bad && (n != tc.n || errText != tc.errText || zero != tc.zero)) {
			t.Errorf("%s: got %d, %q, %v, %v", tc.name, n, errText, zero, err)
		}
	}
}

func TestRun_UnknownPart(t *testing.T) {
	err := Run(context.Background(), &bytes.Buffer{}, Config{Parts: []string{"faults", "nope"}})
	if err == nil || !strings.Contains(err.Error(), `unknown part "nope"`) {
		t.Fatalf("got %v", err)
	}
}

// TestRun_Leaks runs the leak part against the squeeze binary built from
// this tree and a real redis-server: it finds no leak, and says so with
// the figures.
func TestRun_Leaks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds squeeze and starts redis-server")
	}
	server, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server not installed")
		}
		t.Skip("redis-server not installed")
	}
	bin := filepath.Join(t.TempDir(), "squeeze")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/squeeze-kv/squeeze/cmd/squeeze").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var out bytes.Buffer
	err = Run(context.Background(), &out, Config{Squeeze: bin, RedisServer: server, Parts: []string{"leaks"}, Seed: 1})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"400 short connections", "leaked: goroutines 0, upstream connections 0, open files 0, client connections 0", "PASS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the output", want)
		}
	}
}
