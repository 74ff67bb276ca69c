package ctinclusion

import (
	"bytes"
	"testing"
)

// FuzzEvidence checks that UnmarshalBinary never panics, and that what it
// accepts encodes back to the same bytes: one Evidence, one encoding.
func FuzzEvidence(f *testing.F) {
	cp := []byte("o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— o AAAA\n")
	for _, e := range []Evidence{
		{Status: Included, LeafIndex: 7, Checkpoint: cp, Proof: [][32]byte{{1}, {2}}},
		{Status: NotYet, LeafIndex: 9, Checkpoint: cp},
		{Status: Conflict, LeafIndex: 3, Checkpoint: cp, Proof: [][32]byte{{1}}, Leaf: [32]byte{9}},
		{Status: LookupFailed, Message: "connection refused"},
	} {
		b, err := e.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Evidence
		if e.UnmarshalBinary(b) != nil {
			return
		}
		out, err := e.MarshalBinary()
		if err != nil {
			t.Fatalf("accepted evidence does not encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("round trip changed the encoding:\n%x\n%x", b, out)
		}
	})
}

// FuzzSTH checks ParseSTH the same way.
func FuzzSTH(f *testing.F) {
	b, err := MarshalSTH(&STH{TreeSize: 5, Timestamp: 1700000000000, Root: [32]byte{3}, Signature: []byte{4, 3, 0, 2, 0xaa, 0xbb}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSTH(b)
		if err != nil {
			return
		}
		out, err := MarshalSTH(s)
		if err != nil {
			t.Fatalf("accepted STH does not encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("round trip changed the encoding:\n%x\n%x", b, out)
		}
	})
}
