package ctinclusion

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/loglist"
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

// FuzzWitnessedCheckpoint appends arbitrary bytes (signature lines, or
// anything) to a checkpoint the log signed and verifies it under a
// witness policy of 1 of 2: it never panics, and it verifies only with a
// listed witness's valid cosignature; otherwise the error is bad evidence.
func FuzzWitnessedCheckpoint(f *testing.F) {
	s := newSynthLog(f, loglist.Static, "fuzz.witness.test/log")
	e := s.included(f, benchLeaf, 5, 10, time.Now())
	text := noteText(f, e.Checkpoint)
	w1, w2, other := newTestWitness(f, "w1.fuzz.test"), newTestWitness(f, "w2.fuzz.test"), newTestWitness(f, "other.fuzz.test")
	ws := mustWitnesses(f, 1, w1.vkey, w2.cosig)
	for _, seed := range []string{
		"",
		w1.cosignature(f, text, false),
		w2.cosignature(f, text, true),
		other.cosignature(f, text, false) + w2.cosignature(f, text, false),
		"— w1.fuzz.test AAAA\n",
		"— w1.fuzz.test !!\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, extra []byte) {
		c := *e
		c.Checkpoint = append(append([]byte(nil), e.Checkpoint...), extra...)
		r, err := VerifyWith(&c, s.log, benchLeaf, VerifyOptions{Witnesses: ws})
		switch {
		case err == nil && r.Cosigners < 1:
			t.Fatalf("verified with %d cosigners under a quorum of 1", r.Cosigners)
		case err != nil && !errors.Is(err, ErrBadEvidence):
			t.Fatalf("error that is not bad evidence: %v", err)
		}
	})
}
