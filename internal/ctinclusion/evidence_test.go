package ctinclusion

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/loglist"
)

// TestEvidenceEncoding checks that well-formed Evidence round trips and
// that UnmarshalBinary refuses every malformed or out-of-bounds encoding.
func TestEvidenceEncoding(t *testing.T) {
	cp := []byte("origin\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— origin AAAA\n")
	good := []Evidence{
		{Status: Included, LeafIndex: 7, Checkpoint: cp, Proof: [][32]byte{{1}, {2}}},
		{Status: Included, Checkpoint: cp},
		{Status: NotYet, LeafIndex: 1 << 39, Checkpoint: cp},
		{Status: Conflict, LeafIndex: 3, Checkpoint: cp, Proof: [][32]byte{{1}}, Leaf: [32]byte{9}},
		{Status: LookupFailed, Message: "log \"x\": dial tcp 127.0.0.1:1: connection refused"},
		{Status: LookupFailed},
		{Status: Included, Checkpoint: bytes.Repeat([]byte{'a'}, MaxCheckpoint), Proof: make([][32]byte, MaxProof)},
		{Status: LookupFailed, Message: strings.Repeat("é", MaxMessage/2)},
	}
	for i, e := range good {
		e.SCTHash, e.LogID = [32]byte{byte(i), 1}, [32]byte{byte(i), 2}
		b, err := e.MarshalBinary()
		if err != nil {
			t.Fatalf("%d: MarshalBinary: %v", i, err)
		}
		var got Evidence
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("%d: UnmarshalBinary: %v", i, err)
		}
		b2, _ := got.MarshalBinary()
		if !bytes.Equal(b, b2) || got.Status != e.Status || got.LeafIndex != e.LeafIndex || got.Message != e.Message || got.Leaf != e.Leaf {
			t.Errorf("%d: round trip changed the evidence", i)
		}
	}

	enc := func(e Evidence) []byte {
		b, err := e.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	inc := enc(Evidence{Status: Included, LeafIndex: 1, Checkpoint: cp, Proof: [][32]byte{{1}}})
	failed := enc(Evidence{Status: LookupFailed, Message: "down"})
	set := func(b []byte, i int, v byte) []byte { c := bytes.Clone(b); c[i] = v; return c }
	bad := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"version 2", set(inc, 0, 2)},
		{"status 0", set(inc, 1, 0)},
		{"status 5", set(inc, 1, 5)},
		{"truncated", inc[:len(inc)-1]},
		{"trailing byte", append(bytes.Clone(inc), 0)},
		{"proof count past the data", set(inc, 2+32+32+8+2+len(cp), 2)},
		{"proof count 65", set(inc, 2+32+32+8+2+len(cp), MaxProof+1)},
		{"not yet with a proof", set(inc, 1, byte(NotYet))},
		{"lookup failed with a checkpoint", set(inc, 1, byte(LookupFailed))},
		{"included without a checkpoint", set(failed, 1, byte(Included))},
		{"checkpoint over 8 KiB", func() []byte {
			e := Evidence{Status: NotYet, Checkpoint: cp}
			b := enc(e)
			big := bytes.Repeat([]byte{'a'}, MaxCheckpoint+1)
			return append(append(append(b[:2+32+32+8:2+32+32+8], byte(len(big)>>8), byte(len(big))), big...), 0, 0, 0)
		}()},
		{"message over 256 bytes", func() []byte {
			m := strings.Repeat("m", MaxMessage+1)
			b := enc(Evidence{Status: LookupFailed})
			return append(append(b[:len(b)-2:len(b)-2], byte(len(m)>>8), byte(len(m))), m...)
		}()},
		{"message not UTF-8", append(enc(Evidence{Status: LookupFailed})[:2+32+32+8+2+1], 0, 2, 0xff, 0xfe)},
		{"message on included evidence", func() []byte {
			b := bytes.Clone(inc)
			return append(b[:len(b)-2], 0, 1, 'x')
		}()},
	}
	for _, c := range bad {
		var e Evidence
		if err := e.UnmarshalBinary(c.b); err == nil {
			t.Errorf("%s: UnmarshalBinary accepted it", c.name)
		}
	}
	for _, e := range []Evidence{
		{Status: Included},
		{Status: NotYet, Checkpoint: cp, Proof: [][32]byte{{1}}},
		{Status: Included, Checkpoint: cp, Leaf: [32]byte{1}},
		{Status: LookupFailed, Message: strings.Repeat("m", MaxMessage+1)},
		{Status: 9, Checkpoint: cp},
	} {
		if _, err := e.MarshalBinary(); err == nil {
			t.Errorf("MarshalBinary accepted %+v", e)
		}
	}
}

// TestSTHEncoding round trips an STH and refuses malformed ones.
func TestSTHEncoding(t *testing.T) {
	s := &STH{TreeSize: 5, Timestamp: 1700000000000, Root: [32]byte{3}, Signature: []byte{4, 3, 0, 2, 0xaa, 0xbb}}
	b, err := MarshalSTH(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseSTH(b)
	if err != nil || got.TreeSize != 5 || got.Timestamp != s.Timestamp || got.Root != s.Root || !bytes.Equal(got.Signature, s.Signature) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for name, b := range map[string][]byte{
		"truncated":            b[:len(b)-1],
		"trailing byte":        append(bytes.Clone(b), 0),
		"no signature":         b[:48],
		"empty signature":      append(bytes.Clone(b[:48]), 4, 3, 0, 0),
		"signature over bound": append(append(bytes.Clone(b[:48]), 4, 3, 0x04, 0x01), make([]byte, 0x401)...),
	} {
		if _, err := ParseSTH(b); err == nil {
			t.Errorf("%s: ParseSTH accepted it", name)
		}
	}
}

// TestVerifySynthetic checks Verify on tree heads a test key signs:
// both kinds of tree head, the time reported, and what is refused.
func TestVerifySynthetic(t *testing.T) {
	ts := time.UnixMilli(1767225600123)
	leaf := [32]byte{0x1e}
	for _, kind := range []loglist.Kind{loglist.Static, loglist.RFC6962} {
		s := newSynthLog(t, kind, "synth.test/log")
		e := s.included(t, leaf, 12345, 1<<31+7, ts)
		for _, v := range []*Verifier{nil, NewVerifier(4)} {
			for range 2 { // the second time from v's cache
				r, err := v.Verify(e, s.log, leaf)
				if err != nil || r.Status != Included || r.TreeSize != 1<<31+7 || !r.CheckpointTime.Equal(ts) {
					t.Fatalf("%s: %+v, %v; want included in 2^31+7 at %v", kind, r, err, ts)
				}
			}
		}
		notYet := &Evidence{LogID: s.log.ID, Status: NotYet, LeafIndex: 100, Checkpoint: s.treeHead(t, 100, [32]byte{}, ts)}
		if r, err := Verify(notYet, s.log, leaf); err != nil || r.Status != NotYet || r.TreeSize != 100 {
			t.Errorf("%s: not yet at size 100, index 100: %+v, %v", kind, r, err)
		}
		notYet.LeafIndex = 99
		if _, err := Verify(notYet, s.log, leaf); kind == loglist.Static && !errors.Is(err, ErrBadEvidence) {
			t.Errorf("%s: not yet at size 100, index 99: %v; want ErrBadEvidence", kind, err)
		}
		failed := &Evidence{LogID: s.log.ID, Status: LookupFailed, Message: "timeout"}
		if r, err := Verify(failed, s.log, leaf); err != nil || r.Status != LookupFailed {
			t.Errorf("%s: lookup failed: %+v, %v", kind, r, err)
		}
		other := newSynthLog(t, kind, "synth.test/log")
		e2 := *e
		e2.LogID = other.log.ID
		if _, err := Verify(&e2, other.log, leaf); !errors.Is(err, ErrBadEvidence) {
			t.Errorf("%s: signed by another key: %v", kind, err)
		}
		if _, err := Verify(e, other.log, leaf); !errors.Is(err, ErrBadEvidence) {
			t.Errorf("%s: evidence about another log: %v", kind, err)
		}
	}
	// A checkpoint of another origin, signed by the right key.
	s := newSynthLog(t, loglist.Static, "synth.test/log")
	e := s.included(t, leaf, 0, 1, ts)
	moved := *s.log
	moved.URL = "https://synth.test/other/"
	if _, err := Verify(e, &moved, leaf); !errors.Is(err, ErrBadEvidence) {
		t.Errorf("another origin: %v", err)
	}
}

// TestHashNotFound checks which get-proof-by-hash answers mean the log
// holds no such leaf (NotYet) and which are a failed lookup.
func TestHashNotFound(t *testing.T) {
	for _, c := range []struct {
		code int
		body string
		want bool
	}{
		{404, `{"success":false,"error_message":"no leaf with that hash in the tree of 2"}`, true},
		{404, "", true},
		{400, `{"error_message":"Hash not found"}`, true},
		{400, "No such hash in tree", true},
		{400, "ctlog: the hash index is full; read the tiles", false},
		{400, "tree_size must be between 1 and 2", false},
		{500, "not found", false},
		{503, "", false},
	} {
		err := fmt.Errorf("ctinclusion: log x: %w", &statusError{url: "u", status: http.StatusText(c.code), body: c.body, code: c.code})
		if got := hashNotFound(err); got != c.want {
			t.Errorf("%d %q: hashNotFound = %v, want %v", c.code, c.body, got, c.want)
		}
	}
	if hashNotFound(errors.New("connection refused")) {
		t.Error("a transport error is not a missing leaf")
	}
}
