package rediscmd

import (
	"maps"
	"slices"
	"strings"
)

// specs is the table. The order is the proxy's numbering of commands for
// its metrics; keep new commands at the end of their group.
//
// Adding a command: give it the Values, Reply and Flags its arguments and
// reply have. A command that carries no values and needs no care goes in
// others. TestTable_ClassifiesEveryCommand fails on a command the server
// knows and the table does not.
var specs = []Spec{
	// Strings.
	{Name: "SET", Values: ValueAt2, Reply: ReplyValue, Flags: SetsValue | Destructive}, // SET ... GET replies with the old value
	{Name: "SETNX", Values: ValueAt2, Flags: SetsValue},
	{Name: "GETSET", Values: ValueAt2, Reply: ReplyValue, Flags: SetsValue | Destructive},
	{Name: "SETEX", Values: ValueAt3, Flags: SetsValue},
	{Name: "PSETEX", Values: ValueAt3, Flags: SetsValue},
	{Name: "MSET", Values: ValuesEvery2, Flags: SetsValue},
	{Name: "MSETNX", Values: ValuesEvery2, Flags: SetsValue},
	{Name: "MSETEX", Values: ValuesMsetex, Flags: SetsValue}, // Redis 8.4, Valkey 9.1
	{Name: "GET", Reply: ReplyValue},
	{Name: "GETEX", Reply: ReplyValue},
	{Name: "GETDEL", Reply: ReplyValue, Flags: Destructive},
	{Name: "MGET", Reply: ReplyValues},
	// Hashes.
	{Name: "HSET", Values: ValuesEvery2At3, Flags: SetsValue},
	{Name: "HMSET", Values: ValuesEvery2At3, Flags: SetsValue},
	{Name: "HSETNX", Values: ValueAt3, Flags: SetsValue},
	{Name: "HGET", Reply: ReplyValue},
	{Name: "HMGET", Reply: ReplyValues},
	{Name: "HGETALL", Reply: ReplyPairs, Flags: Unordered},
	{Name: "HVALS", Reply: ReplyValues, Flags: Unordered},
	{Name: "HRANDFIELD", Flags: ReplyOptions},                   // ReplyPairs WITHVALUES
	{Name: "HSCAN", Reply: ReplyScanPairs, Flags: ReplyOptions}, // none with NOVALUES
	// Redis 8's hash commands with field expiry (Valkey 9 has them too,
	// and HSETEX's NX and XX).
	{Name: "HSETEX", Values: ValuesHsetex, Flags: SetsValue},
	{Name: "HGETEX", Reply: ReplyValues},
	{Name: "HGETDEL", Reply: ReplyValues, Flags: Destructive},
	// Lists.
	{Name: "LPUSH", Values: ValuesFrom2},
	{Name: "RPUSH", Values: ValuesFrom2},
	{Name: "LPUSHX", Values: ValuesFrom2},
	{Name: "RPUSHX", Values: ValuesFrom2},
	{Name: "LINSERT", Values: ValuesLinsert, Flags: ListSearch},
	{Name: "LSET", Values: ValueAt3},
	{Name: "LREM", Values: ValueAt3, Flags: ListSearch},
	{Name: "LPOS", Values: ValueLpos, Flags: ListSearch},
	{Name: "LRANGE", Reply: ReplyValues},
	{Name: "LINDEX", Reply: ReplyValue},
	{Name: "LPOP", Reply: ReplyValue, Flags: Destructive},
	{Name: "RPOP", Reply: ReplyValue, Flags: Destructive},
	{Name: "LMOVE", Reply: ReplyValue, Flags: Moves},
	{Name: "RPOPLPUSH", Reply: ReplyValue, Flags: Moves},
	{Name: "LMPOP", Reply: ReplyKeyValues, Flags: Destructive},
	{Name: "BLPOP", Reply: ReplyKeyValue, Flags: Pin | Blocking | Destructive},
	{Name: "BRPOP", Reply: ReplyKeyValue, Flags: Pin | Blocking | Destructive},
	{Name: "BLMOVE", Reply: ReplyValue, Flags: Pin | Blocking | Moves},
	{Name: "BRPOPLPUSH", Reply: ReplyValue, Flags: Pin | Blocking | Moves},
	{Name: "BLMPOP", Reply: ReplyKeyValues, Flags: Pin | Blocking | Destructive},
	// Streams.
	{Name: "XADD", Values: ValuesXadd},
	{Name: "XRANGE", Reply: ReplyEntries},
	{Name: "XREVRANGE", Reply: ReplyEntries},
	{Name: "XREAD", Reply: ReplyStreams, Flags: BlockOption},
	{Name: "XREADGROUP", Reply: ReplyStreams, Flags: BlockOption},
	{Name: "XCLAIM", Reply: ReplyEntries, Flags: ReplyOptions}, // none with JUSTID
	{Name: "XAUTOCLAIM", Reply: ReplyAutoClaim, Flags: ReplyOptions},
	{Name: "XINFO", Reply: ReplyAny},
	// Sorted-set blocking pops and other blocking or connection-state commands.
	{Name: "BZPOPMIN", Flags: Pin | Blocking},
	{Name: "BZPOPMAX", Flags: Pin | Blocking},
	{Name: "BZMPOP", Flags: Pin | Blocking},
	{Name: "WAIT", Flags: Pin | Blocking},
	{Name: "WAITAOF", Flags: Pin | Blocking},
	{Name: "SELECT", Flags: Pin | SelectDB},
	{Name: "AUTH", Flags: Pin},
	{Name: "READONLY", Flags: Pin},
	{Name: "READWRITE", Flags: Pin},
	{Name: "ASKING", Flags: Pin | Asking},
	{Name: "UNWATCH", Flags: Pin},
	{Name: "WATCH", Flags: Pin | NotQueued},
	{Name: "MULTI", Flags: Pin | Multi | NotQueued},
	{Name: "EXEC", Reply: ReplyExec, Flags: Exec | NotQueued},
	{Name: "DISCARD", Flags: Discard | NotQueued},
	{Name: "HELLO", Flags: Pin | Hello},
	{Name: "RESET", Flags: Pin | Reset | NotQueued},
	{Name: "CLIENT", Flags: Pin | Client},
	{Name: "QUIT", Flags: Quit | NotQueued},
	{Name: "SUBSCRIBE", Flags: Pin | Subscribe},
	{Name: "PSUBSCRIBE", Flags: Pin | Subscribe},
	{Name: "SSUBSCRIBE", Flags: Pin | Subscribe},
	{Name: "UNSUBSCRIBE", Flags: Pin | Unsubscribe},
	{Name: "PUNSUBSCRIBE", Flags: Pin | Unsubscribe},
	{Name: "SUNSUBSCRIBE", Flags: Pin | Unsubscribe},
	{Name: "MONITOR", Flags: Pin | Monitor},
	{Name: "EVAL", Reply: ReplyAny, Flags: Script},
	{Name: "EVALSHA", Reply: ReplyAny, Flags: Script},
	{Name: "EVAL_RO", Reply: ReplyAny, Flags: Script},
	{Name: "EVALSHA_RO", Reply: ReplyAny, Flags: Script},
	{Name: "FCALL", Reply: ReplyAny, Flags: Script},
	{Name: "FCALL_RO", Reply: ReplyAny, Flags: Script},
	{Name: "CLUSTER", Flags: Topology}, // by subcommand: see Topology
	// Commands whose replies hold keys, members or fields, never values:
	// known, so that their replies pass untouched even when a key or
	// member happens to be a valid frame (Other commands' replies are
	// searched for frames).
	{Name: "SCAN"},
	{Name: "KEYS"},
	{Name: "RANDOMKEY"},
	{Name: "HKEYS", Flags: Unordered},
	{Name: "SMEMBERS", Flags: Unordered},
	{Name: "SRANDMEMBER"},
	{Name: "SPOP"},
	{Name: "SSCAN"},
	{Name: "SINTER"},
	{Name: "SUNION"},
	{Name: "SDIFF"},
	{Name: "ZRANGE"},
	{Name: "ZRANGEBYSCORE"},
	{Name: "ZRANGEBYLEX"},
	{Name: "ZREVRANGE"},
	{Name: "ZREVRANGEBYSCORE"},
	{Name: "ZREVRANGEBYLEX"},
	{Name: "ZSCAN"},
	{Name: "ZPOPMIN"},
	{Name: "ZPOPMAX"},
	{Name: "ZRANDMEMBER"},
	{Name: "ZMPOP"},
	{Name: "ZINTER"},
	{Name: "ZUNION"},
	{Name: "ZDIFF"},
	{Name: "GEORADIUS"},
	{Name: "GEORADIUSBYMEMBER"},
	{Name: "GEOSEARCH"},
	{Name: "PUBSUB"},
	{Name: "COMMAND"},
	{Name: "SORT", Reply: ReplyAny, Flags: Patterns},
	{Name: "SORT_RO", Reply: ReplyAny, Flags: Patterns},
	// Commands that look inside stored bytes.
	{Name: "STRLEN", Flags: Inspect | ReadOnly | HeadOnly, Arity: 2},
	{Name: "GETRANGE", Flags: Inspect | ReadOnly, Arity: 4},
	{Name: "SUBSTR", Flags: Inspect | ReadOnly, Arity: 4},
	{Name: "GETBIT", Flags: Inspect | ReadOnly, Arity: 3},
	{Name: "BITCOUNT", Flags: Inspect | ReadOnly, Arity: -2},
	{Name: "BITPOS", Flags: Inspect | ReadOnly, Arity: -3},
	{Name: "BITFIELD_RO", Flags: Inspect | ReadOnly, Arity: -2},
	{Name: "LCS", Flags: Inspect | ReadOnly, Keys: KeysTwo, Arity: -3},
	{Name: "APPEND", Flags: Inspect, Arity: 3},
	{Name: "SETRANGE", Flags: Inspect, Arity: 4},
	{Name: "SETBIT", Flags: Inspect, Arity: 4},
	{Name: "BITFIELD", Flags: Inspect, Arity: -2},
	{Name: "BITOP", Flags: Inspect, Keys: KeysFrom3, Arity: -4},
	{Name: "HSTRLEN", Flags: Inspect | ReadOnly | HeadOnly, Keys: KeyHash, Arity: 3},
	// Redis 8.4's DIGEST hashes the value (XXH3); DELEX deletes, with
	// IFEQ and friends on a condition on the stored value (the proxy and
	// the hook run those on the decoded value); Valkey 9's DELIFEQ.
	{Name: "DIGEST", Flags: Inspect | ReadOnly, Arity: 2},
	{Name: "DELEX"},
	{Name: "DELIFEQ", Flags: Inspect | Compare, Arity: 3},
	// INCR, DECR, INCRBY, DECRBY and HINCRBY are Other: a stored integer
	// has at most 20 bytes and never compresses, so a compressed value is
	// never an integer and Redis's "not an integer" error is the exact
	// reply. INCRBYFLOAT and HINCRBYFLOAT are known, for the same reason: a
	// value that parses as a number is always stored raw (codec.Numeric),
	// and their result, a number, needs no search for frames.
	{Name: "INCRBYFLOAT"},
	{Name: "HINCRBYFLOAT"},
}

// others are the commands that carry no values and need nothing of
// squeeze (Other), by the server version that brought them.
var others = []string{
	// Redis 7.0.
	`ACL BGREWRITEAOF BGSAVE CONFIG DBSIZE DEBUG DECR DECRBY DEL DUMP ECHO
	EXISTS EXPIRE EXPIREAT EXPIRETIME FAILOVER FLUSHALL FLUSHDB GEOADD
	GEODIST GEOHASH GEOPOS GEORADIUSBYMEMBER_RO GEORADIUS_RO GEOSEARCHSTORE
	HDEL HEXISTS HINCRBY HLEN INCR INCRBY INFO LASTSAVE LATENCY LLEN LOLWUT
	LTRIM MEMORY MIGRATE MODULE MOVE OBJECT PERSIST PEXPIRE PEXPIREAT
	PEXPIRETIME PFADD PFCOUNT PFDEBUG PFMERGE PFSELFTEST PING PUBLISH
	REPLCONF REPLICAOF RESTORE RESTORE-ASKING ROLE SADD SAVE SCARD
	SDIFFSTORE SHUTDOWN SINTERCARD SINTERSTORE SISMEMBER SLAVEOF SLOWLOG
	SMISMEMBER SMOVE SPUBLISH SREM SUNIONSTORE SWAPDB TIME TOUCH TYPE
	UNLINK XACK XDEL XGROUP XLEN XPENDING XSETID XTRIM ZADD ZCARD ZCOUNT
	ZDIFFSTORE ZINCRBY ZINTERCARD ZINTERSTORE ZLEXCOUNT ZMSCORE ZRANGESTORE
	ZRANK ZREM ZREMRANGEBYLEX ZREMRANGEBYRANK ZREMRANGEBYSCORE ZREVRANK ZSCORE
	ZUNIONSTORE`,
	// Redis 8.0: hash field expiry, vector sets.
	`HEXPIRE HEXPIREAT HEXPIRETIME HPERSIST HPEXPIRE HPEXPIREAT HPEXPIRETIME
	VADD VCARD VDIM VEMB VGETATTR VINFO VISMEMBER VLINKS VRANDMEMBER VREM
	VSETATTR VSIM`,
	// Valkey 9: cluster-wide SCAN (keys), the command log (as SLOWLOG).
	`CLUSTERSCAN COMMANDLOG`,
	// Redis 8.6: hot keys, slot trimming, vector set ranges (elements),
	// stream entry deletion, configuration and idempotency records (ids).
	`HOTKEYS TRIMSLOTS VRANGE XACKDEL XCFGSET XDELEX XIDMPRECORD`,
}

// otherFacts are the facts of some Other commands.
var otherFacts = map[string]Flag{
	"COPY": Copies, "RENAME": Copies, "RENAMENX": Copies,
	"TTL": TimeToLive, "PTTL": TimeToLive, "HTTL": TimeToLive, "HPTTL": TimeToLive,
	"SCRIPT": LoadsScripts, "FUNCTION": LoadsScripts,
	"SYNC": Refused, "PSYNC": Refused,
	// Not commands: Redis closes the connection of a client that sends
	// them (see Hostile), before it checks the name, the arguments or
	// the login.
	"POST": Hostile, "HOST:": Hostile,
}

var (
	table = map[string]*Spec{}
	all   []*Spec
)

func init() {
	for i := range specs {
		add(&specs[i])
	}
	for _, name := range slices.Sorted(maps.Keys(otherFacts)) {
		add(&Spec{Name: name, Reply: ReplySniff, Flags: Other | otherFacts[name]})
	}
	for _, group := range others {
		for _, name := range strings.Fields(group) {
			add(&Spec{Name: name, Reply: ReplySniff, Flags: Other})
		}
	}
}

func add(s *Spec) {
	if table[s.Name] != nil {
		panic("rediscmd: " + s.Name + " is in the table twice")
	}
	table[s.Name] = s
	all = append(all, s)
}
