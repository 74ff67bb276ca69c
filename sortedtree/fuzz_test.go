package sortedtree

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzUnmarshalProof feeds arbitrary bytes to the proof decoder: it must
// never panic, anything it accepts must re-encode to the same bytes, and
// verifying it against a real tree must not panic either.
func FuzzUnmarshalProof(f *testing.F) {
	tr := Build(testKeys(37, 1))
	for _, k := range [][32]byte{tr.Key(0), tr.Key(36), next(tr.Key(10)), prev(tr.Key(0)), next(tr.Key(36))} {
		p, _ := tr.Prove(k)
		b, _ := p.MarshalBinary()
		f.Add(b, k[:])
	}
	e, _ := Build(nil).Prove([32]byte{})
	b, _ := e.MarshalBinary()
	f.Add(b, []byte{})
	f.Fuzz(func(t *testing.T, data, key []byte) {
		var p Proof
		if err := p.UnmarshalBinary(data); err != nil {
			return
		}
		again, err := p.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded proof does not encode: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("re-encoding differs")
		}
		var k [32]byte
		copy(k[:], key)
		present, err := p.Verify(k, tr.Size(), tr.Root())
		if err == nil && present != tr.Contains(k) {
			t.Fatalf("forged proof verified: present=%v for key %x", present, k)
		}
		p.Verify(k, p.TreeSize, tr.Root())
	})
}

// FuzzOpen feeds arbitrary tree files to Open: it must reject or accept
// without panicking, and a tree it accepts must answer Check, Prove and
// Verify without panicking; if Check passes, its proofs must verify.
func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	for _, n := range []int{0, 1, 5, 130} {
		for _, level := range []int{0, 2, DefaultFileLevel} {
			path := filepath.Join(dir, "seed")
			if err := Build(testKeys(n, uint64(n))).WriteFileLevel(path, level); err != nil {
				f.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "tree")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		tr, err := Open(path)
		if err != nil {
			return
		}
		defer tr.Close()
		<-tr.Ready()
		sound := tr.Check() == nil
		var probes [][32]byte
		if tr.Size() > 0 {
			probes = append(probes, tr.Key(0), next(tr.Key(tr.Size()-1)), next(tr.Key(0)))
		}
		probes = append(probes, [32]byte{})
		for _, k := range probes {
			p, err := tr.Prove(k)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Verify(k, tr.Size(), tr.Root())
			if sound && err != nil {
				t.Fatalf("tree passes Check but its proof for %x fails: %v", k[:4], err)
			}
		}
	})
}
