package pec

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

// Privacy mode (PEC paper §7, Privacy Enhancements). With
// ClientConfig.Forwarder set, the Client never contacts a cloud: it
// registers with the privacy forwarder, prefetches ephemeral identifiers
// from it, and for each connection draws a fresh per-connection key and
// an unused identifier, seals the submission and the key to the cloud's
// HPKE key (the cloud's bundle must publish one) and sends the envelope
// through the forwarder. The cloud sees the forwarder's address and the
// chain, never the client; the forwarder sees the client, never the
// server, the chain or the proofs, which come back sealed to the
// connection's key and are opened here. Outcomes are delivered as in the
// ordinary mode, so a Dialer verifies them the same way,
// and in the client–server deployment its PEC extension carries an
// identifier, a key and the forwarder's address instead of the client's
// registration (privateExtension).

// Defaults of privacy mode.
const (
	// DefaultEphIDBatch is how many identifiers are fetched at a time;
	// the pool is refilled when it falls below half.
	DefaultEphIDBatch = 32
)

// privacy is a Client's session with its forwarder.
type privacy struct {
	c     *Client
	fwd   *Bundle
	tls   *tls.Config
	cloud *Bundle // the cloud submissions are sealed to: cfg.Clouds[0]
	pin   [32]byte
	batch int

	// guarded by c.mu
	conn      *pecwire.Conn
	at        Addr // the forwarder's point the session is with
	label     string
	id        ClientID
	keepalive time.Duration
	pool      [][]byte
	expires   time.Time
	asked     bool // an EphIDRequest is outstanding
	waiting   map[string]*sealedPending
	lastPong  time.Time
	missed    int
	forged    uint64
	ignored   uint64
	foreign   uint64
	lost      int
	lastErr   string
	ready     chan struct{} // closed when the first batch arrives
	refilled  chan struct{} // closed, and replaced, when a batch arrives
}

// sealedPending is one connection's pending outcomes and the key they are
// sealed to.
type sealedPending struct {
	p   *Pending
	key []byte
	// inExtension: the identifier went to a server in the PEC extension,
	// in the clear (client–server deployment).
	inExtension bool
	// digest is the digest of the submission whose outcomes count
	// (pecwire.Submit.Digest, zero client identifier and nonce): that of
	// the client's own sealed submission, or for an extension's
	// identifier, once the handshake has delivered the chain, that of
	// the chain, name, port and requests the client saw. Until then
	// (bound false) outcomes are held, not delivered. The identifier and
	// key of an extension were in the clear: whoever saw them can have a
	// cloud prove another chain under them, and its outcomes open.
	digest pecwire.Digest
	bound  bool
	held   []heldSealed
}

// heldSealed is an opened outcome under an extension's identifier that
// arrived before the chain was known.
type heldSealed struct {
	m  *pecwire.Proof
	at time.Time
}

// sealedDigest is the digest a cloud puts in the outcomes of a sealed
// submission of sub.
func sealedDigest(sub Submission) pecwire.Digest {
	return (&pecwire.Submit{ServerName: sub.ServerName, Port: uint16(sub.Port), Requests: sub.Requests, Chain: sub.Chain}).Digest()
}

// PrivacyStatus describes the forwarder session of a client in privacy
// mode (the PEC paper's §8.1: the client tracks the forwarder's
// availability as it does the cloud's).
type PrivacyStatus struct {
	// Connected says the client has a session with the forwarder now, at
	// the address Forwarder names.
	Connected bool
	Forwarder string
	// IDs is how many unused identifiers the client holds, valid until
	// Expires.
	IDs     int
	Expires time.Time
	// LastPong is when the forwarder last answered a keepalive.
	LastPong time.Time
	// Forged counts sealed proofs that did not open with their
	// connection's key (dropped).
	Forged uint64
	// IgnoredRejects counts rejections under identifiers the client sent
	// in a PEC extension: a rejection is not sealed and the identifier
	// was in the clear, so it does not end the connection; the client's
	// own sealed submission after the server grace decides.
	IgnoredRejects uint64
	// Foreign counts sealed outcomes that opened but were of another
	// submission than the connection's (another chain, server name, port
	// or requests), dropped: under the identifier and key of a PEC
	// extension, which travel in the clear, anyone who saw the
	// ClientHello can have a cloud prove another site's chain.
	Foreign uint64
	// Reconnects counts new forwarder sessions after one was lost.
	Reconnects int
	// LastError says why the latest forwarder session ended.
	LastError string
}

// Private reports whether the client is in privacy mode.
func (c *Client) Private() bool { return c.priv != nil }

// PrivacyStatus describes the forwarder session; zero outside privacy
// mode.
func (c *Client) PrivacyStatus() PrivacyStatus {
	pv := c.priv
	if pv == nil {
		return PrivacyStatus{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return PrivacyStatus{Connected: pv.conn != nil, Forwarder: pv.label, IDs: len(pv.pool), Expires: pv.expires,
		LastPong: pv.lastPong, Forged: pv.forged, IgnoredRejects: pv.ignored, Foreign: pv.foreign, Reconnects: pv.lost, LastError: pv.lastErr}
}

// dialPrivate starts privacy mode: it registers with the forwarder and
// waits for the first batch of identifiers.
func dialPrivate(ctx context.Context, c *Client) (*Client, error) {
	cfg := c.cfg
	if err := cfg.Forwarder.Check(); err != nil {
		return nil, fmt.Errorf("pec: forwarder %s: %w", bundleName(cfg.Forwarder), err)
	}
	cloud := cfg.Clouds[0]
	if cloud.HPKE == nil {
		return nil, fmt.Errorf("pec: cloud %s publishes no HPKE key: it cannot take submissions through a forwarder", bundleName(cloud))
	}
	fpin, _ := cfg.Forwarder.Pin()
	cpin, _ := cloud.Pin()
	batch := cfg.EphIDBatch
	if batch <= 0 || batch > pecwire.MaxEphIDBatch {
		batch = DefaultEphIDBatch
	}
	pv := &privacy{c: c, fwd: cfg.Forwarder, tls: pecwire.ClientTLS(fpin), cloud: cloud, pin: cpin, batch: batch,
		waiting: map[string]*sealedPending{}, ready: make(chan struct{}), refilled: make(chan struct{})}
	c.priv = pv
	if err := pv.connect(ctx); err != nil {
		c.stop()
		return nil, err
	}
	select {
	case <-pv.ready:
	case <-ctx.Done():
		c.Close()
		return nil, fmt.Errorf("pec: forwarder %s: no identifiers: %w", bundleName(pv.fwd), ctx.Err())
	}
	c.wg.Go(pv.maintain)
	return c, nil
}

// connect opens a session with the first point of the forwarder that
// registers, and asks for a batch of identifiers.
func (pv *privacy) connect(ctx context.Context) error {
	c := pv.c
	var errs []error
	for _, p := range pv.fwd.Points {
		for _, tr := range pv.transports(p) {
			dctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
			conn, reg, err := pv.register(dctx, tr, p)
			cancel()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			c.mu.Lock()
			pv.conn, pv.id, pv.keepalive = conn, ClientID(reg.ClientID), reg.Keepalive
			pv.at = Addr{Transport: tr, HostPort: p.TCP}
			if tr == pecwire.QUIC {
				pv.at.HostPort = p.QUIC
			}
			pv.label = fmt.Sprintf("%s via forwarder %s", bundleName(pv.cloud), bundleName(pv.fwd))
			// Identifiers name the client's registration: those of an
			// earlier session reach nobody now.
			pv.pool, pv.asked, pv.missed, pv.lastPong = nil, false, 0, time.Now()
			c.mu.Unlock()
			c.wg.Go(func() { pv.readLoop(conn) })
			pv.refill()
			return nil
		}
	}
	return fmt.Errorf("pec: no point of forwarder %s registered: %w", bundleName(pv.fwd), errors.Join(errs...))
}

func (pv *privacy) transports(p Point) []string {
	var out []string
	want := pv.c.cfg.Transport
	if p.QUIC != "" && want != TransportTCP {
		out = append(out, pecwire.QUIC)
	}
	if p.TCP != "" && want != TransportQUIC {
		out = append(out, pecwire.TCP)
	}
	return out
}

func (pv *privacy) register(ctx context.Context, tr string, p Point) (*pecwire.Conn, *pecwire.Registered, error) {
	var conn *pecwire.Conn
	var err error
	if tr == pecwire.QUIC {
		conn, err = pecwire.DialQUIC(ctx, p.QUIC, pv.tls, pv.c.qc)
	} else {
		conn, err = pecwire.DialTCP(ctx, p.TCP, pv.tls)
	}
	if err != nil {
		return nil, nil, err
	}
	dl, _ := ctx.Deadline()
	if err := conn.Send(&pecwire.Register{Version: pecwire.Version}, dl); err != nil {
		conn.Close()
		return nil, nil, err
	}
	m, err := conn.Recv(dl)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	reg, ok := m.(*pecwire.Registered)
	if !ok {
		conn.Close()
		if e, ok := m.(*pecwire.Error); ok {
			return nil, nil, e
		}
		return nil, nil, fmt.Errorf("pec: forwarder answered Register with message type %d", m.Type())
	}
	conn.SetMaxFrame(max(int(reg.MaxFrame), pecwire.DefaultMaxFrame))
	return conn, reg, nil
}

// refill asks for a batch when the pool is below half, or its batch
// expires within a keepalive (so that no identifier is used at the edge
// of its life), and none is being fetched.
func (pv *privacy) refill() {
	c := pv.c
	c.mu.Lock()
	conn := pv.conn
	need := conn != nil && !pv.asked &&
		(len(pv.pool) < pv.batch/2+1 || time.Until(pv.expires) < pv.keepalive)
	if need {
		pv.asked = true
	}
	c.mu.Unlock()
	if !need {
		return
	}
	if err := conn.Send(&pecwire.EphIDRequest{Count: uint8(pv.batch)}, time.Now().Add(c.cfg.DialTimeout)); err != nil {
		pv.lose(conn, fmt.Errorf("asking for identifiers: %w", err))
	}
}

func (pv *privacy) readLoop(conn *pecwire.Conn) {
	c := pv.c
	for {
		m, err := conn.Recv(time.Time{})
		if err != nil {
			pv.lose(conn, err)
			return
		}
		switch m := m.(type) {
		case *pecwire.Pong:
			c.mu.Lock()
			pv.lastPong, pv.missed = time.Now(), 0
			c.mu.Unlock()
		case *pecwire.EphIDs:
			c.mu.Lock()
			fresh := pv.expires.IsZero() || time.Until(pv.expires) < pv.keepalive
			if fresh {
				pv.pool = nil // old ones are about to expire
			}
			pv.pool = append(pv.pool, m.IDs...)
			pv.expires = time.Unix(int64(m.Expires), 0)
			pv.asked = false
			close(pv.refilled)
			pv.refilled = make(chan struct{})
			select {
			case <-pv.ready:
			default:
				close(pv.ready)
			}
			c.mu.Unlock()
		case *pecwire.SealedProof:
			pv.onSealed(m)
		case *pecwire.EphIDReject:
			pv.onReject(m)
		case *pecwire.Error:
			pv.lose(conn, m)
			return
		default:
			pv.lose(conn, fmt.Errorf("forwarder sent message type %d", m.Type()))
			return
		}
	}
}

// onSealed opens one sealed outcome with its connection's key and
// delivers it if it is of the connection's submission; anything that does
// not open, or is of another submission, is counted and dropped.
func (pv *privacy) onSealed(m *pecwire.SealedProof) {
	c := pv.c
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	w := pv.waiting[string(m.EphID)]
	if w == nil || w.p.done {
		c.st.Dropped++
		return
	}
	proof, err := pecwire.OpenProof(w.key, m.EphID, m.Sealed)
	if err != nil {
		pv.forged++
		c.log.Warn("pec: sealed proof refused", "forwarder", bundleName(pv.fwd), "err", err)
		return
	}
	if !w.p.wants(proof.ID) {
		c.st.Dropped++
		return
	}
	if !w.bound {
		pv.holdLocked(w, proof, now)
		return
	}
	if proof.Digest != w.digest {
		pv.foreignLocked(proof)
		return
	}
	c.deliverLocked(w.p, Outcome{ID: proof.ID, Status: ProofStatus(proof.Status), Proof: proof.Proof, Text: proof.Text, Received: now, Cloud: pv.label})
	if w.p.done {
		delete(pv.waiting, string(m.EphID))
	}
}

// foreignLocked counts and drops an outcome of another submission.
func (pv *privacy) foreignLocked(proof *pecwire.Proof) {
	pv.foreign++
	pv.c.log.Warn("pec: sealed outcome of another submission dropped (another chain, name, port or requests than the connection's)",
		"forwarder", bundleName(pv.fwd), "pkie", proof.ID, "digest", fmt.Sprintf("%x", proof.Digest[:8]))
}

// holdLocked keeps an opened outcome under an extension's identifier
// until the chain is known, within the bounds of an expectation's held
// outcomes (maxHeldDigests submissions, one outcome per enhancement each).
func (pv *privacy) holdLocked(w *sealedPending, proof *pecwire.Proof, now time.Time) {
	digests := map[pecwire.Digest]int{}
	for _, h := range w.held {
		digests[h.m.Digest]++
	}
	n, seen := digests[proof.Digest]
	if (!seen && len(digests) >= maxHeldDigests) || n >= len(w.p.ids) {
		pv.c.st.Dropped++
		return
	}
	w.held = append(w.held, heldSealed{proof, now})
}

// bindLocked names the submission the outcomes under p's extension
// identifier must be of, now that the handshake has delivered the chain:
// held outcomes of it are delivered, the others counted and dropped. It
// reports false when p is not a privacy extension's.
func (pv *privacy) bindLocked(p *Pending, sub Submission) bool {
	c := pv.c
	for eph, w := range pv.waiting {
		if w.p != p || !w.inExtension {
			continue
		}
		if w.bound {
			return true
		}
		w.digest, w.bound = sealedDigest(sub), true
		held := w.held
		w.held = nil
		for _, h := range held {
			switch {
			case p.done || !p.wants(h.m.ID):
				c.st.Dropped++
			case h.m.Digest != w.digest:
				pv.foreignLocked(h.m)
			default:
				c.deliverLocked(p, Outcome{ID: h.m.ID, Status: ProofStatus(h.m.Status), Proof: h.m.Proof, Text: h.m.Text, Received: h.at, Cloud: pv.label})
			}
		}
		if p.done {
			delete(pv.waiting, eph)
		}
		return true
	}
	return false
}

// onReject delivers a refusal of a connection's submission, by the
// forwarder or the cloud, for every outcome still missing.
func (pv *privacy) onReject(m *pecwire.EphIDReject) {
	c := pv.c
	c.mu.Lock()
	defer c.mu.Unlock()
	w := pv.waiting[string(m.EphID)]
	if w == nil {
		c.st.Dropped++
		return
	}
	if w.inExtension {
		// Whoever saw the ClientHello knows this identifier, and the
		// forwarder relays rejections of authenticated clouds only, but
		// a rejection is not sealed to the connection's key: rather
		// than fail the connection on it, keep waiting. The proofs may
		// still come under it; if not, expectLocked submits the chain
		// under an identifier of the client's own after the grace.
		pv.ignored++
		c.log.Info("pec: rejection under an extension's identifier ignored", "forwarder", bundleName(pv.fwd), "code", m.Code, "text", m.Text)
		return
	}
	delete(pv.waiting, string(m.EphID))
	st := ProofFailed
	if m.Code == pecwire.RejectBusy || m.Code == pecwire.RejectLimited {
		st = ProofBusy
	}
	c.finishAllLocked(w.p, st, pv.label, fmt.Sprintf("refused (%s): %s", m.Code, m.Text))
}

// lose ends a forwarder session: what was pending on it fails (its
// outcomes would be addressed to a registration that no longer exists),
// and maintain reconnects.
func (pv *privacy) lose(conn *pecwire.Conn, err error) {
	c := pv.c
	conn.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if pv.conn != conn {
		return
	}
	pv.conn, pv.pool, pv.asked = nil, nil, false
	pv.lost++
	pv.lastErr = err.Error()
	for k, w := range pv.waiting {
		c.finishAllLocked(w.p, ProofFailed, pv.label, "the forwarder session ended before the outcome came")
		delete(pv.waiting, k)
	}
	if !c.closed {
		c.log.Warn("pec: forwarder session lost", "forwarder", bundleName(pv.fwd), "err", err)
	}
}

// maintain pings the forwarder, refills identifiers and reconnects after
// a loss, until the client is closed.
func (pv *privacy) maintain() {
	c := pv.c
	var seq uint64
	retry := c.cfg.Retry
	for {
		c.mu.Lock()
		ka := pv.keepalive
		connected := pv.conn != nil
		c.mu.Unlock()
		if c.cfg.Keepalive > 0 && c.cfg.Keepalive < ka {
			ka = c.cfg.Keepalive
		}
		if ka <= 0 {
			ka = DefaultKeepalive
		}
		// Ping at the keepalive while connected; retry sooner, backing
		// off, while not.
		wait := ka
		if !connected {
			wait = retry
		}
		select {
		case <-c.base.Done():
			c.mu.Lock()
			conn := pv.conn
			pv.conn = nil
			c.mu.Unlock()
			if conn != nil {
				conn.Close()
			}
			return
		case <-time.After(wait):
		}
		c.mu.Lock()
		conn := pv.conn
		missed := pv.missed
		if conn != nil {
			pv.missed++
		}
		c.mu.Unlock()
		if conn == nil {
			if err := pv.connect(c.base); err != nil {
				c.mu.Lock()
				pv.lastErr = err.Error()
				c.mu.Unlock()
				retry = min(2*retry, 30*time.Second)
			} else {
				retry = c.cfg.Retry
			}
			continue
		}
		if missed >= c.cfg.MissedPings {
			pv.lose(conn, fmt.Errorf("%d keepalives unanswered", missed))
			continue
		}
		seq++
		if err := conn.Send(&pecwire.Ping{Seq: seq}, time.Now().Add(ka)); err != nil {
			pv.lose(conn, err)
			continue
		}
		pv.refill()
	}
}

// submit seals sub for the cloud and sends it through the forwarder under
// an unused identifier and a fresh connection key.
func (pv *privacy) submit(ctx context.Context, sub Submission, ids []pkie.ID) (*Pending, error) {
	c := pv.c
	key := make([]byte, pecwire.ConnKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	m := &pecwire.Submit{Budget: sub.Budget, ServerName: sub.ServerName, Port: uint16(sub.Port),
		Requests: sub.Requests, Chain: sub.Chain}
	p := newPending(sub.Nonce, ids, sub.Budget)
	// A burst of connections larger than the pool waits for the refill,
	// within the submission's budget.
	wait := time.NewTimer(min(sub.Budget, c.cfg.DialTimeout))
	defer wait.Stop()
	c.mu.Lock()
wait:
	for len(pv.pool) == 0 && pv.conn != nil && !c.closed {
		ch := pv.refilled
		c.mu.Unlock()
		pv.refill()
		select {
		case <-ch:
			c.mu.Lock()
		case <-wait.C:
			c.mu.Lock()
			break wait
		case <-ctx.Done():
			c.mu.Lock()
			break wait
		}
	}
	switch {
	case c.closed:
		c.mu.Unlock()
		return nil, ErrClosed
	case len(c.pending) >= c.cfg.MaxPending:
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %d", ErrTooManyPending, c.cfg.MaxPending)
	case c.pending[p.nonce] != nil:
		c.mu.Unlock()
		return nil, fmt.Errorf("pec: nonce %s is already pending", p.nonce)
	case pv.conn == nil:
		c.mu.Unlock()
		return nil, fmt.Errorf("pec: no session with forwarder %s: %s", bundleName(pv.fwd), pv.lastErr)
	case len(pv.pool) == 0:
		c.mu.Unlock()
		pv.refill()
		return nil, fmt.Errorf("pec: no ephemeral identifier left (forwarder %s): retry shortly", bundleName(pv.fwd))
	}
	eph := pv.pool[0]
	pv.pool = pv.pool[1:]
	conn := pv.conn
	for k, w := range pv.waiting {
		if w.p.done {
			delete(pv.waiting, k)
		}
	}
	c.mu.Unlock()
	pv.refill()

	env, err := pecwire.SealEnvelope(pv.cloud.HPKE, eph, key, m)
	if err != nil {
		return nil, fmt.Errorf("pec: sealing the submission: %w", err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	p.cloud = pv.label
	c.pending[p.nonce] = p
	pv.waiting[string(eph)] = &sealedPending{p: p, key: key, digest: m.Digest(), bound: true}
	p.timer = time.AfterFunc(sub.Budget, func() { c.expire(p, sub.Budget) })
	c.mu.Unlock()
	deadline := p.deadline
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := conn.Send(&pecwire.SealedSubmit{Cloud: pv.pin, EphID: eph, Envelope: env}, deadline); err != nil {
		pv.lose(conn, fmt.Errorf("submit: %w", err))
	}
	return p, nil
}

// cloudAddr is the cloud's address a PEC server is told: the first point
// of its bundle, over QUIC if it has a QUIC listener.
func (pv *privacy) cloudAddr() Addr {
	pt := pv.cloud.Points[0]
	if pt.QUIC != "" {
		return Addr{Transport: pecwire.QUIC, HostPort: pt.QUIC}
	}
	return Addr{Transport: pecwire.TCP, HostPort: pt.TCP}
}

// privateExtension prepares one connection's PEC extension in privacy
// mode (client–server deployment): an unused identifier, a fresh key and
// the forwarder's address in place of the client identifier, and the
// Pending its proofs will be delivered to. It returns nil when no
// identifier is at hand: the connection then goes without the extension
// (client-only, as when it is stripped).
func (c *Client) privateExtension(requests []pkie.Request, budget time.Duration) (*Extension, *Pending) {
	pv := c.priv
	var uniq []pkie.ID
	seen := map[pkie.ID]bool{}
	for _, r := range requests {
		if !seen[r.ID] {
			seen[r.ID] = true
			uniq = append(uniq, r.ID)
		}
	}
	e := &Extension{Requests: requests, Cloud: pv.cloudAddr(), HasKey: true}
	if _, err := rand.Read(e.Key[:]); err != nil {
		return nil, nil
	}
	rand.Read(e.Nonce[:])
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || pv.conn == nil || len(pv.pool) == 0 || len(c.pending) >= c.cfg.MaxPending || c.pending[e.Nonce] != nil || len(uniq) == 0 {
		go pv.refill()
		return nil, nil
	}
	e.EphID, pv.pool = pv.pool[0], pv.pool[1:]
	e.Forwarder = pv.at
	p := newPending(e.Nonce, uniq, budget)
	p.cloud = pv.label
	c.pending[p.nonce] = p
	pv.waiting[string(e.EphID)] = &sealedPending{p: p, key: e.Key[:], inExtension: true}
	p.timer = time.AfterFunc(budget, func() { c.expire(p, budget) })
	go pv.refill()
	return e, p
}

// submitFor submits the chain of a connection whose extension went to the
// server (SubmitExpected in privacy mode): sealed, under an identifier and
// key of its own, its outcomes delivered to the same Pending as the
// server's. It reports false when p has ended or was submitted already.
func (pv *privacy) submitFor(ctx context.Context, p *Pending, sub Submission, mark func()) (bool, error) {
	c := pv.c
	key := make([]byte, pecwire.ConnKeySize)
	if _, err := rand.Read(key); err != nil {
		return false, err
	}
	m := &pecwire.Submit{Budget: sub.Budget, ServerName: sub.ServerName, Port: uint16(sub.Port),
		Requests: sub.Requests, Chain: sub.Chain}
	c.mu.Lock()
	if p.done || p.sub != nil || c.pending[p.nonce] != p {
		c.mu.Unlock()
		return false, nil
	}
	if pv.conn == nil || len(pv.pool) == 0 {
		c.mu.Unlock()
		go pv.refill()
		return false, fmt.Errorf("pec: no ephemeral identifier at hand (forwarder %s)", bundleName(pv.fwd))
	}
	eph := pv.pool[0]
	pv.pool = pv.pool[1:]
	conn := pv.conn
	p.sub = m
	if mark != nil {
		mark()
	}
	pv.waiting[string(eph)] = &sealedPending{p: p, key: key, digest: m.Digest(), bound: true}
	c.mu.Unlock()
	go pv.refill()
	env, err := pecwire.SealEnvelope(pv.cloud.HPKE, eph, key, m)
	if err != nil {
		return true, fmt.Errorf("pec: sealing the submission: %w", err)
	}
	deadline := time.Now().Add(sub.Budget)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := conn.Send(&pecwire.SealedSubmit{Cloud: pv.pin, EphID: eph, Envelope: env}, deadline); err != nil {
		pv.lose(conn, fmt.Errorf("submit: %w", err))
	}
	return true, nil
}
