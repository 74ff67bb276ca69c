package proctest

import "syscall"

// DieWithParent makes the server get SIGKILL if the test process dies
// without stopping it (a test binary killed at its timeout), so that no
// server outlives its test.
func DieWithParent(a *syscall.SysProcAttr) *syscall.SysProcAttr {
	if a == nil {
		a = &syscall.SysProcAttr{}
	}
	a.Pdeathsig = syscall.SIGKILL
	return a
}
