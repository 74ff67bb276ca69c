package treeproof

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

func sample(present bool) *Body {
	b := &Body{Present: present, Head: []byte("origin\nhead\n\n— sig\n"), Proof: []byte{1, 2, 3, 4}}
	for i := range b.Key {
		b.Key[i] = byte(i)
	}
	return b
}

func TestBodyRoundTrip(t *testing.T) {
	for _, present := range []bool{false, true} {
		in := sample(present)
		enc, err := in.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		want := 2 + 32 + 2 + len(in.Head) + 2 + len(in.Proof)
		if len(enc) != want || enc[0] != 2 {
			t.Fatalf("encoding of %d bytes (version %d), want %d", len(enc), enc[0], want)
		}
		var out Body
		if err := out.UnmarshalBinary(enc); err != nil {
			t.Fatal(err)
		}
		re, _ := out.MarshalBinary()
		if !bytes.Equal(re, enc) || out.Key != in.Key || out.Present != in.Present {
			t.Fatalf("round trip changed the body: %+v", out)
		}
		if r := out.Response("ct"); r.Checkpoint != string(in.Head) || r.Key != in.Key || r.PKIE != "ct" {
			t.Fatalf("Response: %+v", r)
		}
	}
}

func TestBodyStrict(t *testing.T) {
	good, _ := sample(true).MarshalBinary()
	v1 := append([]byte{1}, good[1:]...)
	headLen := int(binary.BigEndian.Uint16(good[34:]))
	set := func(b []byte, i int, v byte) []byte { b = bytes.Clone(b); b[i] = v; return b }
	for _, tc := range []struct {
		name string
		b    []byte
		err  string
	}{
		{"empty", nil, "shorter"},
		{"version 1 (with SCTs)", v1, "version 1"},
		{"version 3", set(good, 0, 3), "version 3"},
		{"SCT flag of version 1", set(good, 1, 0x03), "unknown flags"},
		{"unknown flag", set(good, 1, 0x06), "unknown flags"},
		{"trailing byte", append(bytes.Clone(good), 0), "after the body"},
		{"an SCT after the proof", append(bytes.Clone(good), make([]byte, 72)...), "after the body"},
		{"truncated proof", good[:len(good)-1], "proof of"},
		{"zero head", append(append(bytes.Clone(good[:34]), 0, 0), good[36:]...), "signed head of 0 bytes"},
		{"head overruns", set(good, 35, byte(headLen+100)), "signed head of"},
		{"head over the limit", set(set(good, 34, 0x20), 35, 1), "want 1 to"},
		{"proof length cut", good[:36+headLen+1], "before the proof length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Body
			err := b.UnmarshalBinary(tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
	for _, bad := range []*Body{{Proof: []byte{1}}, {Head: []byte{1}}, {Head: make([]byte, MaxHead+1), Proof: []byte{1}}} {
		if _, err := bad.MarshalBinary(); err == nil {
			t.Errorf("MarshalBinary(%+v) accepted", bad)
		}
	}
}

// FuzzBody: whatever decodes re-encodes to the same bytes, and nothing
// panics.
func FuzzBody(f *testing.F) {
	for _, present := range []bool{false, true} {
		b, _ := sample(present).MarshalBinary()
		f.Add(b)
	}
	f.Add([]byte{2, 0})
	// A version 1 body with an SCT: refused.
	v1, _ := sample(false).MarshalBinary()
	v1[0], v1[1] = 1, 2
	f.Add(append(v1, make([]byte, 72)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		var b Body
		if err := b.UnmarshalBinary(data); err != nil {
			return
		}
		re, err := b.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded body does not re-encode: %v", err)
		}
		if !bytes.Equal(re, data) {
			t.Fatalf("re-encoding differs:\n%x\n%x", data, re)
		}
	})
}
