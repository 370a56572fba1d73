package proxy

import "github.com/squeeze-kv/squeeze/internal/rediscmd"

// shape says where values sit in a reply, so the proxy decodes exactly
// those bulk strings and never keys, fields, ids or members. The first
// shapes are the command table's reply kinds (rediscmd.Reply), by the same
// numbers; the proxy's own follow.
type shape uint8

// The command table's reply kinds.
const (
	shapeNone      = shape(rediscmd.ReplyNone)      // pass through untouched
	shapeValue     = shape(rediscmd.ReplyValue)     // a value, or an array of values (LPOP/RPOP with a count)
	shapeValues    = shape(rediscmd.ReplyValues)    // an array of values: MGET, HMGET, HVALS, LRANGE
	shapePairs     = shape(rediscmd.ReplyPairs)     // field, value pairs: flat, map, or array of pairs
	shapeKeyValue  = shape(rediscmd.ReplyKeyValue)  // [key, value]: BLPOP, BRPOP
	shapeKeyValues = shape(rediscmd.ReplyKeyValues) // [key, [values]]: LMPOP, BLMPOP
	shapeScanPairs = shape(rediscmd.ReplyScanPairs) // [cursor, [field, value, ...]]: HSCAN
	shapeEntries   = shape(rediscmd.ReplyEntries)   // stream entries [[id, [field, value, ...]], ...]
	shapeStreams   = shape(rediscmd.ReplyStreams)   // [[stream, entries], ...] or {stream: entries}: XREAD
	shapeAutoClaim = shape(rediscmd.ReplyAutoClaim) // [cursor, entries, deleted ids]: XAUTOCLAIM
	shapeAny       = shape(rediscmd.ReplyAny)       // every framed bulk string anywhere (scripts, SORT)
	shapeExec      = shape(rediscmd.ReplyExec)      // EXEC: element i has the shape of queued command i
	shapeSniff     = shape(rediscmd.ReplySniff)     // a command the proxy does not know: see unknownCmd
)

// The proxy's own shapes.
const (
	shapeInspect       = shape(rediscmd.NumReplies) + iota // queued inspect script: may be the "framed" marker
	shapeInspect3                                          // shapeInspect for a RESP3 client
	shapeRelay                                             // enters pub/sub or MONITOR relay (RESP2)
	shapeClusterSlots                                      // [[start, end, [endpoint, port, id, meta], ...], ...]
	shapeClusterShards                                     // [{slots: [...], nodes: [{port, ip, endpoint, ...}]}, ...]
	shapeClusterNodes                                      // "id host:port@cport flags ..." lines, one string or an array
	shapeStreamPair                                        // [stream, entries] inside an XREAD reply
)
