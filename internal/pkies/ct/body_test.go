package ct

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/ctinclusion"
	"github.com/pkie/pkie/internal/pkies/treeproof"
)

func sampleTree() *treeproof.Body {
	t := &treeproof.Body{Present: true, Head: []byte("mirror.pkie.test/ct\nhead\n\n— sig\n"), Proof: []byte{1, 2, 3, 4}}
	for i := range t.Key {
		t.Key[i] = byte(i)
	}
	return t
}

func sampleEvidence(i int) ctinclusion.Evidence {
	e := ctinclusion.Evidence{Status: ctinclusion.Included, LeafIndex: uint64(1000 + i),
		Checkpoint: []byte("log.pkie.test/2026\n1042\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— log.pkie.test/2026 AAAA\n"),
		Proof:      make([][32]byte, 10)}
	e.SCTHash[0], e.LogID[0] = byte(i), byte(i+1)
	for j := range e.Proof {
		e.Proof[j][0] = byte(j)
	}
	return e
}

func sampleBody() *Body {
	failed := ctinclusion.Evidence{Status: ctinclusion.LookupFailed, Message: "log B (https://b.example/): connection refused"}
	failed.SCTHash[0], failed.LogID[0] = 9, 9
	return &Body{Tree: sampleTree(), Inclusions: []ctinclusion.Evidence{sampleEvidence(0), sampleEvidence(1), failed}}
}

// TestBodyRoundTrip: every shape of body (tree only, inclusions only,
// both, neither) decodes to what was encoded and encodes to the same
// bytes again.
func TestBodyRoundTrip(t *testing.T) {
	full := sampleBody()
	for _, tc := range []struct {
		name string
		body *Body
	}{
		{"tree and inclusions", full},
		{"tree only (no SCT)", &Body{Tree: sampleTree()}},
		{"inclusions only (no mirror)", &Body{Inclusions: full.Inclusions}},
		{"neither", &Body{}},
		{"most inclusions", &Body{Inclusions: func() []ctinclusion.Evidence {
			var es []ctinclusion.Evidence
			for i := range MaxInclusions {
				es = append(es, sampleEvidence(i))
			}
			return es
		}()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc, err := tc.body.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if enc[0] != BodyVersion {
				t.Fatalf("version byte %d", enc[0])
			}
			var out Body
			if err := out.UnmarshalBinary(enc); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(&out, tc.body) {
				t.Fatal("round trip changed the body")
			}
			re, err := out.MarshalBinary()
			if err != nil || !bytes.Equal(re, enc) {
				t.Fatalf("re-encoding differs (%v)", err)
			}
		})
	}
}

// TestBodyStrict: a body that is not exactly what MarshalBinary writes is
// refused, with an error saying what was wrong.
func TestBodyStrict(t *testing.T) {
	good, err := sampleBody().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	treeLen := int(binary.BigEndian.Uint16(good[2:]))
	countAt := 4 + treeLen
	noTree, _ := (&Body{Inclusions: sampleBody().Inclusions}).MarshalBinary()
	v2, _ := sampleTree().MarshalBinary()
	set := func(b []byte, i int, v byte) []byte { b = bytes.Clone(b); b[i] = v; return b }
	for _, tc := range []struct {
		name string
		b    []byte
		err  string
	}{
		{"empty", nil, "shorter"},
		{"version 2 (the sorted-tree body alone)", v2, "version 2, want 3"},
		{"version 4", set(good, 0, 4), "version 4"},
		{"unknown flag", set(good, 1, 0x03), "unknown flags"},
		{"trailing byte", append(bytes.Clone(good), 0), "after the body"},
		{"no count", good[:countAt], "before the inclusion count"},
		{"too many inclusions", set(good, countAt, MaxInclusions+1), "at most 16"},
		{"count over what follows", set(good, countAt, 4), "truncated before the inclusion evidence 3 length"},
		{"count under what follows", set(good, countAt, 2), "after the body"},
		{"truncated evidence", good[:len(good)-1], "inclusion evidence 2 of"},
		{"zero-length evidence", append(append(bytes.Clone(noTree[:3]), 0, 0), noTree[5:]...), "inclusion evidence 0 of 0 bytes"},
		{"evidence over the limit", set(set(noTree, 3, 0x7f), 4, 0xff), "want 1 to 8192"},
		{"tree flag without a tree", set(noTree, 1, 1), "sorted-tree part"},
		{"zero-length tree", append([]byte{3, 1, 0, 0}, good[4+treeLen:]...), "sorted-tree part of 0 bytes"},
		{"tree that does not decode", set(good, 4, 7), "sorted-tree part: treeproof: body version 7"},
		{"over a proof's size", append(bytes.Clone(good), make([]byte, pkie.MaxProofBody)...), "over the"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Body
			err := b.UnmarshalBinary(tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
	for _, tc := range []struct {
		name string
		b    *Body
		err  string
	}{
		{"too many", &Body{Inclusions: make([]ctinclusion.Evidence, MaxInclusions+1)}, "at most 16"},
		{"bad tree", &Body{Tree: &treeproof.Body{}}, "sorted-tree part"},
	} {
		if _, err := tc.b.MarshalBinary(); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("MarshalBinary %s: %v, want an error saying %q", tc.name, err, tc.err)
		}
	}
}

// TestBodyDoesNotAlias: a decoded body keeps no slice of the bytes it was
// decoded from, which belong to the caller (a connection's buffer).
func TestBodyDoesNotAlias(t *testing.T) {
	enc, _ := sampleBody().MarshalBinary()
	var b Body
	if err := b.UnmarshalBinary(enc); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(b.Inclusions[0].Checkpoint)
	for i := range enc {
		enc[i] = 0xee
	}
	if !bytes.Equal(b.Inclusions[0].Checkpoint, want) || b.Tree.Proof[0] != 1 {
		t.Fatal("the decoded body changed with the buffer it was decoded from")
	}
}
