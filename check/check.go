// Package check decides whether to trust a TLS server's certificate on more
// evidence than one CA signature. It is the verifying client of pkie, for
// programs to embed.
//
// A Checker looks at the certificate along the client's own network path,
// then asks Convergence notaries, which look from theirs, whether they see
// the same one. A man in the middle near the client shows the client a
// forged certificate that notaries elsewhere do not see, and is caught.
//
// Check does the whole job for a target:
//
//  1. probe: fetch the chain the way the client's own connection would;
//  2. local cache: a (host, port, certificate) accepted less than
//     Config.CacheMaxAge ago under the same notaries, policy and API
//     answers without notaries; a changed certificate or configuration is
//     a miss and goes back to them;
//  3. notaries, in parallel under one deadline (Config.NotaryTimeout), each
//     answer's signature verified against the key pinned in the notary's
//     bundle before anything in it is believed: pkie's v1 API (SHA-256,
//     SNI, signed and dated answers) for bundles that pin a v1 key, the
//     Convergence API for the others (Config.API forces one);
//  4. the policy (majority by default; consensus, minority, or a
//     Perspectives quorum with a minimum observation duration) turns the
//     answers into trusted, untrusted or inconclusive — see Policy for
//     the exact rule, and docs/guides/client.md;
//  5. sources: classic CA path validation ("ca") always, and any further
//     Source in Config.Sources, run beside the notaries; those named in
//     Config.Require must pass.
//
// Converge is Forced Perspectives' converge(host, port, sha1sum): for a program
// that already holds the certificate (its own TLS connection), it skips the
// probe and runs the same cache, notaries and policy on the fingerprint.
//
// # Adding evidence
//
// More PKI enhancements plug in as Sources: implement Source (a Name and an
// Assess that returns Pass, Fail or Unknown with a detail), append it to
// Config.Sources, and name it in Config.Require (the CLI's --require flag)
// to make it mandatory:
//
//	cfg.Sources = append(cfg.Sources, ctSource)      // Name() == "ct"
//	cfg.Require = []string{"ca", "ct"}               // --require ca,ct
//
// The verdict is the worst of the notary result and every required source
// (untrusted over inconclusive over trusted); sources not required are only
// reported. Only trusted verdicts are cached, and a cache hit skips the
// notaries but never the sources.
//
// PKI enhancements of the PEC framework (package pkie: the built-in ct,
// revocation and notary, or any registered one) plug in by their client
// half: put their pkie.Verifiers in Config.Verifiers and say where their
// proofs come from in Config.Proofs (the PEC cloud, prover servers through
// HTTPProofs, or proofs a dialer collected). Each verifier is a source named
// by its enhancement ("ct", "revocation", "notary", …), so one policy and one
// verdict hold whichever way the proofs arrived:
//
//	cfg.Verifiers = []pkie.Verifier{ctVerifier, revocationVerifier}
//	cfg.Proofs = &check.HTTPProofs{CT: proverURL, Revocation: proverURL}
//	cfg.Require = []string{"ca", "ct", "revocation"}
package check

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/consensus"
	"github.com/pkie/pkie/internal/pkies/builtin"
	"github.com/pkie/pkie/probe"
)

// Defaults.
const (
	// DefaultNotaryTimeout is the one deadline for all notaries: room for a
	// notary cache miss (the notary probes the target, up to 2 s) at global
	// distance.
	DefaultNotaryTimeout = 5 * time.Second
	// DefaultCacheMaxAge is how long an accepted certificate answers from
	// the local cache. Convergence kept entries for months; a month bounds
	// how long a mistake can live.
	DefaultCacheMaxAge = 30 * 24 * time.Hour
	// DefaultAnswerMaxAge bounds the age of a v1 notary answer's
	// observation: a pkie notary answers from its history for up to a day
	// before probing again.
	DefaultAnswerMaxAge = 24 * time.Hour
)

// DefaultNotaryDir returns the user's notaries directory,
// os.UserConfigDir()/pkie/notaries ($XDG_CONFIG_HOME/pkie/notaries).
func DefaultNotaryDir() (string, error) {
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no user config directory: %w", err)
	}
	return filepath.Join(d, "pkie", "notaries"), nil
}

// DefaultCachePath returns os.UserCacheDir()/pkie/verdicts.cache.
func DefaultCachePath() (string, error) { return consensus.DefaultCachePath() }

// Config configures a Checker.
type Config struct {
	// Notaries are the logical notaries to ask. None is accepted only
	// with Verifiers and a Require naming a source other than "ca": the
	// verdict then rests on the required sources alone, no notary is
	// asked, and the local cache is neither read nor written (it holds
	// what notaries vouched for). New refuses zero notaries otherwise.
	Notaries []*Bundle
	// Policy decides from the answers; the zero value is majority.
	Policy Policy
	// NotaryTimeout is the one deadline for all notary queries together;
	// 0 means DefaultNotaryTimeout. A notary that has not answered by then
	// stands aside.
	NotaryTimeout time.Duration
	// NotaryDial opens TCP connections to notaries (and to the bounce
	// relay); nil means a plain net.Dialer.
	NotaryDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// BounceVia, if set, relays every notary query through this notary's
	// CONNECT listener so the other notaries do not learn the client's
	// address.
	BounceVia *Bundle
	// API chooses the notary wire API: APIAuto ("", the default) asks a
	// notary whose bundle pins a v1 key over pkie's v1 API (SHA-256, SNI,
	// Ed25519-signed, dated answers) and the others over Convergence.
	API API
	// AnswerMaxAge bounds how old a notary answer may be (a v1 answer's
	// observation and signature, a Convergence answer's newest
	// observation); 0 means DefaultAnswerMaxAge.
	AnswerMaxAge time.Duration

	// Lookup resolves target names on the client's own path; nil means DNS.
	Lookup probe.Lookup
	// AllowPrivate lets Check probe loopback and private addresses.
	AllowPrivate bool
	// ProbeTimeout bounds the client's own connect + handshake; 0 means
	// probe.DefaultTimeout.
	ProbeTimeout time.Duration

	// Roots are the trust anchors of the "ca" source; nil means the
	// system's roots.
	Roots *x509.CertPool
	// Sources are further evidence beyond notaries and CA validation.
	Sources []Source
	// Registry names the enhancements of Verifiers; nil means
	// BuiltinRegistry() (ct, revocation, notary).
	Registry *pkie.Registry
	// Verifiers are the PKI enhancements (package pkie) the client checks,
	// one per enhancement: each becomes a source named by its Kind's name
	// in Registry ("ct", "revocation", "notary", …; an unregistered one by
	// its identifier, "0xff01"), asserting what the verifier finds in the
	// proof Proofs delivers for it. Require names them like any source.
	Verifiers []pkie.Verifier
	// Proofs delivers the Verifiers' proofs, all requested in one call per
	// check: the PEC cloud, HTTP provers (HTTPProofs), or proofs a dialer
	// collected. Required with Verifiers.
	Proofs ProofSource
	// Require names the sources ("ca", a Source's Name, or a Verifier's
	// enhancement name) that must pass.
	// Classic CA validation ("ca") must pass whether named or not, unless
	// TrustAgility is set.
	Require []string
	// TrustAgility is Convergence's trust without CAs: a certificate the
	// notaries agree on is trusted even if no CA vouches for it (a
	// self-signed site seen consistently, say). By default it is not: pkie
	// adds evidence to a CA signature, it does not replace it, so "ca" is
	// required. Under TrustAgility "ca" is reported, and required only if
	// named in Require. Converge and ConvergeSHA256 have no chain to
	// validate; they require "ca" only if Require names it, and leave CA
	// validation to the caller (crypto/tls does it unless told not to).
	TrustAgility bool

	// CachePath is the local cache file; "" disables the cache.
	CachePath string
	// CacheMaxAge is how long an accepted certificate answers from the
	// cache; 0 means DefaultCacheMaxAge.
	CacheMaxAge time.Duration

	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Checker checks certificates. It is safe for concurrent use; Close it to
// release the cache and idle notary connections.
type Checker struct {
	cfg    Config
	prober *probe.Prober
	// notaries are cfg.Notaries as the notary client takes them, checked;
	// policy is cfg.Policy likewise.
	notaries []*consensus.Bundle
	policy   consensus.Policy
	client   *consensus.Client
	cache    *consensus.Cache
	// cacheConfig names the configuration whose verdicts the cache holds
	// (consensus.Configuration.Key).
	cacheConfig string
	sources     []Source
	verifiers   *verifierGroup // nil: none configured
	require     map[string]bool

	warmRoots sync.Once
}

// New validates cfg and opens the cache.
func New(cfg Config) (*Checker, error) {
	if len(cfg.Notaries) == 0 && len(cfg.Verifiers) == 0 {
		return nil, errors.New("check: no notaries configured")
	}
	notaries := make([]*consensus.Bundle, len(cfg.Notaries))
	for i, b := range cfg.Notaries {
		if b == nil {
			return nil, fmt.Errorf("check: notary %d is nil", i)
		}
		nb, err := b.internal()
		if err != nil {
			return nil, notaryError(i, b, err)
		}
		notaries[i] = nb
	}
	var bounce *consensus.Bundle
	if cfg.BounceVia != nil {
		var err error
		if bounce, err = cfg.BounceVia.internal(); err != nil {
			return nil, fmt.Errorf("check: bounce notary: %w", err)
		}
	}
	policy := cfg.Policy.internal()
	if _, err := consensus.ParsePolicy(policy.String()); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	api, err := consensus.ParseAPI(string(cfg.API))
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	cfg.API = API(api)
	if cfg.Policy.MinDuration < 0 || cfg.NotaryTimeout < 0 || cfg.CacheMaxAge < 0 || cfg.ProbeTimeout < 0 || cfg.AnswerMaxAge < 0 {
		return nil, errors.New("check: negative duration in config")
	}
	if cfg.NotaryTimeout == 0 {
		cfg.NotaryTimeout = DefaultNotaryTimeout
	}
	if cfg.CacheMaxAge == 0 {
		cfg.CacheMaxAge = DefaultCacheMaxAge
	}
	if cfg.AnswerMaxAge == 0 {
		cfg.AnswerMaxAge = DefaultAnswerMaxAge
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Checker{
		cfg:      cfg,
		prober:   probe.New(probe.Options{Timeout: cfg.ProbeTimeout, AllowPrivate: cfg.AllowPrivate, Lookup: cfg.Lookup, Vantage: "client"}),
		notaries: notaries,
		policy:   policy,
		client: &consensus.Client{Dial: cfg.NotaryDial, BounceVia: bounce,
			API: api, AnswerMaxAge: cfg.AnswerMaxAge, Now: cfg.Now},
		sources: []Source{CASource{Roots: cfg.Roots, Now: cfg.Now}},
		require: map[string]bool{},
		cacheConfig: consensus.Configuration{Notaries: notaries, Policy: policy,
			API: api, AnswerMaxAge: cfg.AnswerMaxAge}.Key(),
	}
	names := map[string]bool{"ca": true}
	for _, s := range cfg.Sources {
		if s == nil || s.Name() == "" {
			return nil, errors.New("check: a source has no name")
		}
		if names[s.Name()] {
			return nil, fmt.Errorf("check: two sources are named %q", s.Name())
		}
		names[s.Name()] = true
		c.sources = append(c.sources, s)
	}
	if len(cfg.Verifiers) > 0 {
		if cfg.Proofs == nil {
			return nil, errors.New("check: verifiers configured without a proof source (Config.Proofs)")
		}
		reg := cfg.Registry
		if reg == nil {
			reg = builtin.Registry()
		}
		g := &verifierGroup{proofs: cfg.Proofs}
		for i, v := range cfg.Verifiers {
			if v == nil {
				return nil, fmt.Errorf("check: verifier %d is nil", i)
			}
			name := reg.Name(v.ID())
			if names[name] {
				return nil, fmt.Errorf("check: two sources are named %q", name)
			}
			names[name] = true
			g.names, g.vs = append(g.names, name), append(g.vs, v)
		}
		c.verifiers = g
	}
	if len(cfg.Notaries) == 0 && !slices.ContainsFunc(cfg.Require, func(r string) bool { return r != "ca" }) {
		// Without notaries the verdict rests on the sources alone: at
		// least one enhancement beyond a CA signature must be required.
		return nil, errors.New("check: no notaries configured, and no enhancement required in their place")
	}
	for _, r := range cfg.Require {
		if !names[r] {
			have := make([]string, 0, len(names))
			for n := range names {
				have = append(have, n)
			}
			slices.Sort(have)
			return nil, fmt.Errorf("check: required source %q is not configured (have %s)", r, strings.Join(have, ", "))
		}
		c.require[r] = true
	}
	if cfg.CachePath != "" {
		cache, err := consensus.OpenCache(context.Background(), cfg.CachePath)
		if err != nil {
			return nil, fmt.Errorf("check: local %w", err)
		}
		c.cache = cache
	}
	return c, nil
}

// Close releases the cache and idle notary connections.
func (c *Checker) Close() error {
	c.client.CloseIdleConnections()
	if c.cache != nil {
		return c.cache.Close()
	}
	return nil
}

// Timings are the phases of one check.
type Timings struct {
	// Probe is the client's own connect and handshake (Check only);
	// CacheLookup the local cache's.
	Probe       time.Duration `json:"probe_ns"`
	CacheLookup time.Duration `json:"cache_lookup_ns"`
	// Notaries is the wall time of the parallel notary round trips;
	// SignatureChecks the summed time verifying their answers.
	Notaries        time.Duration `json:"notaries_ns"`
	SignatureChecks time.Duration `json:"signature_checks_ns"`
	// Sources is the wall time of the sources run beside the notaries,
	// Policy of the decision, Total of the whole check.
	Sources time.Duration `json:"sources_ns"`
	Policy  time.Duration `json:"policy_ns"`
	Total   time.Duration `json:"total_ns"`
}

// Verdict is the Checker's conclusion about one certificate at one target,
// with everything it rests on.
type Verdict struct {
	// Target is the target as host:port, SNI the server name sent when
	// it is not the host, Result the conclusion.
	Target string `json:"target"`
	SNI    string `json:"sni,omitempty"`
	Result Result `json:"verdict"`
	// Headline says in one line what decided the verdict: for an
	// untrusted one, the evidence that failed. "Possible man-in-the-middle"
	// only when notaries saw a different certificate.
	Headline string `json:"headline"`
	// Reasons explain the verdict, the deciding evidence first.
	Reasons []string `json:"reasons"`
	SHA1    string   `json:"sha1"`             // colon hex, as notaries see it
	SHA256  string   `json:"sha256,omitempty"` // hex; empty under Converge
	// Policy is the notary policy decided under.
	Policy string `json:"policy"`
	// Notaries holds one answer per configured notary; empty on a cache hit.
	Notaries []NotaryAnswer `json:"notaries"`
	// Decision is the policy's tally; nil on a cache hit or without
	// notaries.
	Decision *Decision `json:"decision,omitempty"`
	// Sources holds the "ca" assertion first, then any others.
	Sources []Assertion `json:"sources"`
	// FromCache says the notary part came from the local cache, accepted
	// CacheAge ago.
	FromCache bool          `json:"from_cache"`
	CacheAge  time.Duration `json:"cache_age_ns,omitempty"`
	// Timings are the phases of the check.
	Timings Timings `json:"timings"`
}

// Source returns the assertion of the named source.
func (v *Verdict) Source(name string) (Assertion, bool) {
	for _, a := range v.Sources {
		if a.Source == name {
			return a, true
		}
	}
	return Assertion{}, false
}

// Check probes t along the client's own path and decides whether to trust
// the certificate it presents. The error is for failures to check at all
// (the target cannot be reached, ctx ended); every notary problem is an
// answer in the Verdict instead.
func (c *Checker) Check(ctx context.Context, t probe.Target) (*Verdict, error) {
	start := time.Now()
	if c.cfg.Roots == nil {
		// Go parses the system's roots once per process, on first use
		// (10-15 ms for a distribution's bundle); start that now so it
		// overlaps the probe's round trips instead of following them.
		c.warmRoots.Do(func() { go x509.SystemCertPool() })
	}
	obs, err := c.prober.Probe(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("check: probing %s: %w", t, err)
	}
	v, err := c.CheckObservation(ctx, obs)
	if v != nil {
		v.Timings.Probe = obs.Timings.Total
		v.Timings.Total = time.Since(start)
	}
	return v, err
}

// CheckObservation decides about a chain the caller already observed (for
// example in its own tls.Config.VerifyConnection), without probing.
func (c *Checker) CheckObservation(ctx context.Context, obs *probe.Observation) (*Verdict, error) {
	if obs == nil || len(obs.Chain) == 0 {
		return nil, errors.New("check: observation has no certificate chain")
	}
	if err := obs.Target.Validate(); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	// Recompute the fingerprints: they must be of the chain we assess.
	o := *obs
	o.SHA1, o.SHA256 = sha1.Sum(o.Chain[0]), sha256.Sum256(o.Chain[0])
	return c.decide(ctx, &o, &o.SHA256, &o.SHA1)
}

// Converge is Forced Perspectives' converge(host, port, sha1sum): given the
// SHA-1 fingerprint of a certificate the caller saw at host:port (colon
// separated or plain hex, any case), it reports whether to trust it,
// through the same local cache, notaries and policy as Check. With no chain
// to look at, the "ca" source (and any source needing the chain) answers
// Unknown, so requiring it makes Converge inconclusive at best.
func (c *Checker) Converge(ctx context.Context, host string, port int, fingerprint string) (bool, *Verdict, error) {
	fp, err := ParseSHA1(fingerprint)
	if err != nil {
		return false, nil, fmt.Errorf("check: %w", err)
	}
	t := probe.Target{Host: host, Port: port}
	if err := t.Validate(); err != nil {
		return false, nil, fmt.Errorf("check: %w", err)
	}
	obs := &probe.Observation{Target: t, SHA1: fp, Time: c.cfg.Now(), Vantage: "caller"}
	v, err := c.decide(ctx, obs, nil, &fp)
	if err != nil {
		return false, nil, err
	}
	return v.Result == Trusted, v, nil
}

// ConvergeSHA256 is Converge for a caller that holds the certificate's
// SHA-256 (64 hex digits or 32 colon separated bytes) and possibly an SNI
// name other than host (sni; "" means host). Only notaries whose bundle
// pins a v1 key can answer it: the Convergence API speaks SHA-1 alone, so
// Convergence-only notaries stand aside.
func (c *Checker) ConvergeSHA256(ctx context.Context, host string, port int, sni, fingerprint string) (bool, *Verdict, error) {
	fp, err := ParseSHA256(fingerprint)
	if err != nil {
		return false, nil, fmt.Errorf("check: %w", err)
	}
	t := probe.Target{Host: host, Port: port, ServerName: sni}
	if err := t.Validate(); err != nil {
		return false, nil, fmt.Errorf("check: %w", err)
	}
	obs := &probe.Observation{Target: t, SHA256: fp, Time: c.cfg.Now(), Vantage: "caller"}
	v, err := c.decide(ctx, obs, &fp, nil)
	if err != nil {
		return false, nil, err
	}
	return v.Result == Trusted, v, nil
}

// ParseSHA256 parses a SHA-256 certificate fingerprint written as 32 colon
// separated hex bytes or 64 hex digits, in either case.
func ParseSHA256(s string) ([32]byte, error) {
	var fp [32]byte
	b, err := parseFingerprint(s, len(fp), "SHA-256")
	copy(fp[:], b)
	return fp, err
}

// ParseSHA1 parses a SHA-1 certificate fingerprint written as 20 colon
// separated hex bytes or 40 hex digits, in either case.
func ParseSHA1(s string) ([20]byte, error) {
	var fp [20]byte
	b, err := parseFingerprint(s, len(fp), "SHA-1")
	copy(fp[:], b)
	return fp, err
}

// parseFingerprint parses n bytes written as colon separated hex bytes or
// 2n hex digits; hash names the fingerprint in errors.
func parseFingerprint(s string, n int, hash string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*n {
		b, err := hex.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("fingerprint %q is not %d hex digits", s, 2*n)
		}
		return b, nil
	}
	b, err := probe.ParseColonHex(s, n)
	if err != nil {
		return nil, fmt.Errorf("%w (want the certificate's %s as AA:BB:… or %d hex digits)", err, hash, 2*n)
	}
	return b, nil
}

// decide runs cache, notaries, sources and policy for obs. s256 is nil
// when only the SHA-1 is known (Converge), s1 when only the SHA-256 is
// (ConvergeSHA256).
func (c *Checker) decide(ctx context.Context, obs *probe.Observation, s256 *[32]byte, s1 *[20]byte) (*Verdict, error) {
	start := time.Now()
	t := obs.Target
	v := &Verdict{
		Target: t.String(), SNI: t.SNI(),
		Policy: c.cfg.Policy.String(), Notaries: []NotaryAnswer{},
	}
	if s1 != nil {
		v.SHA1 = probe.ColonHex(s1[:])
	}
	if c.cfg.Policy.MinDuration > 0 {
		v.Policy += fmt.Sprintf(" (min duration %s)", c.cfg.Policy.MinDuration)
	}
	if s256 != nil {
		v.SHA256 = hex.EncodeToString(s256[:])
	}
	// Local cache. An entry counts only under the configuration that
	// accepted it: a certificate accepted by one notary under minority must
	// not pass unasked under consensus, nor one vouched for by a notary
	// since removed (it may have lied) under the notaries that remain.
	key := consensus.Key{Host: t.Host, Port: t.Port, SHA256: s256, Config: c.cacheConfig}
	if s1 != nil {
		key.SHA1 = *s1
	}
	noNotaries := len(c.cfg.Notaries) == 0
	if c.cache != nil && !noNotaries {
		cs := time.Now()
		acc, ok, err := c.cache.Lookup(ctx, key)
		v.Timings.CacheLookup = time.Since(cs)
		switch age := c.cfg.Now().Sub(acc.At); {
		case err != nil:
			v.Reasons = append(v.Reasons, "local cache unavailable, asking notaries: "+err.Error())
		case !ok:
		case age <= c.cfg.CacheMaxAge && age >= -time.Minute:
			v.FromCache, v.CacheAge = true, max(age, 0)
		default:
			v.Reasons = append(v.Reasons, fmt.Sprintf("local cache entry is %s old (max %s): asking notaries again", age.Round(time.Second), c.cfg.CacheMaxAge))
		}
	}

	// Notaries and sources, in parallel, under one deadline.
	dctx, cancel := context.WithTimeout(ctx, c.cfg.NotaryTimeout)
	defer cancel()
	var wg sync.WaitGroup
	nv := 0
	if c.verifiers != nil {
		nv = len(c.verifiers.vs)
	}
	assertions := make([]Assertion, len(c.sources)+nv)
	var sourcesWall time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		ss := time.Now()
		// Path validation comes first (it is local and quick): the other
		// sources get its verified chains, so that one needing the leaf's
		// issuer (revocation) takes it from a verified path rather than
		// from whatever the server sent second.
		a, chains := c.sources[0].(CASource).verify(obs)
		a.Source, a.Duration = "ca", time.Since(ss)
		// Required by default for every check that has a chain.
		a.Required = c.require["ca"] || !c.cfg.TrustAgility && len(obs.Chain) > 0
		assertions[0] = a
		sctx := withVerifiedChains(dctx, chains)
		var swg sync.WaitGroup
		if g := c.verifiers; g != nil {
			swg.Add(1)
			go func() {
				defer swg.Done()
				as := g.assess(sctx, obs, chains, c.cfg.Now())
				for i := range as {
					as[i].Required = c.require[as[i].Source]
				}
				copy(assertions[len(c.sources):], as)
			}()
		}
		for i, s := range c.sources[1:] {
			swg.Add(1)
			go func() {
				defer swg.Done()
				as := time.Now()
				a := s.Assess(sctx, obs)
				a.Source, a.Required, a.Duration = s.Name(), c.require[s.Name()], time.Since(as)
				if a.Status != Pass && a.Status != Fail {
					a.Status = Unknown
				}
				assertions[i+1] = a
			}()
		}
		swg.Wait()
		sourcesWall = time.Since(ss)
	}()
	var answers []consensus.Answer
	if !v.FromCache && !noNotaries {
		ns := time.Now()
		answers = make([]consensus.Answer, len(c.notaries))
		for i, b := range c.notaries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = c.client.Ask(dctx, b, consensus.Request{
					Host: t.Host, Port: t.Port, SNI: t.ServerName, SHA1: s1, SHA256: s256,
				})
			}()
		}
		wg.Wait()
		v.Notaries = make([]NotaryAnswer, len(answers))
		for i, a := range answers {
			v.Notaries[i] = answerOf(a)
		}
		v.Timings.Notaries = time.Since(ns)
	} else {
		wg.Wait()
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	v.Sources = assertions
	v.Timings.Sources = sourcesWall
	for _, a := range v.Notaries {
		v.Timings.SignatureChecks += a.SigCheck
	}

	// Policy.
	ps := time.Now()
	result := Trusted
	// deciding collects the reasons that set the result, the others the
	// rest; the verdict lists the deciding ones first.
	var deciding, others, failed, unanswered, passed []string
	notaryReason := ""
	switch {
	case noNotaries:
		notaryReason = "no notaries configured: the verdict rests on the required enhancements"
	case v.FromCache:
		notaryReason = fmt.Sprintf("accepted %s ago (local cache; max age %s)", v.CacheAge.Round(time.Second), c.cfg.CacheMaxAge)
	default:
		d := decisionOf(c.policy.Decide(answers))
		v.Decision = &d
		result = d.Result
		notaryReason = "notaries: " + d.Reason
	}
	if result != Trusted {
		deciding = append(deciding, notaryReason)
	} else {
		others = append(others, notaryReason)
	}
	for _, a := range v.Sources {
		switch {
		case !a.Required:
			others = append(others, fmt.Sprintf("%s (reported, not required): %s: %s", a.Source, a.Status, a.Detail))
		case a.Status == Fail:
			result = Untrusted
			failed = append(failed, fmt.Sprintf("%s failed: %s", sourceTitle(a.Source), a.Detail))
			deciding = append(deciding, fmt.Sprintf("%s (required) failed: %s", a.Source, a.Detail))
		case a.Status == Unknown:
			if result == Trusted {
				result = Inconclusive
			}
			unanswered = append(unanswered, fmt.Sprintf("%s gave no answer: %s", sourceTitle(a.Source), a.Detail))
			deciding = append(deciding, fmt.Sprintf("%s (required) gave no answer: %s", a.Source, a.Detail))
		default:
			passed = append(passed, a.Source)
			others = append(others, fmt.Sprintf("%s (required) passed: %s", a.Source, a.Detail))
		}
	}
	v.Result = result
	v.Headline = headline(result, v.Decision, failed, unanswered, notaryReason)
	if noNotaries && result == Trusted {
		v.Headline = "trusted: " + strings.Join(passed, ", ") + " passed (no notaries configured)"
	}
	v.Reasons = append(append(deciding, others...), v.Reasons...)
	v.Timings.Policy = time.Since(ps)

	// Only trusted verdicts reached through the notaries are cached; a hit
	// is not refreshed, so an entry expires CacheMaxAge after the notaries
	// last vouched for it.
	// A verdict on the SHA-256 alone (ConvergeSHA256) is not stored: the
	// cache also answers lookups by SHA-1, which it would not know.
	if c.cache != nil && result == Trusted && !v.FromCache && !noNotaries && s1 != nil {
		if err := c.cache.Store(ctx, key, c.cfg.Now()); err != nil {
			v.Reasons = append(v.Reasons, "could not remember this verdict: "+err.Error())
		}
	}
	v.Timings.Total = time.Since(start)
	return v, nil
}

// MitMHeadline is the headline of a verdict decided by notaries that saw a
// different certificate.
const MitMHeadline = "the certificate this machine sees is not the one the notaries see: possible man-in-the-middle"

// headline names what decided a verdict. Notaries that saw another
// certificate come first (the one finding that points at an attacker on
// this machine's path), then failed sources, then notaries that could not
// vouch.
func headline(r Result, d *Decision, failed, unanswered []string, notaryReason string) string {
	notariesSaidNo := d != nil && d.Result == Untrusted
	switch r {
	case Trusted:
		return "trusted: " + notaryReason
	case Untrusted:
		switch {
		case notariesSaidNo && d.No > d.Unreachable:
			h := MitMHeadline
			if len(failed) > 0 {
				h += "; also " + strings.Join(failed, "; ")
			}
			return h
		case len(failed) > 0:
			return strings.Join(failed, "; ")
		case notariesSaidNo:
			return "the notaries could not vouch for this certificate: " + d.Noes()
		}
	case Inconclusive:
		if d != nil && d.Result == Inconclusive {
			return "inconclusive: " + strings.TrimPrefix(notaryReason, "notaries: ")
		}
		if len(unanswered) > 0 {
			return "inconclusive: " + strings.Join(unanswered, "; ")
		}
	}
	return string(r) + ": " + notaryReason
}

// sourceTitle names a source for a headline.
func sourceTitle(name string) string {
	switch name {
	case "ca":
		return "CA validation"
	case "ct":
		return "certificate transparency"
	case "revocation":
		return "the revocation check"
	case "notary":
		return "the cloud's notary"
	}
	return name
}
