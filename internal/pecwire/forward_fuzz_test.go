package pecwire

import (
	"bytes"
	"crypto/ecdh"
	"crypto/hpke"
	"reflect"
	"testing"
	"time"

	"github.com/pkie/pkie"
)

func forwardSeeds() []Message {
	eph := bytes.Repeat([]byte{7}, 41)
	return []Message{
		&EphIDRequest{Count: 32},
		&EphIDs{Expires: 1_800_000_000, IDs: [][]byte{eph, bytes.Repeat([]byte{8}, 41)}},
		&SealedSubmit{Cloud: [32]byte{1}, EphID: eph, Envelope: []byte("sealed")},
		&SealedProof{EphID: eph, Sealed: []byte("sealed proof")},
		&EphIDReject{EphID: eph, Code: RejectReused, Text: "used already"},
		&ServerSealed{EphID: eph, Key: [32]byte{5}, Forwarder: "quic://127.0.0.2:4443", Submit: Submit{Budget: time.Second,
			ServerName: "example.com", Port: 443, Requests: []pkie.Request{{ID: pkie.CT}}, Chain: [][]byte{{0x30, 0}}}},
	}
}

// TestForwardRoundTrip: every forwarder message decodes to itself.
func TestForwardRoundTrip(t *testing.T) {
	for _, m := range forwardSeeds() {
		b, err := Marshal(m)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		got, err := Unmarshal(Type(b[0]), b[4:])
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%T: round trip gave %+v, want %+v", m, got, m)
		}
	}
}

// FuzzForwardMessages feeds arbitrary bodies to the decoder of every
// forwarder message: whatever decodes encodes back to the same bytes.
func FuzzForwardMessages(f *testing.F) {
	for _, m := range forwardSeeds() {
		b, err := Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[0], b[4:])
	}
	f.Fuzz(func(t *testing.T, typ uint8, body []byte) {
		m, err := Unmarshal(Type(typ), body)
		if err != nil || m.Type() < TypeEphIDRequest {
			return
		}
		b, err := Marshal(m)
		if err != nil {
			t.Fatalf("%T decoded but does not encode: %v", m, err)
		}
		if !bytes.Equal(b[4:], body) {
			t.Fatalf("%T: %x re-encodes as %x", m, body, b[4:])
		}
	})
}

var fuzzConnKey = bytes.Repeat([]byte{0x42}, ConnKeySize)

// FuzzOpenProof: arbitrary sealed proofs never panic the client, and
// only genuine ones open.
func FuzzOpenProof(f *testing.F) {
	eph := bytes.Repeat([]byte{7}, 41)
	genuine, err := SealProof(fuzzConnKey, eph, &Proof{ID: pkie.CT, Status: ProofOK, Proof: &pkie.Proof{ID: pkie.CT, Version: 1, Body: []byte("body")}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(bytes.Clone(genuine))
	f.Add(bytes.Clone(genuine[:20]))
	f.Fuzz(func(t *testing.T, sealed []byte) {
		p, err := OpenProof(fuzzConnKey, eph, sealed)
		if err != nil {
			return
		}
		// Sealing is randomized and every fuzz worker seals its own
		// genuine proof: what opens must be one of those.
		if p.ID != pkie.CT || p.Proof == nil || string(p.Proof.Body) != "body" {
			t.Fatalf("a sealed proof not made with the key opened: %+v", p)
		}
	})
}

// FuzzOpenEnvelope: arbitrary envelopes never panic the cloud, and only
// genuine ones open.
func FuzzOpenEnvelope(f *testing.F) {
	priv, err := hpke.DHKEM(ecdh.X25519()).DeriveKeyPair(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		f.Fatal(err)
	}
	k := NewHPKEKey(1, priv)
	eph := bytes.Repeat([]byte{7}, 41)
	genuine, err := SealEnvelope(k, eph, fuzzConnKey, &Submit{Budget: time.Second, ServerName: "example.com", Port: 443,
		Requests: []pkie.Request{{ID: pkie.CT}}, Chain: [][]byte{{0x30, 0}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(bytes.Clone(genuine))
	f.Add(bytes.Clone(genuine[:40]))
	f.Fuzz(func(t *testing.T, env []byte) {
		key, s, err := OpenEnvelope(1, priv, eph, env)
		if err != nil {
			return
		}
		if !bytes.Equal(key, fuzzConnKey) || s.ServerName != "example.com" {
			t.Fatalf("an envelope not sealed to the key opened: %+v", s)
		}
	})
}

// TestSealedProofBinding: a sealed proof opens only with its key, for its
// identifier, under its enhancement's header, untampered.
func TestSealedProofBinding(t *testing.T) {
	eph := bytes.Repeat([]byte{7}, 41)
	p := &Proof{ID: pkie.CT, Status: ProofOK, Proof: &pkie.Proof{ID: pkie.CT, Version: 1, Body: []byte("the proof")}}
	sealed, err := SealProof(fuzzConnKey, eph, p)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := OpenProof(fuzzConnKey, eph, sealed); err != nil || !bytes.Equal(got.Proof.Body, []byte("the proof")) {
		t.Fatalf("genuine: %+v, %v", got, err)
	}
	if bytes.Contains(sealed, []byte("the proof")) {
		t.Fatal("the sealed proof holds its body in the clear")
	}
	otherKey := bytes.Repeat([]byte{1}, 32)
	otherEph := bytes.Repeat([]byte{8}, 41)
	relabelled := bytes.Clone(sealed)
	relabelled[1] ^= byte(pkie.CT ^ pkie.Revocation)
	for name, tc := range map[string]struct{ key, eph, sealed []byte }{
		"other key":   {otherKey, eph, sealed},
		"other EphID": {fuzzConnKey, otherEph, sealed},
		"relabelled":  {fuzzConnKey, eph, relabelled},
		"tampered":    {fuzzConnKey, eph, append(bytes.Clone(sealed[:len(sealed)-1]), sealed[len(sealed)-1]^1)},
		"truncated":   {fuzzConnKey, eph, sealed[:len(sealed)-1]},
		"short key":   {fuzzConnKey[:16], eph, sealed},
	} {
		if _, err := OpenProof(tc.key, tc.eph, tc.sealed); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}

// TestEnvelopeBinding: an envelope opens only for its EphID and its key.
func TestEnvelopeBinding(t *testing.T) {
	kem := hpke.DHKEM(ecdh.X25519())
	priv, _ := kem.GenerateKey()
	other, _ := kem.GenerateKey()
	k := NewHPKEKey(1, priv)
	if err := k.Check(); err != nil {
		t.Fatal(err)
	}
	eph := bytes.Repeat([]byte{7}, 41)
	env, err := SealEnvelope(k, eph, fuzzConnKey, &Submit{Budget: time.Second, ServerName: "secret.example", Port: 443,
		Requests: []pkie.Request{{ID: pkie.CT}}, Chain: [][]byte{{0x30, 0}}})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(env, []byte("secret.example")) {
		t.Fatal("the envelope holds the server name in the clear")
	}
	if _, s, err := OpenEnvelope(1, priv, eph, env); err != nil || s.ServerName != "secret.example" {
		t.Fatalf("genuine: %+v, %v", s, err)
	}
	if _, _, err := OpenEnvelope(1, priv, bytes.Repeat([]byte{8}, 41), env); err == nil {
		t.Error("opened for another EphID")
	}
	if _, _, err := OpenEnvelope(1, other, eph, env); err == nil {
		t.Error("opened with another key")
	}
	if _, _, err := OpenEnvelope(2, priv, eph, env); err == nil {
		t.Error("opened under another key id")
	}
}
