//go:build !unix

package ctfollow

import "os"

// lockKeys does nothing where flock(2) is missing: one follower per
// directory is then the operator's to ensure.
func lockKeys(*os.File) error { return nil }
