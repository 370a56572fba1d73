// Package valuescript holds the Lua scripts that run Redis commands which
// look inside stored values (APPEND, SETRANGE, the bit commands, LCS,
// LREM, LPOS, LINSERT, SORT, the compare commands) exactly and atomically
// on compressed values, and the pure Go helpers that build their arguments
// and read their replies. The proxy (package proxy) and the go-redis hook
// (package client) both send them, so a command is served the same way
// whichever part of squeeze carries it. See docs/design/inspect.md and
// docs/design/list-search.md.
//
// The scripts are plain Lua text; a caller sends them with EVALSHA and
// their SHA-1 (the *SHA variables), and with EVAL and the body when Redis
// answers NOSCRIPT. Words returns the whole call as the words of one
// command, which the proxy writes in RESP and the hook hands to go-redis.
//
// The helpers allocate what they return and hold no state: they are safe
// for concurrent use.
package valuescript

import (
	"crypto/sha1"
	"encoding/hex"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/luaguard"
)

// luaMagic is the frame magic as the scripts write it inside a quoted Lua
// string (see luaguard.Magic).
const luaMagic = luaguard.Magic

// Markers the scripts reply with, instead of the command's reply, when
// they need the caller: Marker, an array whose first element is the frame
// magic and whose others are frames (with their keys, for Inspect) the
// caller must decode; BitfieldMarker, the exact BITFIELD reply (see
// ExactBitfield); RecompressMarker, a written value handed back to be
// compressed ([marker, reply, value], see Inspect's recompressMin).
const (
	Marker           = codec.Magic
	BitfieldMarker   = codec.Magic + "B"
	RecompressMarker = codec.Magic + "W"
)

// SHA returns the SHA-1 of a script, in hex, as EVALSHA takes it.
func SHA(script string) string {
	sum := sha1.Sum([]byte(script))
	return hex.EncodeToString(sum[:])
}

// Words appends to dst the first words of a call of script: EVALSHA and
// sha with byName, else EVAL and the script's text.
func Words(dst [][]byte, script, sha string, byName bool) [][]byte {
	if byName {
		return append(dst, []byte("EVALSHA"), []byte(sha))
	}
	return append(dst, []byte("EVAL"), []byte(script))
}

// flag is "1" for true, "0" for false, as the scripts read flags.
func flag(on bool) []byte {
	if on {
		return []byte("1")
	}
	return []byte("0")
}
