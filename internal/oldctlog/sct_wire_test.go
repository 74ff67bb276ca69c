package oldctlog

import (
	"bytes"
	"testing"

	"github.com/pkie/pkie/internal/ctwire"
)

// TestSCTLeafHash: the leaf hash a client rebuilds for an SCT (package
// ctwire, which links no log) is the hash of the leaf this log appends for
// the certificate, so the two encodings cannot drift apart.
func TestSCTLeafHash(t *testing.T) {
	for _, tc := range []struct {
		der []byte
		ts  uint64
	}{{[]byte{0x30, 1, 2}, 0}, {bytes.Repeat([]byte{7}, 70000), 1700000000123}, {[]byte{1}, 1<<64 - 1}} {
		in, err := (&Leaf{Timestamp: tc.ts, Type: X509Entry, Data: tc.der}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		want := LeafHash(in)
		m, err := ctwire.SignedMessage(tc.der, tc.ts)
		if err != nil {
			t.Fatal(err)
		}
		if got := m[len(m)-32:]; !bytes.Equal(got, want[:]) {
			t.Errorf("%d bytes at %d: ctwire's leaf hash %x, the log's %x", len(tc.der), tc.ts, got, want)
		}
	}
	if _, err := ctwire.SignedMessage(nil, 1); err == nil {
		t.Error("an SCT message for no certificate")
	}
}
