package counters

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
)

// seedHexScript is the seed article's hex-in-hash script, with its HSET
// call given the field name it omits (as printed it fails with "wrong number
// of arguments") and adding delta instead of subtracting it.
var seedHexScript = redis.NewScript(`
local getData = function(str, index)
    local count = str:sub(index*4 -3, index*4)
    return tonumber("0x"..count)
end
local setData = function(str, index, data)
    local str1, str2
    if index == 1 then str1 = "" else str1 = str:sub(1, index*4 - 4) end
    if index*4 == string.len(str) then str2 = "" else str2 = str:sub(index*4 + 1, string.len(str)) end
    local newcount = string.format('%04X', tonumber(data))
    return str1 .. newcount .. str2
end
local dayindex = tonumber(ARGV[1])
local delta = tonumber(ARGV[2])
local strval = redis.call('hget', KEYS[1], "counts")
local count = getData(strval, dayindex)
strval = setData(strval, dayindex, count + delta)
redis.call('hset', KEYS[1], "counts", strval)
return count + delta
`)

func TestParseHex(t *testing.T) {
	tests := []struct {
		in   string
		want []int64
		err  bool
	}{
		{"0118009600fa0230", []int64{280, 150, 250, 560}, false}, // the seed's example
		{"0118009600FA0230", []int64{280, 150, 250, 560}, false},
		{"", nil, false},
		{"FFFF", []int64{65535}, false},
		{"011", nil, true},
		{"0118FFFFFFFFFFFFFFFB", []int64{280, 65535, 65535, 65535, 65531}, false}, // %04X of -5: wrong but well-formed
		{"0118FFFFFFFFFFFFFFFB0", nil, true},
		{"01g8", nil, true},
		{"01 8", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseHex(nil, []byte(tt.in))
		if tt.err {
			if !errors.Is(err, ErrSource) {
				t.Errorf("ParseHex(%q) = %v, %v; want ErrSource", tt.in, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseHex(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	if _, err := AppendHex(nil, []int64{65536}); !errors.Is(err, ErrValueRange) {
		t.Errorf("AppendHex(65536): %v", err)
	}
}

func TestParseDecimalList(t *testing.T) {
	got, err := ParseDecimalList(nil, []string{"280", "150", "-3", "0"})
	if err != nil || !slices.Equal(got, []int64{280, 150, -3, 0}) {
		t.Fatalf("= %v, %v", got, err)
	}
	for _, bad := range [][]string{{"1", "x"}, {"1.5"}, {""}, {"99999999999999999999"}} {
		if _, err := ParseDecimalList(nil, bad); !errors.Is(err, ErrSource) {
			t.Errorf("ParseDecimalList(%q): %v, want ErrSource", bad, err)
		}
	}
}

func TestMigrate(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	s := mustStore(t, rdb, Config{Prefix: "cnt:", Slots: 365})

	// The seed's layouts, with the day counters updated by the seed's script.
	days := make([]int64, 365)
	for i := range days {
		days[i] = int64(i*977%4000 + i%3)
	}
	hex, _ := AppendHex(nil, make([]int64, 365))
	if err := rdb.HSet(ctx, "newkey", "counts", hex).Err(); err != nil {
		t.Fatal(err)
	}
	for i, v := range days {
		if err := rdb.RPush(ctx, "oldkey", v).Err(); err != nil {
			t.Fatal(err)
		}
		if err := seedHexScript.Run(ctx, rdb, []string{"newkey"}, i+1, v).Err(); err != nil {
			t.Fatal(err)
		}
	}

	rep, err := s.MigrateHex(ctx, "newkey", "counts", "hexed", MigrateOptions{})
	if err != nil || !rep.Verified || rep.Slots != 365 {
		t.Fatalf("MigrateHex = %+v, %v", rep, err)
	}
	rep, err = s.MigrateList(ctx, "oldkey", "listed", MigrateOptions{DeleteSource: true})
	if err != nil || !rep.Verified || !rep.Deleted || rep.Slots != 365 {
		t.Fatalf("MigrateList = %+v, %v", rep, err)
	}
	var want int64
	for _, v := range days {
		want += v
	}
	if rep.Sum != want {
		t.Fatalf("report sum = %d, want %d", rep.Sum, want)
	}
	for _, e := range []string{"hexed", "listed"} {
		got, err := s.AppendRange(ctx, nil, e, 0, 365)
		if err != nil || !slices.Equal(got, days) {
			t.Fatalf("%s: migrated series differs: %v", e, err)
		}
	}
	if rdb.Exists(ctx, "oldkey").Val() != 0 || rdb.Exists(ctx, "newkey").Val() != 1 {
		t.Fatal("DeleteSource deleted the wrong sources")
	}
	// The packed series answers the same increments as the seed's script.
	if v, err := s.Incr(ctx, "hexed", 1, 5); err != nil || v != days[1]+5 {
		t.Fatalf("Incr on migrated = %d, %v", v, err)
	}

	// Errors: each leaves the target untouched and the source in place.
	if _, err := s.MigrateHex(ctx, "newkey", "counts", "hexed", MigrateOptions{}); !errors.Is(err, ErrExists) {
		t.Fatalf("existing target: %v, want ErrExists", err)
	}
	if v, _ := s.Get(ctx, "hexed", 1); v != days[1]+5 {
		t.Fatal("refused migration changed the target")
	}
	if _, err := s.MigrateHex(ctx, "newkey", "counts", "hexed", MigrateOptions{Replace: true}); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	if v, _ := s.Get(ctx, "hexed", 1); v != days[1] {
		t.Fatal("Replace did not overwrite the target")
	}

	rdb.HSet(ctx, "h", "counts", "0118FFFFFFFFFFFFFFFB", "other", "x")
	rdb.HSet(ctx, "h2", "counts", "01g8")
	rdb.RPush(ctx, "l8", 1, 2, 300)
	rdb.RPush(ctx, "lbad", 1, "two")
	long := make([]any, 366)
	for i := range long {
		long[i] = 1
	}
	rdb.RPush(ctx, "llong", long...)
	rdb.Set(ctx, "str", "1", 0)
	s8 := mustStore(t, rdb, Config{Prefix: "c8:", Type: U8, Slots: 365})
	tests := []struct {
		name string
		run  func() (MigrateReport, error)
		want error
	}{
		{"negative in hex", func() (MigrateReport, error) {
			return s.MigrateHex(ctx, "h", "counts", "x1", MigrateOptions{Slots: 2})
		}, ErrSource},
		{"not hex", func() (MigrateReport, error) { return s.MigrateHex(ctx, "h2", "counts", "x9", MigrateOptions{}) }, ErrSource},
		{"missing field", func() (MigrateReport, error) { return s.MigrateHex(ctx, "h", "nope", "x2", MigrateOptions{}) }, ErrSource},
		{"missing hash", func() (MigrateReport, error) { return s.MigrateHex(ctx, "nohash", "counts", "x3", MigrateOptions{}) }, ErrSource},
		{"value too big", func() (MigrateReport, error) { return s8.MigrateList(ctx, "l8", "x4", MigrateOptions{}) }, ErrValueRange},
		{"not decimal", func() (MigrateReport, error) { return s.MigrateList(ctx, "lbad", "x5", MigrateOptions{}) }, ErrSource},
		{"too many", func() (MigrateReport, error) { return s.MigrateList(ctx, "llong", "x6", MigrateOptions{}) }, ErrSlot},
		{"not a list", func() (MigrateReport, error) { return s.MigrateList(ctx, "str", "x7", MigrateOptions{}) }, ErrSource},
		{"missing list", func() (MigrateReport, error) { return s.MigrateList(ctx, "nolist", "x8", MigrateOptions{}) }, ErrSource},
	}
	for i, tt := range tests {
		rep, err := tt.run()
		if !errors.Is(err, tt.want) || rep.Verified {
			t.Errorf("%s: %+v, %v; want %v", tt.name, rep, err, tt.want)
		}
		if n := rdb.Exists(ctx, "cnt:x"+strconv.Itoa(i+1), "c8:x"+strconv.Itoa(i+1), "cnt:x9").Val(); n != 0 {
			t.Errorf("%s: failed migration created the target", tt.name)
		}
	}
}

// TestMigrate_TargetIsSource: with an empty Prefix and the entity named as
// the source key, the SET used to replace the source before verification
// (with Replace, the list was gone and the migration reported a failure).
// It is now refused and the source is left as it was.
func TestMigrate_TargetIsSource(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	s := mustStore(t, rdb, Config{Prefix: "", Slots: 365})
	if err := rdb.RPush(ctx, "same:list", 5, 6, 7).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, "same:hash", "counts", "00050006").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MigrateList(ctx, "same:list", "same:list", MigrateOptions{Replace: true}); !errors.Is(err, ErrSource) {
		t.Errorf("list onto itself: %v, want ErrSource", err)
	}
	if _, err := s.MigrateHex(ctx, "same:hash", "counts", "same:hash", MigrateOptions{Replace: true}); !errors.Is(err, ErrSource) {
		t.Errorf("hash onto itself: %v, want ErrSource", err)
	}
	if got := rdb.LRange(ctx, "same:list", 0, -1).Val(); !slices.Equal(got, []string{"5", "6", "7"}) {
		t.Errorf("source list now %v", got)
	}
	if got := rdb.HGet(ctx, "same:hash", "counts").Val(); got != "00050006" {
		t.Errorf("source hash field now %q", got)
	}
}
