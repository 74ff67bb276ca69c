//go:build !linux

package proctest

import "syscall"

// DieWithParent is Linux-only (Pdeathsig); elsewhere a server killed test
// leaves behind must be stopped by hand.
func DieWithParent(a *syscall.SysProcAttr) *syscall.SysProcAttr { return a }
