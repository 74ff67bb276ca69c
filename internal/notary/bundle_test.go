package notary_test

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"

	"github.com/pkie/pkie/internal/consensus"
	"github.com/pkie/pkie/internal/notary"
)

func TestBundleCarriesV1Key(t *testing.T) {
	id, err := notary.NewIdentity("n1", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := id.Bundle("notary.test", 443, 80, "", "US", "https://notary.test/n1.notary").MarshalIndent()
	if err != nil {
		t.Fatal(err)
	}
	// pkie's client reads the v1 key it pins.
	b, err := consensus.ParseBundle(out)
	if err != nil {
		t.Fatalf("pkie's own bundle does not parse: %v\n%s", err, out)
	}
	if !b.Hosts[0].V1PublicKey().Equal(id.V1.Public().(ed25519.PublicKey)) {
		t.Fatalf("bundle pins v1 key %x, identity has %x", b.Hosts[0].V1PublicKey(), id.V1.Public())
	}
	// A Convergence client knows only its own fields and ignores the rest:
	// every one of them must still be there, with its Convergence type.
	var conv struct {
		Version        *int    `json:"version"`
		Name           *string `json:"name"`
		BundleLocation *string `json:"bundle_location"`
		Hosts          []struct {
			Host        *string `json:"host"`
			SSLPort     *int    `json:"ssl_port"`
			HTTPPort    *int    `json:"http_port"`
			Certificate *string `json:"certificate"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal(out, &conv); err != nil {
		t.Fatal(err)
	}
	if conv.Version == nil || *conv.Version != 1 || conv.Name == nil || *conv.Name != "n1" || conv.BundleLocation == nil || len(conv.Hosts) != 1 {
		t.Fatalf("Convergence fields missing: %s", out)
	}
	h := conv.Hosts[0]
	if h.Host == nil || h.SSLPort == nil || *h.SSLPort != 443 || h.HTTPPort == nil || *h.HTTPPort != 80 || h.Certificate == nil || *h.Certificate != string(id.CertPEM) {
		t.Fatalf("Convergence host fields missing: %s", out)
	}
}
