package cloud

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

// dupKey identifies a submission for duplicate suppression: its digest
// (pecwire.Submit.Digest), over everything the provers are given and
// everything the outcomes are addressed by. Two submissions with one key
// would get the same outcomes, so proving one is enough; two that differ
// in anything a prover sees are never merged, and the client tells their
// outcomes apart by the digest each Proof carries, so a submitter that
// knows a client's identifier and nonce cannot pre-empt the client's own
// submission with another chain or name.
type dupKey = pecwire.Digest

// Results of claim.
const (
	claimed = iota
	duplicate
	clientFull
)

// claim marks key as being proved for this client. It reports a duplicate
// when the same submission is being proved or was proved within window,
// and clientFull when the client has limit submissions being proved.
func (s *session) claim(key dupKey, window time.Duration, limit int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight[key] {
		return duplicate
	}
	if t, ok := s.done[key]; ok && time.Since(t) < window {
		return duplicate
	}
	if len(s.inflight) >= limit {
		return clientFull
	}
	s.inflight[key] = true
	return claimed
}

// unclaim forgets a claim whose submission was refused, so that a later
// copy is proved.
func (s *session) unclaim(key dupKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, key)
}

// finish records key as proved.
func (s *session) finish(key dupKey, window time.Duration) {
	s.mu.Lock()
	delete(s.inflight, key)
	s.mu.Unlock()
	s.remember(key, window)
}

// job is one accepted submission.
type job struct {
	target    *session
	own       bool // submitted by the target's own session
	submitter string
	key       dupKey
	clientID  pecwire.ClientID
	nonce     pecwire.Nonce
	subject   pkie.Subject
	reqs      []pkie.Request
	received  time.Time
	deadline  time.Time
	// seal, for a submission relayed by a privacy forwarder, turns each
	// outcome into what is sent instead (see submitSealed).
	seal func(*pecwire.Proof) pecwire.Message
}

// submit handles one Submit from session from. It answers at once: a
// Reject, nothing (a duplicate: the client gets the outcomes of the copy
// being proved), or a job started. It returns false when from could not
// take a Reject (its queue is full) and is being dropped.
//
// A session submitting for a client other than its own registration (a
// PEC server, or anyone who learned an identifier) hears only of what is
// its own or the whole cloud's: a malformed submission, its own rate and
// shares, the cloud's bound on jobs. Whether the client exists, has room
// or already has the submission is never told to it: the answer is the
// same silence as for an accepted submission, so client identifiers
// cannot be probed.
func (c *Cloud) submit(from *session, m *pecwire.Submit) bool {
	received := time.Now()
	reject := func(code pecwire.RejectCode, text string) bool {
		c.m.submissions.WithLabelValues("rejected").Inc()
		c.m.rejects.WithLabelValues(code.String()).Inc()
		return from.push(&pecwire.Reject{Nonce: m.Nonce, Digest: m.Digest(), Code: code, Text: text})
	}
	if !c.allowSubmit(from) {
		return reject(pecwire.RejectLimited, "this session or address is over its rate of submissions")
	}
	if len(m.Requests) == 0 {
		return reject(pecwire.RejectInvalid, "the submission requests no enhancement")
	}
	// The chain is parsed before the client is looked up, so that a
	// malformed one is refused alike for every identifier.
	certs := make([]*x509.Certificate, len(m.Chain))
	for i, der := range m.Chain {
		cert, err := c.certs.parse(der)
		if err != nil {
			return reject(pecwire.RejectInvalid, fmt.Sprintf("certificate %d of the chain does not parse", i))
		}
		certs[i] = cert
	}
	own := from.registered && m.ClientID == from.id
	jobRefused := func(code pecwire.RejectCode) bool {
		if code == pecwire.RejectBusy {
			return reject(code, "too many submissions in flight: try another point of presence")
		}
		return reject(code, "this address has its share of submissions in flight")
	}
	// silent ends a submission another session made for this client
	// without telling it why.
	silent := func(why string) bool {
		c.m.submissions.WithLabelValues(why).Inc()
		return true
	}
	target := c.lookup(m.ClientID)
	if target == nil {
		if own {
			// The client's own session, no longer registered: it learns
			// nothing it does not know.
			return reject(pecwire.RejectUnknown, fmt.Sprintf("no client %s is registered at this point of presence", m.ClientID))
		}
		if code := c.jobCode(from.addr); code != 0 {
			return jobRefused(code)
		}
		return silent("unknown")
	}
	if code := c.acquireJob(from.addr); code != 0 {
		return jobRefused(code)
	}
	// SNI is case-insensitive; provers see one spelling, and duplicates
	// differing only in case are one.
	name := strings.ToLower(m.ServerName)
	key := m.Digest()
	switch target.claim(key, c.cfg.MaxBudget, c.cfg.MaxJobsPerClient) {
	case duplicate:
		c.releaseJob(from.addr)
		return silent("duplicate")
	case clientFull:
		c.releaseJob(from.addr)
		if !own {
			return silent("client_full")
		}
		return reject(pecwire.RejectLimited, "this client has its share of submissions in flight")
	}
	// Every outcome has its place in the client's queue before the job
	// starts, so that submissions, whoever sends them, never overflow it.
	if !target.reserve(len(m.Requests), own) {
		target.unclaim(key)
		c.releaseJob(from.addr)
		if !own {
			return silent("client_full")
		}
		return reject(pecwire.RejectLimited, "this client has no room for more outcomes: read them first")
	}
	budget := m.Budget
	if budget <= 0 || budget > c.cfg.MaxBudget {
		budget = c.cfg.MaxBudget
	}
	j := &job{
		target: target, own: own, submitter: from.addr, key: key, clientID: m.ClientID, nonce: m.Nonce,
		subject:  pkie.Subject{ServerName: name, Port: int(m.Port), Chain: m.Chain, Certs: certs},
		reqs:     m.Requests,
		received: received, deadline: received.Add(budget),
	}
	c.m.submissions.WithLabelValues("accepted").Inc()
	c.wg.Go(func() { c.run(j) })
	return true
}

// result is one prover's answer.
type result struct {
	id    pkie.ID
	proof *pkie.Proof
	err   error
	took  time.Duration
}

// run proves one submission: every requested prover at once, each outcome
// pushed to the client as it comes, those still running at the deadline
// reported as timed out.
func (c *Cloud) run(j *job) {
	defer c.releaseJob(j.submitter)
	defer j.target.finish(j.key, c.cfg.MaxBudget)
	ctx, cancel := context.WithDeadline(pkie.WithRequester(j.target.ctx, j.submitter), j.deadline)
	defer cancel()

	// One outcome per request, each in a place reserved for it; what is
	// left unused (none, unless a prover misbehaves) is given back.
	left := len(j.reqs)
	defer func() {
		if left > 0 {
			j.target.unreserve(left, j.own)
		}
	}()
	outcome := func(id pkie.ID, st pecwire.ProofStatus, p *pkie.Proof, text string) {
		if left == 0 {
			return
		}
		left--
		c.m.proofs.WithLabelValues(c.cfg.Registry.Name(id), st.String()).Inc()
		j.target.pushOutcome(j.wrap(&pecwire.Proof{ClientID: j.clientID, Nonce: j.nonce, Digest: j.key, ID: id, Status: st, Proof: p, Text: text}), j.own)
	}
	// Buffered for every prover, so that a prover answering after the
	// deadline never blocks.
	results := make(chan result, len(j.reqs))
	var pending []pkie.ID
	for _, r := range j.reqs {
		h := c.provers[r.ID]
		if h == nil {
			outcome(r.ID, pecwire.ProofUnsupported, nil, fmt.Sprintf("this cloud does not host enhancement %s", c.cfg.Registry.Name(r.ID)))
			continue
		}
		if !h.tryAcquire() {
			outcome(r.ID, pecwire.ProofBusy, nil, h.name+" prover is at its concurrency bound")
			continue
		}
		pending = append(pending, r.ID)
		req := &pkie.ProveRequest{Subject: j.subject, Params: r.Params}
		go func() {
			defer h.release()
			start := time.Now()
			p, err := h.p.Prove(ctx, req)
			results <- result{id: h.p.ID(), proof: p, err: err, took: time.Since(start)}
		}()
	}
	for len(pending) > 0 {
		select {
		case r := <-results:
			if i := indexOf(pending, r.id); i >= 0 {
				pending = append(pending[:i], pending[i+1:]...)
			}
			c.m.proofSeconds.WithLabelValues(c.cfg.Registry.Name(r.id)).Observe(r.took.Seconds())
			st, p, text := c.classify(ctx, j, r)
			outcome(r.id, st, p, text)
		case <-ctx.Done():
			for _, id := range pending {
				outcome(id, pecwire.ProofTimeout, nil, fmt.Sprintf("no %s proof within the budget of %v", c.cfg.Registry.Name(id), j.deadline.Sub(j.received).Round(time.Millisecond)))
			}
			pending = nil
		}
	}
	c.m.jobSeconds.Observe(time.Since(j.received).Seconds())
}

func indexOf(ids []pkie.ID, id pkie.ID) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

// classify turns a prover's answer into what the client is told. The
// prover's own error goes to the log, not to the client.
func (c *Cloud) classify(ctx context.Context, j *job, r result) (pecwire.ProofStatus, *pkie.Proof, string) {
	name := c.cfg.Registry.Name(r.id)
	switch {
	case r.err == nil && r.proof == nil:
		c.log.Error("prover returned neither a proof nor an error", "pkie", name)
		return pecwire.ProofFailed, nil, name + " prover failed"
	case r.err == nil && r.proof.ID != r.id:
		c.log.Error("prover returned a proof of another enhancement", "pkie", name, "proof_id", r.proof.ID)
		return pecwire.ProofFailed, nil, name + " prover failed"
	case r.err == nil && len(r.proof.Body) > pkie.MaxProofBody:
		c.log.Error("prover returned an oversize proof", "pkie", name, "bytes", len(r.proof.Body))
		return pecwire.ProofFailed, nil, name + " prover failed"
	case r.err == nil:
		return pecwire.ProofOK, r.proof, ""
	case errors.Is(r.err, pkie.ErrBusy):
		return pecwire.ProofBusy, nil, name + " prover is busy"
	case errors.Is(r.err, pkie.ErrUnsupported):
		return pecwire.ProofUnsupported, nil, name + " prover cannot prove this request"
	case errors.Is(r.err, pkie.ErrUnavailable):
		// Said once at the cause (the prover's log, /healthz), not per
		// submission.
		return pecwire.ProofFailed, nil, name + " unavailable on this replica: it holds no tree of its TTP it may prove on"
	case ctx.Err() != nil && j.target.ctx.Err() == nil:
		return pecwire.ProofTimeout, nil, fmt.Sprintf("no %s proof within the budget", name)
	}
	c.log.Warn("prover failed", "pkie", name, "server", j.subject.ServerName, "err", r.err)
	return pecwire.ProofFailed, nil, name + " prover failed: see the cloud's log"
}
