package testbed

import (
	"io"
	"log"
)

// discardLog silences net/http's per-connection error log: tests and the
// demo provoke handshake failures on purpose.
func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }
