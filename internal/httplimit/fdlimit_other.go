//go:build !unix

package httplimit

// FileLimit returns an open-file limit suitable where it cannot be read.
func FileLimit() int { return 2048 }
