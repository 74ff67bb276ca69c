package cloud

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"
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

// othersShare is the part of the others' share of a client's jobs one
// submitter address may hold.
func othersShare(limit int) int { return max(1, limit/4) }

// claim marks j's submission as being proved for this client. It reports
// a duplicate when the same submission is being proved or was proved
// within window, and clientFull when j's share is full: the client's own
// submissions have limit jobs of their own, and others' submissions for
// it another limit, of which one submitter address holds at most a
// quarter. A copy must not shorten the client's own budget: the client's
// own submission joins a copy another session submitted first only by
// extending that job's deadline to its own, and is proved on its own when
// that job has already run out of time.
func (s *session) claim(j *job, window time.Duration, limit int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if first := s.inflight[j.key]; first != nil {
		if !j.own || first.own || first.join(j.deadline) {
			return duplicate
		}
	} else if t, ok := s.done[j.key]; ok && time.Since(t) < window {
		return duplicate
	}
	if j.own {
		if s.ownJobs >= limit {
			return clientFull
		}
		s.ownJobs++
	} else {
		if s.otherJobs >= limit || s.otherBy[j.submitter] >= othersShare(limit) {
			return clientFull
		}
		s.otherJobs++
		s.otherBy[j.submitter]++
	}
	s.inflight[j.key] = j
	j.claimed = true
	return claimed
}

// unclaim forgets the claim of j, whose submission was refused or has
// been proved.
func (s *session) unclaim(j *job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unclaimLocked(j)
}

func (s *session) unclaimLocked(j *job) {
	if !j.claimed {
		return
	}
	j.claimed = false
	if s.inflight[j.key] == j {
		delete(s.inflight, j.key)
	}
	if j.own {
		s.ownJobs--
		return
	}
	s.otherJobs--
	if s.otherBy[j.submitter]--; s.otherBy[j.submitter] <= 0 {
		delete(s.otherBy, j.submitter)
	}
}

// finish records j as proved. A job that left an outcome unsent (another
// session's copy whose budget ran out, see job.clientBudget) is not
// remembered, so that the client's own copy is proved again.
func (s *session) finish(j *job, window time.Duration) {
	s.unclaim(j)
	if !j.incomplete {
		s.remember(j.key, window)
	}
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
	// ctx is the provers' context, cancelled at the deadline.
	ctx    context.Context
	cancel context.CancelFunc
	// seal, for a submission relayed by a privacy forwarder, turns each
	// outcome into what is sent instead (see submitSealed).
	seal func(*pecwire.Proof) pecwire.Message
	// incomplete is set, by run only, when an outcome was left unsent.
	incomplete bool
	// claimed says the job counts in its target's shares (claim); sealed
	// submissions' jobs never do. Guarded by target.mu.
	claimed bool

	mu       sync.Mutex
	deadline time.Time
	timer    *time.Timer
	// joined says the client's own copy of the submission joined this
	// job, which another session submitted; expired that the deadline
	// has passed.
	joined, expired bool
}

// newJob returns a job proving m (with its parsed certs) for target,
// submitted by the session at submitter (own: target's own session) at
// received. Its clock runs from now: stop it if the job does not start.
func (c *Cloud) newJob(target *session, own bool, submitter string, m *pecwire.Submit, certs []*x509.Certificate, received time.Time) *job {
	budget := m.Budget
	if budget <= 0 || budget > c.cfg.MaxBudget {
		budget = c.cfg.MaxBudget
	}
	j := &job{
		target: target, own: own, submitter: submitter, key: m.Digest(), clientID: m.ClientID, nonce: m.Nonce,
		// SNI is case-insensitive; provers see one spelling, and
		// duplicates differing only in case are one.
		subject:  pkie.Subject{ServerName: strings.ToLower(m.ServerName), Port: int(m.Port), Chain: m.Chain, Certs: certs},
		reqs:     m.Requests,
		received: received, deadline: received.Add(budget),
	}
	j.ctx, j.cancel = context.WithCancel(pkie.WithRequester(target.ctx, submitter))
	j.mu.Lock()
	j.timer = time.AfterFunc(time.Until(j.deadline), j.expire)
	j.mu.Unlock()
	return j
}

// expire ends the job's budget, unless a joining copy extended it.
func (j *job) expire() {
	j.mu.Lock()
	if d := time.Until(j.deadline); d > 0 {
		j.timer.Reset(d)
		j.mu.Unlock()
		return
	}
	j.expired = true
	j.mu.Unlock()
	j.cancel()
}

// stop ends the job's clock and its provers' context.
func (j *job) stop() {
	j.mu.Lock()
	j.timer.Stop()
	j.mu.Unlock()
	j.cancel()
}

// join makes the client's own copy of the submission, with budget until
// deadline, one with j: j's deadline becomes the later of the two, and
// its outcomes, timeouts included, go to the client. It reports false
// when j has run out of time already.
func (j *job) join(deadline time.Time) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.expired {
		return false
	}
	j.joined = true
	if deadline.After(j.deadline) {
		j.deadline = deadline
		j.timer.Reset(time.Until(deadline))
	}
	return true
}

// clientBudget reports whether the job's deadline is one the client set
// (its own submission, or its own copy joined), so that running out of it
// is something to tell the client. The budget of another session's
// submission is that session's: whoever sent a copy with a short one
// must not make the client give up, so its timeouts are not sent.
func (j *job) clientBudget() bool {
	if j.own {
		return true
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.joined
}

func (j *job) budget() time.Duration {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.deadline.Sub(j.received)
}

// submit handles one Submit from session from, with the ticket of a
// ServerSubmit if it was one. It answers at once: a Reject, nothing (a
// duplicate: the client gets the outcomes of the copy being proved), or a
// job started. It returns false when from could not take a Reject (its
// queue is full) and is being dropped.
//
// A submission for a client other than the submitting session's own
// registration (a PEC server's) must carry the ticket the client's PEC
// extension carried: minted under a key only the client and the cloud
// hold, bound to the connection's nonce, server name, port and requests,
// and taken once. Knowing a client's identifier, which every ClientHello
// shows, is therefore not enough to submit for it.
//
// Such a session hears only of what is its own or the whole cloud's: a
// malformed submission (a plain Submit for another client included), its
// own rate and shares, the cloud's bound on jobs. Whether the client
// exists, the ticket is good, the client has room or already has the
// submission is never told to it: the answer is the same silence as for
// an accepted submission, so client identifiers cannot be probed.
func (c *Cloud) submit(from *session, m *pecwire.Submit, ticket *pecwire.Ticket) bool {
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
	if !own && ticket == nil {
		return reject(pecwire.RejectInvalid, "a submission for another client must be a ServerSubmit with the ticket of the client's PEC extension")
	}
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
	if target == nil && own {
		// The client's own session, no longer registered: it learns
		// nothing it does not know.
		return reject(pecwire.RejectUnknown, fmt.Sprintf("no client %s is registered at this point of presence", m.ClientID))
	}
	why := "unknown"
	if target != nil {
		why = ""
		if !own {
			why = target.useTicket(m, ticket)
		}
	}
	if why != "" {
		if code := c.jobCode(from.addr); code != 0 {
			return jobRefused(code)
		}
		return silent(why)
	}
	if code := c.acquireJob(from.addr); code != 0 {
		return jobRefused(code)
	}
	j := c.newJob(target, own, from.addr, m, certs, received)
	switch target.claim(j, c.cfg.MaxBudget, c.cfg.MaxJobsPerClient) {
	case duplicate:
		j.stop()
		c.releaseJob(from.addr)
		return silent("duplicate")
	case clientFull:
		j.stop()
		c.releaseJob(from.addr)
		if !own {
			return silent("client_full")
		}
		return reject(pecwire.RejectLimited, "this client has its share of submissions in flight")
	}
	// Every outcome has its place in the client's queue before the job
	// starts, so that submissions, whoever sends them, never overflow it.
	if !target.reserve(len(m.Requests), own) {
		target.unclaim(j)
		j.stop()
		c.releaseJob(from.addr)
		if !own {
			return silent("client_full")
		}
		return reject(pecwire.RejectLimited, "this client has no room for more outcomes: read them first")
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
	defer j.target.finish(j, c.cfg.MaxBudget)
	defer j.stop()
	ctx := j.ctx

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
		if st == pecwire.ProofTimeout && !j.clientBudget() {
			// Its place stays reserved until run returns.
			j.incomplete = true
			c.m.proofs.WithLabelValues(c.cfg.Registry.Name(id), "timeout_unsent").Inc()
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
				outcome(id, pecwire.ProofTimeout, nil, fmt.Sprintf("no %s proof within the budget of %v", c.cfg.Registry.Name(id), j.budget().Round(time.Millisecond)))
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
