//go:build unix

package soak

import "syscall"

// openFileLimit returns the process's soft limit on open files.
func openFileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<20 {
		return 1 << 20
	}
	return int(rl.Cur)
}
