package difftest

import (
	"runtime"
	"syscall"
	"time"
)

// exactPauses makes pause as exact as the kernel allows on the calling
// goroutine's thread, which it locks (undo with the returned function):
// a timer slack of 1 ns where the default lets a sleep of 20 µs last
// 70 µs or more.
func exactPauses() (undo func()) {
	runtime.LockOSThread()
	const prSetTimerSlack = 29
	syscall.Syscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
	return runtime.UnlockOSThread
}

// pause sleeps d in the kernel, blocking the thread: the Go runtime's own
// timers wake sleepers at a millisecond's resolution when nothing else
// runs, and a spin would take a core from the servers under test.
func pause(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
