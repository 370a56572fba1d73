//go:build !linux

package bench

import "os/exec"

// dieWithParent does nothing outside Linux: the shaped link is Linux-only.
func dieWithParent(cmd *exec.Cmd) {}
