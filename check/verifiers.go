package check

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/builtin"
	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/probe"
)

// A ProofSource delivers proofs for an observation: the PEC cloud, HTTP
// provers (HTTPProofs), or proofs a dialer already collected. Proofs is
// asked once per check for every configured verifier together, with ctx
// carrying the check's deadline and the chains the "ca" source verified
// (VerifiedChains). A missing ID means no proof: the verifier's source
// answers Unknown. What a ProofSource returns is never trusted: each proof
// goes to its verifier, which trusts only the TTP keys it pinned.
type ProofSource interface {
	// Proofs returns what it has for each of reqs by ctx's deadline.
	Proofs(ctx context.Context, obs *probe.Observation, reqs []pkie.Request) map[pkie.ID]ProofResult
}

// ProofResult is one enhancement's delivery.
type ProofResult struct {
	Proof *pkie.Proof // nil when none
	// Err says why there is no proof (busy, unsupported, unreachable,
	// timeout); it becomes the Unknown assertion's detail.
	Err error
	// From names where the proof came from, for the reason ("cloud
	// pec.example via quic", "prover http://127.0.0.1:8093").
	From string
}

// ProofSourceFunc adapts a function to ProofSource.
type ProofSourceFunc func(ctx context.Context, obs *probe.Observation, reqs []pkie.Request) map[pkie.ID]ProofResult

// Proofs calls f.
func (f ProofSourceFunc) Proofs(ctx context.Context, obs *probe.Observation, reqs []pkie.Request) map[pkie.ID]ProofResult {
	return f(ctx, obs, reqs)
}

// NewVerifierSource returns a Source named name that fetches v's proof from
// proofs and has v judge it. A Checker builds one per Config.Verifiers
// entry itself (fetching all their proofs in one call); this is for a
// source used on its own or in Config.Sources.
func NewVerifierSource(name string, v pkie.Verifier, proofs ProofSource) (Source, error) {
	if name == "" || v == nil || proofs == nil {
		return nil, errors.New("check: a verifier source needs a name, a verifier and a proof source")
	}
	return &verifierSource{name: name, v: v, proofs: proofs, now: time.Now}, nil
}

type verifierSource struct {
	name   string
	v      pkie.Verifier
	proofs ProofSource
	now    func() time.Time
}

func (s *verifierSource) Name() string { return s.name }

func (s *verifierSource) Assess(ctx context.Context, obs *probe.Observation) Assertion {
	id := s.v.ID()
	res := s.proofs.Proofs(ctx, obs, []pkie.Request{requestFor(id, obs)})
	return verifyProof(ctx, s.name, s.v, obs, res[id], VerifiedChains(ctx), s.now())
}

// verifyProof has v judge the proof delivered for obs and renders its
// assertion as a source's. A verifier is asked even when no proof came: it
// may decide on what the handshake delivered (the ct verifier on the
// certificate's SCTs); when it answers Unknown, the detail says why no
// proof came.
func verifyProof(ctx context.Context, name string, v pkie.Verifier, obs *probe.Observation, res ProofResult, chains [][]*x509.Certificate, now time.Time) Assertion {
	a := Assertion{Source: name, Status: Unknown}
	if len(obs.Chain) == 0 {
		a.Detail = "no certificate chain (only a fingerprint was given)"
		return a
	}
	subj, err := subjectOf(obs)
	if err != nil {
		a.Status, a.Detail = Fail, err.Error()
		return a
	}
	pa := v.Verify(ctx, &pkie.VerifyRequest{Subject: subj, Params: paramsFor(v.ID(), &subj), Proof: res.Proof, Now: now, VerifiedChains: chains})
	switch pa.Status {
	case pkie.Pass:
		a.Status = Pass
	case pkie.Fail:
		a.Status = Fail
	}
	a.Detail = pa.Reason
	if res.Proof == nil {
		what := "no proof"
		if res.From != "" {
			what += " from " + res.From
		}
		if res.Err != nil {
			what += ": " + res.Err.Error()
		}
		switch {
		case pa.Status == pkie.Unknown && isBareNoProof(pa.Reason):
			a.Detail = what
		default:
			a.Detail += " (" + what + ")"
		}
		return a
	}
	if res.From != "" {
		a.Detail += " (proof from " + res.From + ")"
	}
	return a
}

// isBareNoProof reports whether a verifier's Unknown reason for a missing
// proof says only that something is missing ("no revocation proof", "no
// notary answer"), which the source's own detail says better: from where,
// and why.
func isBareNoProof(reason string) bool {
	return reason == "" || strings.HasPrefix(reason, "no ")
}

// requestFor is the request for enhancement id about obs. The ct request
// carries the SCTs the handshake delivered beside the certificate (the TLS
// extension's and a stapled OCSP response's), so that the cloud can fetch
// their inclusion evidence (ct.RequestParams); the others carry none.
func requestFor(id pkie.ID, obs *probe.Observation) pkie.Request {
	r := pkie.Request{ID: id}
	if id != pkie.CT || (len(obs.SCTs) == 0 && len(obs.OCSPResponse) == 0) {
		return r
	}
	s := pkie.Subject{SCTs: obs.SCTs, OCSPResponse: obs.OCSPResponse}
	if len(obs.OCSPResponse) > 0 && len(obs.Chain) > 0 {
		// The OCSP response's SCTs are those of the leaf's response.
		if leaf, err := x509.ParseCertificate(obs.Chain[0]); err == nil {
			s.Certs = []*x509.Certificate{leaf}
		}
	}
	r.Params = paramsFor(id, &s)
	return r
}

// paramsFor is the parameters of the request for enhancement id about s.
func paramsFor(id pkie.ID, s *pkie.Subject) []byte {
	if id != pkie.CT || (len(s.SCTs) == 0 && len(s.OCSPResponse) == 0) {
		return nil
	}
	return ct.RequestParams(s)
}

// subjectOf is what a verifier is told the client connected to: the SNI
// name (the host when it sends none), the port, the chain as sent, and the
// SCTs and OCSP response the handshake delivered beside it.
func subjectOf(obs *probe.Observation) (pkie.Subject, error) {
	name := obs.Target.SNI()
	if name == "" {
		name = obs.Target.Host
	}
	s := pkie.Subject{ServerName: strings.ToLower(name), Port: obs.Target.Port, Chain: obs.Chain,
		Certs: make([]*x509.Certificate, len(obs.Chain)), SCTs: obs.SCTs, OCSPResponse: obs.OCSPResponse}
	for i, der := range obs.Chain {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return s, fmt.Errorf("certificate %d of the chain does not parse: %v", i, err)
		}
		s.Certs[i] = c
	}
	return s, nil
}

// verifierGroup runs a Checker's Config.Verifiers: one Proofs call for all
// of them, then each verifier on its proof.
type verifierGroup struct {
	names  []string
	vs     []pkie.Verifier
	proofs ProofSource
}

func (g *verifierGroup) assess(ctx context.Context, obs *probe.Observation, chains [][]*x509.Certificate, now time.Time) []Assertion {
	start := time.Now()
	out := make([]Assertion, len(g.vs))
	var delivered map[pkie.ID]ProofResult
	if len(obs.Chain) > 0 {
		reqs := make([]pkie.Request, len(g.vs))
		for i, v := range g.vs {
			reqs[i] = requestFor(v.ID(), obs)
		}
		delivered = g.proofs.Proofs(ctx, obs, reqs)
	}
	var wg sync.WaitGroup
	for i, v := range g.vs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = verifyProof(ctx, g.names[i], v, obs, delivered[v.ID()], chains, now)
			out[i].Duration = time.Since(start)
		}()
	}
	wg.Wait()
	return out
}

// NewVerifiers builds the verifiers of the enhancements named in configs
// (enhancement name or identifier → the verifier's JSON configuration, as
// bundles and configuration files carry them) from reg, nil meaning
// BuiltinRegistry(), in identifier order. An unknown name, an enhancement
// without a verifier and a configuration its Kind refuses are errors.
func NewVerifiers(reg *pkie.Registry, configs map[string]json.RawMessage) ([]pkie.Verifier, error) {
	if reg == nil {
		reg = builtin.Registry()
	}
	type built struct {
		id pkie.ID
		v  pkie.Verifier
	}
	var bs []built
	seen := map[pkie.ID]string{}
	for name, cfg := range configs {
		k, ok := reg.ByName(name)
		if !ok {
			return nil, fmt.Errorf("check: unknown enhancement %q", name)
		}
		if other, dup := seen[k.ID]; dup {
			return nil, fmt.Errorf("check: enhancement %s configured twice (%q and %q)", k.Name, other, name)
		}
		seen[k.ID] = name
		if k.NewVerifier == nil {
			return nil, fmt.Errorf("check: enhancement %q has no verifier", k.Name)
		}
		v, err := k.NewVerifier(cfg)
		if err != nil {
			return nil, fmt.Errorf("check: %s verifier: %w", k.Name, err)
		}
		bs = append(bs, built{k.ID, v})
	}
	slices.SortFunc(bs, func(a, b built) int { return int(a.id) - int(b.id) })
	vs := make([]pkie.Verifier, len(bs))
	for i, b := range bs {
		vs[i] = b.v
	}
	return vs, nil
}
