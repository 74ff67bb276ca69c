package pec

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkie/pkie"
	utls "github.com/refraction-networking/utls"
)

// Deployment modes of a Dialer (PEC paper §4.1, Figure 2).
const (
	// ModeClientServer puts the PEC extension in the ClientHello, so that
	// a PEC server sends its chain to the client's cloud at once, and has
	// the client submit the chain itself when the proofs have not all come
	// within ServerGrace of the certificate: a stock server, or an
	// extension stripped on the way, costs the grace, never the checks.
	// It is the default.
	ModeClientServer = "client-server"
	// ModeClientOnly never sends the extension: the client submits the
	// chain the moment it arrives, and the handshake is crypto/tls's own.
	ModeClientOnly = "client-only"
)

// Bounds of the adaptive server grace.
const (
	minServerGrace = 10 * time.Millisecond
	maxServerGrace = 250 * time.Millisecond
)

// TLSConn is the TLS connection a Conn wraps: a *tls.Conn in client-only
// mode, a uTLS connection in client-server mode (crypto/tls cannot add an
// extension to its ClientHello). ConnectionState carries no keying
// material exporter for the latter.
type TLSConn interface {
	net.Conn
	// ConnectionState returns the handshake's outcome, as crypto/tls's.
	ConnectionState() tls.ConnectionState
	// CloseWrite sends close_notify and ends the writing direction.
	CloseWrite() error
}

// csDial is one dial's client–server state.
type csDial struct {
	// ext is the extension's body sent in the ClientHello, nil if none.
	ext []byte
	// pending expects the proofs for the extension's nonce.
	pending *Pending
	// submitted says the client submitted the chain itself.
	submitted atomic.Bool
	// held are sessions uTLS stored before the verdict.
	held []uheldSession
}

func (d *Dialer) clientServer() bool { return d.Mode == "" || d.Mode == ModeClientServer }

// serverGrace is how long after the certificate the client waits for a PEC
// server's proofs before submitting the chain itself.
func (d *Dialer) serverGrace(rtt time.Duration) time.Duration {
	if d.ServerGrace != 0 {
		return max(d.ServerGrace, 0)
	}
	// The server sent its chain when the ClientHello arrived, half a
	// round trip before the certificate reached the client: its proofs
	// come about one round trip to the cloud after the certificate.
	return min(max(rtt+rtt/2, minServerGrace), maxServerGrace, d.proofTimeout()/4)
}

// handshake runs the TLS handshake on raw: crypto/tls in client-only mode,
// uTLS with the PEC extension in client-server mode.
func (st *dialState) handshake(ctx context.Context, raw net.Conn, conf *tls.Config) (TLSConn, error) {
	d := st.d
	if !d.clientServer() {
		tc := tls.Client(raw, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			tc.Close()
			return nil, err
		}
		return tc, nil
	}
	cs := &csDial{}
	st.cs = cs
	key := conf.ServerName
	if key == "" {
		key = raw.RemoteAddr().String()
	}
	if d.Cloud.Private() && !st.reusable(key) {
		// Privacy mode: an identifier from the forwarder, a key for
		// this connection, and the forwarder's address (privacy.go).
		if e, p := d.Cloud.privateExtension(d.requests, d.handshakeTimeout()+d.proofTimeout()); e != nil {
			if body, err := e.Marshal(); err == nil {
				cs.ext, cs.pending = body, p
			} else {
				d.Cloud.Forget(p, "the PEC extension could not be built")
			}
		}
	} else if !st.reusable(key) {
		// The ticket binds what the server will submit: the SNI as
		// sent (empty for an IP address), the port dialled, the
		// requests. No registered session: no extension, client-only.
		if e, ok := d.Cloud.NewExtension(conf.ServerName, st.port, d.requests); ok {
			if body, err := e.Marshal(); err == nil {
				ids := make([]pkie.ID, len(d.requests))
				for i, r := range d.requests {
					ids[i] = r.ID
				}
				cs.ext = body
				cs.pending = d.Cloud.expectHeld(e.Nonce, ids, d.handshakeTimeout()+d.proofTimeout())
			}
		}
	}
	uc := utls.UClient(raw, st.utlsConfig(conf), utls.HelloCustom)
	if err := uc.ApplyPreset(goLikeSpec(cs.ext, conf)); err != nil {
		raw.Close()
		st.forget("the ClientHello could not be built")
		return nil, err
	}
	if err := uc.HandshakeContext(ctx); err != nil {
		uc.Close()
		st.forget("the handshake failed")
		return nil, err
	}
	return uConn{uc}, nil
}

func (d *Dialer) handshakeTimeout() time.Duration {
	if d.HandshakeTimeout > 0 {
		return d.HandshakeTimeout
	}
	return DefaultHandshakeTimeout
}

// forget drops the dial's expectation.
func (st *dialState) forget(why string) {
	if st.cs != nil && st.cs.pending != nil {
		st.d.Cloud.Forget(st.cs.pending, why)
	}
}

// reusable reports whether, under ResumeReuse, the session the cache holds
// for key carries evidence young enough to stand for a resumed connection:
// then the ClientHello goes without the extension, so that a PEC server
// does not have the cloud prove a chain the client will not ask about. If
// the server declines the resumption, the full handshake's chain is
// submitted by the client at once, as in client-only mode.
func (st *dialState) reusable(key string) bool {
	d := st.d
	if d.Resumption == ResumeFresh || d.usessions == nil {
		return false
	}
	cs, ok := d.usessions.Get(key)
	if !ok || cs == nil {
		return false
	}
	ev := uevidenceOf(cs)
	if ev == nil {
		return false
	}
	age := d.now().Sub(ev.At)
	return age <= d.reuseMaxAge() && age >= -time.Minute
}

// expectLocked handles the certificate's arrival in client-server mode:
// the proofs are awaited on the expectation, and the chain is submitted by
// the client too if they have not all come within the server grace. It
// reports false when the ClientHello carried no extension (the caller
// goes on as in client-only mode).
func (st *dialState) expectLocked(now time.Time) bool {
	cs := st.cs
	if cs == nil || cs.pending == nil || st.submitted != nil {
		return false
	}
	st.timings.Certificate = now.Sub(st.start)
	st.submittedAt = now
	ch := make(chan submission, 1)
	ch <- submission{p: cs.pending}
	st.submitted = ch
	// The ct request carries the SCTs the handshake delivered, as the
	// server's submission does (Listener): one digest for both.
	s := Submission{ServerName: st.sni, Port: st.port, Chain: st.chain,
		Requests: st.reqs, Budget: st.d.proofTimeout()}
	if s.ServerName == "" {
		s.ServerName = st.host
	}
	// Only the outcomes of the submission of this chain count: a copy
	// with the nonce (sent in the clear) and another chain does not.
	st.d.Cloud.bindExpected(cs.pending, s)
	_, _, rtt, _ := st.d.Cloud.Presence()
	grace := st.d.serverGrace(rtt)
	if st.d.ServerGrace == 0 && st.d.forwarders.silent(st.serverKey()) {
		// This server did not forward last time: submit at once. Should
		// it forward now, the cloud takes the two submissions for one.
		grace = 0
	}
	p := cs.pending
	go func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-st.ctx.Done():
			return
		}
		if st.d.Cloud.complete(p) {
			return
		}
		st.d.Cloud.submitExpected(st.ctx, p, s, func() { cs.submitted.Store(true) })
	}()
	return true
}

// evidenceCS fills in the client–server fields of a dial's evidence and
// remembers whether the server forwarded.
func (st *dialState) evidenceCS(ev *Evidence) {
	cs := st.cs
	if cs == nil || cs.ext == nil || ev.Reused {
		return
	}
	ev.Extension = true
	ev.Submitted = cs.submitted.Load()
	ev.ServerForwarded = !ev.Submitted && len(ev.Missing) < len(st.d.requests)
	if ev.ServerForwarded {
		st.d.forwarders.set(st.serverKey(), true)
	} else if ev.Submitted {
		// Proofs that came only after our own submission: the server
		// did not forward, or not within the grace.
		st.d.forwarders.set(st.serverKey(), false)
	}
}

func (st *dialState) serverKey() string {
	return st.sni + "\x00" + st.host + ":" + strconv.Itoa(st.port)
}

// forwarderMemo remembers, per server, whether its last client-server
// connection was proved on the server's forwarding: a server that did
// not forward is not waited for next time. Bounded: past maxForwarders
// entries it starts afresh.
type forwarderMemo struct {
	mu sync.Mutex
	m  map[string]bool
}

const maxForwarders = 4096

func (f *forwarderMemo) set(key string, forwarded bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil || len(f.m) >= maxForwarders {
		f.m = make(map[string]bool)
	}
	f.m[key] = forwarded
}

// silent reports whether the server's last connection was not forwarded.
func (f *forwarderMemo) silent(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	fw, ok := f.m[key]
	return ok && !fw
}

// uConn adapts a uTLS connection to TLSConn.
type uConn struct{ *utls.UConn }

func (c uConn) ConnectionState() tls.ConnectionState { return fromUState(c.UConn.ConnectionState()) }

func fromUState(s utls.ConnectionState) tls.ConnectionState {
	return tls.ConnectionState{
		Version: s.Version, HandshakeComplete: s.HandshakeComplete, DidResume: s.DidResume,
		CipherSuite: s.CipherSuite, NegotiatedProtocol: s.NegotiatedProtocol,
		NegotiatedProtocolIsMutual: s.NegotiatedProtocolIsMutual, ServerName: s.ServerName,
		PeerCertificates: s.PeerCertificates, VerifiedChains: s.VerifiedChains,
		SignedCertificateTimestamps: s.SignedCertificateTimestamps, OCSPResponse: s.OCSPResponse,
		TLSUnique: s.TLSUnique, ECHAccepted: s.ECHAccepted,
	}
}

// utlsConfig carries conf over to uTLS: what a client's handshake uses.
func (st *dialState) utlsConfig(conf *tls.Config) *utls.Config {
	u := &utls.Config{
		Rand: conf.Rand, Time: conf.Time, ServerName: conf.ServerName, NextProtos: conf.NextProtos,
		InsecureSkipVerify: true, // the check package validates the chain
		MinVersion:         conf.MinVersion, MaxVersion: conf.MaxVersion, KeyLogWriter: conf.KeyLogWriter,
		SessionTicketsDisabled: conf.SessionTicketsDisabled, Renegotiation: utls.RenegotiateNever,
		OmitEmptyPsk: true,
	}
	for _, c := range conf.Certificates {
		u.Certificates = append(u.Certificates, utls.Certificate{
			Certificate: c.Certificate, PrivateKey: c.PrivateKey, OCSPStaple: c.OCSPStaple,
			SignedCertificateTimestamps: c.SignedCertificateTimestamps, Leaf: c.Leaf,
		})
	}
	if conf.VerifyConnection != nil {
		verify := conf.VerifyConnection
		u.VerifyConnection = func(s utls.ConnectionState) error { return verify(fromUState(s)) }
	}
	if st.d.usessions != nil && !conf.SessionTicketsDisabled {
		u.ClientSessionCache = &usessionView{inner: st.d.usessions, st: st}
	}
	return u
}

// goLikeSpec is a ClientHello shaped as crypto/tls's (TLS 1.3 and 1.2,
// X25519 key share, Go's cipher suites and signature algorithms) with the
// PEC extension, if any, before pre_shared_key (which must be last). The
// post-quantum key share Go sends by default is left out: at 1,216 bytes
// it would triple the ClientHello, and the PEC paper's ClientHello is
// about 400 bytes.
func goLikeSpec(ext []byte, conf *tls.Config) *utls.ClientHelloSpec {
	minV, maxV := conf.MinVersion, conf.MaxVersion
	if minV == 0 {
		minV = tls.VersionTLS12
	}
	if maxV == 0 {
		maxV = tls.VersionTLS13
	}
	var versions []uint16
	for v := maxV; v >= minV && v >= tls.VersionTLS12; v-- {
		versions = append(versions, v)
	}
	suites := []uint16{
		utls.TLS_AES_128_GCM_SHA256, utls.TLS_AES_256_GCM_SHA384, utls.TLS_CHACHA20_POLY1305_SHA256,
		utls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, utls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		utls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, utls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		utls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, utls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	}
	if len(conf.CipherSuites) > 0 && maxV < tls.VersionTLS13 {
		suites = conf.CipherSuites
	}
	exts := []utls.TLSExtension{
		&utls.SNIExtension{},
		&utls.StatusRequestExtension{},
		&utls.SupportedCurvesExtension{Curves: []utls.CurveID{utls.X25519, utls.CurveP256, utls.CurveP384, utls.CurveP521}},
		&utls.SupportedPointsExtension{SupportedPoints: []byte{0}},
		&utls.SessionTicketExtension{},
		&utls.SignatureAlgorithmsExtension{SupportedSignatureAlgorithms: []utls.SignatureScheme{
			utls.PSSWithSHA256, utls.ECDSAWithP256AndSHA256, utls.Ed25519, utls.PSSWithSHA384, utls.PSSWithSHA512,
			utls.PKCS1WithSHA256, utls.PKCS1WithSHA384, utls.PKCS1WithSHA512,
			utls.ECDSAWithP384AndSHA384, utls.ECDSAWithP521AndSHA512,
		}},
		&utls.RenegotiationInfoExtension{Renegotiation: utls.RenegotiateNever},
	}
	if len(conf.NextProtos) > 0 {
		exts = append(exts, &utls.ALPNExtension{AlpnProtocols: conf.NextProtos})
	}
	exts = append(exts,
		&utls.SCTExtension{},
		&utls.SupportedVersionsExtension{Versions: versions},
		&utls.ExtendedMasterSecretExtension{},
	)
	if maxV >= tls.VersionTLS13 {
		exts = append(exts,
			&utls.KeyShareExtension{KeyShares: []utls.KeyShare{{Group: utls.X25519}}},
			&utls.PSKKeyExchangeModesExtension{Modes: []uint8{utls.PskModeDHE}},
		)
	}
	if ext != nil {
		exts = append(exts, &utls.GenericExtension{Id: ExtensionType, Data: ext})
	}
	if maxV >= tls.VersionTLS13 {
		exts = append(exts, &utls.UtlsPreSharedKeyExtension{})
	}
	return &utls.ClientHelloSpec{
		TLSVersMin: minV, TLSVersMax: maxV, CipherSuites: suites,
		CompressionMethods: []byte{0}, Extensions: exts,
	}
}

// Session resumption under uTLS: the same evidence in SessionState.Extra
// as dialer_session.go keeps for crypto/tls, in uTLS's types.

func uevidenceOf(cs *utls.ClientSessionState) *sessionEvidence {
	_, state, err := cs.ResumptionState()
	if err != nil || state == nil {
		return nil
	}
	for _, e := range state.Extra {
		if ev, ok, err := decodeEvidence(e); ok {
			if err != nil {
				return nil
			}
			return ev
		}
	}
	return nil
}

type usessionView struct {
	inner utls.ClientSessionCache
	st    *dialState
}

type uheldSession struct {
	key string
	cs  *utls.ClientSessionState
}

func (v *usessionView) Get(key string) (*utls.ClientSessionState, bool) {
	cs, ok := v.inner.Get(key)
	if ok && cs != nil {
		ev := uevidenceOf(cs)
		v.st.mu.Lock()
		v.st.offered = ev
		v.st.mu.Unlock()
	}
	return cs, ok
}

func (v *usessionView) Put(key string, cs *utls.ClientSessionState) {
	if cs == nil {
		v.inner.Put(key, nil)
		return
	}
	st := v.st
	st.mu.Lock()
	if !st.decided {
		st.cs.held = append(st.cs.held, uheldSession{key, cs})
		st.mu.Unlock()
		return
	}
	accepted, ev := st.accepted, st.evidence
	st.mu.Unlock()
	if accepted {
		st.ustoreSession(key, cs, ev)
	}
}

// flushHeldCS stores (accepted) or drops the sessions uTLS handed over
// before the verdict, and on a refusal ends the dial's expectation; called
// with the verdict by sessionsAccept and sessionsDecided.
func (st *dialState) flushHeldCS(accepted bool, ev *sessionEvidence) {
	if st.cs == nil {
		return
	}
	if !accepted {
		// Nothing waits for this connection's proofs any more.
		st.forget("the connection was refused")
	}
	st.mu.Lock()
	held := st.cs.held
	st.cs.held = nil
	st.mu.Unlock()
	if accepted {
		for _, h := range held {
			st.ustoreSession(h.key, h.cs, ev)
		}
	}
}

func (st *dialState) ustoreSession(key string, cs *utls.ClientSessionState, ev *sessionEvidence) {
	_, state, err := cs.ResumptionState()
	if err != nil || state == nil {
		return
	}
	extra := state.Extra[:0:0]
	for _, e := range state.Extra {
		if !bytes.HasPrefix(e, []byte(evidenceMagic)) {
			extra = append(extra, e)
		}
	}
	if ev != nil {
		b, err := ev.encode()
		if err != nil {
			return
		}
		extra = append(extra, b)
	}
	state.Extra = extra
	st.d.usessions.Put(key, cs)
}

var (
	_ TLSConn = (*tls.Conn)(nil)
	_ TLSConn = uConn{}
)
