package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestMain keeps a SQUEEZE_REDIS of the developer's shell out of the tests:
// the commands under test would talk to that server.
func TestMain(m *testing.M) {
	os.Unsetenv(envRedis)
	redis.SetLogger(quietRedisLogger{}) // as main does
	os.Exit(m.Run())
}

func TestResolveRedis(t *testing.T) {
	for _, c := range []struct {
		name, flag, env, def string
		want, wantErr        string
	}{
		{"flag wins over env", "redis://10.0.0.1:6379/2", "redis://10.0.0.9:6379", localRedis, "redis://10.0.0.1:6379/2", ""},
		{"env over default", "", "redis://10.0.0.9:6379", localRedis, "redis://10.0.0.9:6379", ""},
		{"default", "", "", localRedis, localRedis, ""},
		{"no default", "", "", "", "", ""},
		{"host:port", "10.0.0.5:6380", "", "", "redis://10.0.0.5:6380", ""},
		{"host:port from env", "", "localhost:7000", "", "redis://localhost:7000", ""},
		{":port", ":6390", "", "", "redis://127.0.0.1:6390", ""},
		{"ipv6", "[::1]:6379", "", "", "redis://[::1]:6379", ""},
		{"unix URL", "unix:///run/redis.sock", "", "", "unix:///run/redis.sock", ""},
		{"socket path", "/run/redis.sock", "", "", "unix:///run/redis.sock", ""},
		{"rediss", "rediss://u:p@h:6380/1", "", "", "rediss://u:p@h:6380/1", ""},
		{"sentinel", "sentinel://h1:26379,h2:26379/mymaster", "", "", "sentinel://h1:26379,h2:26379/mymaster", ""},
		{"env spaces", "", "  10.0.0.5:6380\n", "", "redis://10.0.0.5:6380", ""},
		{"bare host", "redis-host", "", "", "", "--redis redis-host: not a Redis address"},
		{"bad port", "h:http", "", "", "", `--redis h:http: port "http" is not a number`},
		{"port 0", "h:0", "", "", "", `port "0" is not a number`},
		{"bad env", "", "h:99999", "", "", "SQUEEZE_REDIS h:99999: port"},
		{"password hidden", "", "u:s3cret@h", "", "", "SQUEEZE_REDIS u:s3cret@h"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(envRedis, c.env)
			got, err := resolveRedis(c.flag, c.def)
			switch {
			case c.wantErr != "":
				if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got %q, %v; want a usage error containing %q", got, err, c.wantErr)
				}
			case err != nil || got != c.want:
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// TestRedisEnv_EveryCommand: every command that works on your data reads
// SQUEEZE_REDIS when --redis is missing, takes host:port and unix:// as well
// as redis:// URLs, and lets --redis win over the variable.
func TestRedisEnv_EveryCommand(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "redis.sock")
	r := testutil.StartRedis(t, "--unixsocket", sock, "--unixsocketperm", "700")
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	doc := strings.Repeat(`{"user":"ada","plan":"pro","country":"DE"},`, 40)
	for _, k := range []string{"doc:1", "doc:2", "doc:3"} {
		if err := rdb.Set(ctx, k, doc, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	commands := []struct {
		args []string
		want string // in stdout
	}{
		{[]string{"archive", "put", "arc:t", dir}, "stored 1 files"},
		{[]string{"archive", "list", "arc:t"}, "a.txt"},
		{[]string{"counters", "incr", "user42", "17"}, "\n"},
		{[]string{"counters", "get", "user42", "17"}, "\n"},
		{[]string{"inspect", "doc:1"}, "raw value"},
		{[]string{"compact", "--pattern", "doc:*", "--min-idle", "0", "--include-raw", "--dry-run"}, "would rewrite 3"},
		{[]string{"dict", "list"}, "no dictionaries published"},
		{[]string{"advise", "--no-dict", "--keys", "10"}, "sampled"},
	}
	for _, form := range []struct{ name, addr string }{
		{"url", r.URL()},
		{"host:port", r.Addr},
		{"unix", "unix://" + sock},
	} {
		t.Run(form.name, func(t *testing.T) {
			t.Setenv(envRedis, form.addr)
			for _, c := range commands {
				out, errs, code := runCLI(t, nil, c.args...)
				if code != 0 || !strings.Contains(out, c.want) {
					t.Errorf("SQUEEZE_REDIS=%s squeeze %s: exit %d, want %q in:\n%s%s", form.addr, strings.Join(c.args, " "), code, c.want, out, errs)
				}
			}
		})
	}
	t.Run("flag wins", func(t *testing.T) {
		t.Setenv(envRedis, "127.0.0.1:1") // nothing listens on port 1
		for _, c := range commands {
			args := append([]string{c.args[0]}, c.args[1:]...)
			if c.args[0] == "archive" || c.args[0] == "counters" || c.args[0] == "dict" {
				args = append(args[:2:2], append([]string{"--redis", r.Addr}, c.args[2:]...)...)
			} else {
				args = append(args[:1:1], append([]string{"--redis", r.Addr}, c.args[1:]...)...)
			}
			out, errs, code := runCLI(t, nil, args...)
			if code != 0 || !strings.Contains(out, c.want) {
				t.Errorf("squeeze %s: exit %d, want %q in:\n%s%s", strings.Join(args, " "), code, c.want, out, errs)
			}
		}
	})
	t.Run("env names the server in errors", func(t *testing.T) {
		t.Setenv(envRedis, "127.0.0.1:1")
		for _, c := range commands {
			_, errs, code := runCLI(t, nil, c.args...)
			if code != 1 || !strings.Contains(errs, "redis://127.0.0.1:1") {
				t.Errorf("squeeze %s: exit %d, want an error naming redis://127.0.0.1:1, got %q", strings.Join(c.args, " "), code, errs)
			}
		}
	})
}

// TestRedisEnv_NotFoundNamesServer: "not there" answers say which server
// they looked at, so that a forgotten --redis or SQUEEZE_REDIS shows.
func TestRedisEnv_NotFoundNamesServer(t *testing.T) {
	r := testutil.StartRedis(t)
	t.Setenv(envRedis, r.Addr)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := runCLI(t, nil, "archive", "put", "arc:t", dir); code != 0 {
		t.Fatal(errs)
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	rdb.HSet(context.Background(), "h", "f", "v")
	server := "on the Redis at " + r.URL()
	for _, args := range [][]string{
		{"archive", "get", "arc:t", "b.txt"},
		{"archive", "list", "arc:none"},
		{"archive", "extract", "arc:none", t.TempDir()},
		{"inspect", "nokey"},
		{"inspect", "h", "nofield"},
		{"dict", "show", "1690163204"},
		{"counters", "migrate", "--from", "list", "nolist", "user42"},
	} {
		_, errs, code := runCLI(t, nil, args...)
		if code != 1 || !strings.Contains(errs, server) {
			t.Errorf("squeeze %s: exit %d, want %q in %q", strings.Join(args, " "), code, server, errs)
		}
	}
}

// TestRedisEnv_Required: the commands without a default server say how to
// name one, the variable included; inspect without a KEY still reads
// standard input, whatever SQUEEZE_REDIS says.
func TestRedisEnv_Required(t *testing.T) {
	for _, args := range [][]string{
		{"advise"}, {"compact"}, {"dict", "list"}, {"dict", "train", "--pattern", "u:*"}, {"dict", "show", "12345678"}, {"inspect", "user:42"},
	} {
		_, errs, code := runCLI(t, nil, args...)
		if code != 2 || !strings.Contains(errs, "needs a Redis: --redis URL or SQUEEZE_REDIS=URL") {
			t.Errorf("squeeze %s: exit %d, %q", strings.Join(args, " "), code, errs)
		}
	}
	t.Setenv(envRedis, "127.0.0.1:1")
	frame, _, code := runCLI(t, []byte(strings.Repeat("squeeze ", 100)), "encode")
	if code != 0 {
		t.Fatal("encode failed")
	}
	out, errs, code := runCLI(t, []byte(frame), "inspect")
	if code != 0 || !strings.Contains(out, "codec") {
		t.Fatalf("inspect < frame with SQUEEZE_REDIS set: exit %d\n%s%s", code, out, errs)
	}
}
