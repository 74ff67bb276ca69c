//go:build unix

package httplimit

import "syscall"

// FileLimit returns the process's open-file limit (Go raises the soft limit
// to the hard one at start-up), or 2048 when it cannot be read.
func FileLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur == 0 {
		return 2048
	}
	if r.Cur > 1<<20 {
		return 1 << 20
	}
	return int(r.Cur)
}
