package pecwire

import (
	"bytes"
	"crypto/ecdh"
	"crypto/hpke"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie"
)

// TestPaddedSize: the classes of docs/formats/pec.md, "Padding".
func TestPaddedSize(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{0, 2048}, {1, 2048}, {2048, 2048}, {2049, 4096}, {4096, 4096}, {4097, 8192},
		{16384, 16384}, {16385, 32768}, {32768, 32768}, {32769, 61440}, {61440, 61440},
		{61441, 65536}, {65537, 131072},
	} {
		if got := PaddedSize(tc.n); got != tc.want {
			t.Errorf("PaddedSize(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

// TestPadRoundTrip: content of any size comes back whole from its class.
func TestPadRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 2045, 2046, 5000, 61437, 61438, 70000} {
		content := bytes.Repeat([]byte{0xa5}, n)
		p, err := pad(content)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != PaddedSize(n+padHeader) {
			t.Errorf("%d bytes padded to %d, want %d", n, len(p), PaddedSize(n+padHeader))
		}
		got, err := unpad(p)
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
}

// TestUnpadRefuses: a padded plaintext with anything but zero padding to
// exactly its content's class is refused.
func TestUnpadRefuses(t *testing.T) {
	good, _ := pad([]byte("content"))
	withLen := func(n int) []byte {
		b := bytes.Clone(good)
		b[0], b[1], b[2] = byte(n>>16), byte(n>>8), byte(n)
		return b
	}
	nonZero := bytes.Clone(good)
	nonZero[len(nonZero)-1] = 1
	bigger := append(bytes.Clone(good), make([]byte, 2048)...) // a class too large
	for name, b := range map[string][]byte{
		"empty":           nil,
		"short":           good[:2],
		"non-zero pad":    nonZero,
		"class too large": bigger,
		"cut":             good[:len(good)-1],
		"length past end": withLen(len(good)),
		"unpadded":        append([]byte{0, 0, 7}, "content"...),
	} {
		if _, err := unpad(b); err == nil {
			t.Errorf("%s: unpadded", name)
		}
	}
}

// FuzzUnpad: arbitrary plaintexts never panic unpad, and what it accepts
// is canonical: padding its content again gives the same bytes.
func FuzzUnpad(f *testing.F) {
	good, _ := pad([]byte("content"))
	f.Add(good)
	f.Add(good[:100])
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := unpad(b)
		if err != nil {
			return
		}
		again, err := pad(c)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%d bytes unpadded to %d that pad to %d bytes", len(b), len(c), len(again))
		}
	})
}

// TestSealedSizesHideContent: envelopes of submissions of different
// names and chains within one class are of one length, and so are sealed
// proofs of different sizes and statuses; an unpadded plaintext sealed
// with the right key is refused.
func TestSealedSizesHideContent(t *testing.T) {
	priv, err := hpke.DHKEM(ecdh.X25519()).GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	k := NewHPKEKey(1, priv)
	eph := bytes.Repeat([]byte{7}, 41)
	sizes := map[int][]string{}
	for _, tc := range []struct {
		name  string
		chain [][]byte
	}{
		{"a.test", [][]byte{bytes.Repeat([]byte{1}, 600)}},
		{"a-much-longer-server-name.example.test", [][]byte{bytes.Repeat([]byte{1}, 700), bytes.Repeat([]byte{2}, 500), bytes.Repeat([]byte{3}, 400)}},
		{"b.test", [][]byte{bytes.Repeat([]byte{1}, 1900)}},
	} {
		env, err := SealEnvelope(k, eph, fuzzConnKey, &Submit{Budget: time.Second, ServerName: tc.name, Port: 443,
			Requests: []pkie.Request{{ID: pkie.CT}, {ID: pkie.Revocation}}, Chain: tc.chain})
		if err != nil {
			t.Fatal(err)
		}
		sizes[len(env)] = append(sizes[len(env)], tc.name)
		if _, s, err := OpenEnvelope(1, priv, eph, env); err != nil || s.ServerName != tc.name {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
	if len(sizes) != 1 {
		t.Errorf("envelope sizes by site: %v; want one size", sizes)
	}
	for n := range sizes {
		if !EnvelopePadded(n) || EnvelopePadded(n+1) || EnvelopePadded(n-1) {
			t.Errorf("EnvelopePadded is wrong about an envelope of %d bytes", n)
		}
	}
	proofSizes := map[int]int{}
	for i, p := range []*Proof{
		{ID: pkie.CT, Status: ProofOK, Proof: &pkie.Proof{ID: pkie.CT, Version: 1, Body: bytes.Repeat([]byte{1}, 300)}},
		{ID: pkie.CT, Status: ProofOK, Proof: &pkie.Proof{ID: pkie.CT, Version: 1, Body: bytes.Repeat([]byte{1}, 1900)}},
		{ID: pkie.CT, Status: ProofFailed, Text: "ct prover failed"},
	} {
		sealed, err := SealProof(fuzzConnKey, eph, p)
		if err != nil {
			t.Fatal(err)
		}
		proofSizes[len(sealed)]++
		if _, err := OpenProof(fuzzConnKey, eph, sealed); err != nil {
			t.Fatalf("proof %d: %v", i, err)
		}
	}
	if len(proofSizes) != 1 {
		t.Errorf("sealed proof sizes: %v; want one size", proofSizes)
	}

	// The right key, the right identifier, no padding: refused.
	aead, _ := connAEAD(fuzzConnKey)
	body, _ := (&Proof{ID: pkie.CT, Status: ProofFailed, Text: "x"}).appendBody(nil)
	nonce := make([]byte, aead.NonceSize())
	unpadded := aead.Seal(append(binary.BigEndian.AppendUint16(nil, uint16(pkie.CT)), nonce...), nonce, body, sealedProofAD(eph, pkie.CT))
	if _, err := OpenProof(fuzzConnKey, eph, unpadded); err == nil || !strings.Contains(err.Error(), "pad") {
		t.Errorf("an unpadded sealed proof: %v, want refused for its padding", err)
	}
}
