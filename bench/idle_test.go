package bench

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestReadIdlePolicy(t *testing.T) {
	const driver = "devices/system/cpu/cpuidle/current_driver"
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name      string
		sys       fstest.MapFS
		want      IdlePolicy
		noPolling bool
	}{
		{"no sysfs", fstest.MapFS{}, IdlePolicy{HaltPollNs: -1}, false},
		{"bare metal", fstest.MapFS{driver: file("intel_idle\n")}, IdlePolicy{Driver: "intel_idle", HaltPollNs: -1}, false},
		{"guest that polls", fstest.MapFS{driver: file("haltpoll\n"), haltPollParam: file("200000\n")},
			IdlePolicy{Driver: "haltpoll", HaltPollNs: 200000}, false},
		{"guest that halts at once", fstest.MapFS{driver: file("haltpoll\n"), haltPollParam: file("0\n")},
			IdlePolicy{Driver: "haltpoll", HaltPollNs: 0}, true},
		{"haltpoll setting unreadable", fstest.MapFS{driver: file("haltpoll\n"), haltPollParam: file("zero\n")},
			IdlePolicy{Driver: "haltpoll", HaltPollNs: -1}, false},
		{"haltpoll setting missing", fstest.MapFS{driver: file("haltpoll")}, IdlePolicy{Driver: "haltpoll", HaltPollNs: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readIdlePolicy(tt.sys)
			if got != tt.want {
				t.Fatalf("readIdlePolicy = %+v, want %+v", got, tt.want)
			}
			if got.HaltsWithoutPolling() != tt.noPolling {
				t.Errorf("HaltsWithoutPolling = %v, want %v", got.HaltsWithoutPolling(), tt.noPolling)
			}
			note := got.Note()
			if tt.noPolling != (note != "") {
				t.Fatalf("Note = %q, want a note: %v", note, tt.noPolling)
			}
			if note != "" && !strings.Contains(note, "/sys/"+haltPollParam) {
				t.Errorf("Note does not name the setting: %q", note)
			}
		})
	}
}
