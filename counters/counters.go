// Package counters keeps fixed-width counters packed in Redis strings with
// BITFIELD: one string per entity (a "series"), one fixed slot per day, hour or
// any period the caller chooses, each slot a u8/u16/u32/i64... integer.
//
// Compared with the layouts in the seed article (a list of decimal counters,
// then four hex characters per day in a hash field rewritten by a Lua script),
// a packed series costs Type.Bits/8 bytes per counter plus one key, and an
// increment is one native, atomic, O(1) command:
//
//	BITFIELD cnt:<entity> OVERFLOW FAIL INCRBY u16 #<slot> <delta>
//
// Series are pre-sized at creation (Store.Create): a string that BITFIELD
// grows one slot at a time is reallocated with greedy headroom and ends up
// costing about 60% more memory than one created at its final size.
// Increments on a series that was never created still work, but the string is
// then grown by Redis; create series first (Store.CreateMany in bulk).
//
// The overflow rule (OverflowFail, OverflowSat, OverflowWrap) is chosen per
// Store; the zero value fails the increment with ErrOverflow and leaves the
// slot unchanged, so that no count is ever silently lost.
//
// A Store is safe for concurrent use. It works with any go-redis v9 client
// (redis.NewClient, redis.NewClusterClient, redis.NewUniversalClient): every
// operation touches a single key.
package counters

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client is what a Store needs from go-redis: *redis.Client,
// *redis.ClusterClient and redis.UniversalClient all satisfy it.
type Client interface {
	redis.Cmdable
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Config describes the series of a Store. Zero fields take the documented
// defaults, except Slots, which is required.
type Config struct {
	// Prefix is prepended to the entity to form the key ("cnt:" gives
	// "cnt:user42"). Empty means the entity is the key.
	Prefix string
	// Type is the width of every slot. Zero means U16.
	Type Type
	// Slots is the number of slots in a series, e.g. 365 for a year of days.
	Slots int
	// Overflow is the rule for increments that leave the type's range.
	// Zero means OverflowFail.
	Overflow Overflow
}

// Errors returned by a Store; match them with errors.Is.
var (
	// ErrOverflow: an increment under OverflowFail would leave the type's
	// range; the slot is unchanged.
	ErrOverflow = errors.New("counters: increment overflows the slot type")
	// ErrSlot: a slot index or range outside [0, Slots).
	ErrSlot = errors.New("counters: slot out of range")
	// ErrSum: a window sum does not fit in int64.
	ErrSum = errors.New("counters: sum overflows int64")
	// ErrConfig: an invalid Config.
	ErrConfig = errors.New("counters: invalid config")
)

// Store reads and updates the packed series described by its Config.
type Store struct {
	rdb      Client
	cfg      Config
	typ      string // "u16"
	overflow string // "FAIL"
	zeros    string // a fresh series
}

// New returns a Store for the series described by cfg. It returns an error
// wrapping ErrConfig when cfg.Slots is not positive, the type is not one
// BITFIELD accepts, or the series would exceed Redis's 512 MiB string limit.
func New(rdb Client, cfg Config) (*Store, error) {
	cfg.Type = cfg.Type.orDefault()
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil client", ErrConfig)
	}
	if !cfg.Type.Valid() {
		return nil, fmt.Errorf("%w: type %s: want u1..u63 or i1..i64", ErrConfig, cfg.Type)
	}
	if cfg.Slots <= 0 {
		return nil, fmt.Errorf("%w: Slots must be positive, got %d", ErrConfig, cfg.Slots)
	}
	if cfg.Type.Bytes(cfg.Slots) > 512<<20 {
		return nil, fmt.Errorf("%w: %d slots of %s exceed the 512 MiB string limit", ErrConfig, cfg.Slots, cfg.Type)
	}
	if cfg.Overflow > OverflowWrap {
		return nil, fmt.Errorf("%w: unknown overflow rule %d", ErrConfig, cfg.Overflow)
	}
	return &Store{
		rdb:      rdb,
		cfg:      cfg,
		typ:      cfg.Type.String(),
		overflow: cfg.Overflow.String(),
		zeros:    string(make([]byte, cfg.Type.Bytes(cfg.Slots))),
	}, nil
}

// Config returns the store's configuration with defaults filled in.
func (s *Store) Config() Config { return s.cfg }

// Key returns the Redis key of entity's series.
func (s *Store) Key(entity string) string { return s.cfg.Prefix + entity }

// SeriesBytes returns the size of one series string in bytes.
func (s *Store) SeriesBytes() int { return len(s.zeros) }

func (s *Store) checkSlot(slot int) error {
	if slot < 0 || slot >= s.cfg.Slots {
		return fmt.Errorf("%w: slot %d not in [0, %d)", ErrSlot, slot, s.cfg.Slots)
	}
	return nil
}

func (s *Store) checkRange(from, to int) error {
	if from < 0 || to > s.cfg.Slots || from > to {
		return fmt.Errorf("%w: range [%d, %d) not within [0, %d)", ErrSlot, from, to, s.cfg.Slots)
	}
	return nil
}

// Create creates entity's series at its full size with every slot zero. It
// reports false, and changes nothing, when the key already exists.
func (s *Store) Create(ctx context.Context, entity string) (bool, error) {
	return s.rdb.SetNX(ctx, s.Key(entity), s.zeros, 0).Result()
}

// CreateMany creates the series of entities (those that do not exist yet) in
// one pipeline, and returns how many it created.
func (s *Store) CreateMany(ctx context.Context, entities []string) (int, error) {
	cmds := make([]*redis.BoolCmd, len(entities))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, e := range entities {
			cmds[i] = p.SetNX(ctx, s.Key(e), s.zeros, 0)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("create series: %w", err)
	}
	n := 0
	for _, c := range cmds {
		if c.Val() {
			n++
		}
	}
	return n, nil
}

// Load writes values into entity's series, replacing it (slot i gets
// values[i]; slots past len(values) are zero). The string is written at its
// full pre-sized length in one SET, which also clears any TTL. It returns an
// error wrapping ErrSlot when there are more values than slots and one
// wrapping ErrValueRange when a value does not fit the type.
func (s *Store) Load(ctx context.Context, entity string, values []int64) error {
	b, err := s.Encode(nil, values)
	if err != nil {
		return err
	}
	return s.rdb.Set(ctx, s.Key(entity), b, 0).Err()
}

// Encode appends to dst the full series image holding values, as Load
// writes it. It fails like Load.
func (s *Store) Encode(dst []byte, values []int64) ([]byte, error) {
	if len(values) > s.cfg.Slots {
		return dst, fmt.Errorf("%w: %d values for %d slots", ErrSlot, len(values), s.cfg.Slots)
	}
	start := len(dst)
	dst, err := AppendEncode(dst, s.cfg.Type, values)
	if err != nil {
		return dst, err
	}
	return append(dst, s.zeros[len(dst)-start:]...), nil
}

// IncrArgs appends to dst the BITFIELD command that adds delta to slot:
// useful to queue increments in your own pipelines or MULTI blocks. The reply
// of such a command is read with IncrResult.
func (s *Store) IncrArgs(dst []any, entity string, slot int, delta int64) []any {
	return append(dst, "BITFIELD", s.Key(entity), "OVERFLOW", s.overflow, "INCRBY", s.typ, "#"+strconv.Itoa(slot), delta)
}

// IncrResult returns the new value of the slot from the reply of a command
// built by IncrArgs, or an error wrapping ErrOverflow when the increment
// failed under OverflowFail.
func IncrResult(cmd *redis.Cmd) (int64, error) {
	vals, err := cmd.Slice()
	if err != nil {
		return 0, err
	}
	if len(vals) != 1 {
		return 0, fmt.Errorf("counters: BITFIELD returned %d values, want 1", len(vals))
	}
	switch v := vals[0].(type) {
	case int64:
		return v, nil
	case nil:
		return 0, ErrOverflow
	default:
		return 0, fmt.Errorf("counters: BITFIELD returned %T, want an integer", v)
	}
}

// Incr adds delta (which may be negative) to slot of entity's series
// atomically and returns the new value. Under OverflowFail an increment that
// leaves the type's range returns an error wrapping ErrOverflow and changes
// nothing; OverflowSat clamps to the bound; OverflowWrap wraps around.
func (s *Store) Incr(ctx context.Context, entity string, slot int, delta int64) (int64, error) {
	if err := s.checkSlot(slot); err != nil {
		return 0, err
	}
	cmd := redis.NewCmd(ctx, s.IncrArgs(make([]any, 0, 8), entity, slot, delta)...)
	_ = s.rdb.Process(ctx, cmd)
	v, err := IncrResult(cmd)
	if err != nil {
		return 0, fmt.Errorf("incr %s slot %d by %d: %w", s.Key(entity), slot, delta, err)
	}
	return v, nil
}

// Incr is one increment of a batch (see Store.IncrMany).
type Incr struct {
	Entity string
	Slot   int
	Delta  int64
}

// IncrError reports which increment of a batch failed.
type IncrError struct {
	Index int // position in the batch
	Incr  Incr
	Err   error
}

// Error names the failed increment and its cause.
func (e *IncrError) Error() string {
	return fmt.Sprintf("counters: increment %d (%s slot %d by %d): %v", e.Index, e.Incr.Entity, e.Incr.Slot, e.Incr.Delta, e.Err)
}

// Unwrap returns the cause (ErrOverflow, a Redis error ...), for errors.Is.
func (e *IncrError) Unwrap() error { return e.Err }

// IncrMany applies the increments of ops in one pipeline (one round trip)
// and appends their new values to dst, in order. Each increment is atomic on
// its own; the batch is not a transaction. When some fail, the others are
// still applied, their values are still appended (0 for the failed ones), and
// the error is an *IncrError for the first failure.
func (s *Store) IncrMany(ctx context.Context, dst []int64, ops []Incr) ([]int64, error) {
	for i, op := range ops {
		if err := s.checkSlot(op.Slot); err != nil {
			return dst, &IncrError{Index: i, Incr: op, Err: err}
		}
	}
	cmds := make([]*redis.Cmd, len(ops))
	args := make([]any, 0, 8*len(ops))
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, op := range ops {
			n := len(args)
			args = s.IncrArgs(args, op.Entity, op.Slot, op.Delta)
			cmds[i] = redis.NewCmd(ctx, args[n:len(args):len(args)]...)
			_ = p.Process(ctx, cmds[i])
		}
		return nil
	})
	var first error
	for i, c := range cmds {
		v, err := IncrResult(c)
		if err != nil && first == nil {
			first = &IncrError{Index: i, Incr: ops[i], Err: err}
		}
		dst = append(dst, v)
	}
	return dst, first
}

// Get returns the value of one slot; slots of a series that does not exist
// read as zero.
func (s *Store) Get(ctx context.Context, entity string, slot int) (int64, error) {
	if err := s.checkSlot(slot); err != nil {
		return 0, err
	}
	v, err := s.AppendRange(ctx, nil, entity, slot, slot+1)
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// AppendRange appends the values of slots [from, to) to dst. It reads only
// the bytes holding those slots (GETRANGE). Slots of a series that does not
// exist read as zero.
func (s *Store) AppendRange(ctx context.Context, dst []int64, entity string, from, to int) ([]int64, error) {
	if err := s.checkRange(from, to); err != nil {
		return dst, err
	}
	if from == to {
		return dst, nil
	}
	bits := int64(s.cfg.Type.Bits)
	first := int64(from) * bits / 8
	last := (int64(to)*bits - 1) / 8
	b, err := s.rdb.GetRange(ctx, s.Key(entity), first, last).Bytes()
	if err != nil {
		return dst, fmt.Errorf("read %s: %w", s.Key(entity), err)
	}
	off := int64(from)*bits - first*8 // bit offset of slot from inside b
	return appendDecodeAt(dst, s.cfg.Type, b, uint64(off), to-from), nil
}

func appendDecodeAt(dst []int64, t Type, b []byte, off uint64, n int) []int64 {
	for i := 0; i < n; i++ {
		dst = append(dst, t.extend(getBits(b, off+uint64(i)*uint64(t.Bits), t.Bits)))
	}
	return dst
}

// Sum returns the sum of slots [from, to): the total over a window. It
// returns an error wrapping ErrSum when the total does not fit in int64.
func (s *Store) Sum(ctx context.Context, entity string, from, to int) (int64, error) {
	vals, err := s.AppendRange(ctx, nil, entity, from, to)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, v := range vals {
		n := sum + v
		if (v > 0 && n < sum) || (v < 0 && n > sum) {
			return 0, fmt.Errorf("%w: window [%d, %d) of %s", ErrSum, from, to, s.Key(entity))
		}
		sum = n
	}
	return sum, nil
}

// clearScript zeroes slots [from, to) of an existing series (a missing
// series is left missing, so that Clear never creates an unsized string).
var clearScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local t, from, to = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local args = {}
for i = from, to - 1 do
  args[#args+1] = 'SET'; args[#args+1] = t; args[#args+1] = '#' .. i; args[#args+1] = 0
  if #args >= 4000 then redis.call('BITFIELD', KEYS[1], unpack(args)); args = {} end
end
if #args > 0 then redis.call('BITFIELD', KEYS[1], unpack(args)) end
return 1
`)

// Clear sets slots [from, to) of entity's series to zero, atomically. A
// series that does not exist is left alone.
func (s *Store) Clear(ctx context.Context, entity string, from, to int) error {
	if err := s.checkRange(from, to); err != nil {
		return err
	}
	if from == to {
		return nil
	}
	return clearScript.Run(ctx, s.rdb, []string{s.Key(entity)}, s.typ, from, to).Err()
}

// shiftScript drops the first ARGV[1] bytes of an existing series, moves
// the rest to the front and zero-fills the tail, in place (SETRANGE keeps the
// string's size and TTL).
var shiftScript = redis.NewScript(`
local n, size = tonumber(ARGV[1]), tonumber(ARGV[2])
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local rest = ''
if n < size then rest = redis.call('GETRANGE', KEYS[1], n, size - 1) end
redis.call('SETRANGE', KEYS[1], 0, rest .. string.rep('\0', size - #rest))
return 1
`)

// Shift rotates entity's series by n slots, atomically: slots [n, Slots)
// move to [0, Slots-n), the n newest slots become zero and the n oldest are
// dropped. With a window of the last Slots days where slot Slots-1 is today,
// call Shift(ctx, e, 1) once a day. n*Type.Bits must be a multiple of 8
// (always true for u8/u16/u32/i64); otherwise Shift returns an error
// wrapping ErrSlot. A series that does not exist is left alone.
func (s *Store) Shift(ctx context.Context, entity string, n int) error {
	if n < 0 {
		return fmt.Errorf("%w: negative shift %d", ErrSlot, n)
	}
	if n == 0 {
		return nil
	}
	if n >= s.cfg.Slots {
		return s.Clear(ctx, entity, 0, s.cfg.Slots)
	}
	if (n*int(s.cfg.Type.Bits))%8 != 0 {
		return fmt.Errorf("%w: shift by %d slots of %s is not a whole number of bytes", ErrSlot, n, s.cfg.Type)
	}
	return shiftScript.Run(ctx, s.rdb, []string{s.Key(entity)}, n*int(s.cfg.Type.Bits)/8, len(s.zeros)).Err()
}

// Expire makes entity's series expire after ttl (the whole series: Redis
// expires keys, not parts of strings). It reports false when the series does
// not exist.
func (s *Store) Expire(ctx context.Context, entity string, ttl time.Duration) (bool, error) {
	return s.rdb.Expire(ctx, s.Key(entity), ttl).Result()
}

// Delete removes entity's series and reports whether it existed.
func (s *Store) Delete(ctx context.Context, entity string) (bool, error) {
	n, err := s.rdb.Del(ctx, s.Key(entity)).Result()
	return n == 1, err
}
