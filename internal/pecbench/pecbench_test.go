package pecbench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunCloudRows runs the throughput and client-cost rows at toy scale
// and checks that every figure is filled in and consistent.
func TestRunCloudRows(t *testing.T) {
	var progress bytes.Buffer
	r, err := Run(context.Background(), Config{
		Rows: []string{RowThroughput, RowClient}, Progress: &progress,
		Sessions: 4, Window: 2, Warmup: 100 * time.Millisecond, Duration: 400 * time.Millisecond,
		CTLeaves: 3000, RevokedLeaves: 500, Samples: 1000, Dir: t.TempDir(),
		LogFill: 20, RevokedFill: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	tp := r.Throughput
	if tp == nil || tp.Cloud == nil || tp.Ceiling == nil {
		t.Fatalf("throughput row %+v", tp)
	}
	if tp.ChainBytes < PaperFlightBytes || tp.ChainCerts != 3 {
		t.Errorf("chain of %d bytes, %d certificates", tp.ChainBytes, tp.ChainCerts)
	}
	// The site plus the fill in the log; the fill revoked.
	if tp.TreeSizes != [2]uint64{21, 100} {
		t.Errorf("tree sizes %v", tp.TreeSizes)
	}
	for _, x := range []*Throughput{tp.Cloud, tp.Ceiling} {
		if x.Proved == 0 || x.NotOK != 0 || x.SessionErrors != 0 || x.P50ms <= 0 {
			t.Errorf("%s: %+v", x.Name, x)
		}
	}
	// The echo answers with the cloud's own proofs: the same bytes back.
	if tp.Cloud.ProofBytes != tp.Ceiling.ProofBytes || tp.Cloud.SubmitBytes != tp.Ceiling.SubmitBytes {
		t.Errorf("cloud and ceiling exchanged different frames: %d/%d vs %d/%d bytes",
			tp.Cloud.SubmitBytes, tp.Cloud.ProofBytes, tp.Ceiling.SubmitBytes, tp.Ceiling.ProofBytes)
	}
	if tp.Ratio <= 0 || tp.PaperPerSecond != 1900 {
		t.Errorf("ratio %v, paper %v", tp.Ratio, tp.PaperPerSecond)
	}
	c := r.ClientCost
	if c == nil || c.Verifier == nil {
		t.Fatalf("client cost %+v", c)
	}
	if c.Verifier.Depths != [2]int{5, 7} {
		t.Errorf("verifier depths %v", c.Verifier.Depths)
	}
	if !(c.Verifier.WarmUsP50 > 0 && c.Verifier.ColdUsP50 > c.Verifier.WarmUsP50) {
		t.Errorf("verifiers: warm %v, cold %v", c.Verifier.WarmUsP50, c.Verifier.ColdUsP50)
	}
	var text bytes.Buffer
	r.WriteText(&text)
	for _, want := range []string{"echo ceiling", "cloud / ceiling", "paper: 1900/s", "client verifiers"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if !strings.Contains(progress.String(), "throughput: cloud") {
		t.Errorf("progress: %s", progress.String())
	}
}
