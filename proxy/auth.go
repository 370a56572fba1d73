package proxy

import (
	"bytes"
	"errors"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"github.com/squeeze-kv/squeeze/resp"
)

// Redis's limits for a client that has not authenticated where a
// password is required (networking.c): at most 10 arguments of at most
// 16 KiB each; past them it answers a protocol error and closes. A proxy
// with RequireAuth holds its unauthenticated clients to the same limits,
// so they cannot make it buffer large commands either.
const (
	unauthMaxArgs = 10
	unauthMaxBulk = 16384
)

var (
	errUnauthMultibulk = errors.New("Protocol error: unauthenticated multibulk length")
	errUnauthBulk      = errors.New("Protocol error: unauthenticated bulk length")
)

// unauthLimit returns the error of a command at the start of b that an
// unauthenticated client may not send, or perr, the error of parsing it
// with a bulk length limit of unauthMaxBulk (maxBulk is the usual limit).
func unauthLimit(b []byte, perr error, maxBulk int64) error {
	if len(b) > 0 && b[0] == '*' {
		if end := bytes.IndexByte(b, '\r'); end > 0 {
			if n, ok := resp.ParseInt(b[1:end]); ok && n > unauthMaxArgs {
				return errUnauthMultibulk
			}
		}
	}
	if errors.Is(perr, resp.ErrInvalidBulkLength) {
		if _, _, err := resp.ReadCommand(nil, b, maxBulk); !errors.Is(err, resp.ErrInvalidBulkLength) {
			return errUnauthBulk // a valid length, over the unauthenticated limit
		}
	}
	return perr
}

// authenticates reports whether the command is AUTH, or HELLO with AUTH.
func authenticates(info *cmdInfo, args [][]byte) bool {
	if info.flags&rediscmd.Hello != 0 {
		for _, a := range args[1:] {
			if is(a, "AUTH") {
				return true
			}
		}
		return false
	}
	return len(args) > 0 && is(args[0], "AUTH")
}

// authUser returns the ACL user an authenticating command logs in as:
// AUTH user pass, AUTH pass (the default user), HELLO ... AUTH user pass;
// nil if it names none.
func authUser(info *cmdInfo, args [][]byte) []byte {
	if info.flags&rediscmd.Hello != 0 {
		for i, a := range args[1:] {
			if is(a, "AUTH") && i+3 < len(args) {
				return bytes.Clone(args[i+2])
			}
		}
		return nil
	}
	switch len(args) {
	case 2:
		return []byte("default")
	case 3:
		return bytes.Clone(args[1])
	}
	return nil
}
