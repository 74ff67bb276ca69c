package mysqltest

import "syscall"

// dieWithParent makes the server get SIGKILL if the test process dies
// without stopping it (a test binary killed at its timeout), so that no
// server outlives its test.
func dieWithParent(a *syscall.SysProcAttr) *syscall.SysProcAttr {
	if a == nil {
		a = &syscall.SysProcAttr{}
	}
	a.Pdeathsig = syscall.SIGKILL
	return a
}
