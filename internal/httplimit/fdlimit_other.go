//go:build !unix

package httplimit

// fileLimit returns an open-file limit suitable where it cannot be read.
func fileLimit() int { return 2048 }
