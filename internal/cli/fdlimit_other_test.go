//go:build !unix

package cli

import "errors"

func setFileLimit(string) error { return errors.New("no open-file limit to set here") }
