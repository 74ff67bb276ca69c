//go:build unix

package atomicfile

import "syscall"

// setUmask sets the process's umask and returns a function restoring it.
func setUmask(m int) func() {
	old := syscall.Umask(m)
	return func() { syscall.Umask(old) }
}
