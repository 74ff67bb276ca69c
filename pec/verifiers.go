package pec

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/builtin"
)

// operatorTTPs are the enhancements whose trusted party may be a cloud's
// operator, so that a cloud's bundle may carry their verifier
// configuration: its own notary. The keys of independent TTPs (a CT log, a
// revocation authority) are never taken from a bundle: a cloud could then
// vouch for the proofs it relays.
var (
	operatorTTPs    = []string{"notary"}
	independentTTPs = []string{"ct", "revocation"}
)

// BundleVerifiers builds the verifiers that the clouds' bundles configure
// (Bundle.Verifiers): today the cloud's notary, whose key each bundle pins.
// With several clouds (failover), an enhancement configured by more than
// one is verified against each cloud's key in turn: a proof passes when it
// verifies under any of them, since the client pinned every one. An entry
// for an enhancement whose TTP must be independent of the cloud is an
// error; one this registry does not know is skipped, named in skipped. A
// nil reg means the built-in enhancements (check.BuiltinRegistry).
func BundleVerifiers(reg *pkie.Registry, clouds []*Bundle) (vs []pkie.Verifier, skipped []string, err error) {
	if reg == nil {
		reg = builtin.Registry()
	}
	byName := map[string][]pkie.Verifier{}
	var names []string
	for _, b := range clouds {
		keys := make([]string, 0, len(b.Verifiers))
		for name := range b.Verifiers {
			keys = append(keys, name)
		}
		slices.Sort(keys)
		for _, name := range keys {
			if slices.Contains(independentTTPs, name) {
				return nil, nil, fmt.Errorf("pec: bundle %q configures the %s verifier: its TTP's key must be pinned by the client, never taken from a cloud", b.Name, name)
			}
			k, ok := reg.ByName(name)
			if !slices.Contains(operatorTTPs, name) || !ok || k.NewVerifier == nil {
				skipped = append(skipped, b.Name+": "+name)
				continue
			}
			v, err := k.NewVerifier(b.Verifiers[name])
			if err != nil {
				return nil, nil, fmt.Errorf("pec: bundle %q: %s verifier: %w", b.Name, name, err)
			}
			if _, seen := byName[name]; !seen {
				names = append(names, name)
			}
			byName[name] = append(byName[name], v)
		}
	}
	for _, name := range names {
		if all := byName[name]; len(all) == 1 {
			vs = append(vs, all[0])
		} else {
			vs = append(vs, anyVerifier(all))
		}
	}
	return vs, skipped, nil
}

// anyVerifier passes a proof that one of its verifiers (the same
// enhancement under the keys of several pinned clouds) passes.
type anyVerifier []pkie.Verifier

func (a anyVerifier) ID() pkie.ID { return a[0].ID() }

// Verify returns the first Pass; otherwise a Fail naming every key's
// reason, or Unknown if none failed.
func (a anyVerifier) Verify(ctx context.Context, req *pkie.VerifyRequest) pkie.Assertion {
	var fails, unknowns []string
	for _, v := range a {
		as := v.Verify(ctx, req)
		switch as.Status {
		case pkie.Pass:
			return as
		case pkie.Fail:
			fails = append(fails, as.Reason)
		default:
			unknowns = append(unknowns, as.Reason)
		}
	}
	if len(fails) > 0 {
		return pkie.Assertion{Status: pkie.Fail, Reason: fmt.Sprintf("under none of the %d pinned clouds' keys: %s", len(a), strings.Join(fails, "; "))}
	}
	return pkie.Assertion{Status: pkie.Unknown, Reason: strings.Join(slices.Compact(unknowns), "; ")}
}
