package cli

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/notary"
)

// TestCheckPinMismatch: a notary reached but presenting another TLS
// certificate than its bundle pins is reported as a pin mismatch, not as
// unreachable, in the notary's row, the headline and --json; a notary
// that cannot be reached still says unreachable.
func TestCheckPinMismatch(t *testing.T) {
	w := newCheckWorld(t)
	dir := t.TempDir()
	// n1's address with a certificate n1 does not have: a stale bundle.
	stale, err := notary.NewIdentity("n1", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := notary.NewIdentity("gone", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	n1 := w.notaries[0].Addr
	dead := netip.MustParseAddrPort(deadAddr(t))
	for name, b := range map[string]notary.Bundle{
		"n1":   stale.Bundle(n1.Addr().String(), int(n1.Port()), 0, "n1", "", ""),
		"gone": other.Bundle(dead.Addr().String(), int(dead.Port()), 0, "gone", "", ""),
	} {
		out, err := b.MarshalIndent()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".notary"), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"check", "bank.test", "--notaries", dir, "--no-cache", "--allow-private", "--roots", w.roots, "--resolve", "bank.test=" + w.site}

	code, out, errOut := runCLI(t, args...)
	if code != ExitNegative {
		t.Fatalf("exit %d, want 1 (inconclusive); stderr %s\n%s", code, errOut, out)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == "n1" || f[0] == "gone") {
			rows[f[0]] = l
		}
	}
	if r := rows["n1"]; !strings.Contains(r, "pin mismatch: the notary's TLS certificate") || strings.Contains(r, "unreachable") {
		t.Errorf("n1's row does not say pin mismatch:\n%s", out)
	}
	if r := rows["gone"]; !strings.Contains(r, "unreachable") || strings.Contains(r, "pin mismatch") {
		t.Errorf("gone's row does not say unreachable:\n%s", out)
	}
	if !strings.Contains(out, "inconclusive: no notary voted (2 configured, 2 stood aside, 1 of them on a pin mismatch") {
		t.Errorf("headline does not name the pin mismatch:\n%s", out)
	}

	code, out, errOut = runCLI(t, append(args, "--json")...)
	if code != ExitNegative {
		t.Fatalf("--json: exit %d; stderr %s", code, errOut)
	}
	var v check.Verdict
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if v.Decision == nil || v.Decision.PinMismatch != 1 || v.Decision.StandAside != 2 {
		t.Fatalf("--json decision %+v, want 1 pin mismatch of 2 stand-asides", v.Decision)
	}
	for _, a := range v.Notaries {
		if want := a.Notary == "n1"; a.PinMismatch != want || strings.HasPrefix(a.Reason, "pin mismatch: ") != want || strings.HasPrefix(a.Reason, "unreachable: ") == want {
			t.Errorf("--json answer of %s: pin_mismatch %v, reason %q", a.Notary, a.PinMismatch, a.Reason)
		}
	}
	if !strings.Contains(out, `"pin_mismatch": true`) {
		t.Errorf("--json carries no pin_mismatch field:\n%s", out)
	}
}
