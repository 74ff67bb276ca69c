package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkie/pkie/internal/testbed"
)

// TestCheckRequireProofs drives "pkie check --require ct,revocation" end to
// end on loopback: a site, a notary, the log, the revocation authority and
// a prover; then the site's certificate is revoked.
func TestCheckRequireProofs(t *testing.T) {
	ctx := context.Background()
	ca, err := testbed.NewRootCA("Proof CLI Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{"pay.test"}})
	if err != nil {
		t.Fatal(err)
	}
	site, err := testbed.StartSite("pay.test", leaf, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	honest := testbed.NewResolver()
	honest.Set("pay.test", site.Addr)
	n, err := testbed.StartNotary(testbed.NotaryOptions{Name: "n1", Path: honest})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	dir := t.TempDir()
	if _, err := n.WriteBundle(dir); err != nil {
		t.Fatal(err)
	}
	roots := filepath.Join(t.TempDir(), "roots.pem")
	os.WriteFile(roots, ca.PEM(), 0o644)
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{ca}})
	if err != nil {
		t.Fatal(err)
	}
	defer ttp.Close()
	if _, err := ttp.LogChain(ctx, leaf.Chain); err != nil {
		t.Fatal(err)
	}
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	logKey := filepath.Join(t.TempDir(), "log.pub")
	os.WriteFile(logKey, []byte(ttp.LogKey+"\n"), 0o644)
	mirrorKey := filepath.Join(t.TempDir(), "mirror.pub")
	os.WriteFile(mirrorKey, []byte(ttp.MirrorKey+"\n"), 0o644)
	args := []string{"check", "pay.test", "--notaries", dir, "--allow-private", "--roots", roots, "--no-cache",
		"--resolve", "pay.test=" + site.Addr.String(), "--require", "ca,ct,revocation",
		"--ct-prover", ttp.ProverURL, "--ct-key", "@" + mirrorKey, "--ct-log-key", "@" + logKey,
		"--revocation-prover", ttp.ProverURL, "--revocation-key", ttp.RevocationKey}

	code, out, errOut := runCLI(t, append(args, "--json")...)
	if code != ExitOK || !strings.Contains(out, `"source": "ct"`) || !strings.Contains(out, `"source": "revocation"`) {
		t.Fatalf("logged, unrevoked: exit %d\n%s\n%s", code, out, errOut)
	}
	if err := ttp.Revoke(ctx, ca, leaf.Cert.SerialNumber); err != nil {
		t.Fatal(err)
	}
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, args...)
	if code != ExitNegative || !strings.Contains(out, "UNTRUSTED") || !strings.Contains(out, "revoked") {
		t.Fatalf("revoked: exit %d\n%s", code, out)
	}
	// A pinned key for the wrong TTP fails closed.
	bad := append([]string{}, args...)
	for i, a := range bad {
		if a == ttp.RevocationKey {
			bad[i] = ttp.MirrorKey
		}
	}
	if code, out, _ := runCLI(t, bad...); code != ExitNegative {
		t.Fatalf("wrong pinned key: exit %d\n%s", code, out)
	}
	if code, _, errOut := runCLI(t, "check", "pay.test", "--notaries", dir, "--ct-prover", ttp.ProverURL); code != ExitUsage || !strings.Contains(errOut, "--ct-key") {
		t.Fatalf("prover without key: exit %d %s", code, errOut)
	}
}
