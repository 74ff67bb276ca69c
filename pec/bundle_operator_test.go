package pec_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/pkies/notary"
	"github.com/pkie/pkie/pec"
)

// domainpolicy stands for an enhancement registered beside the built-ins
// (such as docs/example's, an external module this one cannot import):
// its verifier takes a note verifier key, as the example's does.
var domainpolicy = struct {
	ID   pkie.ID
	Name string
	Kind func() pkie.Kind
}{ID: 0xFF10, Name: "domain-policy", Kind: func() pkie.Kind {
	return pkie.Kind{ID: 0xFF10, Name: "domain-policy", NewVerifier: newPolicyVerifier}
}}

type policyVerifierConfig struct {
	Key string `json:"key"`
}

type policyVerifier struct{ note.Verifier }

func (policyVerifier) ID() pkie.ID { return 0xFF10 }
func (policyVerifier) Verify(context.Context, *pkie.VerifyRequest) pkie.Assertion {
	return pkie.Assertion{Status: pkie.Pass, Reason: "vouched for by the key the bundle named"}
}

func newPolicyVerifier(config json.RawMessage) (pkie.Verifier, error) {
	var c policyVerifierConfig
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, err
	}
	v, err := note.NewVerifier(c.Key)
	if err != nil {
		return nil, err
	}
	return policyVerifier{v}, nil
}

// TestBundleConfiguresOnlyItsNotary: a cloud's bundle is read by the
// client, but the cloud is not trusted for anything but its own notary.
// A bundle naming a registered enhancement that is not built in (the
// example domain-policy of docs/example, whose authority must be independent of the
// cloud) with a well-formed key of the cloud's choosing must not give the
// client a verifier under that key: the cloud would then vouch for the
// proofs it relays. The entry is skipped and named; the notary's is
// taken.
func TestBundleConfiguresOnlyItsNotary(t *testing.T) {
	reg := check.BuiltinRegistry()
	if err := reg.Register(domainpolicy.Kind()); err != nil {
		t.Fatal(err)
	}
	// The key is valid: were the entry read, a verifier would be built.
	_, cloudsPolicyKey, err := note.GenerateKey(rand.Reader, "policy.cloud.test")
	if err != nil {
		t.Fatal(err)
	}
	policyConfig, err := json.Marshal(policyVerifierConfig{Key: cloudsPolicyKey})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newPolicyVerifier(policyConfig); err != nil {
		t.Fatalf("the domain-policy configuration is not one the registry would accept: %v", err)
	}
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	notaryConfig := notary.VerifierConfig{Key: base64.StdEncoding.EncodeToString(pub)}.JSON()

	for _, tc := range []struct {
		name      string
		verifiers string
		want      []pkie.ID
	}{
		{"policy alone", fmt.Sprintf(`{%q: %s}`, domainpolicy.Name, policyConfig), nil},
		{"policy beside the notary", fmt.Sprintf(`{%q: %s, "notary": %s}`, domainpolicy.Name, policyConfig, notaryConfig), []pkie.ID{pkie.Notary}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Read as the client reads a bundle file.
			b, err := pec.ParseBundle(fmt.Appendf(nil, `{"version": 1, "name": "cloud.test", "points": [{"quic": "127.0.0.1:4433"}],
				"spki_sha256": %q, "verifiers": %s}`, strings.Repeat("ab", 32), tc.verifiers))
			if err != nil {
				t.Fatal(err)
			}
			vs, skipped, err := pec.BundleVerifiers(reg, []*pec.Bundle{b})
			if err != nil {
				t.Fatal(err)
			}
			var got []pkie.ID
			for _, v := range vs {
				got = append(got, v.ID())
				if v.ID() == domainpolicy.ID {
					t.Errorf("the bundle set the %s verifier's key", domainpolicy.Name)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("verifiers %v, want %v", got, tc.want)
			}
			if len(skipped) != 1 || skipped[0] != "cloud.test: "+domainpolicy.Name {
				t.Errorf("skipped %q, want the bundle's %s entry named", skipped, domainpolicy.Name)
			}
		})
	}
}
