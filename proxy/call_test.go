package proxy

import (
	"errors"
	"github.com/squeeze-kv/squeeze/internal/rediscmd"
	"reflect"
	"testing"
	"unsafe"
)

// callKept are the fields of call that release keeps for the next use:
// the done channel, and buffers, emptied.
var callKept = map[string]bool{"done": true, "reply": true, "args": true, "argv": true, "tx": true, "txNames": true}

// settable returns v, a field of an addressable struct, as a value the
// test may set although the field is unexported.
func settable(v reflect.Value) reflect.Value {
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

// fillNonZero sets v to a value other than its type's zero value, with
// slices of length 1 and capacity sliceCap. It fails the test for a kind
// it does not know, so that a new field of call of such a kind is seen.
func fillNonZero(t *testing.T, name string, v reflect.Value, sliceCap int) {
	t.Helper()
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.String:
		v.SetString("x")
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, sliceCap))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	case reflect.Chan:
		v.Set(reflect.MakeChan(v.Type(), 1))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Func:
		v.Set(reflect.MakeFunc(v.Type(), func([]reflect.Value) []reflect.Value { return nil }))
	case reflect.Interface:
		if e := reflect.ValueOf(errors.New("x")); e.Type().Implements(v.Type()) {
			v.Set(e)
			return
		}
		t.Fatalf("field %s: no value for interface %s", name, v.Type())
	case reflect.Array:
		if v.Len() > 0 {
			fillNonZero(t, name, v.Index(0), sliceCap)
		}
	case reflect.Struct: // time.Time, atomic.Bool ...: every field of size
		for i := range v.NumField() {
			if f := v.Field(i); f.Type().Size() > 0 {
				fillNonZero(t, name+"."+v.Type().Field(i).Name, settable(f), sliceCap)
			}
		}
	default:
		t.Fatalf("field %s: fillNonZero does not know kind %s", name, v.Kind())
	}
}

// TestCall_ReleaseResetsEveryField: a call released and taken again by
// newCall has every field zero except the buffers it keeps, emptied (and
// let go above maxPooledReply). The fields are found by reflection, so a
// field added to call is covered without a change here.
func TestCall_ReleaseResetsEveryField(t *testing.T) {
	tests := []struct {
		name     string
		sliceCap int
		dropped  map[string]bool // kept buffers let go
	}{
		{"small buffers", 64, nil},
		{"large buffers", maxPooledReply + 1, map[string]bool{"reply": true, "args": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for try := 0; ; try++ {
				cl := newCall()
				done := cl.done
				if done == nil {
					t.Fatal("newCall: no done channel")
				}
				v := reflect.ValueOf(cl).Elem()
				before := map[string]uintptr{} // each kept buffer's array
				for i := range v.NumField() {
					name := v.Type().Field(i).Name
					if name == "done" {
						continue
					}
					f := settable(v.Field(i))
					fillNonZero(t, name, f, tt.sliceCap)
					if f.IsZero() {
						t.Fatalf("field %s is still zero after fillNonZero", name)
					}
					if callKept[name] {
						before[name] = f.Pointer()
					}
				}
				cl.release()
				// The pool may hand out another call (it drops some under
				// the race detector, and other tests' goroutines take calls
				// too): the check needs this one back.
				if again := newCall(); again != cl {
					again.release()
					if try == 100 {
						t.Skip("the call pool did not give the released call back")
					}
					continue
				}
				for i := range v.NumField() {
					name := v.Type().Field(i).Name
					f := v.Field(i)
					switch {
					case name == "done":
						if f.Pointer() != reflect.ValueOf(done).Pointer() {
							t.Errorf("done is another channel after release")
						}
					case callKept[name] && tt.dropped[name]:
						if !f.IsNil() {
							t.Errorf("%s of capacity %d kept after release, want it let go", name, f.Cap())
						}
					case callKept[name]:
						if f.Len() != 0 || f.Pointer() != before[name] {
							t.Errorf("%s after release: len %d, same array %v; want empty, the same array", name, f.Len(), f.Pointer() == before[name])
						}
					case !f.IsZero():
						t.Errorf("field %s is not zero after release", name)
					}
				}
				cl.release()
				return
			}
		})
	}
}

// TestTakesOf_MatchesTheTable: the flags a call carries (call.takes) are
// those the command table gives its name, for every command the proxy
// has an entry for, and none for a command counted as OTHER, as the
// lookup by name for every reply that call.takes replaced found.
func TestTakesOf_MatchesTheTable(t *testing.T) {
	seen := 0
	for _, info := range commandTable {
		var want rediscmd.Flag
		if byName := rediscmd.LookupString(info.name); byName != nil {
			want = byName.Flags & (rediscmd.Destructive | rediscmd.Moves)
		}
		if got := takesOf(info); got != want {
			t.Errorf("entry %q: takes %b, the table by name %b", info.name, got, want)
		}
		if want != 0 {
			seen++
		}
	}
	if seen == 0 {
		t.Fatal("no command of the table takes or moves values")
	}
	if takesOf(unknownCmd) != 0 {
		t.Error("OTHER takes values")
	}
}
