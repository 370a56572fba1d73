package proxy

import (
	"strings"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
)

// cmdInfo is the proxy's entry for one command: the command table's facts
// (package rediscmd) and what the proxy adds to them.
type cmdInfo struct {
	spec  *rediscmd.Spec
	name  string // upper case, for metrics and errors
	id    int32  // 1.. for the table's commands, 0 for unknownCmd and Other
	vals  rediscmd.Values
	reply shape
	flags rediscmd.Flag
	keys  rediscmd.Keys // the keys an Inspect command reads
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
	// touches: the keys the command reads and writes, for the order
	// barriers (orderscope.go).
	touches rediscmd.Touches
	// wakes and reads: see rediscmd.Spec.Wakes and ReadsOnly.
	wakes, reads bool
}

// commandTable holds the proxy's entries by lower-case name.
var commandTable = map[string]*cmdInfo{}

// commandCount numbers the defined commands: their ids are 1..commandCount
// (unknownCmd's is 0), for the metrics' per-command slots.
var commandCount int

// infoOf returns the proxy's entry for spec: its own, numbered, for the
// commands the proxy serves with care; for the table's Other commands an
// entry that counts and behaves as unknownCmd but keeps their facts.
func infoOf(spec *rediscmd.Spec) *cmdInfo {
	if spec.Has(rediscmd.Other) {
		return &cmdInfo{spec: spec, name: unknownCmd.name, reply: shapeSniff, flags: spec.Flags, touches: touchesOf(spec)}
	}
	commandCount++
	return &cmdInfo{
		spec: spec, name: spec.Name, id: int32(commandCount),
		vals: spec.Values, reply: shape(spec.Reply), flags: spec.Flags, keys: spec.Keys,
		headOnly: spec.Has(rediscmd.HeadOnly), readOnly: spec.Has(rediscmd.ReadOnly),
		compare: spec.Has(rediscmd.Compare), arity: spec.Arity, touches: touchesOf(spec), wakes: spec.Wakes, reads: spec.ReadsOnly,
	}
}

// compareForm returns base's inspect form for a command that compares a
// stored string with an argument and then may write or delete it (see
// cmdInfo.compare). It keeps base's name, id and value rule, so metrics
// count it as base and its value is compressed.
func compareForm(base *cmdInfo, arity int) *cmdInfo {
	c := *base
	c.flags |= rediscmd.Inspect
	c.keys, c.compare, c.arity = rediscmd.KeyFirst, true, arity
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
// Valkey commands, module commands. It passes through untouched, and so do
// its replies, unless one holds a valid frame: that is decoded
// (shapeSniff), so that no command returns compressed bytes as if they were
// the value. Values such commands write are stored as the client sent
// them. The table's Other commands behave the same (infoOf).
var unknownCmd = &cmdInfo{name: "OTHER", reply: shapeSniff}

func init() {
	for _, spec := range rediscmd.All() {
		commandTable[strings.ToLower(spec.Name)] = infoOf(spec)
	}
	byName := func(name string) *cmdInfo { return commandTable[name] }
	appendCmd, setrangeCmd, digestCmd, delifeqCmd = byName("append"), byName("setrange"), byName("digest"), byName("delifeq")
	bitfieldCmd, bitfieldROCmd = byName("bitfield"), byName("bitfield_ro")
	bitfieldExact, bitfieldROExact = exactForm(bitfieldCmd), exactForm(bitfieldROCmd)
	setCmd, delexCmd = byName("set"), byName("delex")
	setIf, delexIf = compareForm(setCmd, -3), compareForm(delexCmd, -2)
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
func is(a []byte, w string) bool { return rediscmd.Is(a, w) }

// hasArg reports whether one of args equals word, ignoring case.
func hasArg(args [][]byte, word string) bool { return rediscmd.HasArg(args, word) }

// replyShape returns where values sit in the reply to the command args:
// the table's answer for its options, or, for CLUSTER, the topology reply
// the proxy rewrites.
func replyShape(info *cmdInfo, args [][]byte) shape {
	switch {
	case info.flags&rediscmd.Topology != 0:
		return clusterShape(args)
	case info.flags&rediscmd.ReplyOptions != 0:
		return shape(info.spec.ReplyFor(args))
	}
	return info.reply
}

// needsPin reports whether the command must run on a private connection.
func needsPin(info *cmdInfo, args [][]byte) bool {
	return info.spec != nil && info.spec.Pins(args)
}

// valueArgs returns where a command's values to compress sit among args:
// every step-th argument from first, before end (step 0: none).
func valueArgs(vals rediscmd.Values, args [][]byte) (first, step, end int) {
	return vals.Find(args)
}
