package proxy

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/squeeze-kv/squeeze/codec"
)

func mustEnc(t testing.TB, alg string, opts ...codec.EncoderOption) *codec.Encoder {
	t.Helper()
	a, err := codec.ParseAlgorithm(alg)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := codec.NewEncoder(a, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// storedCodec returns the codec name of the stored bulk string reply got
// (as Redis sent it), or "raw" for bytes that are not a frame.
func storedCodec(t testing.TB, got string) string {
	t.Helper()
	if !strings.HasPrefix(got, "$") {
		t.Fatalf("not a bulk string: %.40q", got)
	}
	v := got[strings.Index(got, "\r\n")+2 : len(got)-2]
	if !codec.IsFramed([]byte(v)) {
		return "raw"
	}
	h, err := codec.ParseHeader([]byte(v))
	if err != nil {
		t.Fatalf("stored frame: %v", err)
	}
	return h.ID.String()
}

// TestProxy_Rules: values follow the write policy of their key's longest
// matching prefix, in every command that writes values (MSET per key), in
// MULTI, and in the exact list search; every reply is the value as written.
func TestProxy_Rules(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, codec.DefaultAlgorithm)
	e := startEnv(t, func(s *Server) {
		s.Metrics = m
		s.Rules = []Rule{
			{Prefix: "img:", Encoder: mustEnc(t, "none")},
			{Prefix: "doc:", Encoder: mustEnc(t, "zstd:3", codec.WithMinSize(0))},
			{Prefix: "doc:tiny:", Encoder: mustEnc(t, "lz4", codec.WithMinSize(1<<20))},
		}
	})
	p := dialRaw(t, e.addr)
	d := dialRaw(t, e.redis.Addr)
	big := compressible(20000, 7)
	for _, c := range [][]string{
		{"SET", "img:1", big},
		{"SET", "doc:1", big},
		{"SET", "doc:tiny:1", big},
		{"SET", "other", big},
		{"MSET", "img:2", big, "doc:2", big, "x:2", big},
		{"HSET", "doc:h", "f", big},
		{"RPUSH", "img:l", big, "a"},
		{"XADD", "doc:s", "1-1", "f", big},
	} {
		if got := p.do(c...); got != "+OK\r\n" && !strings.HasPrefix(got, ":") && !strings.HasPrefix(got, "$3\r\n1-1") {
			t.Fatalf("%.30q: %q", c, got)
		}
	}
	want := map[string]string{
		"img:1": "raw", "doc:1": "zstd", "doc:tiny:1": "raw", "other": codec.DefaultAlgorithm.ID.String(),
		"img:2": "raw", "doc:2": "zstd", "x:2": codec.DefaultAlgorithm.ID.String(),
	}
	for k, codecName := range want {
		if got := storedCodec(t, d.do("GET", k)); got != codecName {
			t.Errorf("%s stored as %s, want %s", k, got, codecName)
		}
		if got := p.do("GET", k); got != bulk(big) {
			t.Errorf("GET %s through the proxy: %.40q", k, got)
		}
	}
	if got := storedCodec(t, d.do("HGET", "doc:h", "f")); got != "zstd" {
		t.Errorf("doc:h field stored as %s, want zstd", got)
	}
	if got := storedCodec(t, d.do("LINDEX", "img:l", "0")); got != "raw" {
		t.Errorf("img:l element stored as %s, want raw", got)
	}
	if got := p.do("LPOS", "img:l", big); got != ":0\r\n" {
		t.Errorf("LPOS in img:l: %q", got)
	}
	// In MULTI, an inspect command sees through a value queued before it.
	p.send([]string{"MULTI"}, []string{"HSET", "doc:t", "f", big}, []string{"HSTRLEN", "doc:t", "f"}, []string{"EXEC"})
	for _, w := range []string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "*2\r\n:1\r\n:20000\r\n"} {
		if got := p.read(); got != w {
			t.Fatalf("transaction: %q, want %q", got, w)
		}
	}
	// The byte counters are labelled by the codec that wrote the values.
	for _, label := range []string{"zstd:3", "none"} {
		if got := testutil.ToFloat64(m.bytesIn.WithLabelValues(label)); got < 20000 {
			t.Errorf("original bytes for %s: %v", label, got)
		}
	}
}

// TestProxy_CodecNone: with no Encoder the proxy stores values as they
// are, but a value that would read as a frame is wrapped, so it reads back
// as written (it was decoded instead, silently).
func TestProxy_CodecNone(t *testing.T) {
	e := startEnv(t, func(s *Server) { s.Encoder = nil })
	p := dialRaw(t, e.addr)
	d := dialRaw(t, e.redis.Addr)
	frame := string(mustEnc(t, "zstd:1", codec.WithMinSize(0)).AppendEncode(nil, []byte(strings.Repeat("hello world ", 20))))
	big := compressible(5000, 1)
	p.do("SET", "frame", frame)
	p.do("SET", "plain", big)
	if got := p.do("GET", "frame"); got != bulk(frame) {
		t.Errorf("GET frame: %.60q, want the frame bytes as written", got)
	}
	if got := p.do("STRLEN", "frame"); got != ":"+strconv.Itoa(len(frame))+"\r\n" {
		t.Errorf("STRLEN frame: %q", got)
	}
	if got := d.do("GET", "plain"); got != bulk(big) {
		t.Errorf("plain stored as %.40q, want raw", got)
	}
	if got := storedCodec(t, d.do("GET", "frame")); got != "none" {
		t.Errorf("frame stored as %s, want wrapped in a none frame", got)
	}
}

func TestServer_BadRules(t *testing.T) {
	enc := mustEnc(t, "s2")
	for _, tt := range []struct {
		rules []Rule
		want  string
	}{
		{[]Rule{{Prefix: "", Encoder: enc}}, "needs a key prefix"},
		{[]Rule{{Prefix: "a:", Encoder: nil}}, "has no Encoder"},
		{[]Rule{{Prefix: "a:", Encoder: enc}, {Prefix: "a:", Encoder: enc}}, "two rules"},
	} {
		s := &Server{Upstream: "redis://127.0.0.1:1", Rules: tt.rules}
		if err := s.init(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("rules %v: %v, want %q", tt.rules, err, tt.want)
		}
	}
}

// TestServer_SetWritePolicy: a new write policy applies to the values
// written after it, while clients keep writing; values written before keep
// reading back; a bad policy is refused and changes nothing.
func TestServer_SetWritePolicy(t *testing.T) {
	e := startEnv(t)
	p := dialRaw(t, e.addr)
	d := dialRaw(t, e.redis.Addr)
	big := compressible(20000, 5)
	p.do("SET", "before", big)
	// Writers keep going on other connections while the policy changes.
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		w := dialRaw(t, e.addr)
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if got := w.do("MSET", "img:w", big, "w", big); got != "+OK\r\n" {
				done <- fmt.Errorf("MSET during the change: %q", got)
				return
			}
			if got := w.do("GET", "w"); got != bulk(big) {
				done <- fmt.Errorf("GET during the change: %.40q", got)
				return
			}
		}
	}()
	for range 20 {
		if err := e.srv.SetWritePolicy(mustEnc(t, "zstd:3", codec.WithMinSize(0)), []Rule{{Prefix: "img:", Encoder: mustEnc(t, "none")}}); err != nil {
			t.Fatal(err)
		}
		if err := e.srv.SetWritePolicy(mustEnc(t, "lz4", codec.WithMinSize(0)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.srv.SetWritePolicy(mustEnc(t, "zstd:3", codec.WithMinSize(0)), []Rule{{Prefix: "img:", Encoder: mustEnc(t, "none")}}); err != nil {
		t.Fatal(err)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p.do("SET", "after", big)
	p.do("SET", "img:1", big)
	for key, want := range map[string]string{"before": codec.DefaultAlgorithm.ID.String(), "after": "zstd", "img:1": "raw"} {
		if got := storedCodec(t, d.do("GET", key)); got != want {
			t.Errorf("%s stored as %s, want %s", key, got, want)
		}
		if got := p.do("GET", key); got != bulk(big) {
			t.Errorf("GET %s: %.40q", key, got)
		}
	}
	if err := e.srv.SetWritePolicy(nil, []Rule{{Prefix: "", Encoder: mustEnc(t, "s2")}}); err == nil {
		t.Fatal("a rule without prefix accepted")
	}
	p.do("SET", "still", big)
	if got := storedCodec(t, d.do("GET", "still")); got != "zstd" {
		t.Errorf("after a refused policy, stored as %s, want zstd", got)
	}
}
