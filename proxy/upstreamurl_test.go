package proxy

import (
	"strings"
	"testing"
)

// TestRedactURL: every secret of an upstream URL is hidden, the password
// and every parameter's value but db's, whatever the scheme; the rest
// stays readable; a string that is no URL passes unchanged.
func TestRedactURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://app:s3cret@10.1.2.3:6379/0", "redis://app:***@10.1.2.3:6379/0"},
		{"rediss://:s3cret@cache:6380", "rediss://:***@cache:6380"},
		{"redis://s3cret@cache", "redis://***@cache"},
		{"unix://:s3cret@/run/redis.sock?db=2", "unix://:***@/run/redis.sock?db=2"},
		{"sentinel://:pw@h:26379/m?sentinel_password=sentpw", "sentinel://:***@h:26379/m?sentinel_password=***"},
		{"sentinel://h1,h2/m/3?sentinel_password=sentpw&db=1", "sentinel://h1,h2/m/3?sentinel_password=***&db=1"},
		{"redis://h?password=x", "redis://h?password=***"},
		{"redis://h?s3cret", "redis://h?***"},
		{"redis://h?db=1&&token=abc=def", "redis://h?db=1&&token=***"},
		// An @ in a parameter: more than the password is hidden, never less.
		{"sentinel://:pw@h/m?sentinel_password=a@b", "sentinel://:***@b"},
		{"--upstream=sentinel://h/m?sentinel_password=sp", "--upstream=sentinel://h/m?sentinel_password=***"},
		{"127.0.0.1:6379", "127.0.0.1:6379"},
		{"--listen", "--listen"},
	} {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestParseUpstream_Params: a parameter the scheme does not take is an
// error that names it and the ones accepted, and shows no secret; the
// accepted ones work as before.
func TestParseUpstream_Params(t *testing.T) {
	for _, tt := range []struct{ in, err string }{
		{"sentinel://:pw@h:1/m?password=x9secret", `unknown parameter "password"; a sentinel:// URL accepts sentinel_password`},
		{"sentinel://h:1/m?sentinel_password=sp&sentinel_pasword=x9secret", `unknown parameter "sentinel_pasword"`},
		{"sentinel://h:1/m?db=2", `unknown parameter "db"; a sentinel:// URL accepts sentinel_password`},
		{"redis://:pw@h:1?password=x9secret", `unknown parameter "password"; a redis:// URL accepts db`},
		{"rediss://h:1/0?protocol=3", `unknown parameter "protocol"; a rediss:// URL accepts db`},
		{"unix:///run/r.sock?db=1&x9secret", "unknown parameter without a value (not shown: it may be a secret)"},
		{"redis://:x9secret@h:bad", "invalid port"},
		{"sentinel://h:1/m?sentinel_password=%zz", "invalid URL escape"},
		{"redis://h:1/0?db=1", ""},
		{"unix:///run/r.sock?db=1", ""},
		{"sentinel://h:1/m?sentinel_password=sp", ""},
	} {
		_, err := ParseUpstream(tt.in)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.in, err)
		case tt.err == "":
		case err == nil || !strings.Contains(err.Error(), tt.err):
			t.Errorf("%s: %v, want %q", tt.in, err, tt.err)
		case strings.Contains(err.Error(), "x9secret") || strings.Contains(err.Error(), ":pw@"):
			t.Errorf("%s: the error shows a secret: %v", tt.in, err)
		}
	}
}
