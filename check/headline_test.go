package check

import (
	"context"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/testbed"
)

// TestHeadlineNamesTheCause: every untrusted verdict used to be headlined
// "possible man-in-the-middle", whatever decided it. Each case here has
// one cause, on real sites, notaries, log, revocation authority and
// prover on loopback, and the headline and the first reason must name it.
func TestHeadlineNamesTheCause(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 0)
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{w.ca}})
	if err != nil {
		t.Fatal(err)
	}
	defer ttp.Close()
	// bank.test is logged; shop.test is not, until the revocation case.
	if _, err := ttp.LogChain(ctx, w.bank.Leaf().Chain); err != nil {
		t.Fatal(err)
	}
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	ct, rev := proofSources(t, ttp, nil)
	wrongKey, err := NewCTSource(ProofOptions{ProverURL: ttp.ProverURL, TTPKey: ttp.RevocationKey, LogKey: ttp.LogKey, MaxAge: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	dead := []*Bundle{deadNotary(t, w), deadNotary(t, w), deadNotary(t, w)}

	type tc struct {
		name     string
		target   string
		edit     func(*Config)
		prepare  func(t *testing.T)
		want     Result
		headline string // the headline starts with it
	}
	base := func(c *Config) {}
	cases := []tc{
		{"honest site", "bank.test", base, nil, Trusted, "trusted: notaries:"},
		{"man in the middle", "bank.test", func(c *Config) { c.Lookup = w.intercept.Lookup }, nil, Untrusted, MitMHeadline},
		{"CA validation fails, notaries agree", "bank.test", func(c *Config) { c.Roots = x509.NewCertPool() }, nil, Untrusted, "CA validation failed: "},
		{"missing log entry", "shop.test", func(c *Config) {
			c.Sources, c.Require = []Source{ct}, []string{"ct"}
		}, nil, Untrusted, "certificate transparency failed: "},
		{"wrong pinned log key", "bank.test", func(c *Config) {
			c.Sources, c.Require = []Source{wrongKey}, []string{"ct"}
		}, nil, Untrusted, "certificate transparency failed: "},
		{"revoked certificate", "shop.test", func(c *Config) {
			c.Sources, c.Require = []Source{ct, rev}, []string{"ct", "revocation"}
		}, func(t *testing.T) {
			if _, err := ttp.LogChain(ctx, w.shop.Leaf().Chain); err != nil {
				t.Fatal(err)
			}
			if err := ttp.Revoke(ctx, w.ca, w.shop.Leaf().Cert.SerialNumber); err != nil {
				t.Fatal(err)
			}
			if err := ttp.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}, Untrusted, "the revocation check failed: "},
		{"unreachable notaries counted as no", "bank.test", func(c *Config) {
			c.Notaries = dead
			c.Policy = Policy{Kind: "majority", UnreachableIsFailure: true}
		}, nil, Untrusted, "the notaries could not vouch for this certificate: 3 could not be reached"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.prepare != nil {
				c.prepare(t)
			}
			cfg := w.config(t, w.honest)
			cfg.CachePath = ""
			c.edit(&cfg)
			v, err := newChecker(t, cfg).Check(ctx, target(c.target))
			if err != nil {
				t.Fatal(err)
			}
			if v.Result != c.want || !strings.HasPrefix(v.Headline, c.headline) {
				t.Fatalf("%s %q, want %s %q…; reasons %q", v.Result, v.Headline, c.want, c.headline, v.Reasons)
			}
			if c.want == Untrusted && c.headline != MitMHeadline && strings.Contains(v.Headline, "man-in-the-middle") {
				t.Fatalf("headline blames a man in the middle: %q", v.Headline)
			}
			if c.name == "unreachable notaries counted as no" {
				if !strings.Contains(v.Reasons[0], "could not be reached") || !strings.Contains(v.Reasons[0], "counted as a no") {
					t.Fatalf("first reason does not say the notaries were unreachable and counted as no: %q", v.Reasons)
				}
			}
		})
	}
}

// TestNotaryErrorShown: a notary's own explanation of a failure reaches
// the verdict, bounded and stripped of control characters, whether it is
// pkie's JSON error or the original notary's HTML.
func TestNotaryErrorShown(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 0)
	// A notary whose path knows no site: it cannot probe, and says why.
	blind, err := testbed.StartNotary(testbed.NotaryOptions{Name: "blind", Path: testbed.NewResolver()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blind.Close() })
	dir := t.TempDir()
	if _, err := blind.WriteBundle(dir); err != nil {
		t.Fatal(err)
	}
	bs, err := LoadNotaries(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := w.config(t, w.honest)
	cfg.CachePath = ""
	cfg.Notaries = bs
	v, err := newChecker(t, cfg).Check(ctx, target("bank.test"))
	if err != nil {
		t.Fatal(err)
	}
	if r := v.Notaries[0].Reason; !strings.Contains(r, "(503): the notary says \"") {
		t.Fatalf("notary reason %q does not carry the notary's own error", r)
	}

}
