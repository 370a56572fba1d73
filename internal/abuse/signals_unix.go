//go:build !windows

package abuse

import (
	"os"
	"syscall"
)

// stopSignal and contSignal pause and resume a process: the fault suite's
// SIGSTOP phase.
var stopSignal, contSignal os.Signal = syscall.SIGSTOP, syscall.SIGCONT
