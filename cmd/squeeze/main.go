// Command squeeze makes Redis hold more data in the same RAM by compressing
// values transparently. Run "squeeze help" for the list of commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// env is what a command may touch: its arguments and standard streams. Tests
// build one with buffers instead of the process's files.
type env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// command is one subcommand of squeeze. Files named after the command
// register it from init, so that each command lives in its own file.
type command struct {
	Name    string
	Summary string // one line for "squeeze help"
	Hidden  bool   // a maintainer's command, left out of "squeeze help"
	Run     func(ctx context.Context, e env, args []string) error
}

var commands = map[string]command{}

// benchCommands are the studies under "squeeze bench".
var benchCommands = map[string]command{}

func register(c command)      { commands[c.Name] = c }
func registerBench(c command) { benchCommands[c.Name] = c }

// errUsage marks an error caused by bad command-line use (exit code 2).
var errUsage = errors.New("usage")

// usageError formats a usage error that prints as the message alone.
func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}

// quietRedisLogger drops go-redis's own log lines ("redis: ... pool.go:770:
// connection pool: failed to dial ..."): commands report the same failure
// once, as their error.
type quietRedisLogger struct{}

func (quietRedisLogger) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quietRedisLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit code.
func run(ctx context.Context, e env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 { // "help encode", "help bench codecs", "help counters get"
			c, ok := commands[args[1]]
			if !ok {
				return exitCode(e, usageError("unknown command %q (run \"squeeze help\")", args[1]))
			}
			return exitCode(e, c.Run(ctx, e, append(append([]string(nil), args[2:]...), "--help")))
		}
		printHelp(e.Stdout)
		return 0
	}
	if args[0] == "--version" {
		args = append([]string{"version"}, args[1:]...)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(e.Stderr, "squeeze: unknown command %q\n\n", args[0])
		printHelp(e.Stderr)
		return 2
	}
	return exitCode(e, c.Run(ctx, e, args[1:]))
}

func exitCode(e env, err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, context.Canceled):
		// Ctrl-C or SIGTERM: the command stopped early (and cleaned up).
		fmt.Fprintln(e.Stderr, "squeeze: interrupted")
		return 130
	case errors.Is(err, errUsage):
		fmt.Fprintln(e.Stderr, "squeeze:", strings.TrimPrefix(err.Error(), "usage: "))
		return 2
	default:
		fmt.Fprintln(e.Stderr, "squeeze:", err)
		return 1
	}
}

func printHelp(w io.Writer) {
	fmt.Fprintf(w, `squeeze makes Redis hold 3-10x more data in the same RAM by compressing values
transparently, with the codec that fits your data.

Usage:
  squeeze <command> [flags] [arguments]

Commands:
`)
	printTable(w, commands)
	fmt.Fprintf(w, `
Run "squeeze <command> --help" for the flags of a command.

Which Redis: --redis, else the environment variable SQUEEZE_REDIS (advise,
archive, compact, counters, dict, inspect KEY); archive and counters fall
back to redis://127.0.0.1:6379, the others need one. The demo and the
benchmarks start a throwaway redis-server unless --redis names one; the
proxy takes --upstream. Addresses take the forms
redis://[user:password@]host:port[/db], host:port, rediss:// (TLS),
unix:///path/to/redis.sock (or the bare path) and sentinel://host:port/MASTER.
For rediss://, SQUEEZE_REDIS_CA names the PEM file of a private CA, and
SQUEEZE_REDIS_CERT with SQUEEZE_REDIS_KEY a client certificate (Redis's TLS
port asks for one by default). The proxy has flags for these:
--upstream-ca, --upstream-cert, --upstream-key.

Frame format: docs/FORMAT.md. Architecture: docs/ARCHITECTURE.md.
`)
}

func printTable(w io.Writer, m map[string]command) {
	names := make([]string, 0, len(m))
	for n, c := range m {
		if c.Hidden {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, m[n].Summary)
	}
}

func init() {
	register(command{Name: "bench", Summary: "measure codecs and Redis paths on your data (codecs, redis, docs, counters, compact, archive)", Run: runBench})
}

// runBench dispatches "squeeze bench <study>".
func runBench(ctx context.Context, e env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		w := e.Stdout // help asked for; without a study, the usage goes with the error
		if len(args) == 0 {
			w = e.Stderr
		}
		fmt.Fprintf(w, "Usage:\n  squeeze bench <study> [flags]\n\nStudies:\n")
		printTable(w, benchCommands)
		fmt.Fprintf(w, "\nExamples:\n  squeeze bench codecs --corpus data.json\n  squeeze bench redis --quick --report ./report\n")
		fmt.Fprintf(w, "\nRun \"squeeze bench <study> --help\" for the flags of a study.\n")
		if len(args) == 0 {
			return usageError("bench needs a study name")
		}
		return nil
	}
	c, ok := benchCommands[args[0]]
	if !ok {
		return usageError("unknown bench study %q (run \"squeeze bench --help\")", args[0])
	}
	return c.Run(ctx, e, args[1:])
}
