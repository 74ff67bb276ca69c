package proofbench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRunSmall runs the whole measurement on a small tree and checks that
// every figure is filled in and plausible: sizes follow from the depth, and
// the file holds at least the keys.
func TestRunSmall(t *testing.T) {
	var log bytes.Buffer
	r, err := Run(context.Background(), Config{Leaves: 3000, Samples: 1000, Dir: t.TempDir(), Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if r.Leaves != 3000 || r.Depth != 12 {
		t.Fatalf("leaves %d depth %d", r.Leaves, r.Depth)
	}
	if r.FileBytes < 3000*32 || r.TreeBytes < 3000*32 {
		t.Fatalf("file %d bytes, tree %d bytes: less than the keys", r.FileBytes, r.TreeBytes)
	}
	// A presence proof carries at most depth hashes after an 18-byte
	// header (fewer on the ragged right edge of the tree).
	if r.PresenceBytesMax != 18+12*32 || (r.PresenceBytesMin-18)%32 != 0 || r.PresenceBytesMin < 18+8*32 {
		t.Fatalf("presence sizes %d..%d", r.PresenceBytesMin, r.PresenceBytesMax)
	}
	if r.AbsenceBytesMin < r.PresenceBytesMin {
		t.Fatalf("absence proofs smaller than presence proofs")
	}
	for name, v := range map[string]float64{
		"gen presence": r.GenPresenceUsP50, "gen absence": r.GenAbsenceUsP50,
		"verify presence": r.VerifyPresenceUsP50, "verify absence sig": r.VerifyAbsenceSigUsP50,
		"path ceiling": r.CeilingPathUsP50, "ed25519 ceiling": r.CeilingEd25519UsP50,
	} {
		if v <= 0 {
			t.Errorf("%s = %v", name, v)
		}
	}
	if r.PeakRSSBytes == 0 || r.CheckpointBytes == 0 {
		t.Errorf("peak RSS %d, checkpoint %d", r.PeakRSSBytes, r.CheckpointBytes)
	}
	if !strings.Contains(log.String(), "building the tree") {
		t.Errorf("no progress lines: %q", log.String())
	}
}

func TestRunRejects(t *testing.T) {
	for _, c := range []Config{{Leaves: 10, Samples: 999}, {Leaves: 0, Samples: 1000}} {
		if _, err := Run(context.Background(), c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, Config{Leaves: 100, Samples: 1000, Dir: t.TempDir()}); err == nil {
		t.Error("cancelled run succeeded")
	}
}
