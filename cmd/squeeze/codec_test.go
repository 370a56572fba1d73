package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/codec"
)

// runCLI runs one squeeze command line in-process.
func runCLI(t *testing.T, stdin []byte, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), env{Stdin: bytes.NewReader(stdin), Stdout: &out, Stderr: &errb}, args)
	return out.String(), errb.String(), code
}

func TestEncodeDecode_RoundTrip(t *testing.T) {
	value := []byte(strings.Repeat(`{"id":1,"name":"squeeze","tags":["redis","compression"]},`, 50))
	for _, c := range []string{"zstd:1", "lz4:hc9", "s2:best", "snappy", "minlz:superfast", "minlz", "brotli:1", "gzip:6", "deflate:3", "zlib:9", "xz", "none"} {
		frame, stderr, code := runCLI(t, value, "encode", "--codec", c)
		if code != 0 {
			t.Fatalf("%s: encode exit %d: %s", c, code, stderr)
		}
		if c != "none" && len(frame) >= len(value) {
			t.Fatalf("%s: %d bytes stored for %d", c, len(frame), len(value))
		}
		out, stderr, code := runCLI(t, []byte(frame), "decode")
		if code != 0 || out != string(value) {
			t.Fatalf("%s: decode exit %d (%s), value equal: %v", c, code, stderr, out == string(value))
		}
		info, _, code := runCLI(t, []byte(frame), "inspect")
		if c != "none" && (code != 0 || !strings.Contains(info, "codec     "+strings.Split(c, ":")[0])) {
			t.Fatalf("%s: inspect exit %d:\n%s", c, code, info)
		}
	}
}

func TestDecode_BadFrames(t *testing.T) {
	value := []byte(strings.Repeat("squeeze makes redis smaller. ", 100))
	frame, _, _ := runCLI(t, value, "encode", "--codec", "zstd:1") // zstd tells truncation from corruption
	h, err := codec.ParseHeader([]byte(frame))
	if err != nil {
		t.Fatal(err)
	}
	corrupt := []byte(frame)
	corrupt = append([]byte(nil), corrupt...)
	corrupt[len(corrupt)-3] ^= 0xff
	huge := codec.AppendHeader(nil, codec.Header{ID: codec.IDZstd, OriginalLen: 100e9})
	huge = append(huge, 0x28, 0xb5, 0x2f, 0xfd, 0, 0)
	unknown := append([]byte(nil), frame...)
	unknown[4] = 0x42
	tests := []struct {
		name, in, want string
	}{
		{"corrupt", string(corrupt), "codec: corrupt frame"},
		{"truncated", frame[:h.Len+3], "codec: corrupt frame: truncated"},
		{"100 GB header", string(huge), "codec: decoded size above limit: frame declares 100000000000 bytes, limit is 536870912"},
		{"unknown codec", string(unknown), "codec: unknown codec id: 0x42"},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		out, stderr, code := runCLI(t, []byte(tt.in), "decode")
		if code != 1 || out != "" {
			t.Errorf("%s: exit %d, %d bytes out; want 1 and nothing", tt.name, code, len(out))
		}
		if !strings.HasPrefix(stderr, "squeeze: "+tt.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: stderr %q, want one line starting with %q", tt.name, stderr, tt.want)
		}
		if seen[stderr] {
			t.Errorf("%s: same message as another case: %q", tt.name, stderr)
		}
		seen[stderr] = true
	}
}

func TestEncode_PolicyAndUsage(t *testing.T) {
	out, stderr, code := runCLI(t, []byte("short"), "encode")
	if code != 0 || out != "short" || !strings.Contains(stderr, "stored raw") {
		t.Fatalf("short value: %q %q %d", out, stderr, code)
	}
	_, stderr, code = runCLI(t, nil, "encode", "--codec", "zip")
	if code != 2 || !strings.Contains(stderr, "known: none, zstd") {
		t.Fatalf("unknown codec: exit %d, %q", code, stderr)
	}
	_, stderr, code = runCLI(t, nil, "encode", "--min-size", "lots")
	if code != 2 || !strings.Contains(stderr, "invalid size") {
		t.Fatalf("bad size: exit %d, %q", code, stderr)
	}
	for _, cmd := range []string{"encode", "decode", "inspect", "bench"} {
		out, _, code := runCLI(t, nil, cmd, "--help")
		if code != 0 || !strings.Contains(out, "Usage") {
			t.Errorf("%s --help: exit %d, %q", cmd, code, out)
		}
	}
	out, _, code = runCLI(t, nil)
	if code != 0 || !strings.Contains(out, "encode") {
		t.Errorf("help: %d %q", code, out)
	}
	if _, _, code := runCLI(t, nil, "nosuch"); code != 2 {
		t.Errorf("unknown command exit %d", code)
	}
}

func TestInspect_JSONAndRaw(t *testing.T) {
	out, _, code := runCLI(t, []byte("plain"), "inspect")
	if code != 0 || !strings.Contains(out, "raw value") {
		t.Fatalf("raw inspect: %d %q", code, out)
	}
	frame, _, _ := runCLI(t, []byte(strings.Repeat("abc", 100)), "encode", "--codec", "lz4")
	out, _, code = runCLI(t, []byte(frame), "inspect", "--json")
	if code != 0 || !strings.Contains(out, `"codec": "lz4"`) || !strings.Contains(out, `"original_bytes": 300`) || !strings.Contains(out, `"valid": true`) {
		t.Fatalf("json inspect: %d %s", code, out)
	}
	out, stderr, code := runCLI(t, []byte(frame[:len(frame)-2]), "inspect")
	if code != 1 || !strings.Contains(stderr, "invalid frame") || !strings.Contains(out, "codec     lz4") {
		t.Fatalf("bad inspect: %d %q %q", code, out, stderr)
	}
}

// TestInspect_RejectsArguments: "squeeze inspect FILE" used to ignore FILE
// and wait on standard input (a hang on a terminal).
func TestInspect_RejectsArguments(t *testing.T) {
	out, stderr, code := runCLI(t, []byte("plain"), "inspect", "frame.bin")
	if code != 2 || out != "" || !strings.Contains(stderr, "squeeze inspect < FILE") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// TestEncode_RefusesTerminal: a binary frame is not written to a terminal
// (it garbles it), as gzip and zstd refuse; raw values, which are the
// user's own bytes, still are.
func TestEncode_RefusesTerminal(t *testing.T) {
	old := isTerminal
	isTerminal = func(any) bool { return true }
	t.Cleanup(func() { isTerminal = old })
	value := []byte(strings.Repeat("squeeze makes redis smaller. ", 100))
	out, stderr, code := runCLI(t, value, "encode")
	if code != 2 || out != "" || !strings.Contains(stderr, "not writing a binary frame to a terminal") {
		t.Fatalf("exit %d, stdout %d bytes, stderr %q", code, len(out), stderr)
	}
	if out, _, code := runCLI(t, []byte("short"), "encode"); code != 0 || out != "short" {
		t.Fatalf("raw value: exit %d, %q", code, out)
	}
}

// TestDecodeInspect_RefuseTerminalInput: decode and inspect with a terminal
// on standard input (no redirect) used to wait silently for a frame that
// cannot be typed; they now say how to call them.
func TestDecodeInspect_RefuseTerminalInput(t *testing.T) {
	old := isTerminal
	isTerminal = func(v any) bool { _, ok := v.(*bytes.Reader); return ok }
	t.Cleanup(func() { isTerminal = old })
	for _, cmd := range []string{"decode", "inspect"} {
		out, stderr, code := runCLI(t, []byte("x"), cmd)
		if code != 2 || out != "" || !strings.Contains(stderr, "use: squeeze "+cmd+" < FILE") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", cmd, code, out, stderr)
		}
	}
}
