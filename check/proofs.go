package check

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/pkie/pkie/internal/prover"
	"github.com/pkie/pkie/internal/revocation"
	"github.com/pkie/pkie/probe"
)

// ProofOptions configure the proof-based sources (CT and revocation).
type ProofOptions struct {
	// ProverURL is the prover server's base URL, e.g. http://127.0.0.1:8093.
	ProverURL string
	// TTPKey is the pinned note verifier key of the trusted third party:
	// the log for CT, the revocation authority for revocation. Proofs are
	// trusted on this key alone, never on the prover.
	TTPKey string
	// MaxAge rejects signed sorted-tree heads older than this: it bounds how long an
	// old proof can be replayed (for revocation, how long after a
	// revocation a stale "not revoked" proof still passes). Zero means
	// DefaultProofMaxAge.
	MaxAge time.Duration
	// MMD is the log's maximum merge delay: a certificate absent from the
	// sorted tree passes CT only with an SCT younger than this. Zero means
	// DefaultMMD. Unused for revocation.
	MMD time.Duration
	// HTTP is the client to reach the prover; nil means one with a 5 s
	// timeout.
	HTTP *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Defaults of ProofOptions.
const (
	DefaultProofMaxAge = time.Hour
	DefaultMMD         = 24 * time.Hour
)

type proofSource struct {
	pkie   string
	client *prover.Client
	pin    prover.Pin
	mmd    time.Duration
	now    func() time.Time
}

func newProofSource(pkie string, o ProofOptions) (*proofSource, error) {
	if o.ProverURL == "" {
		return nil, fmt.Errorf("check: %s source needs a prover URL", pkie)
	}
	if o.MaxAge == 0 {
		o.MaxAge = DefaultProofMaxAge
	}
	if o.MMD == 0 {
		o.MMD = DefaultMMD
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	pin, err := prover.ParsePin(o.TTPKey, o.MaxAge)
	if err != nil {
		return nil, fmt.Errorf("check: %s: %w", pkie, err)
	}
	return &proofSource{pkie: pkie, client: &prover.Client{Base: o.ProverURL, HTTP: o.HTTP}, pin: pin, mmd: o.MMD, now: o.Now}, nil
}

// NewCTSource returns the "ct" source: the leaf must be in the log's signed
// sorted tree (presence proof), or absent with the log's SCT younger than
// the maximum merge delay (the PEC paper, §5.1).
func NewCTSource(o ProofOptions) (Source, error) { return newProofSource(prover.CT, o) }

// NewRevocationSource returns the "revocation" source: an absence proof in
// the revocation authority's signed tree passes, a presence proof
// (revoked) fails. The key a certificate is revoked under names its
// issuer's key: taken from the leaf's authority key identifier, or, for a
// leaf without one, from the issuer on the path the "ca" source verified
// (VerifiedChains); with no such path the source answers Unknown.
func NewRevocationSource(o ProofOptions) (Source, error) {
	return newProofSource(prover.Revocation, o)
}

// Name returns "ct" or "revocation".
func (s *proofSource) Name() string { return s.pkie }

// Assess fetches and verifies the proof for obs's leaf. An unreachable
// prover is Unknown; a proof that does not verify (bad signature, stale or
// future head, wrong origin, a head bound to a log checkpoint the pinned key
// did not sign or that cannot hold the tree, a sorted-tree root in the old
// checkpoint form, broken path) is Fail, since only an attacker or a broken
// TTP produces one.
func (s *proofSource) Assess(ctx context.Context, obs *probe.Observation) Assertion {
	a := Assertion{Source: s.pkie, Status: Unknown}
	if len(obs.Chain) == 0 {
		a.Detail = "no certificate chain (only a fingerprint was given)"
		return a
	}
	leafDER := obs.Chain[0]
	if s.pkie == prover.CT {
		resp, err := s.client.CT(ctx, sha256.Sum256(leafDER))
		if err != nil {
			a.Detail = fmt.Sprintf("no proof from the CT prover: %v", err)
			return a
		}
		res, err := prover.VerifyCT(leafDER, resp, s.pin, s.mmd, s.now())
		if err != nil {
			a.Status, a.Detail = Fail, err.Error()
			return a
		}
		if res.Present {
			a.Detail = fmt.Sprintf("in the log's sorted tree of %d certificates signed %s (built from the log's checkpoint of %d entries)", res.TreeSize, res.CheckpointTime.UTC().Format(time.RFC3339), res.LogSize)
		} else {
			a.Detail = fmt.Sprintf("not yet in the sorted tree; SCT of %s is within the %s merge delay", res.SCTTime.UTC().Format(time.RFC3339), s.mmd)
		}
		a.Status = Pass
		return a
	}
	leaf, err := x509.ParseCertificate(leafDER)
	if err != nil {
		a.Status, a.Detail = Fail, fmt.Sprintf("leaf certificate does not parse: %v", err)
		return a
	}
	issuer, err := verifiedIssuer(ctx, leaf)
	if err != nil {
		a.Detail = err.Error()
		return a
	}
	key, err := revocation.CertKey(leaf, issuer)
	if err != nil {
		a.Detail = err.Error()
		return a
	}
	resp, err := s.client.Revocation(ctx, key)
	if err != nil {
		a.Detail = fmt.Sprintf("no proof from the revocation prover: %v", err)
		return a
	}
	res, err := prover.VerifyRevocation(key, resp, s.pin, s.now())
	if err != nil {
		a.Status, a.Detail = Fail, err.Error()
		return a
	}
	signed := res.CheckpointTime.UTC().Format(time.RFC3339)
	if res.Revoked {
		a.Status, a.Detail = Fail, fmt.Sprintf("revoked: listed in the authority's tree of %d revocations signed %s", res.TreeSize, signed)
		return a
	}
	a.Status, a.Detail = Pass, fmt.Sprintf("not revoked as of %s (absent from %d revocations)", signed, res.TreeSize)
	return a
}

// verifiedIssuer returns the certificate that issued leaf, as the revocation
// key needs it: nil when leaf names its issuer's key itself (authority key
// identifier), else the issuer on a path the "ca" source verified. Without
// such a path the issuer cannot be established: the certificate a server
// sends after the leaf may be unrelated, and even one whose key did sign
// the leaf asserts its own key identifier unchecked, so either would let a
// server choose the key a revoked leaf is looked up under.
func verifiedIssuer(ctx context.Context, leaf *x509.Certificate) (*x509.Certificate, error) {
	if len(leaf.AuthorityKeyId) > 0 {
		return nil, nil
	}
	for _, chain := range VerifiedChains(ctx) {
		if len(chain) == 0 || !chain[0].Equal(leaf) {
			continue
		}
		if len(chain) == 1 {
			return leaf, nil // the leaf is itself a trusted root
		}
		return chain[1], nil
	}
	return nil, errors.New("the leaf has no authority key identifier and its issuer cannot be established without a verified path to a trusted root (CA validation did not pass), so its revocation status cannot be looked up")
}
