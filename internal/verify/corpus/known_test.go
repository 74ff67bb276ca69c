package corpus

import (
	"context"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/verify"
	"github.com/pkie/pkie/internal/verify/verifytest"
)

// TestBackendsAgreeOnKnownCases is the issue's agreement test: every back
// end gives every known case its expected verdict and its expected code
// (or the code the case's table lists as that back end's exception).
func TestBackendsAgreeOnKnownCases(t *testing.T) {
	now := time.Now()
	k, err := Known(now)
	if err != nil {
		t.Fatal(err)
	}
	bs := verifytest.Backends(t)
	ctx := context.Background()
	for _, c := range k.Cases {
		t.Run(c.ID, func(t *testing.T) {
			for _, b := range bs {
				res, err := b.Verify(ctx, c.Request())
				if err != nil {
					t.Errorf("%s: no verdict: %v", b.Name(), err)
					continue
				}
				if res.Valid != (c.Expect == Accept) {
					t.Errorf("%s: valid=%v, want %s (%s: %s)", b.Name(), res.Valid, c.Expect, res.Code, res.Reason)
				}
				if want := c.WantCode(b.Name()); res.Code != want {
					t.Errorf("%s: code %s, want %s (%s)", b.Name(), res.Code, want, res.Reason)
				}
			}
		})
	}
}

// TestKnownCasesCoverTheIssue checks the set holds what the issue names,
// each once, with an expectation and a code.
func TestKnownCasesCoverTheIssue(t *testing.T) {
	k, err := Known(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]verify.Code{
		"valid-ecdsa-p256": verify.OK, "valid-rsa-2048": verify.OK, "valid-ip-san": verify.OK, "valid-client": verify.OK,
		"expired-leaf": verify.Expired, "not-yet-valid-leaf": verify.NotYetValid, "expired-intermediate": verify.Expired,
		"wrong-name": verify.NameMismatch, "unknown-root": verify.UnknownIssuer, "bad-signature": verify.BadSignature,
		"name-constraint-violation": verify.NameConstraint, "path-too-long": verify.PathLength,
		"intermediate-not-ca": verify.NotCA, "wrong-eku": verify.BadUsage, "missing-intermediate": verify.UnknownIssuer,
	}
	seen := map[string]bool{}
	for _, c := range k.Cases {
		if seen[c.ID] {
			t.Errorf("case %s twice", c.ID)
		}
		seen[c.ID] = true
		w, ok := want[c.ID]
		if !ok {
			t.Errorf("unexpected case %s", c.ID)
			continue
		}
		if c.ExpectCode != w {
			t.Errorf("%s: expect code %s, want %s", c.ID, c.ExpectCode, w)
		}
		if (c.Expect == Accept) != (w == verify.OK) || c.Expect == Unknown {
			t.Errorf("%s: expect %q with code %s", c.ID, c.Expect, w)
		}
		if c.Source != KnownSource || len(c.Roots) == 0 || len(c.Chain) == 0 || c.Time.IsZero() {
			t.Errorf("%s: incomplete case %+v", c.ID, c)
		}
	}
	for id := range want {
		if !seen[id] {
			t.Errorf("case %s missing", id)
		}
	}
}
