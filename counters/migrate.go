package counters

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Errors returned by the migration helpers; match them with errors.Is.
var (
	// ErrSource: the source key is missing, has the wrong type, or holds
	// something that is not the layout it was declared to be.
	ErrSource = errors.New("counters: bad migration source")
	// ErrExists: the target series exists and Replace was not set.
	ErrExists = errors.New("counters: target series already exists")
	// ErrVerify: reading back the migrated series (or re-reading the source)
	// did not give the same values; the target is left in place for
	// inspection and the source is never deleted.
	ErrVerify = errors.New("counters: migration verification failed")
)

// ParseDecimalList parses the elements of the seed's list layout (one
// decimal counter per element, element i is slot i, as LRANGE returns them).
// It returns an error wrapping ErrSource naming the first bad element.
func ParseDecimalList(dst []int64, elems []string) ([]int64, error) {
	for i, e := range elems {
		v, err := strconv.ParseInt(e, 10, 64)
		if err != nil {
			return dst, fmt.Errorf("%w: list element %d is %q, not a decimal integer", ErrSource, i, truncate(e))
		}
		dst = append(dst, v)
	}
	return dst, nil
}

// ParseHex parses the seed's hex layout: 4 hexadecimal characters (either
// case) per slot, slot i at characters [4i, 4i+4), each an unsigned 16-bit
// value, e.g. "0118009600fa0230" is 280, 150, 250, 560. It returns an error
// wrapping ErrSource when the length is not a multiple of 4 or a character
// is not hexadecimal.
//
// The seed's script writes a value below zero as 16 characters
// (string.format('%04X', -5) is "FFFFFFFFFFFFFFFB"), which shifts every
// later slot by 3 and keeps the length a multiple of 4: such a string parses
// into wrong values. Only its length betrays it; migrations check it with
// MigrateOptions.Slots.
func ParseHex(dst []int64, s []byte) ([]int64, error) {
	if len(s)%4 != 0 {
		return dst, fmt.Errorf("%w: hex counters of length %d, not a multiple of 4", ErrSource, len(s))
	}
	for i := 0; i < len(s); i += 4 {
		var v int64
		for _, c := range s[i : i+4] {
			d, ok := unhex(c)
			if !ok {
				return dst, fmt.Errorf("%w: slot %d is %q, not 4 hex digits", ErrSource, i/4, s[i:i+4])
			}
			v = v<<4 | int64(d)
		}
		dst = append(dst, v)
	}
	return dst, nil
}

// AppendHex appends the seed's hex layout of values (uppercase, as the
// seed's script writes it with %04X). Values must be in 0..65535.
func AppendHex(dst []byte, values []int64) ([]byte, error) {
	const digits = "0123456789ABCDEF"
	for i, v := range values {
		if v < 0 || v > 0xFFFF {
			return dst, fmt.Errorf("%w: slot %d value %d does not fit 4 hex digits", ErrValueRange, i, v)
		}
		dst = append(dst, digits[v>>12&15], digits[v>>8&15], digits[v>>4&15], digits[v&15])
	}
	return dst, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// MigrateOptions control a migration. The zero value refuses to overwrite
// an existing target and keeps the source.
type MigrateOptions struct {
	// Replace overwrites an existing target series.
	Replace bool
	// DeleteSource deletes the source key after the target was verified.
	DeleteSource bool
	// Slots, when positive, is the exact number of values the source must
	// hold (365 for a year of days); any other count is ErrSource. It catches
	// the seed's hex strings lengthened by a negative value.
	Slots int
}

// MigrateReport says what a migration did.
type MigrateReport struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	Slots    int    `json:"slots"`    // values migrated (and verified)
	Sum      int64  `json:"sum"`      // total of the values
	Verified bool   `json:"verified"` // every value read back equal
	Deleted  bool   `json:"deleted"`  // source deleted
}

// MigrateList converts the seed's list layout at listKey (one decimal
// counter per element, element i is slot i) into entity's packed series.
//
// It reads and parses the source, checks that every value fits the store's
// type and that there are at most Slots values (exactly opt.Slots when set),
// writes the packed series in one SET (NX unless opt.Replace), then reads
// the target back and the source again and compares them value by value.
// Errors wrap ErrSource (bad or missing source), ErrValueRange, ErrSlot,
// ErrExists, or ErrVerify (the source changed meanwhile or the target reads
// back different: the target is left for inspection). The source is deleted
// only with opt.DeleteSource and only after verification.
func (s *Store) MigrateList(ctx context.Context, listKey, entity string, opt MigrateOptions) (MigrateReport, error) {
	if err := s.checkNotSource(listKey, entity); err != nil {
		return MigrateReport{Source: listKey, Target: s.Key(entity)}, err
	}
	read := func() ([]int64, error) {
		t, err := s.rdb.Type(ctx, listKey).Result()
		if err != nil {
			return nil, err
		}
		if t != "list" {
			return nil, fmt.Errorf("%w: %s is a %s, want a list", ErrSource, listKey, t)
		}
		elems, err := s.rdb.LRange(ctx, listKey, 0, -1).Result()
		if err != nil {
			return nil, err
		}
		return ParseDecimalList(nil, elems)
	}
	del := func() error { return s.rdb.Del(ctx, listKey).Err() }
	return s.migrate(ctx, listKey, entity, read, del, opt)
}

// MigrateHex converts the seed's hex layout (4 hex characters per slot in
// field of the hash at hashKey, "counts" in the seed) into entity's packed
// series. See MigrateList for the guarantees.
func (s *Store) MigrateHex(ctx context.Context, hashKey, field, entity string, opt MigrateOptions) (MigrateReport, error) {
	if err := s.checkNotSource(hashKey, entity); err != nil {
		return MigrateReport{Source: hashKey + " " + field, Target: s.Key(entity)}, err
	}
	read := func() ([]int64, error) {
		b, err := s.rdb.HGet(ctx, hashKey, field).Bytes()
		if errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("%w: hash %s has no field %q (or does not exist)", ErrSource, hashKey, field)
		}
		if err != nil {
			return nil, err
		}
		return ParseHex(nil, b)
	}
	// Delete the field; Redis removes the hash when it was the last one.
	del := func() error { return s.rdb.HDel(ctx, hashKey, field).Err() }
	return s.migrate(ctx, hashKey+" "+field, entity, read, del, opt)
}

// checkNotSource refuses a target series stored at the source key itself
// (an empty Prefix and entity == key): the SET would replace the source
// before it is verified, and with Replace the source would be lost.
func (s *Store) checkNotSource(sourceKey, entity string) error {
	if s.Key(entity) == sourceKey {
		return fmt.Errorf("migrate %s: %w: the target series would overwrite the source key; use another entity or a Prefix", sourceKey, ErrSource)
	}
	return nil
}

// migrate is the common path of MigrateList and MigrateHex: read and parse
// the source, check every value fits the store's type and the number of
// values fits Slots, write the packed series in one SET (NX unless Replace),
// then read the target back and the source again and compare value by
// value. With DeleteSource the list key, or the hash field, is deleted
// after verification. A source that changed in between, or a target that reads back
// different, gives ErrVerify and the source is kept.
func (s *Store) migrate(ctx context.Context, source, entity string, read func() ([]int64, error), del func() error, opt MigrateOptions) (MigrateReport, error) {
	rep := MigrateReport{Source: source, Target: s.Key(entity)}
	vals, err := read()
	if err != nil {
		return rep, fmt.Errorf("migrate %s: %w", source, err)
	}
	if opt.Slots > 0 && len(vals) != opt.Slots {
		return rep, fmt.Errorf("migrate %s: %w: holds %d values, want exactly %d", source, ErrSource, len(vals), opt.Slots)
	}
	img, err := s.Encode(nil, vals)
	if err != nil {
		return rep, fmt.Errorf("migrate %s: %w", source, err)
	}
	if opt.Replace {
		err = s.rdb.Set(ctx, rep.Target, img, 0).Err()
	} else {
		var ok bool
		ok, err = s.rdb.SetNX(ctx, rep.Target, img, 0).Result()
		if err == nil && !ok {
			return rep, fmt.Errorf("migrate %s: %w: %s (use Replace to overwrite)", source, ErrExists, rep.Target)
		}
	}
	if err != nil {
		return rep, fmt.Errorf("migrate %s: write %s: %w", source, rep.Target, err)
	}
	got, err := s.AppendRange(ctx, nil, entity, 0, s.cfg.Slots)
	if err != nil {
		return rep, fmt.Errorf("migrate %s: read back: %w", source, err)
	}
	again, err := read()
	if err != nil {
		return rep, fmt.Errorf("migrate %s: re-read source: %w", source, err)
	}
	for i := 0; i < s.cfg.Slots; i++ {
		var want, now int64
		if i < len(vals) {
			want = vals[i]
		}
		if i < len(again) {
			now = again[i]
		}
		if len(again) != len(vals) || now != want {
			return rep, fmt.Errorf("migrate %s: %w: source changed during migration at slot %d (%d then %d)", source, ErrVerify, i, want, now)
		}
		if got[i] != want {
			return rep, fmt.Errorf("migrate %s: %w: slot %d reads %d, want %d", source, ErrVerify, i, got[i], want)
		}
		rep.Sum += want
	}
	rep.Slots = len(vals)
	rep.Verified = true
	if opt.DeleteSource {
		if err := del(); err != nil {
			return rep, fmt.Errorf("migrate %s: delete source: %w", source, err)
		}
		rep.Deleted = true
	}
	return rep, nil
}
