//go:build !linux

package abuse

import "syscall"

// dieWithParent: only Linux can tie a child's life to its parent's; the
// suite's deferred kills stop its servers.
func dieWithParent() *syscall.SysProcAttr { return nil }
