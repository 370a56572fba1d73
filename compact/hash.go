package compact

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/dictstore"
)

// HashCASScript is the compare-and-set that writes compacted hash field
// values: ARGV holds triples of field, old value, new value, and each field
// is set to its new value only if it still holds the old one. HSET keeps
// the key's TTL. It returns, per triple, 1 if it set the field and 0 if
// not; redis.pcall makes a key that became another type a mismatch, not a
// script error.
const HashCASScript = `local res = {}
for i = 1, #ARGV, 3 do
  local v = redis.pcall('HGET', KEYS[1], ARGV[i])
  if v == ARGV[i + 1] then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
    res[#res + 1] = 1
  else
    res[#res + 1] = 0
  end
end
return res`

var hashCASScript = redis.NewScript(HashCASScript)

// hashFieldsPerScript bounds the fields one compare-and-set call writes, so
// that one script does not hold Redis for long.
const hashFieldsPerScript = 64

// hash compacts the field values of one hash, field by field: HSCAN, decode
// and re-encode each value as for strings, then compare-and-set the fields
// that gain, in scripts of at most hashFieldsPerScript fields. A field
// written meanwhile keeps its newer value. The key counts as rewritten when
// at least one field was.
func (r *runner) hash(ctx context.Context, key string) error {
	memOld, err := r.rdb.MemoryUsage(ctx, key, 0).Result()
	if err == redis.Nil {
		r.st.skip(SkipGone)
		return nil
	}
	if err != nil {
		return fmt.Errorf("compact: MEMORY USAGE %q: %w", key, err)
	}
	var items []*item
	seen := map[string]bool{}
	var read int64
	raw := 0
	var cursor uint64
	for {
		kvs, next, err := r.rdb.HScan(ctx, key, cursor, "*", r.o.ScanCount).Result()
		if err != nil {
			if strings.HasPrefix(err.Error(), "WRONGTYPE") {
				r.st.skip(SkipChanged)
				return nil
			}
			return fmt.Errorf("compact: HSCAN %q: %w", key, err)
		}
		for i := 0; i+1 < len(kvs); i += 2 {
			field, v := kvs[i], []byte(kvs[i+1])
			if seen[field] { // HSCAN may return a field twice
				continue
			}
			seen[field] = true
			if !codec.IsFramed(v) && !r.o.IncludeRaw {
				raw++
				continue
			}
			read += int64(len(v))
			items = append(items, &item{key: field, old: v})
		}
		cursor = next
		if cursor == 0 {
			break
		}
	}
	if len(items) == 0 {
		if raw > 0 {
			r.st.skip(SkipRaw)
		} else {
			r.st.skip(SkipGone) // emptied meanwhile
		}
		return nil
	}
	r.st.Eligible++
	r.st.BytesRead += read
	r.encodeAll(ctx, items)
	var writes []*item
	reasons := map[string]int{}
	for _, it := range items {
		if it.reason != "" {
			reasons[it.reason]++
			continue
		}
		writes = append(writes, it)
	}
	if len(writes) == 0 {
		r.st.skip(mostCommon(reasons))
		return nil
	}
	if r.o.beforeWrite != nil {
		r.o.beforeWrite()
	}
	var before, after int64
	if r.o.DryRun {
		for _, it := range writes {
			before += int64(len(it.old))
			after += int64(len(it.new))
		}
		r.countKey(before, after, memOld, memOld-(dictstore.ValueMemory(int(before))-dictstore.ValueMemory(int(after))))
		return nil
	}
	set := 0
	for len(writes) > 0 {
		n := min(len(writes), hashFieldsPerScript)
		args := make([]any, 0, 3*n)
		for _, it := range writes[:n] {
			args = append(args, it.key, it.old, it.new)
		}
		done, err := hashCASScript.Run(ctx, r.rdb, []string{key}, args...).Int64Slice()
		if err != nil || len(done) != n {
			return fmt.Errorf("compact: hash compare-and-set %q: %d results for %d fields, %v", key, len(done), n, err)
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
	if set == 0 {
		r.st.skip(SkipChanged)
		return nil
	}
	memNew, err := r.rdb.MemoryUsage(ctx, key, 0).Result()
	if err != nil {
		memNew = memOld - (dictstore.ValueMemory(int(before)) - dictstore.ValueMemory(int(after)))
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
