package check

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/pkies/ct"
	pkierev "github.com/pkie/pkie/internal/pkies/revocation"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	"github.com/pkie/pkie/probe"
)

// ProofOptions configure the proof-based sources (CT and revocation) that
// fetch their proofs from a prover server over HTTP.
type ProofOptions struct {
	// ProverURL is the prover server's base URL, e.g. http://127.0.0.1:8093.
	ProverURL string
	// TTPKey is the pinned note verifier key of the trusted third party:
	// for CT the mirror that signs the sorted tree's heads, for revocation
	// the revocation authority. Proofs are trusted on the pinned keys
	// alone, never on the prover.
	TTPKey string
	// LogKey is, for CT, the pinned key of the log the mirror follows (its
	// RFC 6962 note key); required with TTPKey. Unused for revocation.
	LogKey string
	// LogList is, for CT, the log list SCTs are checked against: a file
	// (or http(s) URL, read once) in Chrome's v3 format. With it, a
	// certificate's SCTs, the Policy and their inclusion decide; the
	// mirror (TTPKey, LogKey, ProverURL) judges only certificates with no
	// SCT and may be left out. Unused for revocation.
	LogList string
	// LogListSignature and LogListPublicKey are, for CT, the list's
	// detached signature (a file or URL) and the file of the key it is
	// checked with (PEM or DER); both or neither.
	LogListSignature, LogListPublicKey string
	// Policy is, for CT with a LogList, the CT policy: "chrome" (the
	// default), "apple" or "one".
	Policy string
	// Inclusion is, for CT with a LogList, "required" (the default: the
	// SCTs shown included, or promises still within their logs' merge
	// delay, must meet the policy by themselves, else the source is
	// Unknown) or "optional" (the policy alone decides a pass).
	Inclusion string
	// Witnesses and WitnessQuorum are, for CT with a LogList, the
	// witnesses a quorum of which must have cosigned each static-ct-api
	// checkpoint (CTVerifierConfig's fields of the same names).
	Witnesses     []string
	WitnessQuorum int
	// MaxListAge is, for CT with a LogList, the oldest list relied on
	// (CTVerifierConfig.MaxListAge).
	MaxListAge time.Duration
	// Fetch has the CT source fetch missing inclusion evidence straight
	// from the logs. It tells each log which certificate is checked;
	// proofs from a prover or a PEC cloud do not.
	Fetch bool
	// MaxAge rejects signed sorted-tree heads older than this: it bounds how long an
	// old proof can be replayed (for revocation, how long after a
	// revocation a stale "not revoked" proof still passes). Zero means
	// DefaultProofMaxAge.
	MaxAge time.Duration
	// HTTP is the client to reach the prover; nil means one with a 5 s
	// timeout.
	HTTP *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Defaults of ProofOptions.
const (
	// DefaultProofMaxAge is the oldest signed sorted-tree head accepted.
	DefaultProofMaxAge = time.Hour
)

// NewCTSource returns the "ct" source: the ct enhancement's verifier. With
// a LogList, the certificate's SCTs (embedded, from the TLS extension or a
// stapled OCSP response) must satisfy the Policy, and, unless Inclusion is
// "optional", be shown included (Fetch fetching the evidence from the
// logs). A certificate with no SCT, or a source with no LogList, must be in
// the mirror's signed sorted tree of the log (a presence proof fetched
// from the prover server at ProverURL; the PEC paper, §5.1).
func NewCTSource(o ProofOptions) (Source, error) {
	// With a log list the SCTs decide, and a prover is optional.
	o, err := o.defaults(treeproof.CT, o.LogList == "")
	if err != nil {
		return nil, err
	}
	v, err := ct.NewVerifierFrom(ct.VerifierConfig{Key: o.TTPKey, LogKey: o.LogKey, MaxAge: ct.Duration(o.MaxAge),
		LogList: o.LogList, LogListSignature: o.LogListSignature, LogListPublicKey: o.LogListPublicKey,
		Policy: o.Policy, Inclusion: o.Inclusion, Fetch: o.Fetch, Witnesses: o.Witnesses, WitnessQuorum: o.WitnessQuorum,
		MaxListAge: ct.Duration(o.MaxListAge), HTTP: o.HTTP})
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	return &verifierSource{name: treeproof.CT, v: v, proofs: &HTTPProofs{CT: o.ProverURL, HTTP: o.HTTP}, now: o.Now}, nil
}

// NewRevocationSource returns the "revocation" source: the revocation
// enhancement's verifier on proofs fetched from a prover server. An absence
// proof in the revocation authority's signed tree passes, a presence proof
// (revoked) fails. The key a certificate is revoked under names its
// issuer's key: taken from the leaf's authority key identifier, or, for a
// leaf without one, from the issuer on the path the "ca" source verified
// (VerifiedChains); with no such path the source answers Unknown.
func NewRevocationSource(o ProofOptions) (Source, error) {
	o, err := o.defaults(treeproof.Revocation, true)
	if err != nil {
		return nil, err
	}
	v, err := pkierev.NewVerifierFrom(pkierev.VerifierConfig{Key: o.TTPKey, MaxAge: pkierev.Duration(o.MaxAge)})
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	return &verifierSource{name: treeproof.Revocation, v: v, proofs: &HTTPProofs{Revocation: o.ProverURL, HTTP: o.HTTP}, now: o.Now}, nil
}

func (o ProofOptions) defaults(pkieName string, proverRequired bool) (ProofOptions, error) {
	if o.ProverURL == "" && proverRequired {
		return o, fmt.Errorf("check: %s source needs a prover URL", pkieName)
	}
	if o.MaxAge == 0 {
		o.MaxAge = DefaultProofMaxAge
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// HTTPProofs is a ProofSource on prover servers (`pkie prover serve`,
// docs/formats/api-proofs.md): it fetches the ct and revocation proofs over HTTP
// and wraps each response into the enhancement's proof (the signed
// sorted-tree proof of docs/formats/proofs.md; for ct, as the sorted-tree
// part of a version 3 ct body, with no inclusion evidence), so that the
// same verifiers judge them as judge proofs from the PEC cloud. Other
// enhancements get no proof.
type HTTPProofs struct {
	CT         string       // the ct prover's base URL; "" for none
	Revocation string       // the revocation prover's base URL; "" for none
	HTTP       *http.Client // nil: a client with a 5 s timeout
}

// Proofs fetches the requested proofs concurrently. The revocation key is
// computed as the verifier computes it: from the leaf's authority key
// identifier, or from the issuer on the path the "ca" source verified
// (VerifiedChains(ctx)); a proof for any other key would fail anyway.
func (h *HTTPProofs) Proofs(ctx context.Context, obs *probe.Observation, reqs []pkie.Request) map[pkie.ID]ProofResult {
	out := make(map[pkie.ID]ProofResult, len(reqs))
	if len(obs.Chain) == 0 {
		return out
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := h.fetch(ctx, obs, r.ID)
			mu.Lock()
			out[r.ID] = res
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func (h *HTTPProofs) fetch(ctx context.Context, obs *probe.Observation, id pkie.ID) ProofResult {
	var base string
	switch id {
	case pkie.CT:
		base = h.CT
	case pkie.Revocation:
		base = h.Revocation
	}
	if base == "" {
		return ProofResult{Err: fmt.Errorf("no HTTP prover for enhancement %s", id)}
	}
	res := ProofResult{From: "prover " + base}
	c := &treeproof.Client{Base: base, HTTP: h.HTTP}
	var resp *treeproof.Response
	var err error
	if id == pkie.CT {
		var key [32]byte
		if key, err = ctwire.ChainKey(obs.Chain); err != nil {
			res.From, res.Err = "", fmt.Errorf("certificate's CT key: %w", err)
			return res
		}
		resp, err = c.CT(ctx, key)
	} else {
		var key [32]byte
		if key, err = revocationKey(ctx, obs.Chain[0]); err != nil {
			res.From, res.Err = "", err // nothing was asked: the reason is ours
			return res
		}
		resp, err = c.Revocation(ctx, key)
	}
	if err != nil {
		res.Err = err
		return res
	}
	b, err := treeproof.FromResponse(resp)
	if err != nil {
		res.Err = err
		return res
	}
	version := uint8(treeproof.Version)
	var body []byte
	if id == pkie.CT {
		version = ct.BodyVersion
		body, err = (&ct.Body{Tree: b}).MarshalBinary()
	} else {
		body, err = b.MarshalBinary()
	}
	if err != nil {
		// A response whose fields do not fit the body cannot verify:
		// say so rather than drop it.
		res.Err = fmt.Errorf("prover's response does not encode as a proof: %w", err)
		return res
	}
	res.Proof = &pkie.Proof{ID: id, Version: version, Body: body}
	return res
}

// revocationKey computes the revocation key of leafDER from the verified
// path in ctx.
func revocationKey(ctx context.Context, leafDER []byte) ([32]byte, error) {
	leaf, err := x509.ParseCertificate(leafDER)
	if err != nil {
		return [32]byte{}, fmt.Errorf("leaf certificate does not parse: %w", err)
	}
	issuer, err := pkierev.VerifiedIssuer(leaf, VerifiedChains(ctx))
	if err != nil {
		return [32]byte{}, err
	}
	return pkierev.CertKey(leaf, issuer)
}
