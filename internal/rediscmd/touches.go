package rediscmd

import "strings"

// Touches says what a command reads and writes in Redis, for the order
// barriers of a proxy: two commands that touch nothing in common give the
// same replies and leave the same data in either order, so a command that
// waits behind a barrier raised for another one need not wait when both
// name their keys and the keys differ. The zero value is TouchesAny.
type Touches uint8

const (
	// TouchesAny: the command may read or write anything (keys not at
	// fixed places, the whole keyspace, the server's state, pub/sub): it
	// orders with every command.
	TouchesAny Touches = iota
	// TouchesNothing: the command reads and writes no key and no state
	// another client can change or see (PING, ECHO).
	TouchesNothing
	// TouchesKey1: the key at argument 1, and nothing else.
	TouchesKey1
	// TouchesKeysFrom1: every argument from 1 is a key (DEL k1 k2 ...).
	TouchesKeysFrom1
	// TouchesKeysEvery2: the arguments 1, 3, 5, ... are keys, the others
	// values (MSET k1 v1 k2 v2 ...).
	TouchesKeysEvery2
)

// touchGroups are the commands whose Touches is not TouchesAny. A command
// goes here only when COMMAND gives it exactly these key positions and it
// reads no other key (SORT's BY and GET patterns do, so SORT is not here)
// and no shared state (PUBLISH reaches subscribers: not here).
// TestTable_Touches holds each against the server's key positions.
var touchGroups = map[Touches]string{
	TouchesNothing: `PING ECHO`,
	TouchesKey1: `SET SETNX SETEX PSETEX GET GETEX GETDEL GETSET INCR DECR INCRBY DECRBY
	INCRBYFLOAT STRLEN GETRANGE APPEND SETRANGE GETBIT SETBIT BITCOUNT BITPOS
	HSET HMSET HSETNX HGET HMGET HGETALL HVALS HKEYS HLEN HDEL HEXISTS HINCRBY
	HINCRBYFLOAT HSTRLEN HRANDFIELD HSCAN
	LPUSH RPUSH LPUSHX RPUSHX LSET LRANGE LINDEX LLEN LPOP RPOP LTRIM
	SADD SREM SCARD SISMEMBER SMISMEMBER SMEMBERS SRANDMEMBER SPOP SSCAN
	ZADD ZREM ZCARD ZSCORE ZMSCORE ZINCRBY ZRANK ZREVRANK ZCOUNT ZRANGE
	ZRANGEBYSCORE ZREVRANGE ZREVRANGEBYSCORE ZSCAN
	XADD XLEN XRANGE XREVRANGE XDEL XTRIM
	EXPIRE PEXPIRE EXPIREAT PEXPIREAT PERSIST TTL PTTL TYPE`,
	TouchesKeysFrom1:  `DEL UNLINK EXISTS TOUCH MGET`,
	TouchesKeysEvery2: `MSET MSETNX`,
}

// wakeGroup are the commands of touchGroups that may serve a client
// blocked on their key (BLPOP ... BLMOVE on a list they push to, BZPOPMIN
// ... on a sorted set they add to, XREAD and XREADGROUP BLOCK on a stream
// they add to): the served command then reads and writes keys of its own,
// which the pushing command's Touches does not name.
const wakeGroup = `LPUSH RPUSH LPUSHX RPUSHX ZADD ZINCRBY XADD`

// readGroup are the commands of touchGroups that only read their keys:
// COMMAND flags them readonly (TestTable_Touches holds each against the
// server). An order barrier raised for one holds the requests that write
// one of its keys, and lets those that read them pass.
const readGroup = `GET STRLEN GETRANGE GETBIT BITCOUNT BITPOS
	HGET HMGET HGETALL HVALS HKEYS HLEN HEXISTS HSTRLEN HRANDFIELD HSCAN
	LRANGE LINDEX LLEN SCARD SISMEMBER SMISMEMBER SMEMBERS SRANDMEMBER SSCAN
	ZCARD ZSCORE ZMSCORE ZRANK ZREVRANK ZCOUNT ZRANGE ZRANGEBYSCORE ZREVRANGE
	ZREVRANGEBYSCORE ZSCAN XLEN XRANGE XREVRANGE TTL PTTL TYPE EXISTS TOUCH MGET`

func init() {
	for _, name := range strings.Fields(wakeGroup) {
		table[name].Wakes = true
	}
	for _, name := range strings.Fields(readGroup) {
		table[name].ReadsOnly = true
	}
	for t, group := range touchGroups {
		for _, name := range strings.Fields(group) {
			s := table[name]
			if s == nil {
				panic("rediscmd: touchGroups names " + name + ", which is not in the table")
			}
			s.Touches = t
		}
	}
}

// KeyPositions returns COMMAND's first key, last key and step for a
// Touches other than TouchesAny (ok false for TouchesAny).
func (t Touches) KeyPositions() (first, last, step int, ok bool) {
	switch t {
	case TouchesNothing:
		return 0, 0, 0, true
	case TouchesKey1:
		return 1, 1, 1, true
	case TouchesKeysFrom1:
		return 1, -1, 1, true
	case TouchesKeysEvery2:
		return 1, -1, 2, true
	}
	return 0, 0, 0, false
}

// EachKey calls f with each key of a command's arguments (name included)
// as t places them, and reports false for TouchesAny, whose keys are not
// known from their places.
func (t Touches) EachKey(args [][]byte, f func(key []byte)) bool {
	switch t {
	case TouchesNothing:
	case TouchesKey1:
		if len(args) > 1 {
			f(args[1])
		}
	case TouchesKeysFrom1:
		for _, k := range args[1:] {
			f(k)
		}
	case TouchesKeysEvery2:
		for i := 1; i < len(args); i += 2 {
			f(args[i])
		}
	default:
		return false
	}
	return true
}
