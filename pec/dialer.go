package pec

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/pkies/builtin"
	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/probe"
	utls "github.com/refraction-networking/utls"
)

// Defaults of a Dialer.
const (
	// DefaultProofTimeout is how long a Dialer waits for proofs after the
	// server's certificate arrived.
	DefaultProofTimeout = 3 * time.Second
	// DefaultHandshakeTimeout bounds connect and handshake when the
	// caller's context has no deadline.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultReuseMaxAge is how long the evidence of a full handshake
	// serves resumed connections under Resumption "reuse".
	DefaultReuseMaxAge = 10 * time.Minute
)

// Resumption policies (PEC paper, Appendix A).
const (
	// ResumeReuse trusts a resumed session on the proofs its full
	// handshake verified, re-verified under the current policy and time,
	// while they are younger than ReuseMaxAge; the cloud is not asked.
	ResumeReuse = "reuse"
	// ResumeFresh submits the session's chain to the cloud again and waits
	// for new proofs, as for a full handshake.
	ResumeFresh = "fresh"
)

// A Dialer opens TLS connections whose server certificate is trusted on
// the evidence of PKI enhancements delivered by a PEC cloud, in the
// client-server or client-only deployment of "Towards Sustainable
// Evolution for the TLS PKI" (PEC, ASIA CCS 2018, §4.1, Figure 2). An
// application uses it in place of tls.Dial. In client-server mode (Mode,
// the default; dialer_cs.go) the ClientHello carries the PEC extension, a
// PEC server submits its chain itself, and the Dialer submits it too only
// when the proofs have not come within ServerGrace.
//
// The moment the server's certificate arrives, from inside the handshake
// (tls.Config.VerifyConnection, which runs before the client's Finished),
// the Dialer submits the chain to the cloud without waiting for an answer,
// so the handshake and the provers run at once. It returns the connection
// only after every requested proof has arrived (or ProofTimeout has passed)
// and the check package has decided on them with CA validation, under the
// same policy `pkie check` applies: the application cannot write a byte
// before then. A connection that is not trusted is closed without any
// application data having been sent, and the error is a *VerdictError.
//
// A Dialer's fields must not change after its first use. It is safe for
// concurrent use.
type Dialer struct {
	// Cloud is the session with the PEC cloud that proves chains.
	Cloud *Client
	// Verifiers are the enhancements the client checks, one per
	// enhancement: each one's proof is requested from the cloud and
	// verified by it. The TTP keys they pin are the client's own; a
	// cloud's bundle supplies only its notary key (Bundle.Verifiers).
	Verifiers []pkie.Verifier
	// Registry names the verifiers' identifiers; nil means the built-in
	// enhancements (ct, revocation, notary).
	Registry *pkie.Registry
	// Require names the evidence that must pass ("ca", or an enhancement's
	// registered name). Nil requires every one of Verifiers. Classic CA
	// validation ("ca") is required whether named or not, unless
	// TrustAgility is set, as in check.Config.
	Require []string
	// TrustAgility is check.Config.TrustAgility: a certificate no CA
	// vouches for may be trusted on the enhancements' evidence alone.
	TrustAgility bool
	// ProofTimeout is how long after the certificate arrived the Dialer
	// waits for the proofs; 0 means DefaultProofTimeout. It is also the
	// budget the cloud is told.
	ProofTimeout time.Duration
	// Warn returns a connection whose verdict is inconclusive (a required
	// proof missing at the deadline, a busy cloud) instead of failing
	// closed; Conn.Verdict says so. An untrusted verdict (evidence that
	// failed) always fails.
	Warn bool
	// Resumption is ResumeReuse ("", the default) or ResumeFresh.
	Resumption string
	// ReuseMaxAge bounds, under ResumeReuse, the age of the evidence a
	// resumed connection is trusted on; 0 means DefaultReuseMaxAge.
	ReuseMaxAge time.Duration

	// TLSConfig is the base configuration; nil means the zero one. Its
	// RootCAs are the "ca" source's trust anchors (nil: the system's). The
	// Dialer validates the chain itself, through the check package, so
	// InsecureSkipVerify is ignored; VerifyConnection, if set, runs after
	// the chain was submitted. ServerName defaults to the host dialled.
	// Renegotiation is refused. With http.Transport, leave "h2" out of
	// NextProtos: the transport speaks HTTP/2 only on a *tls.Conn.
	// ClientSessionCache holds resumable sessions; nil means one of the
	// Dialer's own (SessionTicketsDisabled turns resumption off).
	TLSConfig *tls.Config
	// NetDial opens the TCP connection; nil means a zero net.Dialer's
	// DialContext.
	NetDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// HandshakeTimeout bounds connect and handshake when ctx has no
	// deadline; 0 means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// Now is the clock verification uses; nil means time.Now.
	Now func() time.Time
	// Mode is ModeClientServer ("", the default) or ModeClientOnly. In
	// client-server mode the handshake is uTLS's, the Dialer keeps its
	// own session cache (TLSConfig.ClientSessionCache, a crypto/tls
	// type, is not used) and the TLSConfig fields a client's handshake
	// uses are carried over (dialer_cs.go).
	Mode string
	// ServerGrace is how long after the certificate arrived a
	// client-server dial waits for the server's proofs before submitting
	// the chain itself; 0 means one and a half times the cloud session's
	// round trip, within 10–250 ms and a quarter of ProofTimeout, and none
	// for a server whose last connection was not forwarded; negative
	// means at once.
	ServerGrace time.Duration

	initOnce sync.Once
	initErr  error
	checker  *check.Checker
	requests []pkie.Request
	names    map[pkie.ID]string
	sessions tls.ClientSessionCache
	// usessions is the session cache of client-server mode.
	usessions utls.ClientSessionCache
	// forwarders remembers which servers forwarded (client-server mode).
	forwarders forwarderMemo
}

// Timings are the phases of one dial, each measured from its start except
// Verification.
type Timings struct {
	// Connect is when the TCP connection was established.
	Connect time.Duration `json:"connect_ns"`
	// Certificate is when the server's certificate arrived and the chain
	// was handed to the cloud (zero when a resumed session's evidence
	// was reused and nothing was submitted).
	Certificate time.Duration `json:"certificate_ns,omitempty"`
	// Handshake is when the TLS handshake completed.
	Handshake time.Duration `json:"handshake_ns"`
	// FirstProof and LastProof are when the first and the last of the
	// cloud's answers (a proof or a refusal) arrived; zero if none did.
	FirstProof time.Duration `json:"first_proof_ns,omitempty"`
	LastProof  time.Duration `json:"last_proof_ns,omitempty"`
	// Verification is how long the check package took to verify the
	// proofs and decide (a duration, not an offset).
	Verification time.Duration `json:"verification_ns"`
	// Total is when the connection was handed to the caller (or closed).
	Total time.Duration `json:"total_ns"`
}

// Conn is a TLS connection the Dialer's policy accepted, with the verdict
// it was accepted on. No application data was exchanged before Dial
// returned it.
type Conn struct {
	TLSConn
	verdict  *check.Verdict
	timings  Timings
	evidence Evidence
}

// Verdict returns the check's verdict on the server's certificate: Trusted,
// or Inconclusive when the Dialer was told to Warn.
func (c *Conn) Verdict() *check.Verdict { return c.verdict }

// Timings returns the phases of the dial.
func (c *Conn) Timings() Timings { return c.timings }

// Evidence says where the verdict's proofs came from.
func (c *Conn) Evidence() Evidence { return c.evidence }

// Evidence describes the proofs a verdict rests on.
type Evidence struct {
	// Resumed is ConnectionState().DidResume.
	Resumed bool `json:"resumed"`
	// Reused says the proofs came with the resumed session (Resumption
	// "reuse"), not from the cloud for this connection.
	Reused bool `json:"reused"`
	// VerifiedAt is when the proofs were first verified: this dial, or,
	// when Reused, the full handshake whose session was resumed.
	VerifiedAt time.Time `json:"verified_at"`
	// Submitted says the chain was submitted to the cloud for this
	// connection.
	Submitted bool `json:"submitted"`
	// Missing names the requested enhancements whose answer had not
	// arrived by the deadline.
	Missing []string `json:"missing,omitempty"`
	// Extension says the ClientHello carried the PEC extension
	// (client-server mode); Submitted then says the client submitted the
	// chain itself after the server grace.
	Extension bool `json:"extension,omitempty"`
	// ServerForwarded says proofs came although the client did not
	// submit: the server sent its chain to the cloud.
	ServerForwarded bool `json:"server_forwarded,omitempty"`
}

// VerdictError is the error of a dial whose connection the policy refused:
// the TLS connection was closed before any application data was sent.
type VerdictError struct {
	// Verdict is the check's verdict; Verdict.Reasons explain it.
	Verdict *check.Verdict
	// Missing names the requested enhancements whose answer had not
	// arrived when the Dialer stopped waiting.
	Missing []string
	// Waited is how long the Dialer waited for the proofs.
	Waited time.Duration
	// Timings are the phases of the dial.
	Timings Timings
}

// Error names the target, the verdict and what decided it.
func (e *VerdictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pec: %s %s: %s", e.Verdict.Target, e.Verdict.Result, e.Verdict.Headline)
	if len(e.Missing) > 0 {
		fmt.Fprintf(&b, " (no answer within %s from: %s)", e.Waited.Round(time.Millisecond), strings.Join(e.Missing, ", "))
	}
	return b.String()
}

// Init checks the Dialer's configuration and builds its checker. Dial
// calls it; calling it first reports a configuration error before any
// connection is made.
func (d *Dialer) Init() error {
	d.initOnce.Do(func() { d.initErr = d.doInit() })
	return d.initErr
}

func (d *Dialer) doInit() error {
	if d.Cloud == nil {
		return errors.New("pec: Dialer has no Cloud")
	}
	if len(d.Verifiers) == 0 {
		return errors.New("pec: Dialer has no Verifiers: there would be nothing to ask the cloud")
	}
	switch d.Mode {
	case "", ModeClientServer, ModeClientOnly:
	default:
		return fmt.Errorf("pec: Mode %q: want %q or %q", d.Mode, ModeClientServer, ModeClientOnly)
	}
	switch d.Resumption {
	case "", ResumeReuse, ResumeFresh:
	default:
		return fmt.Errorf("pec: Resumption %q: want %q or %q", d.Resumption, ResumeReuse, ResumeFresh)
	}
	if d.ProofTimeout < 0 || d.ReuseMaxAge < 0 || d.HandshakeTimeout < 0 {
		return errors.New("pec: negative duration in Dialer")
	}
	reg := d.Registry
	if reg == nil {
		reg = builtin.Registry()
	}
	d.names = map[pkie.ID]string{}
	var all []string
	for _, v := range d.Verifiers {
		if v == nil {
			return errors.New("pec: nil Verifier")
		}
		if _, dup := d.names[v.ID()]; dup {
			return fmt.Errorf("pec: two verifiers for enhancement %s", reg.Name(v.ID()))
		}
		d.names[v.ID()] = reg.Name(v.ID())
		all = append(all, reg.Name(v.ID()))
		d.requests = append(d.requests, pkie.Request{ID: v.ID()})
	}
	require := d.Require
	if require == nil {
		require = all
	}
	cfg := check.Config{
		Registry:     reg,
		Verifiers:    d.Verifiers,
		Proofs:       collectedSource{},
		Require:      require,
		TrustAgility: d.TrustAgility,
		Now:          d.Now,
	}
	if d.TLSConfig != nil {
		cfg.Roots = d.TLSConfig.RootCAs
	}
	c, err := check.New(cfg)
	if err != nil {
		return fmt.Errorf("pec: %w", err)
	}
	d.checker = c
	if d.TLSConfig == nil || !d.TLSConfig.SessionTicketsDisabled {
		if d.TLSConfig != nil && d.TLSConfig.ClientSessionCache != nil {
			d.sessions = d.TLSConfig.ClientSessionCache
		} else {
			d.sessions = tls.NewLRUClientSessionCache(0)
		}
		if d.clientServer() {
			d.usessions = utls.NewLRUClientSessionCache(0)
		}
	}
	return nil
}

func (d *Dialer) proofTimeout() time.Duration {
	if d.ProofTimeout > 0 {
		return d.ProofTimeout
	}
	return DefaultProofTimeout
}

func (d *Dialer) reuseMaxAge() time.Duration {
	if d.ReuseMaxAge > 0 {
		return d.ReuseMaxAge
	}
	return DefaultReuseMaxAge
}

func (d *Dialer) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// DialContext is Dial returning a net.Conn, for http.Transport's
// DialTLSContext.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.Dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Dial connects to addr ("host:port") on network ("tcp", "tcp4" or
// "tcp6"), runs the TLS handshake, has the cloud prove the server's chain
// meanwhile and returns the connection once the policy accepts it. A
// refused connection is closed and its error is a *VerdictError; other
// errors are failures to connect or to check at all.
func (d *Dialer) Dial(ctx context.Context, network, addr string) (*Conn, error) {
	if err := d.Init(); err != nil {
		return nil, err
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("pec: %w", err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return nil, fmt.Errorf("pec: port %q of %s is not 1-65535", portStr, addr)
	}
	st := &dialState{d: d, start: time.Now(), host: host, port: port, ctx: ctx}

	hctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		t := d.HandshakeTimeout
		if t == 0 {
			t = DefaultHandshakeTimeout
		}
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	dial := d.NetDial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	raw, err := dial(hctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("pec: %w", err)
	}
	st.timings.Connect = time.Since(st.start)

	var conf *tls.Config
	if d.TLSConfig != nil {
		conf = d.TLSConfig.Clone()
	} else {
		conf = &tls.Config{}
	}
	if conf.ServerName == "" {
		if _, err := netip.ParseAddr(host); err != nil {
			conf.ServerName = host
		}
	}
	st.sni = conf.ServerName
	// The chain is validated by the check package, with the proofs, so
	// that one policy gives one verdict; crypto/tls only hands it over.
	conf.InsecureSkipVerify = true
	// A renegotiation could present another certificate after Dial
	// returned, which no proof would cover.
	conf.Renegotiation = tls.RenegotiateNever
	userVerify := conf.VerifyConnection
	conf.VerifyConnection = func(cs tls.ConnectionState) error {
		st.onCertificate(cs)
		if userVerify != nil {
			return userVerify(cs)
		}
		return nil
	}
	if d.sessions != nil {
		conf.ClientSessionCache = &sessionView{inner: d.sessions, st: st}
	} else {
		conf.ClientSessionCache = nil
	}
	tc, err := st.handshake(hctx, raw, conf)
	if err != nil {
		return nil, fmt.Errorf("pec: TLS handshake with %s: %w", addr, err)
	}
	st.handshakeAt = time.Now()
	st.timings.Handshake = st.handshakeAt.Sub(st.start)
	st.tc = tc

	c, err := st.decide()
	st.timings.Total = time.Since(st.start)
	if err != nil {
		tc.Close()
		st.sessionsDecided(false)
		var ve *VerdictError
		if errors.As(err, &ve) {
			ve.Timings = st.timings
		}
		return nil, err
	}
	c.timings = st.timings
	return c, nil
}

// dialState is one dial's state, shared between the handshake's hook, the
// session cache view and Dial.
type dialState struct {
	d     *Dialer
	ctx   context.Context
	start time.Time
	host  string
	port  int
	sni   string
	tc    TLSConn
	cs    *csDial // client-server mode; nil in client-only mode

	timings     Timings
	handshakeAt time.Time

	mu sync.Mutex
	// Set by onCertificate, in the handshake.
	chain   [][]byte
	version uint16
	suite   uint16
	resumed bool
	// scts and ocsp are the SCTs of the TLS extension and the stapled
	// OCSP response, as received; reqs are the Dialer's requests with
	// the ct request carrying them (ct.RequestParams).
	scts [][]byte
	ocsp []byte
	reqs []pkie.Request
	// reuse is the resumed session's evidence, when the policy reuses it.
	reuse *sessionEvidence
	// submitted receives the submission's Pending (or error), once;
	// submittedAt is when the chain was handed over.
	submitted   chan submission
	submittedAt time.Time
	// offered is the evidence stored with the session the cache offered.
	offered *sessionEvidence
	// Session cache state: decided once the verdict is known; held is a
	// session crypto/tls stored before then (TLS 1.2 does so inside the
	// handshake), kept back until the connection is trusted.
	decided  bool
	accepted bool
	evidence *sessionEvidence // nil for a connection accepted without evidence (Warn)
	held     []heldSession
}

type submission struct {
	p   *Pending
	err error
}

// onCertificate runs inside the handshake as soon as the server's
// certificate (or, on resumption, the session's) is known. It must not
// block: the handshake goes on while the cloud proves the chain.
func (st *dialState) onCertificate(cs tls.ConnectionState) {
	now := time.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.chain = make([][]byte, len(cs.PeerCertificates))
	for i, c := range cs.PeerCertificates {
		st.chain[i] = c.Raw
	}
	st.version, st.suite, st.resumed = cs.Version, cs.CipherSuite, cs.DidResume
	st.scts, st.ocsp = cs.SignedCertificateTimestamps, cs.OCSPResponse
	st.reqs = requestsFor(st.d.requests, cs)
	if st.expectLocked(now) {
		return
	}
	if cs.DidResume && st.d.Resumption != ResumeFresh && st.offered.usable(st.d.now(), st.chain, st.d.reuseMaxAge()) {
		st.reuse = st.offered
		return
	}
	st.submitLocked(now)
}

// submitLocked hands the chain to the cloud on a goroutine of its own, so
// that nothing the cloud session does can hold up the handshake.
func (st *dialState) submitLocked(now time.Time) {
	if st.submitted != nil {
		return
	}
	st.timings.Certificate = now.Sub(st.start)
	st.submittedAt = now
	ch := make(chan submission, 1)
	st.submitted = ch
	s := Submission{ServerName: st.sni, Port: st.port, Chain: st.chain,
		Requests: st.reqs, Budget: st.d.proofTimeout()}
	if s.ServerName == "" {
		s.ServerName = st.host
	}
	go func() {
		p, err := st.d.Cloud.Submit(st.ctx, s)
		ch <- submission{p: p, err: err}
	}()
}

// decide waits for the proofs, has the check package decide, and returns
// the connection if the policy accepts it.
func (st *dialState) decide() (*Conn, error) {
	d := st.d
	st.mu.Lock()
	chain, reuse, resumed := st.chain, st.reuse, st.resumed
	st.mu.Unlock()
	if len(chain) == 0 {
		return nil, errors.New("pec: the handshake completed without a server certificate")
	}
	obs := st.observation(chain)
	ev := Evidence{Resumed: resumed}

	if reuse != nil {
		v, dur, err := st.evaluate(obs, reuse.results())
		if err != nil {
			return nil, err
		}
		st.timings.Verification += dur
		if v.Result == check.Trusted {
			ev.Reused, ev.VerifiedAt = true, reuse.At
			st.sessionsAccept(reuse)
			return &Conn{TLSConn: st.tc, verdict: v, evidence: ev}, nil
		}
		// The stored proofs no longer satisfy the policy (a signed head
		// grew too old, say): ask the cloud as a full handshake would.
		st.mu.Lock()
		st.reuse = nil
		st.submitLocked(time.Now())
		st.mu.Unlock()
	}

	results, missing, waited, err := st.collect()
	if err != nil {
		return nil, err
	}
	ev.Submitted, ev.Missing = true, missing
	st.evidenceCS(&ev)
	v, dur, err := st.evaluate(obs, results)
	if err != nil {
		return nil, err
	}
	st.timings.Verification += dur
	ev.VerifiedAt = d.now()
	switch {
	case v.Result == check.Trusted:
		st.sessionsAccept(newSessionEvidence(ev.VerifiedAt, chain[0], results))
		return &Conn{TLSConn: st.tc, verdict: v, evidence: ev}, nil
	case v.Result == check.Inconclusive && d.Warn:
		st.sessionsDecided(true)
		return &Conn{TLSConn: st.tc, verdict: v, evidence: ev}, nil
	}
	return nil, &VerdictError{Verdict: v, Missing: missing, Waited: waited}
}

// collect waits for the submission's outcomes until every requested one
// arrived or the deadline (ProofTimeout after the submission) passed.
func (st *dialState) collect() (map[pkie.ID]check.ProofResult, []string, time.Duration, error) {
	d := st.d
	st.mu.Lock()
	ch, submittedAt := st.submitted, st.submittedAt
	st.mu.Unlock()
	timeout := d.proofTimeout()
	deadline := submittedAt.Add(timeout)
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()

	results := make(map[pkie.ID]check.ProofResult, len(d.requests))
	var sub submission
	select {
	case sub = <-ch:
	case <-timer.C:
		sub.err = fmt.Errorf("the cloud session did not take the submission within %s", timeout)
	case <-st.ctx.Done():
		return nil, nil, 0, fmt.Errorf("pec: waiting for proofs: %w", st.ctx.Err())
	}
	if sub.err != nil {
		var missing []string
		for _, r := range d.requests {
			results[r.ID] = check.ProofResult{Err: fmt.Errorf("not submitted to the cloud: %w", sub.err)}
			missing = append(missing, d.names[r.ID])
		}
		return results, missing, time.Since(submittedAt), nil
	}
	want := make(map[pkie.ID]bool, len(d.requests))
	for _, r := range d.requests {
		want[r.ID] = true
	}
	out := sub.p.C()
	var timedOut []pkie.ID
wait:
	for len(want) > 0 {
		select {
		case o, ok := <-out:
			if !ok {
				break wait
			}
			if !want[o.ID] {
				continue
			}
			delete(want, o.ID)
			results[o.ID] = outcomeResult(o)
			if o.Status == ProofTimeout {
				// The session's own deadline, not an answer.
				timedOut = append(timedOut, o.ID)
				continue
			}
			at := o.Received
			if at.IsZero() {
				at = time.Now()
			}
			if st.timings.FirstProof == 0 {
				st.timings.FirstProof = at.Sub(st.start)
			}
			st.timings.LastProof = at.Sub(st.start)
		case <-timer.C:
			break wait
		case <-st.ctx.Done():
			return nil, nil, 0, fmt.Errorf("pec: waiting for proofs: %w", st.ctx.Err())
		}
	}
	var missing []string
	for _, r := range d.requests {
		switch {
		case want[r.ID]:
			results[r.ID] = check.ProofResult{Err: fmt.Errorf("no answer from the cloud within %s", timeout)}
		case !slices.Contains(timedOut, r.ID):
			continue
		}
		missing = append(missing, d.names[r.ID])
	}
	return results, missing, time.Since(submittedAt), nil
}

// outcomeResult turns what the cloud delivered into what check consumes.
func outcomeResult(o Outcome) check.ProofResult {
	from := "cloud"
	if o.Cloud != "" {
		from = "cloud " + o.Cloud
	}
	r := check.ProofResult{From: from}
	switch {
	case o.Status == ProofOK && o.Proof != nil:
		r.Proof = o.Proof
	case o.Text != "":
		r.Err = fmt.Errorf("%s: %s", o.Status, o.Text)
	default:
		r.Err = fmt.Errorf("%s", o.Status)
	}
	return r
}

func (st *dialState) observation(chain [][]byte) *probe.Observation {
	obs := &probe.Observation{
		Target:  probe.Target{Host: st.host, Port: st.port, ServerName: st.sni},
		Chain:   chain,
		SHA256:  sha256.Sum256(chain[0]),
		SHA1:    sha1.Sum(chain[0]),
		Time:    st.handshakeAt,
		Vantage: "client",
		Timings: probe.Timings{Connect: st.timings.Connect, Handshake: st.timings.Handshake - st.timings.Connect,
			Total: st.timings.Handshake},
	}
	st.mu.Lock()
	obs.Version, obs.CipherSuite = st.version, st.suite
	obs.SCTs, obs.OCSPResponse = st.scts, st.ocsp
	st.mu.Unlock()
	if ap, err := netip.ParseAddrPort(st.tc.RemoteAddr().String()); err == nil {
		obs.Addr = ap
	}
	return obs
}

// evaluate runs the check package over the observation with the given
// proofs: CA validation, each verifier, the policy.
func (st *dialState) evaluate(obs *probe.Observation, results map[pkie.ID]check.ProofResult) (*check.Verdict, time.Duration, error) {
	vs := time.Now()
	ctx := context.WithValue(st.ctx, collectedKey{}, results)
	v, err := st.d.checker.CheckObservation(ctx, obs)
	if err != nil {
		return nil, 0, fmt.Errorf("pec: %w", err)
	}
	return v, time.Since(vs), nil
}

// requestsFor returns reqs for the connection whose state cs is: the ct
// request carries the SCTs the handshake delivered beside the certificate.
func requestsFor(reqs []pkie.Request, cs tls.ConnectionState) []pkie.Request {
	if len(cs.SignedCertificateTimestamps) == 0 && len(cs.OCSPResponse) == 0 {
		return reqs
	}
	return withCTParams(reqs, &pkie.Subject{SCTs: cs.SignedCertificateTimestamps, OCSPResponse: cs.OCSPResponse, Certs: cs.PeerCertificates})
}

// withCTParams returns reqs with the ct request, if any, carrying the SCTs
// s holds beside its certificate (ct.RequestParams), so that the cloud can
// fetch their inclusion evidence. A client and a PEC server (Listener)
// compute the same parameters from one handshake, so that the server's
// submission for the client and the client's own have one digest.
func withCTParams(reqs []pkie.Request, s *pkie.Subject) []pkie.Request {
	params := ct.RequestParams(s)
	if params == nil {
		return reqs
	}
	out := slices.Clone(reqs)
	for i := range out {
		if out[i].ID == pkie.CT {
			out[i].Params = params
		}
	}
	return out
}

// collectedKey carries a dial's proofs, by enhancement, to collectedSource.
type collectedKey struct{}

// collectedSource is the Dialer's check.ProofSource: the proofs the cloud
// already pushed for this connection (or that came with its session),
// passed in the context of the check.
type collectedSource struct{}

func (collectedSource) Proofs(ctx context.Context, _ *probe.Observation, reqs []pkie.Request) map[pkie.ID]check.ProofResult {
	have, _ := ctx.Value(collectedKey{}).(map[pkie.ID]check.ProofResult)
	out := make(map[pkie.ID]check.ProofResult, len(reqs))
	for _, r := range reqs {
		if res, ok := have[r.ID]; ok {
			out[r.ID] = res
		}
	}
	return out
}

// sessionsAccept records that the connection is trusted on ev: sessions
// crypto/tls stores from now on, and any it stored during the handshake,
// carry ev.
func (st *dialState) sessionsAccept(ev *sessionEvidence) {
	st.mu.Lock()
	st.decided, st.accepted, st.evidence = true, true, ev
	held := st.held
	st.held = nil
	st.mu.Unlock()
	for _, h := range held {
		st.storeSession(h.key, h.cs, ev)
	}
	st.flushHeldCS(true, ev)
}

// sessionsDecided records a verdict other than trusted: sessions are
// stored without evidence when the connection was accepted anyway (Warn),
// so that resuming one asks the cloud; those of a refused connection are
// dropped.
func (st *dialState) sessionsDecided(accepted bool) {
	st.mu.Lock()
	st.decided, st.accepted = true, accepted
	held := st.held
	st.held = nil
	st.mu.Unlock()
	if accepted {
		for _, h := range held {
			st.storeSession(h.key, h.cs, nil)
		}
	}
	st.flushHeldCS(accepted, nil)
}
