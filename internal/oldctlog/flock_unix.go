//go:build unix

package oldctlog

import (
	"errors"
	"os"
	"syscall"
)

// flock takes f's advisory lock: shared, waiting; or exclusive, not
// waiting (ok is false when it is held). The kernel releases it when the
// process dies, however it dies, which is what makes a leftover file
// distinguishable from one being written.
func flock(f *os.File, exclusive bool) (bool, error) {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX | syscall.LOCK_NB
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case exclusive && errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		}
		return false, err
	}
}
