package abuse

import "syscall"

// dieWithParent has the kernel kill a server the suite started when the
// suite dies: nothing is left behind.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
