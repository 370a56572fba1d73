package counters

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

func newClient(t *testing.T) *redis.Client {
	t.Helper()
	r := testutil.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func mustStore(t *testing.T, rdb Client, cfg Config) *Store {
	t.Helper()
	s, err := New(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseType(t *testing.T) {
	tests := []struct {
		in   string
		want Type
		err  bool
	}{
		{"u16", U16, false},
		{"U8", U8, false},
		{"i64", I64, false},
		{"u63", Type{Bits: 63}, false},
		{"u1", Type{Bits: 1}, false},
		{"i1", Type{Signed: true, Bits: 1}, false},
		{"u12", Type{Bits: 12}, false},
		{"u64", Type{}, true}, // Redis: unsigned at most 63 bits
		{"i65", Type{}, true},
		{"u0", Type{}, true},
		{"u016", Type{}, true},
		{"u+8", Type{}, true},
		{"u-8", Type{}, true},
		{"x16", Type{}, true},
		{"u", Type{}, true},
		{"", Type{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseType(tt.in)
			if tt.err {
				if !errors.Is(err, ErrType) {
					t.Fatalf("ParseType(%q) = %v, %v; want ErrType", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseType(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			if got.String() != "u"+tt.in[1:] && got.String() != "i"+tt.in[1:] {
				t.Fatalf("String() = %q for %q", got.String(), tt.in)
			}
		})
	}
}

func TestType_Bounds(t *testing.T) {
	tests := []struct {
		t        Type
		min, max int64
	}{
		{Type{}, 0, 65535},
		{U8, 0, 255},
		{I8, -128, 127},
		{Type{Bits: 63}, 0, 1<<63 - 1},
		{I64, -1 << 63, 1<<63 - 1},
		{Type{Signed: true, Bits: 1}, -1, 0},
	}
	for _, tt := range tests {
		if tt.t.Min() != tt.min || tt.t.Max() != tt.max {
			t.Errorf("%s: Min, Max = %d, %d; want %d, %d", tt.t, tt.t.Min(), tt.t.Max(), tt.min, tt.max)
		}
	}
}

// TestAppendEncode_MatchesBITFIELD writes random values with BITFIELD SET on
// a real server and checks the client-side image is byte for byte the same,
// and that AppendDecode reads BITFIELD's image back.
func TestAppendEncode_MatchesBITFIELD(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"u1", "u3", "u5", "u8", "u12", "u16", "u32", "u63", "i1", "i7", "i8", "i16", "i33", "i64"} {
		t.Run(name, func(t *testing.T) {
			typ, _ := ParseType(name)
			const n = 37
			vals := make([]int64, n)
			args := []any{"BITFIELD", "img:" + name}
			for i := range vals {
				span := uint64(typ.Max()-typ.Min()) + 1 // 0 means the whole int64 range
				var v int64
				if span == 0 {
					v = int64(rng.Uint64())
				} else {
					v = typ.Min() + int64(rng.Uint64N(span))
				}
				vals[i] = v
				args = append(args, "SET", name, "#"+strconv.Itoa(i), v)
			}
			if err := rdb.Do(ctx, args...).Err(); err != nil {
				t.Fatal(err)
			}
			server, err := rdb.Get(ctx, "img:"+name).Bytes()
			if err != nil {
				t.Fatal(err)
			}
			prefix := []byte("keep")
			img, err := AppendEncode(prefix, typ, vals)
			if err != nil {
				t.Fatal(err)
			}
			if string(img[:4]) != "keep" || string(img[4:]) != string(server) {
				t.Fatalf("image differs:\n client %x\n server %x", img[4:], server)
			}
			got := AppendDecode([]int64{-7}, typ, server, 0, n)
			if got[0] != -7 || !slices.Equal(got[1:], vals) {
				t.Fatalf("decode = %v, want %v", got[1:], vals)
			}
		})
	}
}

func TestAppendEncode_Range(t *testing.T) {
	if _, err := AppendEncode(nil, U8, []int64{1, 256}); !errors.Is(err, ErrValueRange) {
		t.Fatalf("u8 256: err = %v, want ErrValueRange", err)
	}
	if _, err := AppendEncode(nil, U16, []int64{-1}); !errors.Is(err, ErrValueRange) {
		t.Fatalf("u16 -1: err = %v, want ErrValueRange", err)
	}
	if _, err := AppendEncode(nil, Type{Bits: 64}, []int64{1}); !errors.Is(err, ErrType) {
		t.Fatalf("u64: err = %v, want ErrType", err)
	}
}

func TestNew_Config(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialed
	defer rdb.Close()
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no slots", Config{}},
		{"negative slots", Config{Slots: -1}},
		{"u64", Config{Slots: 1, Type: Type{Bits: 64}}},
		{"too big", Config{Slots: 1 << 31, Type: I64}},
		{"overflow", Config{Slots: 1, Overflow: 9}},
	}
	for _, tt := range tests {
		if _, err := New(rdb, tt.cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", tt.name, err)
		}
	}
	s, err := New(rdb, Config{Slots: 365})
	if err != nil || s.Config().Type != U16 || s.SeriesBytes() != 730 {
		t.Fatalf("defaults: %+v, %d bytes, %v", s.Config(), s.SeriesBytes(), err)
	}
}

func TestStore_Create_PreSized(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	s := mustStore(t, rdb, Config{Prefix: "c:", Slots: 365})
	ok, err := s.Create(ctx, "e1")
	if err != nil || !ok {
		t.Fatalf("Create = %v, %v", ok, err)
	}
	if _, err := s.Incr(ctx, "e1", 3, 5); err != nil {
		t.Fatal(err)
	}
	ok, err = s.Create(ctx, "e1")
	if err != nil || ok {
		t.Fatalf("second Create = %v, %v; want false", ok, err)
	}
	if v, _ := s.Get(ctx, "e1", 3); v != 5 {
		t.Fatalf("second Create changed the series: slot 3 = %d", v)
	}
	if n := rdb.StrLen(ctx, "c:e1").Val(); n != 730 {
		t.Fatalf("STRLEN = %d, want 730", n)
	}
	n, err := s.CreateMany(ctx, []string{"e1", "e2", "e3"})
	if err != nil || n != 2 {
		t.Fatalf("CreateMany = %d, %v; want 2", n, err)
	}

	// The reason to pre-size: a series grown slot by slot by BITFIELD
	// takes more memory than one created at its final size.
	for i := 0; i < 365; i++ {
		if err := rdb.Do(ctx, "BITFIELD", "grown", "INCRBY", "u16", "#"+strconv.Itoa(i), 1).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Incr(ctx, "e2", i, 1); err != nil {
			t.Fatal(err)
		}
	}
	grown := rdb.MemoryUsage(ctx, "grown").Val()
	sized := rdb.MemoryUsage(ctx, "c:e2").Val()
	t.Logf("MEMORY USAGE: pre-sized %d bytes, grown by BITFIELD %d bytes", sized, grown)
	if sized >= grown {
		t.Fatalf("pre-sized series (%d bytes) not smaller than grown one (%d bytes)", sized, grown)
	}
}

func TestStore_Incr_Overflow(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	tests := []struct {
		typ      Type
		overflow Overflow
		start    int64
		delta    int64
		want     int64
		err      error
	}{
		{U8, OverflowFail, 250, 10, 250, ErrOverflow},
		{U8, OverflowSat, 250, 10, 255, nil},
		{U8, OverflowWrap, 250, 10, 4, nil},
		{U8, OverflowFail, 0, -1, 0, ErrOverflow},
		{U8, OverflowSat, 0, -1, 0, nil},
		{U8, OverflowWrap, 0, -1, 255, nil},
		{I8, OverflowFail, -120, -10, -120, ErrOverflow},
		{I8, OverflowSat, -120, -10, -128, nil},
		{I8, OverflowWrap, 127, 1, -128, nil},
		{U16, OverflowFail, 65000, 535, 65535, nil},
		{I64, OverflowFail, 1<<63 - 2, 2, 1<<63 - 2, ErrOverflow},
		{I64, OverflowSat, 5, -7, -2, nil},
	}
	for i, tt := range tests {
		name := tt.typ.String() + "/" + tt.overflow.String() + "/" + strconv.Itoa(i)
		t.Run(name, func(t *testing.T) {
			s := mustStore(t, rdb, Config{Prefix: name + ":", Type: tt.typ, Slots: 10, Overflow: tt.overflow})
			vals := make([]int64, 10)
			vals[4] = tt.start
			if err := s.Load(ctx, "e", vals); err != nil {
				t.Fatal(err)
			}
			got, err := s.Incr(ctx, "e", 4, tt.delta)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Incr = %d, %v; want %v", got, err, tt.err)
				}
			} else if err != nil || got != tt.want {
				t.Fatalf("Incr = %d, %v; want %d", got, err, tt.want)
			}
			if v, err := s.Get(ctx, "e", 4); err != nil || v != tt.want {
				t.Fatalf("Get after Incr = %d, %v; want %d", v, err, tt.want)
			}
			if v, _ := s.Get(ctx, "e", 3); v != 0 {
				t.Fatalf("neighbour slot changed: %d", v)
			}
		})
	}
}

func TestStore_SlotErrors(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	s := mustStore(t, rdb, Config{Slots: 10})
	if _, err := s.Incr(ctx, "e", 10, 1); !errors.Is(err, ErrSlot) {
		t.Errorf("Incr slot 10: %v", err)
	}
	if _, err := s.Incr(ctx, "e", -1, 1); !errors.Is(err, ErrSlot) {
		t.Errorf("Incr slot -1: %v", err)
	}
	if _, err := s.Get(ctx, "e", 10); !errors.Is(err, ErrSlot) {
		t.Errorf("Get slot 10: %v", err)
	}
	if _, err := s.Sum(ctx, "e", 5, 11); !errors.Is(err, ErrSlot) {
		t.Errorf("Sum [5,11): %v", err)
	}
	if _, err := s.AppendRange(ctx, nil, "e", 6, 5); !errors.Is(err, ErrSlot) {
		t.Errorf("Range [6,5): %v", err)
	}
	if err := s.Clear(ctx, "e", 0, 11); !errors.Is(err, ErrSlot) {
		t.Errorf("Clear [0,11): %v", err)
	}
	if err := s.Load(ctx, "e", make([]int64, 11)); !errors.Is(err, ErrSlot) {
		t.Errorf("Load 11 values: %v", err)
	}
	if err := s.Load(ctx, "e", []int64{70000}); !errors.Is(err, ErrValueRange) {
		t.Errorf("Load 70000 into u16: %v", err)
	}
	if n := rdb.DBSize(ctx).Val(); n != 0 {
		t.Errorf("failed calls created %d keys", n)
	}
	if err := rdb.Set(ctx, "str", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.LPush(ctx, "list", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Incr(ctx, "list", 0, 1); err == nil {
		t.Error("Incr on a list: no error")
	}
}

func TestStore_RangeSum(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, typ := range []Type{U8, U16, {Bits: 12}, {Signed: true, Bits: 5}, I64} {
		t.Run(typ.String(), func(t *testing.T) {
			const slots = 50
			s := mustStore(t, rdb, Config{Prefix: typ.String() + ":", Type: typ, Slots: slots})
			vals := make([]int64, slots-3) // last slots stay zero
			for i := range vals {
				lo, hi := max(typ.Min(), -1<<40), min(typ.Max(), 1<<40)
				vals[i] = lo + int64(rng.Uint64N(uint64(hi-lo+1)))
			}
			if err := s.Load(ctx, "e", vals); err != nil {
				t.Fatal(err)
			}
			want := append(slices.Clone(vals), 0, 0, 0)
			for _, r := range [][2]int{{0, slots}, {0, 0}, {7, 8}, {3, 29}, {slots - 5, slots}, {13, 14}} {
				got, err := s.AppendRange(ctx, nil, "e", r[0], r[1])
				if err != nil || !slices.Equal(got, want[r[0]:r[1]]) {
					t.Fatalf("Range %v = %v, %v; want %v", r, got, err, want[r[0]:r[1]])
				}
				var sum int64
				for _, v := range want[r[0]:r[1]] {
					sum += v
				}
				if got, err := s.Sum(ctx, "e", r[0], r[1]); err != nil || got != sum {
					t.Fatalf("Sum %v = %d, %v; want %d", r, got, err, sum)
				}
			}
			got, err := s.AppendRange(ctx, nil, "missing", 0, slots)
			if err != nil || !slices.Equal(got, make([]int64, slots)) {
				t.Fatalf("missing series = %v, %v; want zeros", got, err)
			}
		})
	}
	s := mustStore(t, rdb, Config{Prefix: "big:", Type: I64, Slots: 3})
	if err := s.Load(ctx, "e", []int64{1<<63 - 1, 1, 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sum(ctx, "e", 0, 3); !errors.Is(err, ErrSum) {
		t.Fatalf("Sum overflowing int64: %v, want ErrSum", err)
	}
}

func TestStore_IncrMany(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	s := mustStore(t, rdb, Config{Type: U8, Slots: 4})
	if _, err := s.CreateMany(ctx, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.IncrMany(ctx, []int64{42}, []Incr{{"a", 0, 5}, {"b", 1, 300}, {"a", 0, 5}, {"b", 3, -1}})
	var ie *IncrError
	if !errors.As(err, &ie) || ie.Index != 1 || !errors.Is(err, ErrOverflow) {
		t.Fatalf("IncrMany error = %v, want *IncrError at 1 wrapping ErrOverflow", err)
	}
	if !slices.Equal(got, []int64{42, 5, 0, 10, 0}) {
		t.Fatalf("IncrMany values = %v", got)
	}
	if v, _ := s.Get(ctx, "a", 0); v != 10 {
		t.Fatalf("a[0] = %d, want 10", v)
	}
	if _, err := s.IncrMany(ctx, nil, []Incr{{"a", 9, 1}}); !errors.Is(err, ErrSlot) {
		t.Fatalf("bad slot in batch: %v", err)
	}
	if got, err := s.IncrMany(ctx, nil, nil); err != nil || len(got) != 0 {
		t.Fatalf("empty batch = %v, %v", got, err)
	}
}

func TestStore_ClearShiftExpire(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	s := mustStore(t, rdb, Config{Prefix: "s:", Type: U16, Slots: 6})
	if err := s.Load(ctx, "e", []int64{1, 2, 3, 4, 5, 6}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Expire(ctx, "e", time.Hour); err != nil || !ok {
		t.Fatalf("Expire = %v, %v", ok, err)
	}
	check := func(want ...int64) {
		t.Helper()
		got, err := s.AppendRange(ctx, nil, "e", 0, 6)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("series = %v, %v; want %v", got, err, want)
		}
		if n := rdb.StrLen(ctx, "s:e").Val(); n != 12 {
			t.Fatalf("STRLEN = %d, want 12", n)
		}
		if ttl := rdb.TTL(ctx, "s:e").Val(); ttl <= 0 {
			t.Fatalf("TTL lost: %v", ttl)
		}
	}
	if err := s.Shift(ctx, "e", 2); err != nil {
		t.Fatal(err)
	}
	check(3, 4, 5, 6, 0, 0)
	if err := s.Clear(ctx, "e", 1, 3); err != nil {
		t.Fatal(err)
	}
	check(3, 0, 0, 6, 0, 0)
	if err := s.Shift(ctx, "e", 0); err != nil {
		t.Fatal(err)
	}
	check(3, 0, 0, 6, 0, 0)
	if err := s.Shift(ctx, "e", 99); err != nil {
		t.Fatal(err)
	}
	check(0, 0, 0, 0, 0, 0)
	if err := s.Shift(ctx, "e", -1); !errors.Is(err, ErrSlot) {
		t.Fatalf("Shift -1: %v", err)
	}
	// Neither Clear nor Shift create a missing series.
	if err := s.Clear(ctx, "none", 0, 6); err != nil {
		t.Fatal(err)
	}
	if err := s.Shift(ctx, "none", 1); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, "s:none").Val(); n != 0 {
		t.Fatal("Clear/Shift created a missing series")
	}
	// u12: odd slot counts are not whole bytes.
	s12 := mustStore(t, rdb, Config{Prefix: "u12:", Type: Type{Bits: 12}, Slots: 5})
	if err := s12.Load(ctx, "e", []int64{1, 2, 3, 4, 4095}); err != nil {
		t.Fatal(err)
	}
	if err := s12.Shift(ctx, "e", 1); !errors.Is(err, ErrSlot) {
		t.Fatalf("u12 shift 1: %v, want ErrSlot", err)
	}
	if err := s12.Shift(ctx, "e", 2); err != nil {
		t.Fatal(err)
	}
	if err := s12.Clear(ctx, "e", 1, 2); err != nil {
		t.Fatal(err)
	}
	if got, _ := s12.AppendRange(ctx, nil, "e", 0, 5); !slices.Equal(got, []int64{3, 0, 4095, 0, 0}) {
		t.Fatalf("u12 after shift 2 and clear = %v", got)
	}
	if ok, err := s.Delete(ctx, "e"); err != nil || !ok {
		t.Fatalf("Delete = %v, %v", ok, err)
	}
	if ok, err := s.Expire(ctx, "e", time.Hour); err != nil || ok {
		t.Fatalf("Expire on deleted = %v, %v", ok, err)
	}
}

func TestStore_ConcurrentIncr(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t)
	s := mustStore(t, rdb, Config{Type: U32, Slots: 8})
	const workers, each = 8, 200
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			for i := 0; i < each; i++ {
				if _, err := s.Incr(ctx, "e", i%8, 1); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for w := 0; w < workers; w++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if sum, err := s.Sum(ctx, "e", 0, 8); err != nil || sum != workers*each {
		t.Fatalf("Sum = %d, %v; want %d", sum, err, workers*each)
	}
}

func TestStore_ClusterAndUniversal(t *testing.T) {
	ctx := context.Background()
	r := testutil.StartRedis(t)
	// A UniversalClient with one address is a plain client; the store
	// only needs the Client interface, which both satisfy.
	var u redis.UniversalClient = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{r.Addr}})
	defer u.Close()
	s := mustStore(t, u, Config{Slots: 3})
	if v, err := s.Incr(ctx, "e", 2, 7); err != nil || v != 7 {
		t.Fatalf("Incr via UniversalClient = %d, %v", v, err)
	}
	var _ Client = (*redis.ClusterClient)(nil)
	var _ Client = (*redis.Ring)(nil)
}

func TestAppendEncodeDecode_ZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	vals := make([]int64, 365)
	for i := range vals {
		vals[i] = int64(i * 7)
	}
	img := make([]byte, 0, 1024)
	out := make([]int64, 0, 365)
	for _, typ := range []Type{U16, {Bits: 12}, I64} {
		n := testing.AllocsPerRun(100, func() {
			img, _ = AppendEncode(img[:0], typ, vals)
			out = AppendDecode(out[:0], typ, img, 0, len(vals))
		})
		if n != 0 {
			t.Errorf("%s: %v allocations per encode+decode, want 0", typ, n)
		}
		if !slices.Equal(out, vals) {
			t.Errorf("%s: round trip differs", typ)
		}
	}
}
