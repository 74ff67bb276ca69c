package ctbench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestRunSmall runs every part of the CT benchmark on a small log: the
// synthetic log is generated, then reused; the mirror verifies every entry;
// proofs, ceilings and add-chain of pkie's log (and TesseraCT's, where its
// binary is installed) are measured. No timing is asserted.
func TestRunSmall(t *testing.T) {
	dir := t.TempDir()
	var progress bytes.Buffer
	c := Config{Entries: 3*256 + 7, DataDir: filepath.Join(dir, "log"), WorkDir: dir, Parallel: 2, Samples: 1000,
		Chains: 40, Concurrency: 8, TesseraCT: TesseraCTBinary(), Progress: &progress}
	r, err := Run(t.Context(), c)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if r.Log.Reused || r.Ceiling.Entries != c.Entries || r.Mirror == nil || r.Mirror.Entries != c.Entries {
		t.Fatalf("result %+v, mirror %+v", r, r.Mirror)
	}
	// Every entry yields a key, a final certificate two of which one is
	// its precertificate's: the tree holds exactly one key per entry.
	if r.Mirror.Keys <= c.Entries || r.Mirror.TreeKeys != c.Entries || r.Mirror.TreeFileBytes == 0 || r.Mirror.FirstHeadSeconds < r.Mirror.FollowSeconds {
		t.Errorf("mirror %+v for %d entries", r.Mirror, c.Entries)
	}
	if r.Proofs.Leaves != c.Entries || r.ProofsOn != onMirrorTree {
		t.Errorf("proofs on %q, %d leaves", r.ProofsOn, r.Proofs.Leaves)
	}
	if r.Proofs == nil || r.Proofs.GenPresenceUsP50 <= 0 || r.Ed25519VerifyUsP50 <= 0 || r.ECDSAP256VerifyUsP50 <= 0 {
		t.Errorf("proofs %+v, signature ceilings %v %v", r.Proofs, r.Ed25519VerifyUsP50, r.ECDSAP256VerifyUsP50)
	}
	if r.Head == nil || r.Head.VerifyPresenceUsP50 <= 0 || r.Head.HeadBytes == 0 {
		t.Errorf("no verification against the mirror's head: %+v", r.Head)
	}
	want := 1
	if c.TesseraCT != "" {
		want = 2
	} else if os.Getenv("CI") != "" {
		t.Error("CI without TesseraCT")
	}
	if len(r.AddChain) != want {
		t.Fatalf("add-chain results %+v", r.AddChain)
	}
	for _, a := range r.AddChain {
		if a.Chains != c.Chains-1 || a.PerSecond <= 0 {
			t.Errorf("add-chain %+v", a)
		}
	}
	// A second run reuses the log, its ceiling over the first two tiles;
	// one of another size is refused.
	c.Chains, c.SkipMirror, c.CeilingEntries = 0, true, 600
	if r, err = Run(t.Context(), c); err != nil || !r.Log.Reused {
		t.Fatalf("second run: %v, reused %v", err, r != nil && r.Log.Reused)
	}
	if r.Ceiling.Entries != 512 {
		t.Errorf("ceiling over %d entries, want 512", r.Ceiling.Entries)
	}
	c.Entries++
	if _, err := Run(t.Context(), c); err == nil {
		t.Error("ran over a log of another size")
	}
}

// TestRunRefusesForeignDir: a data directory holding anything but a
// synthetic log (finished or not) is left alone.
func TestRunRefusesForeignDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Run(t.Context(), Config{Entries: 10, DataDir: dir, Samples: 1000, SkipMirror: true})
	if err == nil {
		t.Fatal("ran over a foreign directory")
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatalf("the foreign file is gone: %v", err)
	}
}
