package ct

import (
	"bytes"
	"testing"
)

// FuzzBody: whatever bytes a cloud relays, decoding does not panic, and a
// body that decodes encodes to exactly the same bytes (the decoder accepts
// one encoding of each body, so no two encodings mean the same evidence).
func FuzzBody(f *testing.F) {
	for _, b := range []*Body{sampleBody(), {Tree: sampleTree()}, {Inclusions: sampleBody().Inclusions[2:]}, {}} {
		enc, err := b.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
	}
	f.Add([]byte{3, 0, 17})
	f.Add([]byte{3, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var b Body
		if err := b.UnmarshalBinary(data); err != nil {
			return
		}
		re, err := b.MarshalBinary()
		if err != nil {
			t.Fatalf("a decoded body does not encode: %v", err)
		}
		if !bytes.Equal(re, data) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", re, data)
		}
	})
}
