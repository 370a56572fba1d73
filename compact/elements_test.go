package compact

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/squeeze-kv/squeeze/codec"
)

// TestRun_Hash compacts the field values of a hash written with s2: every
// framed field is rewritten with the target codec and decodes to the same
// bytes, a field written between the read and the write keeps its newer
// value, raw fields stay as they are, the TTL stays, and a second run
// rewrites nothing. A dry run writes nothing.
func TestRun_Hash(t *testing.T) {
	rdb := newClient(t)
	ctx := context.Background()
	s2 := encoder(t, "s2")
	docs := map[string][]byte{}
	for i := range 10 {
		f := "f" + strconv.Itoa(i)
		docs[f] = doc(i)
		rdb.HSet(ctx, "h", f, s2.AppendEncode(nil, docs[f]))
	}
	corrupt := append([]byte(codec.Magic+"\x01\x03\x00\x90\x4e"), "garbage"...)
	rdb.HSet(ctx, "h", "small", "x", "changed", s2.AppendEncode(nil, doc(99)), "corrupt", corrupt)
	rdb.Expire(ctx, "h", time.Hour)
	rdb.HSet(ctx, "dry", "f", s2.AppendEncode(nil, doc(5)))
	dryBefore := rdb.HGet(ctx, "dry", "f").Val()

	st, err := Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:9"), Pattern: "dry", DryRun: true})
	if err != nil || st.Rewritten != 1 || st.MemoryAfter >= st.MemoryBefore {
		t.Fatalf("dry run: %+v, %v", st, err)
	}
	if rdb.HGet(ctx, "dry", "f").Val() != dryBefore {
		t.Fatal("dry run wrote")
	}

	st, err = Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:9"), Pattern: "h", beforeWrite: func() {
		rdb.HSet(ctx, "h", "changed", "newer")
	}})
	if err != nil || st.Rewritten != 1 || st.Eligible != 1 || st.BytesAfter >= st.BytesBefore || st.MemoryAfter >= st.MemoryBefore {
		t.Fatalf("stats %+v, %v", st, err)
	}
	dec, _ := codec.NewDecoder()
	for f, want := range docs {
		v := []byte(rdb.HGet(ctx, "h", f).Val())
		h, err := codec.ParseHeader(v)
		if err != nil || h.ID != codec.IDZstd {
			t.Fatalf("%s: header %+v, %v", f, h, err)
		}
		if got, err := dec.AppendDecode(nil, v); err != nil || string(got) != string(want) {
			t.Fatalf("%s decodes to other bytes: %v", f, err)
		}
	}
	if got := rdb.HGet(ctx, "h", "changed").Val(); got != "newer" {
		t.Fatalf("a field written meanwhile was overwritten: %q", got)
	}
	if got := rdb.HGet(ctx, "h", "small").Val(); got != "x" {
		t.Fatalf("raw field: %q", got)
	}
	if got := rdb.HGet(ctx, "h", "corrupt").Val(); got != string(corrupt) {
		t.Fatalf("a corrupt field was changed: %q", got)
	}
	if ttl := rdb.TTL(ctx, "h").Val(); ttl <= 0 {
		t.Fatalf("TTL lost: %v", ttl)
	}

	st, err = Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:9"), Pattern: "h"})
	if err != nil || st.Rewritten != 0 || st.Skipped[SkipNoGain] != 1 {
		t.Fatalf("second run: %+v, %v", st, err)
	}
}

// TestRun_HashFieldExpiry: compaction keeps the expiry of the hash fields
// that have one (HEXPIRE, Redis 7.4; HSETEX, Redis 8), which HSET alone
// would clear, and gives none to the fields that have none. Skipped on
// servers without field expiry; CI runs it in the Redis 8 pass.
func TestRun_HashFieldExpiry(t *testing.T) {
	rdb := newClient(t)
	ctx := context.Background()
	if err := rdb.Do(ctx, "HPEXPIRETIME", "h", "FIELDS", "1", "f").Err(); err != nil && strings.Contains(err.Error(), "unknown command") {
		t.Skipf("this server has no hash field expiry (Redis 7.4 and 8 have): %v", err)
	}
	s2 := encoder(t, "s2")
	for i := range 4 {
		rdb.HSet(ctx, "h", "f"+strconv.Itoa(i), s2.AppendEncode(nil, doc(i)))
	}
	at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	rdb.HPExpireAt(ctx, "h", at, "f0", "f2")
	st, err := Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:9"), Pattern: "h"})
	if err != nil || st.Rewritten != 1 {
		t.Fatalf("stats %+v, %v", st, err)
	}
	for i, want := range []int64{at.UnixMilli(), -1, at.UnixMilli(), -1} {
		f := "f" + strconv.Itoa(i)
		if h, err := codec.ParseHeader([]byte(rdb.HGet(ctx, "h", f).Val())); err != nil || h.ID != codec.IDZstd {
			t.Fatalf("%s was not compacted: %+v, %v", f, h, err)
		}
		if got := rdb.HPExpireTime(ctx, "h", f).Val(); len(got) != 1 || got[0] != want {
			t.Fatalf("%s: expiry time %v after compaction, want %d", f, got, want)
		}
	}
}

// TestRun_List compacts the elements of a list longer than one LRANGE page,
// written with s2. An element pushed at the head between the read and the
// write moves every index: the compare-and-set then leaves the moved
// elements alone, and the list still holds the same values in the same
// order. The next run rewrites every framed element, keeps the TTL, raw and
// corrupt elements, and a third run finds nothing to gain.
func TestRun_List(t *testing.T) {
	rdb := newClient(t)
	ctx := context.Background()
	s2 := encoder(t, "s2")
	corrupt := append([]byte(codec.Magic+"\x01\x03\x00\x90\x4e"), "garbage"...)
	var want []string // the values, in order
	var stored []any
	for i := range 1200 {
		switch i {
		case 7:
			want, stored = append(want, "small"), append(stored, "small")
		case 700:
			want, stored = append(want, string(corrupt)), append(stored, corrupt)
		default:
			d := doc(i % 50)
			want, stored = append(want, string(d)), append(stored, s2.AppendEncode(nil, d))
		}
	}
	rdb.RPush(ctx, "l", stored...)
	rdb.Expire(ctx, "l", time.Hour)
	dec, _ := codec.NewDecoder()
	check := func(stage string, want []string) (framedZstd int) {
		t.Helper()
		got := rdb.LRange(ctx, "l", 0, -1).Val()
		if len(got) != len(want) {
			t.Fatalf("%s: %d elements, want %d", stage, len(got), len(want))
		}
		for i, e := range got {
			v := []byte(e)
			if h, err := codec.ParseHeader(v); err == nil && string(v) != string(corrupt) {
				if h.ID == codec.IDZstd {
					framedZstd++
				}
				if v, err = dec.AppendDecode(nil, v); err != nil {
					t.Fatalf("%s: element %d: %v", stage, i, err)
				}
			}
			if string(v) != want[i] {
				t.Fatalf("%s: element %d holds another value", stage, i)
			}
		}
		return framedZstd
	}

	pushed := false
	st, err := Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:9"), Pattern: "l", beforeWrite: func() {
		if !pushed {
			rdb.LPush(ctx, "l", "head")
			pushed = true
		}
	}})
	if err != nil || st.Eligible != 1 {
		t.Fatalf("run with a push meanwhile: %+v, %v", st, err)
	}
	want = append([]string{"head"}, want...)
	first := check("after a push meanwhile", want)

	st, err = Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:9"), Pattern: "l"})
	if err != nil || st.Rewritten != 1 || st.BytesAfter >= st.BytesBefore || st.MemoryAfter >= st.MemoryBefore {
		t.Fatalf("second run: %+v, %v", st, err)
	}
	if n := check("second run", want); n != len(want)-3 || n <= first {
		t.Fatalf("second run: %d zstd elements (%d before), want %d", n, first, len(want)-3)
	}
	if ttl := rdb.TTL(ctx, "l").Val(); ttl <= 0 {
		t.Fatalf("TTL lost: %v", ttl)
	}

	st, err = Run(ctx, rdb, Options{Encoder: encoder(t, "zstd:9"), Pattern: "l"})
	if err != nil || st.Rewritten != 0 || st.Skipped[SkipNoGain] != 1 {
		t.Fatalf("third run: %+v, %v", st, err)
	}
}
