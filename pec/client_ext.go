package pec

import (
	"context"
	"crypto/rand"
	"fmt"
	"math"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

// Presence returns what a client names itself by in the PEC extension: its
// identifier at the point of presence it is registered with, and that
// point's address. ok is false during a failover, when the client has no
// registered session (the next connection then goes client-only).
func (c *Client) Presence() (id ClientID, at Addr, rtt time.Duration, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.cur
	if s == nil || c.closed || s.dead {
		return id, at, 0, false
	}
	s.pmu.Lock()
	rtt = s.rtt
	s.pmu.Unlock()
	return s.id, Addr{Transport: s.transport, HostPort: s.addr}, rtt, true
}

// NewExtension returns the PEC extension for one connection to the server
// named serverName (the ClientHello's SNI) at port, asking for requests:
// the client's identifier at its point of presence, a fresh nonce and a
// ticket for exactly that nonce, name, port and requests, which lets a
// PEC server submit for the client once. ok is false when the client has
// no registered session (during a failover) or has run out of tickets on
// it: the connection then goes without the extension, client-only.
func (c *Client) NewExtension(serverName string, port int, requests []pkie.Request) (e *Extension, ok bool) {
	if port < 0 || port > 65535 || len(requests) == 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.cur
	if s == nil || c.closed || s.dead || s.ticketKey == nil || s.tickets == math.MaxUint32 {
		return nil, false
	}
	e = &Extension{ClientID: s.id, Requests: requests, Cloud: Addr{Transport: s.transport, HostPort: s.addr}}
	rand.Read(e.Nonce[:])
	e.Ticket = Ticket(pecwire.MintTicket(s.ticketKey, s.tickets, &pecwire.Submit{
		ClientID: pecwire.ClientID(s.id), Nonce: pecwire.Nonce(e.Nonce), ServerName: serverName, Port: uint16(port), Requests: requests}))
	s.tickets++
	return e, true
}

// SubmitExpected turns p, an expectation from Expect that has not yet
// received every outcome, into a submission of sub by the client itself:
// the client–server deployment's fallback when the server did not forward
// (a stock server, a stripped extension) or its proofs are late. sub's
// Nonce is p's; its requests go out whole, not just the missing ones, so
// that a submission the server already made with the same chain and
// requests is the same to the cloud, which proves it once. It reports
// false, and sends nothing, when p has every outcome already or has ended.
// Once converted, p is resubmitted after a failover as Submit's are.
func (c *Client) SubmitExpected(ctx context.Context, p *Pending, sub Submission) (bool, error) {
	return c.submitExpected(ctx, p, sub, nil)
}

// submitExpected is SubmitExpected calling mark, if set, under the lock
// that orders it before any outcome delivered afterwards.
func (c *Client) submitExpected(ctx context.Context, p *Pending, sub Submission, mark func()) (bool, error) {
	if sub.Budget <= 0 || len(sub.Requests) == 0 {
		return false, fmt.Errorf("pec: submission without a budget or requests")
	}
	if c.priv != nil {
		return c.priv.submitFor(ctx, p, sub, mark)
	}
	m := &pecwire.Submit{
		Nonce: pecwire.Nonce(p.nonce), Budget: sub.Budget, ServerName: sub.ServerName, Port: uint16(sub.Port),
		Requests: sub.Requests, Chain: sub.Chain,
	}
	frame, err := pecwire.Marshal(m)
	if err != nil {
		return false, fmt.Errorf("pec: submission: %w", err)
	}
	c.mu.Lock()
	if p.done || p.sub != nil || c.pending[p.nonce] != p {
		c.mu.Unlock()
		return false, nil
	}
	p.sub, p.size = m, len(frame)-4
	if mark != nil {
		mark()
	}
	s := c.cur
	var out *pecwire.Submit
	if s != nil {
		// After a failover the identifier the server was told is gone
		// and only this submission can bring the proofs; otherwise it
		// joins the server's, if the server made one.
		out = c.assignLocked(p, s)
	}
	if out != nil {
		out.Requests = m.Requests
		out.Budget = min(out.Budget, sub.Budget)
		p.digest = out.Digest() // the requests sent, whole
	}
	p.hold = false
	c.mu.Unlock()
	if out != nil {
		deadline := time.Now().Add(out.Budget)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		if err := s.conn.Send(out, deadline); err != nil {
			c.failed(s, time.Now(), fmt.Errorf("submit: %w", err), false)
		}
	}
	return true, nil
}

// Forget ends p at once, delivering ProofFailed for what is missing: the
// connection it was for is gone.
func (c *Client) Forget(p *Pending, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.finishAllLocked(p, ProofFailed, p.cloud, why)
}

// complete reports whether p has ended (every outcome delivered, or the
// budget spent).
func (c *Client) complete(p *Pending) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return p.done
}
