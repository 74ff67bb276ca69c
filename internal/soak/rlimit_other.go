//go:build !unix

package soak

// openFileLimit assumes a conservative limit where there is no rlimit.
func openFileLimit() int { return 2048 }
