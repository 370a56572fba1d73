package luaguard

import (
	"strconv"
	"testing"
)

// TestPrefix: the prefix of a key is up to its last ':', or up to a
// segment that is an item's id, so per-item keys share one prefix.
func TestPrefix(t *testing.T) {
	for _, tt := range []struct{ key, want string }{
		{"lock", "lock"},
		{"lock:order", "lock:"},
		{"app:lock:order", "app:lock:"},
		{"bull:q:17", "bull:q:"},
		{"bull:q:17:logs", "bull:q:"},
		{"bull:q:wait", "bull:q:"},
		{"user:42:profile:photo", "user:"},
		{"s:9f86d081-884c-4d63:lock", "s:"},
		{"v2:cache:item", "v2:cache:"},
		{"cafe:beef:x", "cafe:beef:"}, // hex letters without a digit: words
		{"123:x", "123:"},
		{"123:456:x", "123:"},
		{"a::b", "a::"},
		{":x", ":"},
	} {
		if got := string(Prefix([]byte(tt.key))); got != tt.want {
			t.Errorf("Prefix(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

// TestUnwrapReply: the code of a wrapped library in a FUNCTION LIST
// WITHCODE reply is the code as loaded, the bulk string's length with it;
// code loaded some other way stays as it is.
func TestUnwrapReply(t *testing.T) {
	code := "#!lua name=a\nredis.register_function('f', function() return 1 end)"
	other := "#!lua name=b\nredis.register_function('g', function() return 2 end)"
	bulk := func(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }
	wrapped := string(Wrap([]byte(code), FunctionPrologue))
	reply := "*2\r\n*4\r\n$12\r\nlibrary_name\r\n$1\r\na\r\n$12\r\nlibrary_code\r\n" + bulk(wrapped) +
		"*4\r\n$12\r\nlibrary_name\r\n$1\r\nb\r\n$12\r\nlibrary_code\r\n" + bulk(other)
	want := "*2\r\n*4\r\n$12\r\nlibrary_name\r\n$1\r\na\r\n$12\r\nlibrary_code\r\n" + bulk(code) +
		"*4\r\n$12\r\nlibrary_name\r\n$1\r\nb\r\n$12\r\nlibrary_code\r\n" + bulk(other)
	if got := string(UnwrapReply([]byte(reply))); got != want {
		t.Errorf("UnwrapReply = %q, want %q", got, want)
	}
	if got := string(UnwrapReply([]byte(want))); got != want {
		t.Errorf("UnwrapReply of plain code = %q", got)
	}
	if got := string(Unwrap([]byte(wrapped))); got != code {
		t.Errorf("Unwrap = %q", got)
	}
}

// TestLoadError: the prologue's refusal of a callback that is not a
// function reads as Redis's.
func TestLoadError(t *testing.T) {
	got := string(LoadError([]byte("-ERR Error registering functions: ERR user_function:2: bad argument #1 to 'squeeze_named_callback' (function expected, got string)\r\n"), "redis"))
	if want := "-ERR Error registering functions: ERR callback argument given to redis.register_function must be a function\r\n"; got != want {
		t.Errorf("LoadError = %q, want %q", got, want)
	}
	if got := string(LoadError([]byte("-ERR other\r\n"), "redis")); got != "-ERR other\r\n" {
		t.Errorf("LoadError of another error = %q", got)
	}
}

// TestProbeAPI: the API's name in the reply to APIProbe.
func TestProbeAPI(t *testing.T) {
	for reply, want := range map[string]string{
		"-ERR Error registering functions: ERR wrong number of arguments to redis.register_function\r\n":  "redis",
		"-ERR Error registering functions: ERR wrong number of arguments to server.register_function\r\n": "server",
		"-ERR unknown command\r\n": "redis",
	} {
		if got := ProbeAPI([]byte(reply)); got != want {
			t.Errorf("ProbeAPI(%q) = %q, want %q", reply, got, want)
		}
	}
}

// TestUnwrapLegacy: a library an earlier proxy wrapped (issue 22's
// prologue) lists as it was loaded too.
func TestUnwrapLegacy(t *testing.T) {
	code := "#!lua name=old\nredis.register_function('f', function() return 1 end)"
	wrapped := Wrap([]byte(code), FunctionPrologue22)
	if got := string(Unwrap(wrapped)); got != code {
		t.Errorf("Unwrap = %q", got)
	}
	reply := "*1\r\n$" + strconv.Itoa(len(wrapped)) + "\r\n" + string(wrapped) + "\r\n"
	want := "*1\r\n$" + strconv.Itoa(len(code)) + "\r\n" + code + "\r\n"
	if got := string(UnwrapReply([]byte(reply))); got != want {
		t.Errorf("UnwrapReply = %q, want %q", got, want)
	}
}
