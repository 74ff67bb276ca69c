package pec

// Submissions and expectations waiting for their outcomes, and the
// delivery of each outcome to the one it belongs to.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

// Submission is one connection's chain for the cloud to prove.
type Submission struct {
	// Nonce names the connection; zero: Submit draws a random one.
	Nonce Nonce
	// ServerName and Port are the server the client connected to.
	ServerName string
	Port       int
	// Chain is the chain the server presented, DER, leaf first.
	Chain [][]byte
	// Requests are the enhancements wanted, with their parameters.
	Requests []pkie.Request
	// Budget is how long the caller will wait for the proofs.
	Budget time.Duration
}

// Outcome is one enhancement's result for one submission, as delivered.
type Outcome struct {
	// ID is the enhancement, Status what became of its proof.
	ID     pkie.ID
	Status ProofStatus
	// Proof is the proof when Status is ProofOK. It is NOT verified:
	// verifying it against the TTP's key is the caller's job.
	Proof *pkie.Proof
	// Text says why, when Status is not ProofOK.
	Text string
	// Received is when the outcome arrived (or was concluded).
	Received time.Time
	// Cloud names the bundle, point of presence and transport that
	// delivered it, or for a timeout the one that failed to.
	Cloud string
}

// ProofStatus is the outcome of one enhancement for one submission, as the
// cloud reports it or, for ProofTimeout and some failures, as the client
// concludes it.
type ProofStatus uint8

// Proof statuses. The values are those of the wire format
// (docs/formats/pec.md).
const (
	// ProofOK: Outcome.Proof holds the enhancement's proof, not yet
	// verified.
	ProofOK ProofStatus = 0
	// ProofBusy: the prover or the cloud is overloaded, or the client's
	// share is used up.
	ProofBusy ProofStatus = 1
	// ProofUnsupported: the cloud does not host this enhancement, or it
	// cannot prove this chain.
	ProofUnsupported ProofStatus = 2
	// ProofFailed: the prover, the cloud or the session failed; Text says
	// why.
	ProofFailed ProofStatus = 3
	// ProofTimeout: no answer within the budget.
	ProofTimeout ProofStatus = 4
)

// String returns "ok", "busy", "unsupported", "failed" or "timeout".
func (s ProofStatus) String() string { return pecwire.ProofStatus(s).String() }

// Pending is a submission (or an expectation) waiting for its outcomes.
type Pending struct {
	nonce    Nonce
	ids      []pkie.ID
	ch       chan Outcome
	deadline time.Time

	// guarded by Client.mu
	sub *pecwire.Submit // nil for Expect
	// digest is the submission's digest outcomes must carry: that of the
	// Submit last sent, or for an expectation, once bound.
	digest pecwire.Digest
	bound  bool
	// expect is what an expectation's submitter is to submit, its
	// ClientID filled in from the session the outcome arrives on; nil
	// for Expect, which binds to the first outcome's digest.
	expect *pecwire.Submit
	// hold marks an expectation whose chain is not known yet (the
	// client–server dialer's, until the handshake delivers it): its
	// outcomes wait in held, by digest, until bindExpected.
	hold           bool
	held           []heldProof
	size           int
	got            map[pkie.ID]bool
	via            *session
	cloud          string
	busyRetried    bool
	unknownRetried bool
	retrying       bool
	done           bool
	timer          *time.Timer
}

// C delivers one Outcome per requested enhancement, then is closed. At the
// budget the missing ones arrive as ProofTimeout. It is buffered to the
// number of enhancements, so a slow reader never holds up the session.
// Read either C or Wait, not both.
func (p *Pending) C() <-chan Outcome { return p.ch }

// Nonce returns the submission's nonce.
func (p *Pending) Nonce() Nonce { return p.nonce }

// Wait collects the outcomes until all have arrived (by the budget) or ctx
// ends, and returns what it has.
func (p *Pending) Wait(ctx context.Context) map[pkie.ID]Outcome {
	out := make(map[pkie.ID]Outcome, len(p.ids))
	for {
		select {
		case o, ok := <-p.ch:
			if !ok {
				return out
			}
			out[o.ID] = o
		case <-ctx.Done():
			return out
		}
	}
}

func newPending(nonce Nonce, ids []pkie.ID, budget time.Duration) *Pending {
	return &Pending{
		nonce: nonce, ids: ids, ch: make(chan Outcome, len(ids)),
		deadline: time.Now().Add(budget), got: make(map[pkie.ID]bool, len(ids)),
	}
}

// deliverLocked hands one outcome to the reader; the buffer holds one per
// ID, so it never blocks.
func (c *Client) deliverLocked(p *Pending, o Outcome) {
	p.got[o.ID] = true
	p.ch <- o
	if len(p.got) == len(p.ids) {
		c.completeLocked(p)
	}
}

func (c *Client) completeLocked(p *Pending) {
	if p.done {
		return
	}
	p.done = true
	close(p.ch)
	if p.timer != nil {
		p.timer.Stop()
	}
	if c.pending[p.nonce] == p {
		delete(c.pending, p.nonce)
	}
	c.releaseLocked(p)
}

// releaseLocked detaches p from its cloud, closing an auxiliary session
// nothing else waits on.
func (c *Client) releaseLocked(p *Pending) {
	s := p.via
	p.via = nil
	if s == nil || !s.aux {
		return
	}
	s.refs--
	if s.refs <= 0 && !s.dead {
		s.dead = true
		delete(c.aux, s.t)
		go s.close()
	}
}

// finishAllLocked delivers status for every enhancement still missing.
func (c *Client) finishAllLocked(p *Pending, st ProofStatus, cloud, text string) {
	if p.done {
		return
	}
	now := time.Now()
	for _, id := range p.ids {
		if !p.got[id] {
			c.deliverLocked(p, Outcome{ID: id, Status: st, Text: text, Received: now, Cloud: cloud})
		}
	}
	c.completeLocked(p)
}

func (c *Client) expire(p *Pending, budget time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	where := p.cloud
	if where == "" {
		where = "any cloud"
	}
	c.finishAllLocked(p, ProofTimeout, p.cloud, fmt.Sprintf("no outcome from %s within the budget of %v", where, budget))
}

// Submit sends a chain to the cloud and returns at once. The Pending
// delivers one Outcome per requested enhancement: a proof (unverified), a
// per-enhancement refusal, the whole submission's refusal repeated for each
// (busy, invalid, too large), or ProofTimeout at the budget. If the cloud
// dies before it answers, the submission is resubmitted after failover
// with what is left of the budget; a busy submission is retried once at
// the next point of presence or cloud when OnBusy is BusyNext. An error
// means nothing was sent: a malformed submission, too many pending, or a
// closed client. ctx bounds the write of the submission.
func (c *Client) Submit(ctx context.Context, sub Submission) (*Pending, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if sub.Budget <= 0 {
		return nil, errors.New("pec: submission without a budget")
	}
	if len(sub.Requests) == 0 {
		return nil, errors.New("pec: submission requests no enhancement")
	}
	if sub.Port < 0 || sub.Port > 65535 {
		return nil, fmt.Errorf("pec: port %d out of range", sub.Port)
	}
	if sub.Nonce == (Nonce{}) {
		rand.Read(sub.Nonce[:])
	}
	if c.priv != nil {
		ids := make([]pkie.ID, len(sub.Requests))
		for i, r := range sub.Requests {
			ids[i] = r.ID
		}
		return c.priv.submit(ctx, sub, ids)
	}
	m := &pecwire.Submit{
		Nonce: pecwire.Nonce(sub.Nonce), Budget: sub.Budget, ServerName: sub.ServerName, Port: uint16(sub.Port),
		Requests: sub.Requests, Chain: sub.Chain,
	}
	frame, err := pecwire.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("pec: submission: %w", err)
	}
	ids := make([]pkie.ID, len(sub.Requests))
	for i, r := range sub.Requests {
		ids[i] = r.ID
	}
	p := newPending(sub.Nonce, ids, sub.Budget)
	p.sub, p.size = m, len(frame)-4

	c.mu.Lock()
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
	case c.cur != nil && p.size > c.cur.maxFrame:
		c.mu.Unlock()
		return nil, fmt.Errorf("pec: submission of %d bytes exceeds the cloud's limit of %d", p.size, c.cur.maxFrame)
	}
	c.pending[p.nonce] = p
	p.timer = time.AfterFunc(sub.Budget, func() { c.expire(p, sub.Budget) })
	s := c.cur
	var out *pecwire.Submit
	if s != nil {
		out = c.assignLocked(p, s)
	}
	c.mu.Unlock()
	if out != nil {
		deadline := p.deadline
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		if err := s.conn.Send(out, deadline); err != nil {
			// The submission stays pending and goes to the next cloud.
			c.failed(s, time.Now(), fmt.Errorf("submit: %w", err), false)
		}
	}
	return p, nil
}

// Expect registers interest in proofs for a nonce that someone else (a PEC
// server) submits for this client's identifier, with the same delivery as
// Submit. Nothing is resubmitted: after a failover the client's identifier
// changes and such proofs cannot arrive. When the client is closed or
// MaxPending is reached, the Pending delivers ProofFailed or ProofBusy for
// every ID at once.
//
// Expect knows no chain, so it takes the outcomes of the first submission
// with this nonce to reach it (the first outcome binds the digest): a copy
// with another chain submitted by someone who saw the nonce may pre-empt
// the server's. Use ExpectSubmission when the handshake has delivered the
// chain.
func (c *Client) Expect(nonce Nonce, ids []pkie.ID, budget time.Duration) *Pending {
	return c.expect(nonce, ids, budget, nil)
}

// ExpectSubmission is Expect for the submission sub describes: the
// connection's nonce, server name, port, requests and the chain the
// handshake delivered. Only outcomes carrying that submission's digest
// (with this client's identifier) are taken, so a copy with the same
// nonce and another chain or requests cannot pre-empt it.
func (c *Client) ExpectSubmission(sub Submission) *Pending {
	ids := make([]pkie.ID, len(sub.Requests))
	for i, r := range sub.Requests {
		ids[i] = r.ID
	}
	return c.expect(sub.Nonce, ids, sub.Budget, &pecwire.Submit{
		Nonce: pecwire.Nonce(sub.Nonce), ServerName: sub.ServerName, Port: uint16(sub.Port), Requests: sub.Requests, Chain: sub.Chain,
	})
}

func (c *Client) expect(nonce Nonce, ids []pkie.ID, budget time.Duration, tmpl *pecwire.Submit) *Pending {
	var uniq []pkie.ID
	seen := map[pkie.ID]bool{}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	p := newPending(nonce, uniq, budget)
	p.expect = tmpl
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		c.finishAllLocked(p, ProofFailed, "", ErrClosed.Error())
		return p
	case len(c.pending) >= c.cfg.MaxPending:
		c.finishAllLocked(p, ProofBusy, "", fmt.Sprintf("%v: %d", ErrTooManyPending, c.cfg.MaxPending))
		return p
	case c.pending[nonce] != nil:
		c.finishAllLocked(p, ProofFailed, "", fmt.Sprintf("pec: nonce %s is already pending", nonce))
		return p
	case len(uniq) == 0:
		c.completeLocked(p)
		return p
	}
	c.pending[nonce] = p
	if c.cur != nil {
		p.cloud = c.cur.label
	}
	p.timer = time.AfterFunc(budget, func() { c.expire(p, budget) })
	return p
}

// heldProof is an outcome that arrived for an expectation before its
// chain was known.
type heldProof struct {
	s  *session
	m  *pecwire.Proof
	at time.Time
}

// maxHeldDigests bounds the submissions whose outcomes an expectation
// holds before its chain is known: copies with the same nonce and other
// chains, which whoever saw the nonce in the ClientHello can submit.
const maxHeldDigests = 8

// expectHeld is Expect for an expectation whose chain the handshake will
// deliver: outcomes are held, not delivered, until bindExpected names the
// submission, so that none of a copy with another chain is taken.
func (c *Client) expectHeld(nonce Nonce, ids []pkie.ID, budget time.Duration) *Pending {
	p := c.expect(nonce, ids, budget, nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !p.done {
		p.hold = true
	}
	return p
}

// holdLocked keeps m for p until its chain is known, within bounds.
func (c *Client) holdLocked(p *Pending, s *session, m *pecwire.Proof, now time.Time) {
	digests := map[pecwire.Digest]int{}
	for _, h := range p.held {
		digests[h.m.Digest]++
	}
	n, seen := digests[m.Digest]
	if (!seen && len(digests) >= maxHeldDigests) || n >= len(p.ids) {
		c.st.Dropped++
		return
	}
	p.held = append(p.held, heldProof{s, m, now})
}

// bindExpected names the submission an expectation from expectHeld waits
// for, now that the handshake has delivered the chain: the held outcomes
// of that submission are delivered, the others dropped, and later ones
// are matched by its digest.
func (c *Client) bindExpected(p *Pending, sub Submission) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.priv != nil && c.priv.bindLocked(p, sub) {
		return
	}
	if p.done || !p.hold {
		return
	}
	p.hold = false
	if !p.bound {
		p.expect = &pecwire.Submit{
			Nonce: pecwire.Nonce(p.nonce), ServerName: sub.ServerName, Port: uint16(sub.Port), Requests: sub.Requests, Chain: sub.Chain,
		}
	}
	held := p.held
	p.held = nil
	for _, h := range held {
		if p.done || h.s.dead || !p.wants(h.m.ID) || !p.matchesLocked(h.s, h.m.Digest) {
			c.st.Dropped++
			continue
		}
		h.s.answered.Store(true)
		c.deliverLocked(p, Outcome{ID: h.m.ID, Status: ProofStatus(h.m.Status), Proof: h.m.Proof, Text: h.m.Text, Received: h.at, Cloud: h.s.label})
	}
}

// matchesLocked reports whether an outcome carrying digest d, arriving on
// s, belongs to p, binding an Expect to the first digest it sees.
func (p *Pending) matchesLocked(s *session, d pecwire.Digest) bool {
	if !p.bound && p.expect != nil {
		m := *p.expect
		m.ClientID = pecwire.ClientID(s.id)
		p.digest, p.bound = m.Digest(), true
	}
	if !p.bound {
		p.digest, p.bound = d, true
	}
	return p.digest == d
}

func (c *Client) onProof(s *session, m *pecwire.Proof) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending[Nonce(m.Nonce)]
	if p != nil && !p.done && p.hold && p.sub == nil && ClientID(m.ClientID) == s.id && !s.aux && p.wants(m.ID) {
		c.holdLocked(p, s, m, now)
		return
	}
	switch {
	case p == nil, p.done, ClientID(m.ClientID) != s.id, p.sub != nil && p.via != s, p.sub == nil && s.aux,
		!p.wants(m.ID), !p.matchesLocked(s, m.Digest):
		c.st.Dropped++
		c.log.Debug("pec: outcome dropped", "cloud", s.label, "nonce", m.Nonce, "id", m.ID, "client", m.ClientID)
		return
	}
	s.answered.Store(true)
	c.deliverLocked(p, Outcome{ID: m.ID, Status: ProofStatus(m.Status), Proof: m.Proof, Text: m.Text, Received: now, Cloud: s.label})
}

func (p *Pending) wants(id pkie.ID) bool {
	if p.got[id] {
		return false
	}
	for _, x := range p.ids {
		if x == id {
			return true
		}
	}
	return false
}

func (c *Client) onReject(s *session, m *pecwire.Reject) {
	c.mu.Lock()
	p := c.pending[Nonce(m.Nonce)]
	if p == nil || p.done || (p.sub != nil && p.via != s) || (p.hold && p.sub == nil) || !p.matchesLocked(s, m.Digest) {
		c.st.Dropped++
		c.mu.Unlock()
		return
	}
	why := fmt.Sprintf("cloud %s refused the submission: %s", s.label, m.Code)
	if m.Text != "" {
		why += ": " + m.Text
	}
	switch {
	case (m.Code == pecwire.RejectBusy || m.Code == pecwire.RejectLimited) && c.cfg.OnBusy == BusyNext && p.sub != nil && !p.busyRetried:
		// Another point of presence has its own bounds and shares.
		p.busyRetried = true
		p.retrying = true
		c.releaseLocked(p)
		c.mu.Unlock()
		c.wg.Go(func() { c.retryElsewhere(p, s.t, why) })
		return
	case m.Code == pecwire.RejectUnknown && p.sub != nil && !s.aux && s == c.cur && !p.unknownRetried:
		// The cloud forgot this client (it restarted, or missed our
		// pings): register again and resubmit.
		p.unknownRetried = true
		c.mu.Unlock()
		c.failed(s, time.Now(), errors.New("cloud does not know this client"), true)
		return
	}
	st := ProofFailed
	if m.Code == pecwire.RejectBusy || m.Code == pecwire.RejectLimited {
		st = ProofBusy
	}
	c.finishAllLocked(p, st, s.label, why)
	c.mu.Unlock()
}
