package check

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/store"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

// withoutV1 returns b as a Convergence-only bundle: the v1 key removed,
// as a bundle from a Convergence notary would be.
func withoutV1(t *testing.T, b *Bundle) *Bundle {
	t.Helper()
	c := *b
	c.Hosts = append([]Host(nil), b.Hosts...)
	for i := range c.Hosts {
		c.Hosts[i].V1Key = ""
	}
	out, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := ParseBundle(out)
	if err != nil {
		t.Fatal(err)
	}
	return nb
}

// pinnedToOtherKey returns b pinning a v1 key the notary does not hold.
func pinnedToOtherKey(t *testing.T, b *Bundle) *Bundle {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	c := *b
	c.Hosts = append([]Host(nil), b.Hosts...)
	c.Hosts[0].V1Key = base64.StdEncoding.EncodeToString(pub)
	return &c
}

func apis(v *Verdict) string {
	var s []string
	for _, a := range v.Notaries {
		s = append(s, string(a.API))
	}
	return strings.Join(s, " ")
}

// TestNotaryAPIs runs the client against real notaries over the v1 API,
// the Convergence API and both at once.
func TestNotaryAPIs(t *testing.T) {
	w := newWorld(t, 0)
	ctx := context.Background()
	mixed := []*Bundle{w.bundles[0], withoutV1(t, w.bundles[1]), w.bundles[2]}
	otherKey := []*Bundle{pinnedToOtherKey(t, w.bundles[0]), w.bundles[1], w.bundles[2]}
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	earlier := func() time.Time { return time.Now().Add(-time.Hour) }

	tests := []struct {
		name       string
		path       *testbed.Resolver
		target     probe.Target
		edit       func(*Config)
		bounce     bool
		want       Result
		wantVotes  string
		wantAPIs   string
		wantReason string // in some notary's reason
	}{
		{"auto asks v1", w.honest, target("bank.test"), nil, false,
			Trusted, "n1=yes n2=yes n3=yes", "v1 v1 v1", "same certificate (v1)"},
		{"convergence forced", w.honest, target("bank.test"), func(c *Config) { c.API = APIConvergence }, false,
			Trusted, "n1=yes n2=yes n3=yes", "convergence convergence convergence", "same certificate (200)"},
		{"MitM caught through v1", w.intercept, target("bank.test"), nil, false,
			Untrusted, "n1=no n2=no n3=no", "v1 v1 v1", "different certificate (v1)"},
		{"mixed bundles", w.honest, target("bank.test"), func(c *Config) { c.Notaries = mixed }, false,
			Trusted, "n1=yes n2=yes n3=yes", "v1 convergence v1", "same certificate (200)"},
		{"MitM caught by mixed bundles", w.intercept, target("bank.test"), func(c *Config) { c.Notaries = mixed }, false,
			Untrusted, "n1=no n2=no n3=no", "v1 convergence v1", "different certificate (409)"},
		{"v1 forced with a Convergence-only bundle", w.honest, target("bank.test"), func(c *Config) { c.Notaries, c.API = mixed, APIV1 }, false,
			Trusted, "n1=yes n2=stand-aside n3=yes", "v1  v1", "no pkie_v1_ed25519 key"},
		{"bundle pins another v1 key", w.honest, target("bank.test"), func(c *Config) { c.Notaries = otherKey }, false,
			Trusted, "n1=stand-aside n2=yes n3=yes", "v1 v1 v1", "signature does not verify"},
		{"stale answers stand aside", w.honest, target("bank.test"), func(c *Config) { c.Now, c.AnswerMaxAge = later, time.Hour }, false,
			Inconclusive, "n1=stand-aside n2=stand-aside n3=stand-aside", "v1 v1 v1", "stale answer: signed_at"},
		{"stale answers count as no when unreachable is failure", w.honest, target("bank.test"), func(c *Config) {
			c.Now, c.AnswerMaxAge, c.Policy.UnreachableIsFailure = later, time.Hour, true
		}, false, Untrusted, "n1=stand-aside n2=stand-aside n3=stand-aside", "v1 v1 v1", "stale answer"},
		{"answers from the future stand aside", w.honest, target("bank.test"), func(c *Config) { c.Now = earlier }, false,
			Inconclusive, "n1=stand-aside n2=stand-aside n3=stand-aside", "v1 v1 v1", "from the future"},
		// The site's certificate does not name www.bank.test: only the
		// notaries' vote is under test here.
		{"sni separate from host", w.honest, probe.Target{Host: "bank.test", Port: 443, ServerName: "www.bank.test"}, func(c *Config) { c.TrustAgility = true }, false,
			Trusted, "n1=yes n2=yes n3=yes", "v1 v1 v1", "same certificate (v1)"},
		{"bounced over v1", w.honest, target("bank.test"), nil, true,
			Trusted, "n1=yes n2=yes n3=yes", "v1 v1 v1", "same certificate (v1)"},
		{"bounced over convergence", w.honest, target("bank.test"), func(c *Config) { c.API = APIConvergence }, true,
			Trusted, "n1=yes n2=yes n3=yes", "convergence convergence convergence", "same certificate (200)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := w.config(t, tt.path)
			cfg.CachePath = ""
			if tt.edit != nil {
				tt.edit(&cfg)
			}
			if tt.bounce {
				via := *w.bundles[0]
				via.Hosts = append([]Host(nil), via.Hosts...)
				via.Hosts[0].HTTPPort = startBouncer(t, w.notaries[1].Addr.String(), w.notaries[2].Addr.String())
				cfg.BounceVia = &via
			}
			v, err := newChecker(t, cfg).Check(ctx, tt.target)
			if err != nil {
				t.Fatal(err)
			}
			var reasons []string
			for _, a := range v.Notaries {
				reasons = append(reasons, a.Reason)
			}
			if v.Result != tt.want || votes(v) != tt.wantVotes || apis(v) != tt.wantAPIs || !strings.Contains(strings.Join(reasons, "\n"), tt.wantReason) {
				t.Fatalf("Check = %s, votes %s, apis %q; want %s, %s, %q, a reason containing %q\n%s",
					v.Result, votes(v), apis(v), tt.want, tt.wantVotes, tt.wantAPIs, tt.wantReason, strings.Join(reasons, "\n"))
			}
			if tt.bounce && (v.Notaries[0].Bounced || !v.Notaries[1].Bounced || !v.Notaries[2].Bounced) {
				t.Fatalf("bounced %v %v %v", v.Notaries[0].Bounced, v.Notaries[1].Bounced, v.Notaries[2].Bounced)
			}
			for _, a := range v.Notaries {
				if a.API == APIV1 && a.Vote != StandAside && a.ObservedAt.IsZero() {
					t.Fatalf("a v1 vote without its observation time: %+v", a)
				}
			}
			if tt.target.ServerName != "" {
				// The notaries probed with the client's SNI, under its own
				// history key.
				for _, n := range w.notaries {
					recs, err := n.History.Lookup(ctx, store.Key{Host: "bank.test", Port: 443, SNI: tt.target.ServerName})
					if err != nil || len(recs) == 0 {
						t.Fatalf("notary %s has no history for sni %s: %v", n.Name, tt.target.ServerName, err)
					}
				}
			}
		})
	}

	t.Run("ConvergeSHA256", func(t *testing.T) {
		cfg := w.config(t, w.honest)
		cfg.Notaries = mixed
		c := newChecker(t, cfg)
		real := sha256.Sum256(w.bank.Leaf().Cert.Raw)
		ok, v, err := c.ConvergeSHA256(ctx, "bank.test", 443, "", hex.EncodeToString(real[:]))
		if err != nil || !ok || votes(v) != "n1=yes n2=stand-aside n3=yes" || !strings.Contains(v.Notaries[1].Reason, "needs the certificate's SHA-1") {
			t.Fatalf("ConvergeSHA256(real) = %v %s %v %+v", ok, votes(v), err, v)
		}
		if v.SHA1 != "" || v.SHA256 != hex.EncodeToString(real[:]) {
			t.Fatalf("verdict fingerprints %q %q", v.SHA1, v.SHA256)
		}
		forged, _ := w.mitm.Forged("bank.test")
		fs := sha256.Sum256(forged.Cert.Raw)
		ok, v, err = c.ConvergeSHA256(ctx, "bank.test", 443, "www.bank.test", hex.EncodeToString(fs[:]))
		if err != nil || ok || v.Result != Untrusted || votes(v) != "n1=no n2=stand-aside n3=no" {
			t.Fatalf("ConvergeSHA256(forged) = %v %v %v", ok, v, err)
		}
		for _, bad := range []string{"", "AA:BB", strings.Repeat("A", 40), strings.Repeat("z", 64)} {
			if _, _, err := c.ConvergeSHA256(ctx, "bank.test", 443, "", bad); err == nil {
				t.Errorf("ConvergeSHA256(%q) accepted a malformed fingerprint", bad)
			}
		}
	})
}
