package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
)

// errFlagsChecked stops a command right after its flags parsed, when it
// runs under checkCommandLine: nothing past the flags runs.
var errFlagsChecked = errors.New("flags checked")

// checkingWriter marks the standard error of an env made by
// checkCommandLine. newFlagSet gives it to the flag set as its output, which
// is how parseFlags knows to stop after parsing.
type checkingWriter struct{ io.Writer }

// stopIfChecking returns errFlagsChecked when fs belongs to a command run by
// checkCommandLine, and nil otherwise.
func stopIfChecking(fs *flag.FlagSet) error {
	if _, ok := fs.Output().(checkingWriter); !ok {
		return nil
	}
	return errFlagsChecked
}

// checkCommandLine checks that args (a command line without "squeeze")
// names a command and gives it flags that its flag set accepts, without
// running the command: it stops right after the flags parse. The commands
// that take positional arguments see them, so a subcommand ("dict train",
// "bench redis") is checked too. Use it on command lines found in
// documentation; ctx should be cancelled, so that a command which ran past
// its flags by mistake stops at once.
func checkCommandLine(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError("no command")
	}
	switch args[0] {
	case "help", "-h", "--help", "-help":
		if len(args) > 1 {
			if _, ok := commands[args[1]]; !ok {
				return usageError("unknown command %q", args[1])
			}
		}
		return nil
	case "--version":
		if len(args) > 1 {
			return usageError("--version takes no arguments, got %q", args[1:])
		}
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		return usageError("unknown command %q", args[0])
	}
	e := env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: checkingWriter{io.Discard}}
	err := c.Run(ctx, e, args[1:])
	switch {
	case errors.Is(err, errFlagsChecked), errors.Is(err, flag.ErrHelp):
		return nil
	case err == nil:
		for _, a := range args {
			if a == "help" || a == "-h" || a == "--help" || a == "-help" {
				return nil // a dispatcher's own help ("bench --help")
			}
		}
		return errors.New("the command ran past its flags without parsing them through parseFlags")
	}
	return err
}
