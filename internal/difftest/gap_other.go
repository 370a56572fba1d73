//go:build !linux

package difftest

import "time"

// exactPauses does nothing here: pause is time.Sleep.
func exactPauses() (undo func()) { return func() {} }

// pause sleeps d.
func pause(d time.Duration) { time.Sleep(d) }
