//go:build unix

package cli

import (
	"strconv"
	"syscall"
)

// setFileLimit sets the process's open-file limit, soft and hard, to n.
func setFileLimit(n string) error {
	v, err := strconv.ParseUint(n, 10, 64)
	if err != nil {
		return err
	}
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: v, Max: v})
}
