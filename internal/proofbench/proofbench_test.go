package proofbench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkie/pkie/sortedtree"
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

// TestRunTreeFile: a run over a given tree file (a mirror's) proves keys of
// that tree, reports its size, and leaves the file where it was.
func TestRunTreeFile(t *testing.T) {
	keys := make([][32]byte, 2500)
	for i := range keys {
		keys[i] = sha256.Sum256([]byte{byte(i), byte(i >> 8)})
	}
	path := filepath.Join(t.TempDir(), "mirror.tree")
	if err := sortedtree.Build(keys).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	r, err := Run(t.Context(), Config{TreeFile: path, Samples: 1000})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the tree file is gone: %v", err)
	}
	if r.Leaves != 2500 || r.FileBytes != fi.Size() || r.BuildSeconds != 0 || r.GenPresenceUsP50 <= 0 {
		t.Errorf("result %+v", r)
	}
}

// TestRunScaleFile measures the sorted-tree file $PKIE_PROOFBENCH_TREE (a
// mirror's tree at 10M-100M keys, or sortedtree's TestBuildFileScale
// output) as `pkie bench ct` does, and logs generation p50s beside the bare
// audit path; skipped unless set.
func TestRunScaleFile(t *testing.T) {
	path := os.Getenv("PKIE_PROOFBENCH_TREE")
	if path == "" {
		t.Skip("set PKIE_PROOFBENCH_TREE to a sorted-tree file")
	}
	r, err := Run(context.Background(), Config{Samples: 1000, Dir: t.TempDir(), TreeFile: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d keys, depth %d: open %.2f s, warm %.2f s, peak RSS %.1f MB", r.Leaves, r.Depth, r.OpenSeconds, r.WarmSeconds, float64(r.PeakRSSBytes)/1e6)
	t.Logf("generate p50: presence %.2f µs (%.2f×), absence %.2f µs (%.2f×); bare path of %d SHA-256 %.2f µs",
		r.GenPresenceUsP50, r.GenPresenceUsP50/r.CeilingPathUsP50, r.GenAbsenceUsP50, r.GenAbsenceUsP50/r.CeilingPathUsP50, r.Depth, r.CeilingPathUsP50)
}
