// Package sctworldtest starts an sctworld for a test with TesseraCT
// (transparency-dev's static-ct-api log, v0.1.1, run by
// internal/tesseracttest) as its first listed log and pkie's own log as
// the second and the unlisted one: two operators, two implementations.
package sctworldtest

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/proctest"
	"github.com/pkie/pkie/internal/sctworld"
	"github.com/pkie/pkie/internal/tesseracttest"
)

// Start starts the world, skipping the test where TesseraCT's binary is
// missing (failing it under CI), and closes it when the test ends.
func Start(t testing.TB) *sctworld.World {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tesseract := func(_ context.Context, origin string, root *x509.Certificate) (*sctworld.Backend, error) {
		if strings.Contains(origin, ":") {
			proctest.Require(t, "sctworldtest", fmt.Errorf("the log's front got origin %q: TesseraCT %s refuses an origin with a port, and port 80 of a 127/8 address could not be bound", origin, tesseracttest.Version),
				"the privilege to bind port 80 on loopback (root or CAP_NET_BIND_SERVICE)")
		}
		tl := tesseracttest.Start(t, tesseracttest.Options{Origin: origin, Roots: []*x509.Certificate{root},
			CheckpointInterval: 100 * time.Millisecond})
		return &sctworld.Backend{SubmissionURL: tl.SubmissionURL, MonitoringURL: tl.MonitoringURL, Key: tl.PublicKey, Close: func() error {
			tl.Stop()
			return nil
		}}, nil
	}
	w, err := sctworld.New(ctx, sctworld.Options{Dir: t.TempDir(), Logs: [3]sctworld.StartFunc{tesseract}, Port80: [3]bool{true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}
