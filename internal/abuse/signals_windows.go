//go:build windows

package abuse

import "os"

// Windows cannot stop a process and let it go on (no SIGSTOP): the fault
// suite's pause phase fails there with errNoPause, the rest still runs.
var stopSignal, contSignal os.Signal
