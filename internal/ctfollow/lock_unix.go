//go:build unix

package ctfollow

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockKeys takes an exclusive, non-blocking lock on the keys file, so
// that two followers never append to one state directory. The lock goes
// with the file descriptor.
func lockKeys(f *os.File) error {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("ctfollow: %s is in use by another follower", f.Name())
		}
		return fmt.Errorf("ctfollow: locking %s: %w", f.Name(), err)
	}
	return nil
}
