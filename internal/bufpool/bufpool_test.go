package bufpool

import (
	"testing"
	"time"
)

// drain empties the free lists of the kept classes, so that a test sees
// the buffers it put back and no others.
func drain() {
	for k := minClass; k <= maxKeptClass; k++ {
		for empty := false; !empty; {
			select {
			case b := <-keptList(k):
				keptN.Add(-int64(cap(b)))
				unlisted(b)
			default:
				empty = true
			}
		}
	}
}

// first is the address of b's first byte: which buffer b is.
func first(b []byte) *byte { return &b[:1][0] }

// TestGet_SizeClasses: Get gives an empty buffer of the least class that
// holds n from MinSize on (four to each power of two), and of n itself
// below.
func TestGet_SizeClasses(t *testing.T) {
	tests := []struct {
		n, cap int
	}{
		{0, 0},
		{1, 1},
		{MinSize - 1, MinSize - 1},
		{MinSize, MinSize},
		{MinSize + 1, 20 << 10},
		{20 << 10, 20 << 10},
		{20<<10 + 1, 24 << 10},
		{100 << 10, 112 << 10},
		{256 << 10, 256 << 10},
		{256<<10 + 1, 320 << 10},
		{1<<20 + 40, 1280 << 10}, // a SET of 1 MiB: was 2 MiB
		{4_200_000, 5 << 20},
		{10_000_000, 10 << 20},
		{16 << 20, 16 << 20},
		{16<<20 + 1, 20 << 20}, // huge from here
		{40 << 20, 40 << 20},
		{1 << 30, 1 << 30},
	}
	for _, tt := range tests {
		b := Get(tt.n)
		if len(b) != 0 || cap(b) != tt.cap {
			t.Errorf("Get(%d): len %d cap %d, want len 0 cap %d", tt.n, len(b), cap(b), tt.cap)
		}
		Put(b)
	}
}

// TestClasses: classUp gives the least class that holds n, classDown the
// greatest that a capacity holds, and classSize their sizes, for every
// class.
func TestClasses(t *testing.T) {
	for c := minClass; c <= maxClass; c++ {
		n := classSize(c)
		if got := classUp(n); got != c {
			t.Errorf("classUp(%d) = %d, want %d", n, got, c)
		}
		if got := classDown(n); got != c {
			t.Errorf("classDown(%d) = %d, want %d", n, got, c)
		}
		if c > minClass {
			if got := classUp(classSize(c-1) + 1); got != c {
				t.Errorf("classUp(%d) = %d, want %d", classSize(c-1)+1, got, c)
			}
			if got := classDown(n - 1); got != c-1 {
				t.Errorf("classDown(%d) = %d, want %d", n-1, got, c-1)
			}
			if n <= classSize(c-1) || n > classSize(c-1)*5/4 {
				t.Errorf("class %d: %d bytes after %d", c, n, classSize(c-1))
			}
		}
	}
	if classSize(minClass) != MinSize || classSize(maxKeptClass) != 16<<20 || classSize(maxClass) != 1<<30 || classSize(bigClass) != 1<<20 {
		t.Errorf("classes of %d, %d, %d and %d bytes", classSize(minClass), classSize(maxKeptClass), classSize(maxClass), classSize(bigClass))
	}
}

// TestPut_Reuse: a buffer put back comes out again for a request of its
// class, counted in KeptBytes meanwhile; one below MinSize is dropped, and
// one of another capacity goes to the class of the power of two it holds.
func TestPut_Reuse(t *testing.T) {
	tests := []struct {
		name      string
		cap, get  int // the buffer put back; the request after it
		kept      int // bytes KeptBytes grows by
		comesBack bool
	}{
		{"class of 8 MiB", 8 << 20, 7_500_000, 8 << 20, true},
		{"class below", 8 << 20, 5_000_000, 8 << 20, false},        // of 5 MiB
		{"request below MinSize", MinSize, 10_000, MinSize, false}, // allocates
		{"least class", MinSize, MinSize, MinSize, true},
		{"between classes", 22 << 10, 18 << 10, 22 << 10, true}, // of 20 KiB
		{"below MinSize", MinSize - 1, MinSize - 1, 0, false},
		{"most kept class", 16 << 20, 16 << 20, 16 << 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			drain()
			b := append(make([]byte, 0, tt.cap), 'x')
			before := KeptBytes()
			Put(b)
			if got := KeptBytes() - before; got != int64(tt.kept) {
				t.Errorf("KeptBytes grew by %d after Put of a buffer of %d bytes, want %d", got, tt.cap, tt.kept)
			}
			again := Get(tt.get)
			if len(again) != 0 || cap(again) < tt.get {
				t.Fatalf("Get(%d): len %d cap %d", tt.get, len(again), cap(again))
			}
			if same := cap(again) > 0 && first(again) == first(b); same != tt.comesBack {
				t.Errorf("Get(%d) after Put of a buffer of %d bytes: the same buffer %v, want %v", tt.get, tt.cap, same, tt.comesBack)
			}
			if tt.comesBack && KeptBytes() != before {
				t.Errorf("KeptBytes %d after the buffer came out again, want %d", KeptBytes(), before)
			}
		})
	}
	drain()
}

// TestPut_EvictsOtherClass: with the free lists full, a buffer put back
// takes the room of one of the class that holds the most bytes: the sizes
// in use now win over those of before.
func TestPut_EvictsOtherClass(t *testing.T) {
	drain()
	var old [][]byte
	for range keepBytes / (8 << 20) {
		old = append(old, Get(8<<20))
	}
	for _, b := range old {
		Put(b)
	}
	if KeptBytes() != keepBytes {
		t.Fatalf("KeptBytes %d after filling the lists with 8 MiB buffers, want %d", KeptBytes(), keepBytes)
	}
	b := append(make([]byte, 0, 1<<20), 'x')
	Put(b)
	if got := len(keptList(classUp(1 << 20))); got != 1 {
		t.Errorf("the 1 MiB list holds %d buffers after a put to full lists, want 1", got)
	}
	if got, want := KeptBytes(), int64(keepBytes-8<<20+1<<20); got != want {
		t.Errorf("KeptBytes %d, want %d (one 8 MiB buffer gave way)", got, want)
	}
	drain()
}

// TestHugeBuffers: a buffer above 16 MiB put back comes out again while
// such buffers are in use, and is let go (its memory returned to the
// system) once none was asked for in bigIdle, so that an idle process
// does not stay as large as the largest value it carried.
func TestHugeBuffers(t *testing.T) {
	b := Get(40 << 20)
	if cap(b) != 40<<20 {
		t.Fatalf("Get(40 MiB): cap %d, want the 40 MiB class", cap(b))
	}
	b = append(b, 'x')
	trimmed := bigTrims.Load()
	Put(b)
	again := Get(38 << 20)
	if first(again) != first(b) {
		t.Fatal("a 40 MiB buffer put back did not come out again for the next request of its class")
	}
	Put(again)
	waitTrim(t, trimmed)
	hugeMu.Lock()
	defer hugeMu.Unlock()
	if hugeKeptN != 0 || len(hugeKept[classUp(40<<20)]) != 0 {
		t.Fatalf("%d bytes of huge buffers kept after the trim", hugeKeptN)
	}
}

// waitTrim waits until a trim after trimmed (bigTrims) ran.
func waitTrim(t *testing.T, trimmed int64) {
	t.Helper()
	for deadline := time.Now().Add(30 * bigIdle); bigTrims.Load() <= trimmed; time.Sleep(bigIdle / 10) {
		if time.Now().After(deadline) {
			t.Fatalf("no trim %v after the last use of a big buffer", 30*bigIdle)
		}
	}
}

// TestBurstLetGo: after a burst of big buffers, more than the free lists
// keep, the lists of the big classes are emptied bigIdle after the last
// Get of one (before, they stayed for good, and what the burst put in the
// sync.Pools stayed until two collections had run: minutes, in an idle
// process); the lists of smaller classes stay.
func TestBurstLetGo(t *testing.T) {
	drain()
	small := Get(64 << 10)
	var burst [][]byte
	for range 2 * keepBytes / (2 << 20) {
		burst = append(burst, Get(2<<20))
	}
	trimmed := bigTrims.Load()
	for _, b := range burst {
		Put(b)
	}
	Put(small)
	if got := KeptBytes(); got > keepBytes {
		t.Fatalf("KeptBytes %d after the burst, more than the lists keep (%d)", got, keepBytes)
	}
	waitTrim(t, trimmed)
	if n := len(keptList(classUp(2 << 20))); n != 0 {
		t.Errorf("the 2 MiB list holds %d buffers %v after the burst", n, bigIdle)
	}
	if n := len(keptList(classUp(64 << 10))); n != 1 {
		t.Errorf("the 64 KiB list holds %d buffers after the trim, want 1: only big classes are let go", n)
	}
	drain()
}

// TestSetChecks_DoublePut: with the check on, a buffer put back twice
// panics, of a kept class or a huge one, and one taken out in between does
// not.
func TestSetChecks_DoublePut(t *testing.T) {
	SetChecks(true)
	defer SetChecks(false)
	for _, n := range []int{20 << 10, 8 << 20, 40 << 20} {
		drain()
		b := Get(n)
		Put(b)
		again := Get(n) // b, taken out: owned again
		Put(again)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("a buffer of %d bytes put back twice did not panic", cap(again))
				}
			}()
			Put(again)
		}()
	}
	drain()
}

// TestSetChecks_Off: with the check off again, it neither panics nor
// remembers the buffers.
func TestSetChecks_Off(t *testing.T) {
	SetChecks(true)
	b := Get(20 << 10)
	Put(b)
	SetChecks(false)
	if listd != nil {
		t.Error("the check still holds its buffers after SetChecks(false)")
	}
	again := Get(20 << 10)
	Put(again)
	drain()
}

// TestGetPut_Allocs: taking a buffer of a kept class and putting it back
// allocates nothing, nor does putting back a buffer too small to keep.
func TestGetPut_Allocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	small := make([]byte, 0, 4<<10)
	tests := []struct {
		name string
		f    func()
	}{
		{"least class", func() { Put(Get(MinSize)) }},
		{"class of 1 MiB", func() { Put(Get(700 << 10)) }},
		{"most kept class", func() { Put(Get(16 << 20)) }},
		{"two at once", func() { a, b := Get(64<<10), Get(64<<10); Put(a); Put(b) }},
		{"below MinSize", func() { Put(small) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			drain()
			tt.f() // the first allocates the buffer
			if n := testing.AllocsPerRun(100, tt.f); n != 0 {
				t.Errorf("%v allocations per run, want 0", n)
			}
		})
	}
	drain()
}
