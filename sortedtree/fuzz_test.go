package sortedtree

import (
	"bytes"
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
