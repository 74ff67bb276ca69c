package cli

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/notary"
	"github.com/pkie/pkie/internal/store"
	"github.com/pkie/pkie/internal/testbed"
)

// TestCheckStaleNotaryAnswer: a real notary whose own freshness window is
// long (1000 days) answers from a history whose newest sighting of the
// site's certificate is 700 days old. Under --trust-agility (no CA to fall
// back on) that answer must not make the certificate trusted, over either
// API: it stands aside as stale, so no notary votes and the verdict is
// inconclusive. With an --answer-max-age that admits it, the same answer
// votes yes, which shows the notary, its history and the site are as
// described.
func TestCheckStaleNotaryAnswer(t *testing.T) {
	ca, err := testbed.NewRootCA("Stale Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{"bank.test"}})
	if err != nil {
		t.Fatal(err)
	}
	site, err := testbed.StartSite("bank.test", leaf, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	path := testbed.NewResolver()
	path.Set("bank.test", site.Addr)
	day := 24 * time.Hour
	n, err := testbed.StartNotary(testbed.NotaryOptions{Name: "old", Path: path, Config: notary.Config{MaxAge: 1000 * day}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	dir := t.TempDir()
	if _, err := n.WriteBundle(dir); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s1, s256 := sha1.Sum(leaf.Cert.Raw), sha256.Sum256(leaf.Cert.Raw)
	k := store.Key{Host: "bank.test", Port: 443}
	for _, at := range []time.Time{time.Now().Add(-900 * day), time.Now().Add(-700 * day)} {
		if err := n.History.Observe(ctx, k, s256, s1, at, 0); err != nil {
			t.Fatal(err)
		}
	}

	base := []string{"check", "bank.test", "--notaries", dir, "--allow-private", "--resolve", "bank.test=" + site.Addr.String(),
		"--trust-agility", "--no-cache", "--json"}
	for _, tc := range []struct {
		api, maxAge string
		code        int
		result      check.Result
		vote        check.Vote
		reason      string
	}{
		{"convergence", "", ExitNegative, check.Inconclusive, check.StandAside, "stale answer"},
		{"v1", "", ExitNegative, check.Inconclusive, check.StandAside, "stale answer"},
		{"convergence", "17520h", ExitOK, check.Trusted, check.Yes, "same certificate"},
		{"v1", "17520h", ExitOK, check.Trusted, check.Yes, "same certificate"},
	} {
		t.Run(tc.api+"/"+tc.maxAge, func(t *testing.T) {
			args := append(append([]string(nil), base...), "--api", tc.api)
			if tc.maxAge != "" {
				args = append(args, "--answer-max-age", tc.maxAge)
			}
			code, out, errOut := runCLI(t, args...)
			var v check.Verdict
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("exit %d, output does not parse: %v\n%s\n%s", code, err, out, errOut)
			}
			if code != tc.code || v.Result != tc.result || len(v.Notaries) != 1 || v.Notaries[0].Vote != tc.vote || !strings.Contains(v.Notaries[0].Reason, tc.reason) {
				t.Fatalf("exit %d, verdict %s, notaries %+v; want exit %d, %s, one %s containing %q\n%s", code, v.Result, v.Notaries, tc.code, tc.result, tc.vote, tc.reason, errOut)
			}
		})
	}
}
