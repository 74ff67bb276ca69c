package ctlog

import (
	"bytes"
	"testing"
)

func FuzzParseLeaf(f *testing.F) {
	in, _ := (&Leaf{Timestamp: 1, Type: X509Entry, Data: []byte{0x30, 0x03, 1, 2, 3}}).Marshal()
	f.Add(in)
	in2, _ := (&Leaf{Timestamp: 2, Type: SortedRootEntry, Data: []byte("note\n")}).Marshal()
	f.Add(in2)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLeaf(b)
		if err != nil {
			return
		}
		out, err := l.Marshal()
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("leaf did not round-trip: %x → %x (%v)", b, out, err)
		}
	})
}

func FuzzParseAddChainRequest(f *testing.F) {
	f.Add([]byte(`{"chain":["MAMCAQE="]}`))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nMAMCAQE=\n-----END CERTIFICATE-----\n"))
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		chain, err := ParseAddChainRequest(b)
		if err != nil {
			return
		}
		if len(chain) == 0 {
			t.Fatal("no error and no certificates")
		}
		l := &Log{}
		l.checkChain(chain) // must not panic on any input
	})
}
