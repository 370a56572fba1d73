package bench

import (
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// IdlePolicy is how this machine's idle CPUs wait for work, as far as it
// changes a latency study. Read it with [ReadIdlePolicy].
type IdlePolicy struct {
	// Driver is the cpuidle driver ("haltpoll" in a KVM guest that has it,
	// "intel_idle", "acpi_idle", ...), empty when unknown.
	Driver string
	// HaltPollNs is the haltpoll driver's guest_halt_poll_ns: how long an
	// idle virtual CPU polls for work before it halts. -1 when the driver is
	// not haltpoll or the value cannot be read. The kernel's default is
	// 200000; 0 turns polling off.
	HaltPollNs int64
}

// haltPollParam is the haltpoll driver's setting, relative to /sys.
const haltPollParam = "module/haltpoll/parameters/guest_halt_poll_ns"

// ReadIdlePolicy reads the idle policy of this machine from /sys. On other
// systems than Linux, or without /sys, it returns an empty policy.
func ReadIdlePolicy() IdlePolicy { return readIdlePolicy(os.DirFS("/sys")) }

func readIdlePolicy(sys fs.FS) IdlePolicy {
	p := IdlePolicy{HaltPollNs: -1}
	if b, err := fs.ReadFile(sys, "devices/system/cpu/cpuidle/current_driver"); err == nil {
		p.Driver = strings.TrimSpace(string(b))
	}
	if p.Driver != "haltpoll" {
		return p
	}
	if b, err := fs.ReadFile(sys, haltPollParam); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n >= 0 {
			p.HaltPollNs = n
		}
	}
	return p
}

// HaltsWithoutPolling reports whether idle CPUs halt at once: a virtual
// machine whose haltpoll driver has guest_halt_poll_ns set to 0.
func (p IdlePolicy) HaltsWithoutPolling() bool { return p.Driver == "haltpoll" && p.HaltPollNs == 0 }

// Note is a sentence for a study's output when the idle policy skews
// latencies, or "" when it does not.
//
// A halted virtual CPU wakes only when the host schedules it again. On the
// machine squeeze is developed on that takes tens of microseconds, so a
// server that waited more than about 15 µs for its next command answers it
// late, and a client that pauses between commands (to compress a value, say)
// pays for the pause twice. Sequential round trips measure the host's
// scheduler as much as the code under test. See README ("Redis with and
// without compression").
func (p IdlePolicy) Note() string {
	if !p.HaltsWithoutPolling() {
		return ""
	}
	return fmt.Sprintf("This virtual machine halts idle CPUs without polling (cpuidle driver haltpoll, /sys/%s = 0; "+
		"the kernel's default is 200000): a Redis that waited more than about 15 µs for its next command wakes late, "+
		"so sequential round trips are slower than on bare metal or a guest that polls, most of all a write that "+
		"follows the compression of its value. As root, `echo 200000 > /sys/%s` sets the kernel's default "+
		"(`echo 0` restores this machine's setting); see docs/RESULTS.md, \"Redis with and without compression\".", haltPollParam, haltPollParam)
}
