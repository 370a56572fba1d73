package proxy

import (
	"bytes"
	"strings"

	"github.com/squeeze-kv/squeeze/resp"
)

// shape says where values sit in a command's reply, so the proxy decodes
// exactly those bulk strings and never keys, fields, ids or members.
type shape uint8

const (
	shapeNone      shape = iota // pass through untouched
	shapeValue                  // a value, or an array of values (LPOP/RPOP with a count)
	shapeValues                 // an array of values: MGET, HMGET, HVALS, LRANGE
	shapePairs                  // field, value pairs: flat, map, or array of pairs
	shapeKeyValue               // [key, value]: BLPOP, BRPOP
	shapeKeyValues              // [key, [values]]: LMPOP, BLMPOP
	shapeScanPairs              // [cursor, [field, value, ...]]: HSCAN
	shapeEntries                // stream entries [[id, [field, value, ...]], ...]
	shapeStreams                // [[stream, entries], ...] or {stream: entries}: XREAD
	shapeAutoClaim              // [cursor, entries, deleted ids]: XAUTOCLAIM
	shapeAny                    // every framed bulk string anywhere (scripts, SORT)
	shapeExec                   // EXEC: element i has the shape of queued command i
	shapeInspect                // queued inspect script: may be the "framed" marker
	shapeRelay                  // enters pub/sub or MONITOR relay (RESP2)
	shapeSniff                  // a command the proxy does not know: see unknownCmd
)

// argRule says which arguments of a command are values to compress.
type argRule uint8

const (
	argsNone      argRule = iota
	argsAt2               // SET k v, SETNX, GETSET
	argsAt3               // SETEX k s v, PSETEX, HSETNX k f v, LSET k i v, LREM k n v
	argsEvery2            // MSET k v k v ...: 2, 4, 6 ...
	argsEvery2At3         // HSET k f v f v ...: 3, 5, 7 ...
	argsFrom2             // LPUSH k v v ...
	argsLinsert           // LINSERT k BEFORE|AFTER pivot element: 3, 4
	argsLpos              // LPOS k element ...: 2
	argsXadd              // XADD k [options] id f v f v ...
	argsHsetex            // HSETEX k [options] FIELDS n f v f v ...
	argsMsetex            // MSETEX n k v k v ... [options]: values up to the options
)

type cmdFlag uint16

const (
	flagPin         cmdFlag = 1 << iota // needs a private upstream connection
	flagSubscribe                       // enters pub/sub (relay in RESP2, pushes in RESP3)
	flagMonitor                         // enters MONITOR relay
	flagMulti                           // MULTI
	flagExec                            // EXEC
	flagDiscard                         // DISCARD
	flagNotQueued                       // runs at once even inside MULTI (WATCH, MULTI)
	flagInspect                         // looks inside stored bytes: see inspect.go
	flagScript                          // EVAL, FCALL and friends
	flagQuit                            // QUIT
	flagHello                           // HELLO
	flagReset                           // RESET
	flagClient                          // CLIENT (REPLY needs care)
	flagUnsubscribe                     // (P|S)UNSUBSCRIBE
	flagListSearch                      // compares list elements: see listsearch.go
)

// inspectKeys says which arguments are the keys an inspect command reads.
type inspectKeys uint8

const (
	keysFirst inspectKeys = iota // the key at 1
	keysTwo                      // keys at 1 and 2 (LCS)
	keysFrom3                    // keys from 3 on (BITOP op dest src ...)
	keysHash                     // hash key at 1, field at 2
)

// cmdInfo is what the proxy knows about one command.
type cmdInfo struct {
	name  string // upper case, for metrics and errors
	id    int32  // 1.. for defined commands, 0 for unknownCmd
	vals  argRule
	reply shape
	flags cmdFlag
	keys  inspectKeys
	// headOnly: the inspect command needs only the frame header of a
	// compressed value (STRLEN, HSTRLEN); readOnly: it does not write;
	// compare: it compares the value with an argument and then may replace
	// or delete it (SET ... IFEQ, DELEX ... IFEQ, DELIFEQ): what it leaves
	// stays, and a value it left alone gets its frame back.
	headOnly, readOnly, compare bool
	// exact: BITFIELD with a field wider than 53 bits, which the script
	// runs one subcommand at a time (see bitfield.go).
	exact bool
	// arity as in COMMAND INFO: exact when positive, a minimum when
	// negative. Inspect commands with a wrong count pass through, so the
	// client gets Redis's own arity error.
	arity int
}

var commandTable = map[string]*cmdInfo{}

// commandCount numbers the defined commands: their ids are 1..commandCount
// (unknownCmd's is 0), for the metrics' per-command slots.
var commandCount int

func def(name string, vals argRule, reply shape, flags cmdFlag) *cmdInfo {
	commandCount++
	c := &cmdInfo{name: name, vals: vals, reply: reply, flags: flags, id: int32(commandCount)}
	commandTable[strings.ToLower(name)] = c
	return c
}

func inspect(name string, arity int, keys inspectKeys, readOnly, headOnly bool) *cmdInfo {
	c := def(name, argsNone, shapeNone, flagInspect)
	c.keys, c.readOnly, c.headOnly, c.arity = keys, readOnly, headOnly, arity
	return c
}

// compareForm returns base's inspect form for a command that compares a
// stored string with an argument and then may write or delete it (see
// cmdInfo.compare). It keeps base's name, id and value rule, so metrics
// count it as base and its value is compressed.
func compareForm(base *cmdInfo, arity int) *cmdInfo {
	c := *base
	c.flags |= flagInspect
	c.keys, c.compare, c.arity = keysFirst, true, arity
	return &c
}

// setIf and delexIf are SET and DELEX with a condition on the stored value
// (see conditional); the others are the commands conditional and
// Server.served look for.
var setIf, delexIf, setCmd, delexCmd, digestCmd, delifeqCmd, appendCmd, setrangeCmd *cmdInfo

// bitfieldCmd and bitfieldROCmd, and their exact forms (see bitfield.go).
var bitfieldCmd, bitfieldROCmd, bitfieldExact, bitfieldROExact *cmdInfo

// exactForm returns base's form whose script runs BITFIELD subcommands one
// by one and reads each field's bits exactly (see bitfield.go).
func exactForm(base *cmdInfo) *cmdInfo {
	c := *base
	c.exact = true
	return &c
}

// arityOK reports whether n arguments (command name included) fit arity.
func arityOK(arity, n int) bool {
	if arity >= 0 {
		return n == arity
	}
	return n >= -arity
}

// unknownCmd is every command the proxy does not know: newer Redis or
// Valkey commands (Redis 8's HGETDEL and HGETEX return hash values),
// module commands, and the many that never carry values. It passes
// through untouched, and so do its replies, unless one holds a valid
// frame: that is decoded (shapeSniff), so that no command returns
// compressed bytes as if they were the value. Values such commands write
// are stored as the client sent them.
var unknownCmd = &cmdInfo{name: "OTHER", reply: shapeSniff}

func init() {
	// Strings.
	def("SET", argsAt2, shapeValue, 0) // SET ... GET replies with the old value
	def("SETNX", argsAt2, shapeNone, 0)
	def("GETSET", argsAt2, shapeValue, 0)
	def("SETEX", argsAt3, shapeNone, 0)
	def("PSETEX", argsAt3, shapeNone, 0)
	def("MSET", argsEvery2, shapeNone, 0)
	def("MSETNX", argsEvery2, shapeNone, 0)
	def("MSETEX", argsMsetex, shapeNone, 0) // Redis 8.4, Valkey 9.1
	def("GET", argsNone, shapeValue, 0)
	def("GETEX", argsNone, shapeValue, 0)
	def("GETDEL", argsNone, shapeValue, 0)
	def("MGET", argsNone, shapeValues, 0)
	// Hashes.
	def("HSET", argsEvery2At3, shapeNone, 0)
	def("HMSET", argsEvery2At3, shapeNone, 0)
	def("HSETNX", argsAt3, shapeNone, 0)
	def("HGET", argsNone, shapeValue, 0)
	def("HMGET", argsNone, shapeValues, 0)
	def("HGETALL", argsNone, shapePairs, 0)
	def("HVALS", argsNone, shapeValues, 0)
	def("HRANDFIELD", argsNone, shapeNone, 0) // shapePairs WITHVALUES, see replyShape
	def("HSCAN", argsNone, shapeScanPairs, 0)
	// Redis 8's hash commands with field expiry (Valkey 9 has them too,
	// and HSETEX's NX and XX).
	def("HSETEX", argsHsetex, shapeNone, 0)
	def("HGETEX", argsNone, shapeValues, 0)
	def("HGETDEL", argsNone, shapeValues, 0)
	// Lists.
	def("LPUSH", argsFrom2, shapeNone, 0)
	def("RPUSH", argsFrom2, shapeNone, 0)
	def("LPUSHX", argsFrom2, shapeNone, 0)
	def("RPUSHX", argsFrom2, shapeNone, 0)
	def("LINSERT", argsLinsert, shapeNone, flagListSearch)
	def("LSET", argsAt3, shapeNone, 0)
	def("LREM", argsAt3, shapeNone, flagListSearch)
	def("LPOS", argsLpos, shapeNone, flagListSearch)
	def("LRANGE", argsNone, shapeValues, 0)
	def("LINDEX", argsNone, shapeValue, 0)
	def("LPOP", argsNone, shapeValue, 0)
	def("RPOP", argsNone, shapeValue, 0)
	def("LMOVE", argsNone, shapeValue, 0)
	def("RPOPLPUSH", argsNone, shapeValue, 0)
	def("LMPOP", argsNone, shapeKeyValues, 0)
	def("BLPOP", argsNone, shapeKeyValue, flagPin)
	def("BRPOP", argsNone, shapeKeyValue, flagPin)
	def("BLMOVE", argsNone, shapeValue, flagPin)
	def("BRPOPLPUSH", argsNone, shapeValue, flagPin)
	def("BLMPOP", argsNone, shapeKeyValues, flagPin)
	// Streams.
	def("XADD", argsXadd, shapeNone, 0)
	def("XRANGE", argsNone, shapeEntries, 0)
	def("XREVRANGE", argsNone, shapeEntries, 0)
	def("XREAD", argsNone, shapeStreams, 0)      // pinned with BLOCK
	def("XREADGROUP", argsNone, shapeStreams, 0) // pinned with BLOCK
	def("XCLAIM", argsNone, shapeEntries, 0)
	def("XAUTOCLAIM", argsNone, shapeAutoClaim, 0)
	def("XINFO", argsNone, shapeAny, 0)
	// Sorted-set blocking pops and other blocking or connection-state commands.
	for _, n := range []string{"BZPOPMIN", "BZPOPMAX", "BZMPOP", "WAIT", "WAITAOF", "SELECT", "AUTH", "READONLY", "READWRITE", "ASKING", "UNWATCH"} {
		def(n, argsNone, shapeNone, flagPin)
	}
	def("WATCH", argsNone, shapeNone, flagPin|flagNotQueued)
	def("MULTI", argsNone, shapeNone, flagPin|flagMulti|flagNotQueued)
	def("EXEC", argsNone, shapeExec, flagExec|flagNotQueued)
	def("DISCARD", argsNone, shapeNone, flagDiscard|flagNotQueued)
	def("HELLO", argsNone, shapeNone, flagPin|flagHello)
	def("RESET", argsNone, shapeNone, flagPin|flagReset|flagNotQueued)
	def("CLIENT", argsNone, shapeNone, flagPin|flagClient)
	def("QUIT", argsNone, shapeNone, flagQuit|flagNotQueued)
	for _, n := range []string{"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"} {
		def(n, argsNone, shapeNone, flagPin|flagSubscribe)
	}
	for _, n := range []string{"UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE"} {
		def(n, argsNone, shapeNone, flagPin|flagUnsubscribe)
	}
	def("MONITOR", argsNone, shapeNone, flagPin|flagMonitor)
	for _, n := range []string{"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"} {
		def(n, argsNone, shapeAny, flagScript)
	}
	def("CLUSTER", argsNone, shapeNone, 0) // shapeCluster* for topology, see replyShape
	// Commands whose replies hold keys, members or fields, never values:
	// known, so that their replies pass untouched even when a key or
	// member happens to be a valid frame (unknown commands' replies are
	// sniffed for frames).
	for _, n := range []string{"SCAN", "KEYS", "RANDOMKEY", "HKEYS", "SMEMBERS", "SRANDMEMBER", "SPOP", "SSCAN",
		"SINTER", "SUNION", "SDIFF", "ZRANGE", "ZRANGEBYSCORE", "ZRANGEBYLEX", "ZREVRANGE", "ZREVRANGEBYSCORE",
		"ZREVRANGEBYLEX", "ZSCAN", "ZPOPMIN", "ZPOPMAX", "ZRANDMEMBER", "ZMPOP", "ZINTER", "ZUNION", "ZDIFF",
		"GEORADIUS", "GEORADIUSBYMEMBER", "GEOSEARCH", "PUBSUB", "COMMAND"} {
		def(n, argsNone, shapeNone, 0)
	}
	def("SORT", argsNone, shapeAny, 0)
	def("SORT_RO", argsNone, shapeAny, 0)
	// Commands that look inside stored bytes.
	inspect("STRLEN", 2, keysFirst, true, true)
	inspect("GETRANGE", 4, keysFirst, true, false)
	inspect("SUBSTR", 4, keysFirst, true, false)
	inspect("GETBIT", 3, keysFirst, true, false)
	inspect("BITCOUNT", -2, keysFirst, true, false)
	inspect("BITPOS", -3, keysFirst, true, false)
	bitfieldROCmd = inspect("BITFIELD_RO", -2, keysFirst, true, false)
	inspect("LCS", -3, keysTwo, true, false)
	appendCmd = inspect("APPEND", 3, keysFirst, false, false)
	setrangeCmd = inspect("SETRANGE", 4, keysFirst, false, false)
	inspect("SETBIT", 4, keysFirst, false, false)
	bitfieldCmd = inspect("BITFIELD", -2, keysFirst, false, false)
	bitfieldExact, bitfieldROExact = exactForm(bitfieldCmd), exactForm(bitfieldROCmd)
	inspect("BITOP", -4, keysFrom3, false, false)
	inspect("HSTRLEN", 3, keysHash, true, true)
	// Redis 8.4's DIGEST hashes the value (XXH3); the script gives it the
	// decoded bytes. Conditions on the stored value: see conditional.
	digestCmd = inspect("DIGEST", 2, keysFirst, true, false)
	setCmd, delexCmd = commandTable["set"], def("DELEX", argsNone, shapeNone, 0)
	setIf, delexIf = compareForm(setCmd, -3), compareForm(delexCmd, -2)
	delifeqCmd = inspect("DELIFEQ", 3, keysFirst, false, false) // Valkey 9
	delifeqCmd.compare = true
	// INCR, DECR, INCRBY, DECRBY and HINCRBY pass through: a stored integer
	// has at most 20 bytes and never compresses, so a compressed value is
	// never an integer and Redis's "not an integer" error is the exact reply.
	// INCRBYFLOAT and HINCRBYFLOAT pass through for the same reason: the
	// write policy stores every string that parses as a number raw
	// (codec.Numeric), so a frame never holds one, and Redis's "not a valid
	// float" is its reply on the decoded value too. Their result is a number
	// and is stored raw, as the policy would. Passing them through keeps
	// SLOWLOG, MONITOR and client-side caching as Redis shows them.
	def("INCRBYFLOAT", argsNone, shapeNone, 0)
	def("HINCRBYFLOAT", argsNone, shapeNone, 0)
}

// conditional returns the inspect form of SET and DELEX when they carry a
// condition that compares the stored value (IFEQ, IFNE, IFDEQ or IFDNE:
// Redis 8.4; SET ... IFEQ: Valkey 8.1), else info. Redis would compare a
// compressed value's frame, which never equals the argument, so the proxy
// runs the command inside the inspect script on the decoded value, which
// makes the comparison, and the digest, Redis's own. Older servers refuse
// these options as syntax errors, and do so inside the script too.
func conditional(info *cmdInfo, args [][]byte) *cmdInfo {
	from, cond := 3, setIf // SET key value [options]
	switch info {
	case setCmd:
	case delexCmd:
		from, cond = 2, delexIf // DELEX key [IFEQ value ...]
	default:
		return info
	}
	for i := from; i < len(args); i++ {
		if len(args[i]) < 4 || len(args[i]) > 5 {
			continue
		}
		for _, c := range [...]string{"IFEQ", "IFNE", "IFDEQ", "IFDNE"} {
			if is(args[i], c) {
				return cond
			}
		}
	}
	return info
}

// lookup finds a command by name without allocating.
func lookup(name []byte) *cmdInfo {
	var buf [24]byte
	if len(name) > len(buf) {
		return unknownCmd
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	if c, ok := commandTable[string(buf[:len(name)])]; ok {
		return c
	}
	return unknownCmd
}

// is reports whether a equals the upper-case ASCII word w, ignoring case.
func is(a []byte, w string) bool {
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

// hasArg reports whether one of args equals word, ignoring case.
func hasArg(args [][]byte, word string) bool {
	for _, a := range args {
		if is(a, word) {
			return true
		}
	}
	return false
}

// replyShape adjusts a command's reply shape to its arguments.
func replyShape(info *cmdInfo, args [][]byte) shape {
	switch info.name {
	case "HRANDFIELD":
		if len(args) > 3 && is(args[3], "WITHVALUES") {
			return shapePairs
		}
	case "CLUSTER":
		return clusterShape(args)
	case "HSCAN":
		// Redis 7.4's NOVALUES: [cursor, [field, field ...]], no values.
		for i := 3; i < len(args); i++ {
			switch {
			case is(args[i], "MATCH"), is(args[i], "COUNT"):
				i++ // the option's argument, which may be any word
			case is(args[i], "NOVALUES"):
				return shapeNone
			}
		}
	}
	return info.reply
}

// needsPin reports whether the command must run on a private connection.
func needsPin(info *cmdInfo, args [][]byte) bool {
	if info.flags&flagPin != 0 {
		return true
	}
	if (info.name == "XREAD" || info.name == "XREADGROUP") && hasArg(args[1:], "BLOCK") {
		return true
	}
	return false
}

// valueArgs returns where a command's values to compress sit among args:
// every step-th argument from first, before end (step 0: none).
func valueArgs(rule argRule, args [][]byte) (first, step, end int) {
	switch rule {
	case argsAt2:
		if len(args) > 2 {
			return 2, len(args), len(args) // only index 2
		}
	case argsAt3:
		if len(args) > 3 {
			return 3, len(args), len(args)
		}
	case argsEvery2:
		return 2, 2, len(args)
	case argsEvery2At3:
		return 3, 2, len(args)
	case argsFrom2:
		return 2, 1, len(args)
	case argsLinsert:
		return 3, 1, len(args) // pivot and element
	case argsLpos:
		if len(args) > 2 {
			return 2, len(args), len(args)
		}
	case argsXadd:
		// XADD key [NOMKSTREAM] [KEEPREF|DELREF|ACKED] [IDMPAUTO pid|IDMP
		// pid iid] [MAXLEN|MINID [=|~] threshold [LIMIT count]] id f v ...
		// (KEEPREF, DELREF and ACKED are Redis 8.2's, IDMP Redis 8.6's.)
		i := 2
		for i < len(args) {
			a := args[i]
			switch {
			case is(a, "NOMKSTREAM"), is(a, "KEEPREF"), is(a, "DELREF"), is(a, "ACKED"):
				i++
			case is(a, "IDMPAUTO"):
				i += 2
			case is(a, "IDMP"):
				i += 3
			case is(a, "MAXLEN"), is(a, "MINID"):
				i++
				if i < len(args) && (bytes.Equal(args[i], []byte("=")) || bytes.Equal(args[i], []byte("~"))) {
					i++
				}
				i++
			case is(a, "LIMIT"):
				i += 2
			case xaddID(a):
				// args[i] is the id; fields start at i+1, values at i+2.
				return i + 2, 2, len(args)
			default:
				// An option this proxy does not know (a newer server's):
				// compress nothing rather than guess where the values are.
				// The server stores them as they are, or answers its error.
				return 0, 0, 0
			}
		}
	case argsHsetex:
		// HSETEX key [NX|XX] [FNX|FXX] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]
		// FIELDS n f v ... (NX and XX, on the key, are Valkey 9's.)
		for i := 2; i < len(args); i++ {
			switch a := args[i]; {
			case is(a, "NX"), is(a, "XX"), is(a, "FNX"), is(a, "FXX"), is(a, "KEEPTTL"):
			case is(a, "EX"), is(a, "PX"), is(a, "EXAT"), is(a, "PXAT"):
				i++ // the time, a number
			case is(a, "FIELDS"):
				// args[i+1] is the count; fields from i+2, values from i+3.
				return i + 3, 2, len(args)
			default:
				return 0, 0, 0 // a syntax error: Redis answers it, nothing is compressed
			}
		}
	case argsMsetex:
		// MSETEX numkeys key value ... [NX|XX] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]
		// (Redis 8.4, Valkey 9.1): the values of the numkeys pairs. A count
		// that does not fit is Redis's error to give; nothing is compressed.
		if len(args) > 1 {
			if n, ok := resp.ParseInt(args[1]); ok && n > 0 && n <= int64(len(args)-2)/2 {
				return 3, 2, 2 + 2*int(n)
			}
		}
	}
	return 0, 0, 0
}

// xaddID reports whether a is an entry id XADD takes: "*", "ms", "ms-seq"
// or "ms-*". No XADD option begins with "*" or a digit.
func xaddID(a []byte) bool {
	return len(a) > 0 && (a[0] == '*' && len(a) == 1 || a[0] >= '0' && a[0] <= '9')
}
