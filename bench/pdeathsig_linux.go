package bench

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd when this process dies, so that a
// server started for a study does not outlive a killed squeeze.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
