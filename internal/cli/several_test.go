package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/testbed"
)

// TestCheckTrustsSiteWithTwoCertificates: pkie check of a site that serves
// two certificates in turn (CDN edges, a rotation), whose notary's first
// probe sees the certificate the client did not, is TRUSTED, run after run,
// over both notary APIs.
func TestCheckTrustsSiteWithTwoCertificates(t *testing.T) {
	ca, err := testbed.NewRootCA("CLI Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	var leaves []*testbed.Leaf
	for range 2 {
		l, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{"cdn.test"}})
		if err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, l)
	}
	roots := filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(roots, ca.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, api := range []string{"v1", "convergence"} {
		t.Run(api, func(t *testing.T) {
			// Connections alternate between the two: the client's probe
			// sees one, the notary's first probe the other.
			site, err := testbed.StartSiteWith("cdn.test", testbed.SiteOptions{Leaves: leaves})
			if err != nil {
				t.Fatal(err)
			}
			defer site.Close()
			path := testbed.NewResolver()
			path.Set("cdn.test", site.Addr)
			n, err := testbed.StartNotary(testbed.NotaryOptions{Name: "n1", Path: path})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			dir := t.TempDir()
			if _, err := n.WriteBundle(dir); err != nil {
				t.Fatal(err)
			}
			for run := range 3 {
				code, out, errs := runCLI(t, "check", "cdn.test", "--notaries", dir, "--allow-private", "--roots", roots,
					"--no-cache", "--api", api, "--resolve", "cdn.test="+site.Addr.String())
				if code != 0 || !strings.Contains(out, "TRUSTED") {
					t.Fatalf("run %d: exit %d; want 0 (trusted)\n%s%s", run, code, out, errs)
				}
			}
		})
	}
}
