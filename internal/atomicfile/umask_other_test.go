//go:build !unix

package atomicfile

func setUmask(int) func() { return func() {} }
