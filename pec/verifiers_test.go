package pec

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/builtin"
	"github.com/pkie/pkie/internal/pkies/notary"
)

func notaryConfig(t *testing.T) json.RawMessage {
	t.Helper()
	pub := newEd25519(t).Public().(ed25519.PublicKey)
	return notary.VerifierConfig{Key: base64.StdEncoding.EncodeToString(pub)}.JSON()
}

func TestBundleVerifiers(t *testing.T) {
	reg := builtin.Registry()
	a := &Bundle{Name: "a", Verifiers: map[string]json.RawMessage{"notary": notaryConfig(t), "domain-policy": json.RawMessage(`{}`)}}
	b := &Bundle{Name: "b", Verifiers: map[string]json.RawMessage{"notary": notaryConfig(t)}}
	none := &Bundle{Name: "none"}

	vs, skipped, err := BundleVerifiers(reg, []*Bundle{a, none})
	if err != nil || len(vs) != 1 || vs[0].ID() != pkie.Notary || len(skipped) != 1 || skipped[0] != "a: domain-policy" {
		t.Fatalf("one cloud: %v %v %v", vs, skipped, err)
	}
	if _, isAny := vs[0].(anyVerifier); isAny {
		t.Fatal("one cloud's notary wrapped for several keys")
	}
	vs, _, err = BundleVerifiers(reg, []*Bundle{a, b})
	if err != nil || len(vs) != 1 {
		t.Fatalf("two clouds: %v %v", vs, err)
	}
	if av, ok := vs[0].(anyVerifier); !ok || len(av) != 2 {
		t.Fatalf("two clouds' notaries: %T %v", vs[0], vs[0])
	}
	// The keys of independent TTPs never come from a cloud.
	for _, name := range []string{"ct", "revocation"} {
		bad := &Bundle{Name: "bad", Verifiers: map[string]json.RawMessage{name: json.RawMessage(`{"key":"x"}`)}}
		if _, _, err := BundleVerifiers(reg, []*Bundle{a, bad}); err == nil || !strings.Contains(err.Error(), "pinned by the client") {
			t.Errorf("bundle configuring %s: %v", name, err)
		}
	}
	broken := &Bundle{Name: "broken", Verifiers: map[string]json.RawMessage{"notary": json.RawMessage(`{"key":"not base64"}`)}}
	if _, _, err := BundleVerifiers(reg, []*Bundle{broken}); err == nil || !strings.Contains(err.Error(), "broken") {
		t.Errorf("malformed notary key: %v", err)
	}
}

// anyVerifier passes a proof under any pinned cloud's key, and only those.
func TestAnyVerifier(t *testing.T) {
	keys := []ed25519.PrivateKey{newEd25519(t), newEd25519(t), newEd25519(t)}
	av := anyVerifier{gateVerifier{pub: keys[0].Public().(ed25519.PublicKey)}, gateVerifier{pub: keys[1].Public().(ed25519.PublicKey)}}
	pki := newTestPKI(t)
	req := func(k ed25519.PrivateKey) *pkie.VerifyRequest {
		r := &pkie.VerifyRequest{Subject: pkie.Subject{ServerName: "site.test", Port: 443, Chain: pki.leaf.Chain}}
		if k != nil {
			r.Proof = &pkie.Proof{ID: gateID, Version: 1, Body: gateBody(k, "site.test", 443, pki.leaf.Chain[0], time.Now())}
		}
		return r
	}
	for _, tt := range []struct {
		key    ed25519.PrivateKey
		want   pkie.Status
		reason string
	}{
		{keys[0], pkie.Pass, "signed"},
		{keys[1], pkie.Pass, "signed"},
		{keys[2], pkie.Fail, "under none of the 2 pinned clouds' keys"},
		{nil, pkie.Unknown, "no gate proof"},
	} {
		if a := av.Verify(context.Background(), req(tt.key)); a.Status != tt.want || !strings.Contains(a.Reason, tt.reason) {
			t.Errorf("got %s %q, want %s %q", a.Status, a.Reason, tt.want, tt.reason)
		}
	}
}
