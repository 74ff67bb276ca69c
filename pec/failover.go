package pec

// Choosing points of presence: racing a bundle's points, failing over to
// the next point or cloud when a session dies, resubmitting what was
// pending, and retrying a busy submission elsewhere.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/pecwire"
)

func (c *Client) allPoints(b int) []target {
	ts := make([]target, len(c.cfg.Clouds[b].Points))
	for p := range ts {
		ts[p] = target{b, p}
	}
	return ts
}

// orderLocked returns bundle b's points, those that registered in its
// latest race first, in the order they did.
func (c *Client) orderLocked(b int) []int {
	seen := map[int]bool{}
	var o []int
	for _, p := range c.ranked[b] {
		if !seen[p] {
			seen[p] = true
			o = append(o, p)
		}
	}
	for p := range c.cfg.Clouds[b].Points {
		if !seen[p] {
			o = append(o, p)
		}
	}
	return o
}

// race registers with one of ts. Attempt i starts stagger after attempt
// i-1, or as soon as every attempt started so far has failed; stagger zero
// starts them all at once. The first session to register is returned. With
// learn, the others run on (not beyond DialTimeout) and the order in which
// they register is remembered for failover, each closed as it does;
// otherwise they are cancelled. Registration times count from start.
func (c *Client) race(ctx context.Context, ts []target, stagger time.Duration, learn bool, start time.Time) (*session, error) {
	if len(ts) == 0 {
		return nil, errors.New("no point of presence to try")
	}
	actx, acancel := context.WithCancel(c.base)
	detach := context.AfterFunc(ctx, acancel)
	type result struct {
		i   int
		s   *session
		err error
	}
	results := make(chan result, len(ts))
	next, running := 0, 0
	launch := func() {
		i := next
		next++
		running++
		c.wg.Go(func() {
			s, err := c.registerPoint(actx, ts[i], start)
			results <- result{i, s, err}
		})
	}
	var tick <-chan time.Time
	var timer *time.Timer
	if stagger <= 0 {
		for next < len(ts) {
			launch()
		}
	} else {
		launch()
		timer = time.NewTimer(stagger)
		defer timer.Stop()
		tick = timer.C
	}
	var errs []error
	for {
		if running == 0 && next == len(ts) {
			detach()
			acancel()
			return nil, joinErrors(errs)
		}
		select {
		case <-tick:
			if next < len(ts) {
				launch()
				timer.Reset(stagger)
			}
		case r := <-results:
			running--
			if r.err != nil {
				errs = append(errs, r.err)
				if running == 0 && next < len(ts) {
					launch()
					if timer != nil {
						timer.Reset(stagger)
					}
				}
				continue
			}
			if learn {
				detach() // the losers run on to say how near they are
				c.mu.Lock()
				c.ranked[ts[r.i].b] = []int{ts[r.i].p}
				c.mu.Unlock()
			} else {
				acancel()
			}
			left := running
			c.wg.Go(func() {
				defer acancel()
				for range left {
					r := <-results
					if r.s == nil {
						continue
					}
					r.s.close()
					if learn {
						c.mu.Lock()
						c.ranked[ts[r.i].b] = append(c.ranked[ts[r.i].b], ts[r.i].p)
						c.mu.Unlock()
					}
				}
			})
			return r.s, nil
		case <-ctx.Done():
			left := running
			c.wg.Go(func() {
				for range left {
					if r := <-results; r.s != nil {
						r.s.close()
					}
				}
			})
			return nil, ctx.Err()
		}
	}
}

// run fails over when the current session dies.
func (c *Client) run() {
	for {
		select {
		case <-c.base.Done():
			return
		case ev := <-c.events:
			c.failover(ev)
		}
	}
}

type stage struct {
	ts      []target
	stagger time.Duration
	learn   bool
}

// planLocked is the failover order after the session with t died: the
// other points of its cloud in the order they registered last (nearest
// first), then each following cloud's points raced, wrapping around to the
// same cloud's. A cloud that forgot the client is asked again first.
func (c *Client) planLocked(t target, again bool) []stage {
	var st []stage
	if again {
		st = append(st, stage{ts: []target{t}})
	}
	var rest []target
	for _, p := range c.orderLocked(t.b) {
		if p != t.p {
			rest = append(rest, target{t.b, p})
		}
	}
	if len(rest) > 0 {
		st = append(st, stage{ts: rest, stagger: c.cfg.FallbackDelay})
	}
	n := len(c.cfg.Clouds)
	for k := 1; k <= n; k++ {
		st = append(st, stage{ts: c.allPoints((t.b + k) % n), learn: true})
	}
	return st
}

func (c *Client) failover(ev event) {
	// A cloud that registers the client and drops it before answering
	// anything would otherwise have it reconnecting in a tight loop: after
	// the second such session in a row, wait Retry (doubling) first.
	if ev.s.answered.Load() {
		c.flaps = 0
	} else {
		c.flaps++
	}
	if c.flaps >= 2 {
		wait := min(c.cfg.Retry<<min(c.flaps-2, 16), maxRetry)
		c.log.Warn("pec: sessions end before answering anything; waiting before registering again", "wait", wait, "cloud", ev.s.label)
		select {
		case <-c.base.Done():
			return
		case <-time.After(wait):
		}
	}
	if !ev.reregister {
		// The dead point goes last in its cloud's order.
		c.mu.Lock()
		o := c.orderLocked(ev.s.t.b)
		c.ranked[ev.s.t.b] = append(slices.DeleteFunc(o, func(p int) bool { return p == ev.s.t.p }), ev.s.t.p)
		c.mu.Unlock()
	}
	retry := c.cfg.Retry
	for round := 0; ; round++ {
		c.mu.Lock()
		plan := c.planLocked(ev.s.t, ev.reregister && round == 0)
		c.mu.Unlock()
		var errs []error
		for _, st := range plan {
			s, err := c.race(c.base, st.ts, st.stagger, st.learn, ev.at)
			if err == nil {
				c.adopt(s, ev)
				return
			}
			if c.base.Err() != nil {
				return
			}
			errs = append(errs, err)
		}
		c.log.Warn("pec: no cloud registered; trying again", "in", retry, "err", joinErrors(errs))
		select {
		case <-c.base.Done():
			return
		case <-time.After(retry):
		}
		retry = min(2*retry, maxRetry)
	}
}

// adopt makes s the current session after a failover and resubmits what is
// still pending.
func (c *Client) adopt(s *session, ev event) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		s.close()
		return
	}
	c.cur = s
	took := s.at.Sub(ev.at)
	if ev.reregister {
		c.st.Reregistrations++
	} else {
		c.st.Failovers++
		c.st.LastFailover = took
	}
	resend := c.unsentLocked(s)
	c.mu.Unlock()
	c.log.Info("pec: registered after failover", "cloud", s.label, "client", s.id, "took", took, "resubmitted", len(resend))
	c.startSession(s)
	c.sendAll(s, resend)
}

type outgoing struct {
	m        *pecwire.Submit
	deadline time.Time
}

// unsentLocked assigns every pending submission that is at no cloud to s.
func (c *Client) unsentLocked(s *session) []outgoing {
	var out []outgoing
	for _, p := range c.pending {
		if p.via == nil && !p.retrying && p.sub != nil && !p.done {
			if m := c.assignLocked(p, s); m != nil {
				out = append(out, outgoing{m, p.deadline})
			}
		}
	}
	return out
}

// assignLocked makes s the cloud of p and returns the Submit to send
// there: the enhancements still missing, the budget still left.
func (c *Client) assignLocked(p *Pending, s *session) *pecwire.Submit {
	left := time.Until(p.deadline)
	if left < time.Millisecond {
		return nil // the timer is about to deliver the timeouts
	}
	if p.size > s.maxFrame {
		c.finishAllLocked(p, ProofFailed, s.label, fmt.Sprintf("submission of %d bytes exceeds the cloud's limit of %d", p.size, s.maxFrame))
		return nil
	}
	m := *p.sub
	m.ClientID = pecwire.ClientID(s.id)
	m.Budget = left
	m.Requests = nil
	for _, r := range p.sub.Requests {
		if !p.got[r.ID] {
			m.Requests = append(m.Requests, r)
		}
	}
	// Outcomes of this submission, and of no other with the same nonce,
	// are taken from now on.
	p.digest, p.bound = m.Digest(), true
	p.via = s
	p.cloud = s.label
	if s.aux {
		s.refs++
	}
	return &m
}

func (c *Client) sendAll(s *session, out []outgoing) {
	for _, o := range out {
		if err := s.conn.Send(o.m, o.deadline); err != nil {
			c.failed(s, time.Now(), fmt.Errorf("submit: %w", err), false)
			return
		}
	}
}

// alternativesLocked lists every point but from, nearest of from's cloud
// first, then the other clouds' in preference order.
func (c *Client) alternativesLocked(from target) []target {
	var ts []target
	n := len(c.cfg.Clouds)
	for k := range n {
		b := (from.b + k) % n
		for _, p := range c.orderLocked(b) {
			if (target{b, p}) != from {
				ts = append(ts, target{b, p})
			}
		}
	}
	return ts
}

// retryElsewhere resubmits a submission refused as busy at the next point
// of presence or cloud, within its budget, over an auxiliary session that
// lives as long as submissions use it.
func (c *Client) retryElsewhere(p *Pending, from target, why string) {
	c.mu.Lock()
	ts := c.alternativesLocked(from)
	var s *session
	for _, t := range ts {
		if a := c.aux[t]; a != nil && !a.dead {
			s = a
			break
		}
		if c.cur != nil && c.cur.t == t {
			s = c.cur
			break
		}
	}
	c.mu.Unlock()
	var err error
	fresh := false
	if s == nil && len(ts) > 0 {
		ctx, cancel := context.WithDeadline(c.base, p.deadline)
		s, err = c.race(ctx, ts, c.cfg.FallbackDelay, false, time.Now())
		cancel()
		fresh = err == nil
	}
	c.mu.Lock()
	p.retrying = false
	if !fresh && s != nil && s.dead {
		s, err = nil, errors.New("the session chosen for the retry ended")
	}
	switch {
	case p.done || c.closed:
		c.mu.Unlock()
		if fresh {
			s.close()
		}
		return
	case len(ts) == 0:
		c.finishAllLocked(p, ProofBusy, p.cloud, why+"; no other point of presence to try")
		c.mu.Unlock()
		return
	case s == nil:
		c.finishAllLocked(p, ProofBusy, p.cloud, fmt.Sprintf("%s; no other point of presence registered in time: %v", why, err))
		c.mu.Unlock()
		return
	}
	if fresh {
		if a := c.aux[s.t]; a != nil && !a.dead {
			defer s.close() // another retry opened one meanwhile
			s, fresh = a, false
		} else {
			s.aux = true
			c.aux[s.t] = s
		}
	}
	m := c.assignLocked(p, s)
	if fresh && m == nil {
		// Out of budget (the timer delivers the timeouts): nothing uses s.
		s.dead = true
		delete(c.aux, s.t)
		c.mu.Unlock()
		s.close()
		return
	}
	c.mu.Unlock()
	if fresh {
		c.log.Info("pec: retrying a busy submission elsewhere", "cloud", s.label, "nonce", p.nonce)
		c.startSession(s)
	}
	if m != nil {
		c.sendAll(s, []outgoing{{m, p.deadline}})
	}
}

// joinedErrors is several attempts' failures reported as one. Unlike
// errors.Join, whose message puts each on a line of its own, it joins them
// with "; ": an error is one line, whoever prints it. errors.Is and
// errors.As see every part.
type joinedErrors []error

// joinErrors joins the non-nil errors of errs; nil if there are none, the
// error itself if there is one.
func joinErrors(errs []error) error {
	var j joinedErrors
	for _, err := range errs {
		if err != nil {
			j = append(j, err)
		}
	}
	switch len(j) {
	case 0:
		return nil
	case 1:
		return j[0]
	}
	return j
}

func (j joinedErrors) Error() string {
	var b strings.Builder
	for i, err := range j {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

func (j joinedErrors) Unwrap() []error { return j }
