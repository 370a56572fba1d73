package proxy

import "testing"

// TestSession_InPlainFlow: the proxy answers in a command's place only
// when its reply would come in the ordinary way.
func TestSession_InPlainFlow(t *testing.T) {
	for _, tt := range []struct {
		name string
		s    *session
		want bool
	}{
		{"a new session", &session{proto: 2}, true},
		{"RESP3", &session{proto: 3}, true},
		{"in a transaction", &session{inMulti: true}, false},
		{"relaying pub/sub", &session{relay: true}, false},
		{"CLIENT REPLY OFF", &session{replyOff: true}, false},
		{"CLIENT REPLY SKIP", &session{skip: 1}, false},
	} {
		if got := tt.s.inPlainFlow(); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
