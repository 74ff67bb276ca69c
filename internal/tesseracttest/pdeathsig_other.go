//go:build !linux

package tesseracttest

import "syscall"

// dieWithParent is Linux-only (Pdeathsig); elsewhere a server killed test
// leaves behind must be stopped by hand.
func dieWithParent(a *syscall.SysProcAttr) *syscall.SysProcAttr { return a }
