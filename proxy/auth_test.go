package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/internal/difftest"
	"github.com/squeeze-kv/squeeze/internal/testutil"
	"github.com/squeeze-kv/squeeze/resp"
)

// TestProxy_RequireAuth: with RequireAuth every client authenticates
// itself. The same commands go to Redis directly and through the proxy,
// whose upstream URL holds the password and database 2, and the replies
// must be equal: -NOAUTH before AUTH, -WRONGPASS, the ACL user's -NOPERM,
// HELLO 3 AUTH, RESET logging the client out. Once authenticated, values
// are stored compressed in the URL's database.
func TestProxy_RequireAuth(t *testing.T) {
	e := startEnv(t)
	ref := testutil.StartRedis(t) // the same configuration, used directly
	for _, addr := range []string{e.redis.Addr, ref.Addr} {
		admin := dialRaw(t, addr)
		for _, c := range [][]string{
			{"ACL", "SETUSER", "app", "on", ">apppass", "~app:*", "+@all"},
			{"CONFIG", "SET", "requirepass", "s3cret"},
		} {
			if got := admin.do(c...); got != "+OK\r\n" {
				t.Fatalf("%q: %q", c, got)
			}
		}
	}
	p := startProxy(t, "redis://:s3cret@"+e.redis.Addr+"/2", e.redis, func(s *Server) { s.RequireAuth = true })
	big := compressible(20000, 3)
	steps := [][]string{
		{"PING"},
		{"GET", "app:1"},
		{"SET", "app:1", "small"},
		{"AUTH", "wrong"},
		{"AUTH", "app", "wrong"},
		{"AUTH", "app", "apppass"},
		{"SET", "app:1", big},
		{"GET", "app:1"},
		{"SET", "other:1", big}, // outside the user's keys: -NOPERM
		{"STRLEN", "app:1"},
		{"AUTH", "s3cret"},
		{"SET", "other:1", big},
		{"GET", "other:1"},
		{"RESET"},
		{"GET", "other:1"}, // logged out again
		{"HELLO", "3", "AUTH", "default", "s3cret"},
		{"GET", "other:1"},
		{"HGET", "nohash", "f"},
	}
	direct, via := dialRaw(t, ref.Addr), dialRaw(t, p.addr)
	for _, c := range steps {
		want := direct.do(c...)
		if c[0] == "AUTH" || c[0] == "HELLO" || c[0] == "RESET" {
			direct.do("SELECT", "2") // the proxy stands for database 2 (fails while logged out)
		}
		got := via.do(c...)
		if c[0] == "HELLO" { // connection ids differ
			want, got = dropID(want), dropID(got)
		}
		if got != want {
			t.Errorf("%s through the proxy: %.80q; Redis: %.80q", difftest.Short(c), got, want)
		}
	}
	admin := dialRaw(t, e.redis.Addr)
	admin.do("AUTH", "s3cret")
	admin.do("SELECT", "2")
	if got := storedCodec(t, admin.do("GET", "app:1")); got == "raw" {
		t.Error("app:1 stored raw through the proxy")
	}
	// Before AUTH, Redis's limits for unauthenticated clients hold: the
	// same error, then the connection closes.
	many := []string{"DEL"}
	for i := range 11 {
		many = append(many, fmt.Sprint("k", i))
	}
	for _, c := range [][]string{{"SET", "app:2", big}, many} {
		direct, via := dialRaw(t, ref.Addr), dialRaw(t, p.addr)
		want, got := direct.do(c...), via.do(c...)
		if !strings.HasPrefix(want, "-ERR Protocol error: unauthenticated") || got != want {
			t.Errorf("%s before AUTH through the proxy: %q; Redis: %q", difftest.Short(c), got, want)
		}
		if got := via.read(); got != "" {
			t.Errorf("%s before AUTH: the proxy kept the connection open (%q)", difftest.Short(c), got)
		}
	}
	// Without RequireAuth the proxy's own credentials serve every client.
	open := startProxy(t, "redis://:s3cret@"+e.redis.Addr+"/2", e.redis)
	c := dialRaw(t, open.addr)
	if got := c.do("GET", "app:1"); got != bulk(big) {
		t.Errorf("without RequireAuth: GET %.40q", got)
	}
	// RESET keeps it so: the proxy logs its connection in again, in its database.
	if got := c.do("RESET"); got != "+RESET\r\n" {
		t.Fatalf("RESET: %q", got)
	}
	if got := c.do("GET", "app:1"); got != bulk(big) {
		t.Errorf("without RequireAuth, after RESET: GET %.40q", got)
	}
}

// dropID removes the value of the "id" field from a HELLO reply.
func dropID(reply string) string {
	i := strings.Index(reply, "id\r\n:")
	if i < 0 {
		return reply
	}
	j := strings.Index(reply[i+5:], "\r\n")
	return reply[:i+5] + reply[i+5+j:]
}

// FuzzUnauthLimit: for any input, the unauthenticated limits either pass
// the parser's own result through or name one of the two limits, and only
// when the command really breaks it.
func FuzzUnauthLimit(f *testing.F) {
	f.Add([]byte("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"))
	f.Add([]byte("*11\r\n"))
	f.Add([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$16385\r\n"))
	f.Add([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$-5\r\n"))
	f.Add([]byte("PING\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, perr := resp.ReadCommand(nil, b, unauthMaxBulk)
		err := unauthLimit(b, perr, resp.DefaultMaxBulk)
		switch {
		case errors.Is(err, errUnauthMultibulk):
			end := bytes.IndexByte(b, '\r')
			if n, ok := resp.ParseInt(b[1:end]); !ok || n <= unauthMaxArgs {
				t.Fatalf("%q: multibulk limit with count %d", b, n)
			}
		case errors.Is(err, errUnauthBulk):
			if !errors.Is(perr, resp.ErrInvalidBulkLength) {
				t.Fatalf("%q: bulk limit where the parser said %v", b, perr)
			}
			if _, _, err := resp.ReadCommand(nil, b, resp.DefaultMaxBulk); errors.Is(err, resp.ErrInvalidBulkLength) {
				t.Fatalf("%q: bulk limit for an invalid length", b)
			}
		case err != perr:
			t.Fatalf("%q: %v, want the parser's %v", b, err, perr)
		}
	})
}

// TestProxy_RequireAuthScriptedCommands: with RequireAuth the user's ACL
// rights for the command it sent decide, not the proxy's scripts: a user
// allowed STRLEN, GETRANGE, APPEND, SETRANGE and LPOS but not EVALSHA runs
// them through the proxy as directly, on compressed values too; one
// allowed neither gets Redis's own NOPERM; key patterns apply.
func TestProxy_RequireAuthScriptedCommands(t *testing.T) {
	e := startEnv(t)
	ref := testutil.StartRedis(t)
	for _, addr := range []string{e.redis.Addr, ref.Addr} {
		admin := dialRaw(t, addr)
		for _, c := range [][]string{
			{"ACL", "SETUSER", "reader", "on", ">rpass", "~doc:*", "-@all", "+get", "+set", "+strlen", "+getrange", "+append", "+setrange", "+lpos", "+rpush", "+auth", "+hello", "+ping"},
			{"ACL", "SETUSER", "nolen", "on", ">npass", "~doc:*", "-@all", "+get", "+set", "+auth", "+ping"},
			{"CONFIG", "SET", "requirepass", "s3cret"},
		} {
			if got := admin.do(c...); got != "+OK\r\n" {
				t.Fatalf("%q: %q", c, got)
			}
		}
	}
	p := startProxy(t, "redis://:s3cret@"+e.redis.Addr, e.redis, func(s *Server) { s.RequireAuth = true })
	big := compressible(5000, 2)
	steps := [][]string{
		{"AUTH", "reader", "rpass"},
		{"SET", "doc:1", big},
		{"STRLEN", "doc:1"},
		{"GETRANGE", "doc:1", "0", "20"},
		{"APPEND", "doc:1", "tail"},
		{"SETRANGE", "doc:1", "2", "XY"},
		{"GET", "doc:1"},
		{"RPUSH", "doc:l", big, "x"},
		{"LPOS", "doc:l", "x"},
		{"STRLEN", "other:1"}, // outside the user's keys
		{"EVAL", "return 1", "0"},
		{"AUTH", "nolen", "npass"},
		{"STRLEN", "doc:1"},
		{"AUTH", "default", "s3cret"},
		{"AUTH", "nolen", "wrong"}, // fails: still the default user
		{"STRLEN", "doc:1"},
		{"AUTH", "nolen", "npass"},
		{"APPEND", "doc:1", "x"},
		{"GET", "doc:1"},
	}
	direct, via := dialRaw(t, ref.Addr), dialRaw(t, p.addr)
	for _, c := range steps {
		want, got := direct.do(c...), via.do(c...)
		if got != want {
			t.Errorf("%.60q: direct %.120q, proxy %.120q", c, want, got)
		}
	}
	// Pipelined: a login, then a command its user may not run, sent
	// together: the command is judged as the new user.
	for _, c := range []*rawConn{direct, via} {
		c.send([]string{"AUTH", "default", "s3cret"}, []string{"AUTH", "nolen", "npass"}, []string{"STRLEN", "doc:1"})
	}
	for range 3 {
		if want, got := direct.read(), via.read(); got != want {
			t.Errorf("pipelined: direct %.120q, proxy %.120q", want, got)
		}
	}
}
