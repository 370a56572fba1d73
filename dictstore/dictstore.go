// Package dictstore keeps trained zstd dictionaries in Redis itself, so that
// every squeeze proxy and library instance in front of the same Redis can
// read the frames that name them (docs/FORMAT.md, dictionary ids).
//
// Small values (a few hundred bytes to a few kB of JSON) share most of their
// structure with their peers, not with themselves, so they compress poorly
// alone and well against a dictionary trained on their peers. A frame
// written with a dictionary carries its id; a reader needs the same
// dictionary bytes, forever. The design follows from that:
//
//   - A dictionary is immutable by id. Its bytes live at the key
//     squeeze:dict:<id> (Key), written with SET NX, so a published id can
//     never name other bytes; publishing different bytes under an existing
//     id is an error naming the id.
//   - The hash squeeze:dicts (IndexKey) maps each id to a small JSON Meta:
//     what it was trained on and what it measured. It is written after the
//     bytes, so an id listed there can always be loaded.
//   - Train samples live values read-only (SCAN, TYPE, GET, HGETALL), holds
//     out a fifth of them to measure the ratio with and without the
//     dictionary, and derives the id from a hash of the dictionary bytes, in
//     zstd's user range [32768, 2^31): two trainings on the same data agree
//     on the id, and different dictionaries practically never collide.
//   - Readers use a Resolver: a *codec.Decoder that knows every dictionary
//     loaded so far, behind an atomic pointer (no lock on the hot path), and
//     that loads an unknown id from Redis once, on demand, and swaps in a
//     new Decoder that also knows it.
//
// Dictionaries are never deleted by squeeze: a value written with one may
// live for years. Deleting squeeze:dict:<id> by hand makes every value
// written with that id unreadable.
package dictstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
)

// Where dictionaries live in Redis. Both names start with KeyPrefix's
// "squeeze:dict", so one prefix test (IsStoreKey) recognizes them.
const (
	// KeyPrefix is followed by the decimal id: squeeze:dict:40001 holds the
	// bytes of dictionary 40001.
	KeyPrefix = "squeeze:dict:"
	// IndexKey is the hash of id -> JSON Meta.
	IndexKey = "squeeze:dicts"
)

// Range of the ids Train picks: zstd reserves ids below 32768 for a
// public registry, and frames written by zstd's own tools may use ids up to
// 2^31-1.
const (
	MinUserID = 32768
	MaxID     = 1<<31 - 1
)

// ErrNotFound is wrapped by the error of Load when no dictionary is
// published under the id.
var ErrNotFound = errors.New("dictstore: dictionary not published")

// Key returns the Redis key holding the bytes of dictionary id.
func Key(id uint32) string { return KeyPrefix + strconv.FormatUint(uint64(id), 10) }

// IsStoreKey reports whether key is one of the keys this package writes
// (a dictionary or the index). Compressing clients must store them raw.
func IsStoreKey(key string) bool {
	return strings.HasPrefix(key, "squeeze:dict")
}

// Meta describes a published dictionary: what it was trained on and what it
// measured on held-out samples.
type Meta struct {
	ID           uint32    `json:"id"`
	Size         int       `json:"size"`         // dictionary bytes
	Pattern      string    `json:"pattern"`      // SCAN pattern of the training keys
	Samples      int       `json:"samples"`      // values trained on
	SampleBytes  int64     `json:"sample_bytes"` // their total size
	Created      time.Time `json:"created"`
	Codec        string    `json:"codec,omitempty"`         // the codec the ratios were measured with
	HeldOut      int       `json:"held_out,omitempty"`      // values measured (not trained on)
	RatioWithout float64   `json:"ratio_without,omitempty"` // original/stored bytes without the dictionary
	RatioWith    float64   `json:"ratio_with,omitempty"`    // ... and with it
}

// ParseMeta parses the JSON metadata of one dictionary as stored in
// IndexKey. It returns an error for malformed JSON, an id out of range, or
// negative counts.
func ParseMeta(b []byte) (Meta, error) {
	var m Meta
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		return Meta{}, fmt.Errorf("dictstore: metadata: %w", err)
	}
	if dec.More() {
		return Meta{}, errors.New("dictstore: metadata: trailing data after the JSON object")
	}
	if m.ID == 0 || m.ID > MaxID {
		return Meta{}, fmt.Errorf("dictstore: metadata: id %d out of range 1..2^31-1", m.ID)
	}
	if m.Size < 0 || m.Samples < 0 || m.SampleBytes < 0 || m.HeldOut < 0 || m.RatioWith < 0 || m.RatioWithout < 0 {
		return Meta{}, fmt.Errorf("dictstore: metadata of dictionary %d: negative count", m.ID)
	}
	return m, nil
}

// checkDictionary verifies that data is a zstd dictionary carrying id.
func checkDictionary(id uint32, data []byte) error {
	if id == 0 || id > MaxID {
		return fmt.Errorf("dictstore: dictionary id %d out of range 1..2^31-1", id)
	}
	info, err := zstd.InspectDictionary(data)
	if err != nil {
		return fmt.Errorf("dictstore: dictionary %d: not a zstd dictionary: %w", id, err)
	}
	if info.ID() != id {
		return fmt.Errorf("dictstore: dictionary bytes carry id %d, not %d", info.ID(), id)
	}
	return nil
}

// Publish stores d in Redis under Key(d.ID) with SET NX and records meta
// (with its ID and Size set from d) in IndexKey. Publishing the same bytes
// again is a no-op that keeps the first metadata; publishing different
// bytes under an id already taken is an error naming the id. It returns an
// error when d is not a valid zstd dictionary carrying d.ID.
func Publish(ctx context.Context, rdb redis.UniversalClient, d codec.Dictionary, meta Meta) error {
	if err := checkDictionary(d.ID, d.Data); err != nil {
		return err
	}
	key := Key(d.ID)
	set, err := rdb.SetNX(ctx, key, d.Data, 0).Result()
	if err != nil {
		return fmt.Errorf("dictstore: publish %d: SET NX %s: %w", d.ID, key, err)
	}
	if !set {
		old, err := rdb.Get(ctx, key).Bytes()
		if err != nil {
			return fmt.Errorf("dictstore: publish %d: GET %s: %w", d.ID, key, err)
		}
		if !bytes.Equal(old, d.Data) {
			return fmt.Errorf("dictstore: dictionary id %d is already published (%s) with different bytes; dictionaries are immutable, train or pick another id", d.ID, key)
		}
	}
	meta.ID, meta.Size = d.ID, len(d.Data)
	if meta.Created.IsZero() {
		meta.Created = time.Now().UTC().Truncate(time.Second)
	}
	js, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("dictstore: publish %d: %w", d.ID, err)
	}
	if err := rdb.HSetNX(ctx, IndexKey, strconv.FormatUint(uint64(d.ID), 10), js).Err(); err != nil {
		return fmt.Errorf("dictstore: publish %d: HSETNX %s: %w", d.ID, IndexKey, err)
	}
	return nil
}

// Load reads dictionary id from Redis. It returns an error wrapping
// ErrNotFound, naming the id and the key, when nothing is published there,
// and an error when the stored bytes are not a zstd dictionary with that id.
func Load(ctx context.Context, rdb redis.UniversalClient, id uint32) (codec.Dictionary, error) {
	if id == 0 || id > MaxID {
		return codec.Dictionary{}, fmt.Errorf("dictstore: dictionary id %d out of range 1..2^31-1", id)
	}
	key := Key(id)
	data, err := rdb.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return codec.Dictionary{}, fmt.Errorf("%w: id %d (key %s does not exist; publish it with squeeze dict train --publish)", ErrNotFound, id, key)
	}
	if err != nil {
		return codec.Dictionary{}, fmt.Errorf("dictstore: load dictionary %d: GET %s: %w", id, key, err)
	}
	if err := checkDictionary(id, data); err != nil {
		return codec.Dictionary{}, fmt.Errorf("%w (stored at %s)", err, key)
	}
	return codec.Dictionary{ID: id, Data: data}, nil
}

// List returns the metadata of every published dictionary, by id. An entry
// that does not parse is an error naming its id.
func List(ctx context.Context, rdb redis.UniversalClient) ([]Meta, error) {
	all, err := rdb.HGetAll(ctx, IndexKey).Result()
	if err != nil {
		return nil, fmt.Errorf("dictstore: HGETALL %s: %w", IndexKey, err)
	}
	metas := make([]Meta, 0, len(all))
	for field, js := range all {
		m, err := ParseMeta([]byte(js))
		if err != nil {
			return nil, fmt.Errorf("%s field %q: %w", IndexKey, field, err)
		}
		if strconv.FormatUint(uint64(m.ID), 10) != field {
			return nil, fmt.Errorf("dictstore: %s field %q holds the metadata of id %d", IndexKey, field, m.ID)
		}
		metas = append(metas, m)
	}
	slices.SortFunc(metas, func(a, b Meta) int { return int(a.ID) - int(b.ID) })
	return metas, nil
}
