package notary_test

import (
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/notary"
)

// TestNewIdentityRefusesBadHost: x509 signs any ASCII as a DNS name, so
// the notary's own constructor refuses a host no client could match,
// whoever calls it.
func TestNewIdentityRefusesBadHost(t *testing.T) {
	for _, h := range []string{"bad host!", "", "[::1]", "a..b", "x/y", "fe80::1%eth0", strings.Repeat("a", 64) + ".test"} {
		if _, err := notary.NewIdentity("n", []string{"ok.test", h}); err == nil || !strings.Contains(err.Error(), "certificate host") {
			t.Errorf("NewIdentity with host %q: %v, want a certificate host error", h, err)
		}
	}
	id, err := notary.NewIdentity("n", []string{"ok.test", "under_score.test", "::1", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(id.Cert.DNSNames) != 2 || len(id.Cert.IPAddresses) != 2 {
		t.Fatalf("SANs %v %v", id.Cert.DNSNames, id.Cert.IPAddresses)
	}
}
