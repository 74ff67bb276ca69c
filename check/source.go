package check

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/pkie/pkie/probe"
)

// Status is a source's finding about one certificate.
type Status string

// Statuses.
const (
	Pass    Status = "pass"    // the evidence supports the certificate
	Fail    Status = "fail"    // the evidence speaks against it
	Unknown Status = "unknown" // no evidence either way (unreachable, not applicable…)
)

// Assertion is one source's finding, with what it rests on.
type Assertion struct {
	// Source names the source: "ca", a Source's Name, or an enhancement's.
	Source string `json:"source"`
	// Status is Pass, Fail or Unknown.
	Status Status `json:"status"`
	// Detail says what the finding rests on, or why there is none.
	Detail string `json:"detail"`
	// Required says the source had to pass for a trusted verdict.
	Required bool `json:"required"`
	// Duration is how long the source took.
	Duration time.Duration `json:"duration_ns"`
}

// A Source is one kind of evidence about a certificate beyond the notaries
// (a PKI enhancement: classic CA validation, Certificate Transparency,
// revocation…). The Checker runs every configured source beside the
// notaries, under the same deadline, and reports each Assertion in the
// Verdict. A source named in Config.Require must Pass for the verdict to be
// trusted: Fail makes it untrusted, Unknown inconclusive. Sources not
// required are reported only.
//
// obs.Chain is empty when the Checker was given only a fingerprint
// (Converge); a source that needs the chain answers Unknown then. Assess
// must honour ctx (it carries the check's deadline, and the chains the
// "ca" source verified: see VerifiedChains); the Checker fills in
// Source, Required and Duration, and treats any Status other than Pass or
// Fail as Unknown.
type Source interface {
	// Name names the source in verdicts and in Config.Require.
	Name() string
	// Assess judges the certificate of obs.
	Assess(ctx context.Context, obs *probe.Observation) Assertion
}

// CASource is classic path validation: the chain the client saw must lead
// to a root in Roots (nil: the system's roots) and name the target. It is
// always part of a Checker under the name "ca".
type CASource struct {
	// Roots are the trust anchors; nil means the system's.
	Roots *x509.CertPool
	Now   func() time.Time // nil: time.Now
}

// Name returns "ca".
func (CASource) Name() string { return "ca" }

// Assess validates obs.Chain for the target's server name.
func (s CASource) Assess(_ context.Context, obs *probe.Observation) Assertion {
	a, _ := s.verify(obs)
	return a
}

// verify is Assess that also returns the verified chains (leaf first, root
// last), nil unless the assertion is Pass.
func (s CASource) verify(obs *probe.Observation) (Assertion, [][]*x509.Certificate) {
	a := Assertion{Source: "ca", Status: Unknown}
	if len(obs.Chain) == 0 {
		a.Detail = "no certificate chain to validate (only a fingerprint was given)"
		return a, nil
	}
	leaf, err := x509.ParseCertificate(obs.Chain[0])
	if err != nil {
		a.Status, a.Detail = Fail, fmt.Sprintf("leaf certificate does not parse: %v", err)
		return a, nil
	}
	inter := x509.NewCertPool()
	for _, der := range obs.Chain[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	name := obs.Target.SNI()
	if name == "" {
		name = obs.Target.Host
	}
	opts := x509.VerifyOptions{DNSName: name, Roots: s.Roots, Intermediates: inter}
	if s.Now != nil {
		opts.CurrentTime = s.Now()
	}
	chains, err := leaf.Verify(opts)
	if err != nil {
		a.Status, a.Detail = Fail, describeX509(err)
		return a, nil
	}
	root := chains[0][len(chains[0])-1]
	a.Status, a.Detail = Pass, fmt.Sprintf("valid for %s, chains to %s", name, root.Subject)
	return a, chains
}

type verifiedChainsKey struct{}

// VerifiedChains returns the chains, leaf first and root last, that the
// "ca" source verified for the observation a Source is assessing: the
// Checker validates the path before it runs the other sources and hands
// them the result in ctx. It is nil when CA validation did not pass, and
// when ctx does not come from a Checker.
//
// A source that needs the leaf's issuer takes it from here (chain[1], or
// the leaf itself for a one-certificate chain), never from what the server
// sent after the leaf: that may be any certificate.
func VerifiedChains(ctx context.Context) [][]*x509.Certificate {
	c, _ := ctx.Value(verifiedChainsKey{}).([][]*x509.Certificate)
	return c
}

func withVerifiedChains(ctx context.Context, chains [][]*x509.Certificate) context.Context {
	return context.WithValue(ctx, verifiedChainsKey{}, chains)
}

func describeX509(err error) string {
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		return "chain does not lead to a trusted root: " + err.Error()
	}
	return err.Error()
}
