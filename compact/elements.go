package compact

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/dictstore"
)

// HashCASScript is the compare-and-set that writes compacted hash field
// values: ARGV holds triples of field, old value, new value, and each field
// is set to its new value only if it still holds the old one. HSET keeps
// the key's TTL, but clears the field's own (Redis 7.4's HEXPIRE, Redis 8's
// HSETEX), so the script reads the field's expiry time first and sets it
// again (on servers without field expiry the read fails and nothing more
// is done). It returns, per triple, 1 if it set the field and 0 if not;
// redis.pcall makes a key that became another type a mismatch, not a
// script error.
var HashCASScript = elementCAS("HGET", `local t = redis.pcall('HPEXPIRETIME', KEYS[1], 'FIELDS', 1, ARGV[i])
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
    if type(t) == 'table' and type(t[1]) == 'number' and t[1] > 0 then
      redis.call('HPEXPIREAT', KEYS[1], t[1], 'FIELDS', 1, ARGV[i])
    end`)

// ListCASScript is HashCASScript for lists: ARGV holds triples of index,
// old element, new element, and each element is set (LSET, which keeps the
// TTL) only if the index still holds the old bytes. An element that moved
// (a push or pop at the head meanwhile) is left alone: it is found at
// another index or not at all. If another element with exactly the old
// bytes took its place, it holds the same value, which the new bytes hold
// too.
var ListCASScript = elementCAS("LINDEX", `redis.call('LSET', KEYS[1], ARGV[i], ARGV[i + 2])`)

// elementCAS returns the compare-and-set script over triples of name, old,
// new that reads an element with get and writes it with the Lua statements
// set (ARGV[i] names the element, ARGV[i + 2] is its new value).
func elementCAS(get, set string) string {
	return `local res = {}
for i = 1, #ARGV, 3 do
  local v = redis.pcall('` + get + `', KEYS[1], ARGV[i])
  if v == ARGV[i + 1] then
    ` + set + `
    res[#res + 1] = 1
  else
    res[#res + 1] = 0
  end
end
return res`
}

var (
	hashCASScript = redis.NewScript(HashCASScript)
	listCASScript = redis.NewScript(ListCASScript)
)

// elementsPerScript bounds the elements one compare-and-set call writes,
// so that one script does not hold Redis for long.
const elementsPerScript = 64

// listPage is how many list elements one LRANGE reads.
const listPage = 512

// elementReader returns the next page of a hash's fields or a list's
// elements as items named by field or index, and whether it was the last.
type elementReader func(ctx context.Context) (items []*item, raw int, last bool, err error)

// hashReader reads a hash with HSCAN. HSCAN may return a field twice; it
// is kept once.
func (r *runner) hashReader(key string) elementReader {
	seen := map[string]bool{}
	var cursor uint64
	return func(ctx context.Context) ([]*item, int, bool, error) {
		kvs, next, err := r.rdb.HScan(ctx, key, cursor, "*", r.o.ScanCount).Result()
		if err != nil {
			return nil, 0, true, err
		}
		var items []*item
		raw := 0
		for i := 0; i+1 < len(kvs); i += 2 {
			field, v := kvs[i], []byte(kvs[i+1])
			if seen[field] {
				continue
			}
			seen[field] = true
			if !codec.IsFramed(v) && !r.o.IncludeRaw {
				raw++
				continue
			}
			items = append(items, &item{key: field, old: v})
		}
		cursor = next
		return items, raw, cursor == 0, nil
	}
}

// listReader reads a list from the head, listPage elements at a time.
func (r *runner) listReader(key string) elementReader {
	var start int64
	return func(ctx context.Context) ([]*item, int, bool, error) {
		vals, err := r.rdb.LRange(ctx, key, start, start+listPage-1).Result()
		if err != nil {
			return nil, 0, true, err
		}
		var items []*item
		raw := 0
		for i, s := range vals {
			v := []byte(s)
			if !codec.IsFramed(v) && !r.o.IncludeRaw {
				raw++
				continue
			}
			items = append(items, &item{key: strconv.FormatInt(start+int64(i), 10), old: v})
		}
		start += int64(len(vals))
		return items, raw, len(vals) < listPage, nil
	}
}

// elements compacts the field values of a hash or the elements of a list,
// page by page: read, decode and re-encode each value as for strings, then
// compare-and-set those that gain, in scripts of at most elementsPerScript
// elements (cas). A value written meanwhile keeps its newer form. The key
// counts as rewritten when at least one element was.
func (r *runner) elements(ctx context.Context, key string, next elementReader, cas *redis.Script) error {
	memOld, err := r.rdb.MemoryUsage(ctx, key, 0).Result()
	if err == redis.Nil {
		r.st.skip(SkipGone)
		return nil
	}
	if err != nil {
		return fmt.Errorf("compact: MEMORY USAGE %q: %w", key, err)
	}
	var before, after, read int64
	eligible, raw, set, tried := 0, 0, 0, 0
	reasons := map[string]int{}
	for last := false; !last; {
		var items []*item
		var nraw int
		items, nraw, last, err = next(ctx)
		if err != nil {
			if strings.HasPrefix(err.Error(), "WRONGTYPE") {
				r.st.skip(SkipChanged)
				return nil
			}
			return fmt.Errorf("compact: reading %q: %w", key, err)
		}
		raw += nraw
		if len(items) == 0 {
			continue
		}
		eligible += len(items)
		for _, it := range items {
			read += int64(len(it.old))
		}
		r.encodeAll(ctx, items)
		var writes []*item
		for _, it := range items {
			if it.reason != "" {
				reasons[it.reason]++
				continue
			}
			writes = append(writes, it)
		}
		if len(writes) == 0 {
			continue
		}
		if r.o.beforeWrite != nil {
			r.o.beforeWrite()
		}
		tried += len(writes)
		if r.o.DryRun {
			for _, it := range writes {
				set++
				before += int64(len(it.old))
				after += int64(len(it.new))
			}
			continue
		}
		for len(writes) > 0 {
			n := min(len(writes), elementsPerScript)
			args := make([]any, 0, 3*n)
			for _, it := range writes[:n] {
				args = append(args, it.key, it.old, it.new)
			}
			done, err := cas.Run(ctx, r.rdb, []string{key}, args...).Int64Slice()
			if err != nil || len(done) != n {
				return fmt.Errorf("compact: compare-and-set %q: %d results for %d elements, %v", key, len(done), n, err)
			}
			for i, it := range writes[:n] {
				if done[i] == 1 {
					set++
					before += int64(len(it.old))
					after += int64(len(it.new))
				}
			}
			writes = writes[n:]
		}
	}
	switch {
	case eligible == 0 && raw > 0:
		r.st.skip(SkipRaw)
		return nil
	case eligible == 0:
		r.st.skip(SkipGone) // emptied meanwhile
		return nil
	}
	r.st.Eligible++
	r.st.BytesRead += read
	switch {
	case tried == 0:
		r.st.skip(mostCommon(reasons))
		return nil
	case set == 0:
		r.st.skip(SkipChanged)
		return nil
	}
	estimate := memOld - (dictstore.ValueMemory(int(before)) - dictstore.ValueMemory(int(after)))
	if r.o.DryRun {
		r.countKey(before, after, memOld, estimate)
		return nil
	}
	memNew, err := r.rdb.MemoryUsage(ctx, key, 0).Result()
	if err != nil {
		memNew = estimate
	}
	r.countKey(before, after, memOld, memNew)
	return nil
}

// countKey counts a rewritten key by its stored bytes and memory.
func (r *runner) countKey(bytesBefore, bytesAfter, memBefore, memAfter int64) {
	r.st.Rewritten++
	r.st.BytesBefore += bytesBefore
	r.st.BytesAfter += bytesAfter
	r.st.MemoryBefore += memBefore
	r.st.MemoryAfter += memAfter
}

// mostCommon returns the skip reason counted most often (ties: the
// alphabetically first, so that the result is stable).
func mostCommon(reasons map[string]int) string {
	best, n := SkipNoGain, 0
	for reason, c := range reasons {
		if c > n || (c == n && reason < best) {
			best, n = reason, c
		}
	}
	return best
}
