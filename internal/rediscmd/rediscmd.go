// Package rediscmd is squeeze's one table of facts about Redis commands:
// which arguments are values to compress, where values sit in the reply,
// whether a command blocks, holds connection state, looks inside stored
// bytes, or takes a value out of Redis. The proxy, the go-redis hook
// (package client) and the differential tests (internal/difftest) all read
// it, so that a command is described once.
//
// Every command of the Redis and Valkey versions squeeze is tested against
// has an entry; those that neither carry values nor need care are listed as
// Other, so that a test can tell a command the table has considered from
// one a newer server added (see table_test.go). Adding a command that fits
// the existing vocabulary is one line in table.go.
package rediscmd

// Spec is what squeeze knows about one command.
type Spec struct {
	// Name is the command's name in upper case.
	Name string
	// Values says which arguments are values to compress.
	Values Values
	// Reply says where values sit in the command's reply.
	Reply Reply
	// Flags are the command's other facts.
	Flags Flag
	// Keys says which arguments are the keys an Inspect command reads.
	Keys Keys
	// Arity is the argument count (name included) as COMMAND INFO gives
	// it: exact when positive, a minimum when negative; 0 when the table
	// does not rely on it. Set for Inspect commands, whose wrong counts
	// pass to Redis untouched for its own arity error.
	Arity int
	// Touches says which keys the command reads and writes (touches.go).
	Touches Touches
	// Wakes: the command may serve a client blocked on its key (a push
	// to a list a BRPOPLPUSH waits on), which then reads and writes the
	// keys of its own command (touches.go).
	Wakes bool
	// ReadsOnly: the command only reads the keys Touches names (COMMAND
	// flags it readonly): two such commands give the same replies in
	// either order, also on one key (touches.go).
	ReadsOnly bool
}

// Has reports whether the command has every fact in f.
func (s *Spec) Has(f Flag) bool { return s.Flags&f == f }

// Flag is a set of facts about a command.
type Flag uint64

const (
	// Pin: the command changes or needs the state of its connection
	// (blocking, transactions, SELECT, AUTH, subscriptions...): a proxy
	// runs it on a connection of the client's own.
	Pin Flag = 1 << iota
	// Blocking: the command may wait for another client's write.
	Blocking
	// BlockOption: the command blocks (and pins) when it has a BLOCK
	// option (XREAD, XREADGROUP).
	BlockOption
	// Subscribe enters pub/sub; Unsubscribe leaves channels; Monitor
	// enters MONITOR.
	Subscribe
	Unsubscribe
	Monitor
	// Multi, Exec and Discard open, run and drop a transaction.
	Multi
	Exec
	Discard
	// NotQueued: inside MULTI the command runs at once instead of being
	// queued (WATCH, MULTI, EXEC, DISCARD, RESET, QUIT).
	NotQueued
	// Quit, Hello, Reset, Client and SelectDB: connection commands whose
	// effects a proxy keeps track of.
	Quit
	Hello
	Reset
	Client
	SelectDB
	// Script: EVAL, FCALL and their variants; the script reads and writes
	// keys that its arguments name.
	Script
	// Inspect: the command looks inside stored bytes (lengths, ranges,
	// bits, comparisons), so a compressed value must be decoded for it.
	Inspect
	// ReadOnly: an Inspect command that does not write. HeadOnly: it needs
	// only a frame's header (the original length). Compare: it compares the
	// stored value with an argument, then may replace or delete it.
	ReadOnly
	HeadOnly
	Compare
	// ListSearch: the command compares list elements with an argument
	// (LINSERT, LREM, LPOS).
	ListSearch
	// SetsValue: the command replaces a string's or a hash field's whole
	// value with an argument (SET, MSET, HSET...), which a transaction can
	// then read back.
	SetsValue
	// Copies: the command copies or moves the value at argument 1 to the
	// key at argument 2 (COPY, RENAME, RENAMENX).
	Copies
	// Destructive: the reply takes a value out of Redis (popped, deleted
	// or replaced), so the reply is its only copy.
	Destructive
	// Moves: the reply is the element the command moved from the list at
	// argument 1 to the list at argument 2 (LMOVE, RPOPLPUSH and their
	// blocking forms), between the ends MoveEnds names.
	Moves
	// Topology: the reply names cluster nodes (CLUSTER SLOTS, SHARDS,
	// NODES), which a proxy rewrites to name itself.
	Topology
	// Unordered: Redis leaves the order of the reply's elements undefined.
	Unordered
	// TimeToLive: the reply is a time left, which counts down.
	TimeToLive
	// ReplyOptions: options change where values sit in the reply (see
	// ReplyFor).
	ReplyOptions
	// Patterns: the command reads keys that patterns in its arguments
	// name (SORT's BY and GET).
	Patterns
	// LoadsScripts: a subcommand loads or looks up scripts (SCRIPT LOAD,
	// SCRIPT EXISTS, FUNCTION LOAD).
	LoadsScripts
	// Asking: ASKING, after which Redis Cluster runs the client's next
	// command, and only that one, on a slot this node is importing: a
	// proxy that runs that command itself (as a script, in several round
	// trips) sends ASKING before each of them.
	Asking
	// Other: a command the table has considered and that needs nothing of
	// squeeze: it carries no values, and its reply holds none (replies are
	// still searched for frames, see ReplySniff).
	Other
	// Refused: a proxy answers the command with an error of its own and
	// never sends it on: it would turn the connection it came on into
	// something else than a client's (SYNC and PSYNC make it a replica's,
	// which receives the database and then every write). Redis refuses
	// these inside MULTI itself, so a transaction may pass them on.
	Refused
	// Hostile: not a command but the first line of an HTTP request (POST,
	// Host:), which Redis takes for a cross-protocol attack: it logs a
	// warning and closes the sender's connection without a reply. A proxy
	// must close the sender the same way, never pass the line on.
	Hostile
)

// Keys says which arguments are the keys an Inspect command reads.
type Keys uint8

const (
	KeyFirst  Keys = iota // the key at 1
	KeysTwo               // keys at 1 and 2 (LCS)
	KeysFrom3             // keys from 3 on, the destination at 2 (BITOP op dest src ...)
	KeyHash               // a hash at 1, its field at 2 (HSTRLEN)
)

// Reply says where values sit in a command's reply, so that exactly those
// bulk strings are decoded and never keys, fields, ids or members.
type Reply uint8

const (
	ReplyNone      Reply = iota // no values: passes untouched
	ReplyValue                  // a value, or an array of values (LPOP with a count)
	ReplyValues                 // an array of values: MGET, HMGET, HVALS, LRANGE
	ReplyPairs                  // field, value pairs: flat, map, or array of pairs
	ReplyKeyValue               // [key, value]: BLPOP, BRPOP
	ReplyKeyValues              // [key, [values]]: LMPOP, BLMPOP
	ReplyScanPairs              // [cursor, [field, value, ...]]: HSCAN
	ReplyEntries                // stream entries [[id, [field, value, ...]], ...]
	ReplyStreams                // [[stream, entries], ...] or {stream: entries}: XREAD
	ReplyAutoClaim              // [cursor, entries, deleted ids]: XAUTOCLAIM
	ReplyAny                    // values anywhere: any bulk string may be one (scripts, SORT, XINFO)
	ReplyExec                   // EXEC: element i is the reply of queued command i
	ReplySniff                  // none expected; any well-formed frame found is decoded (Other)
	NumReplies                  // the number of Reply kinds
)

// ReplyFor returns where values sit in the reply to the command args
// (args[0] is the name), which some options change (ReplyOptions).
func (s *Spec) ReplyFor(args [][]byte) Reply {
	if s.Flags&ReplyOptions == 0 {
		return s.Reply
	}
	switch s.Name {
	case "HRANDFIELD":
		if len(args) > 3 && Is(args[3], "WITHVALUES") {
			return ReplyPairs
		}
	case "HSCAN":
		// Redis 7.4's NOVALUES: [cursor, [field, field ...]], no values.
		for i := 3; i < len(args); i++ {
			switch {
			case Is(args[i], "MATCH"), Is(args[i], "COUNT"):
				i++ // the option's argument, which may be any word
			case Is(args[i], "NOVALUES"):
				return ReplyNone
			}
		}
	case "XCLAIM", "XAUTOCLAIM":
		// JUSTID: ids only. Options come after the key, group, consumer
		// and min-idle-time (and XAUTOCLAIM's start), any of which may be
		// the word JUSTID.
		from := 5
		if s.Name == "XAUTOCLAIM" {
			from = 6
		}
		if len(args) > from && HasArg(args[from:], "JUSTID") {
			return ReplyNone
		}
	}
	return s.Reply
}

// MoveEnds returns, for a Moves command args, the end of the source list
// the element left and the end of the destination it went to ("LEFT" or
// "RIGHT", as the command spelt them); ok is false for any other command,
// or one too short to name them.
func (s *Spec) MoveEnds(args [][]byte) (from, to []byte, ok bool) {
	switch {
	case s.Flags&Moves == 0:
	case s.Name == "RPOPLPUSH" || s.Name == "BRPOPLPUSH":
		return []byte("RIGHT"), []byte("LEFT"), len(args) >= 3
	case len(args) >= 5: // LMOVE src dst from to, BLMOVE ... timeout
		return args[3], args[4], true
	}
	return nil, nil, false
}

// Blocks reports whether the command args may block.
func (s *Spec) Blocks(args [][]byte) bool {
	if s.Flags&Blocking != 0 {
		return true
	}
	return s.Flags&BlockOption != 0 && len(args) > 1 && HasArg(args[1:], "BLOCK")
}

// Pins reports whether the command args needs a connection of its client's
// own: it holds connection state or blocks.
func (s *Spec) Pins(args [][]byte) bool {
	return s.Flags&Pin != 0 || s.Flags&BlockOption != 0 && len(args) > 1 && HasArg(args[1:], "BLOCK")
}

// ArityOK reports whether n arguments (name included) fit the command's
// arity; true when the table does not know it.
func (s *Spec) ArityOK(n int) bool {
	switch {
	case s.Arity == 0:
		return true
	case s.Arity > 0:
		return n == s.Arity
	}
	return n >= -s.Arity
}

// maxName is the longest command name Lookup looks up.
const maxName = 24

// Lookup returns the command called name, in any case, or nil when the
// table does not know it. It does not allocate.
func Lookup(name []byte) *Spec {
	var buf [maxName]byte
	if len(name) > len(buf) {
		return nil
	}
	for i, c := range name {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	return table[string(buf[:len(name)])]
}

// LookupString is Lookup for a name held in a string.
func LookupString(name string) *Spec {
	var buf [maxName]byte
	if len(name) > len(buf) {
		return nil
	}
	return Lookup(append(buf[:0], name...))
}

// All returns every command of the table, in the order of table.go.
func All() []*Spec { return all }

// Is reports whether a equals the upper-case ASCII word w, ignoring case.
func Is(a []byte, w string) bool {
	if len(a) != len(w) {
		return false
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != w[i] {
			return false
		}
	}
	return true
}

// HasArg reports whether one of args equals the upper-case word w,
// ignoring case.
func HasArg(args [][]byte, w string) bool {
	for _, a := range args {
		if Is(a, w) {
			return true
		}
	}
	return false
}
