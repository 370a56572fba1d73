package luaguard

import "testing"

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
