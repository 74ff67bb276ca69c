package cloud

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie/internal/pecwire"
)

// session is one client's or submitter's message stream.
type session struct {
	c         *Cloud
	conn      *pecwire.Conn
	addr      string // the share it counts against
	transport string
	out       chan pecwire.Message
	ctx       context.Context
	cancel    context.CancelCauseFunc

	// Set once by the reading goroutine before any job can see them.
	id         pecwire.ClientID
	registered bool
	submitted  bool
	final      pecwire.Message // the Error that ends the session, if any

	// ticketKey is the key the client mints its PEC extension's tickets
	// under (pecwire.Conn.TicketKey); set before the session is
	// registered, read by other sessions' submissions for this client.
	ticketKey []byte

	mu       sync.Mutex
	inflight map[dupKey]*job      // submissions for this client being proved
	done     map[dupKey]time.Time // recently proved ones, for duplicates
	doneFIFO []doneEntry          // done's keys, oldest first
	// ownJobs counts the jobs being proved for this client that it
	// submitted itself, otherJobs those other sessions submitted, and
	// otherBy the latter per submitter address: two shares, so that
	// submissions by others never take the room of the client's own, and
	// one submitter never takes all of the others' share.
	ownJobs, otherJobs int
	otherBy            map[string]int
	// tickets are the ticket counters used by others' submissions.
	tickets ticketWindow
	// reserved counts the places in out promised to outcomes of jobs
	// being proved for this client, reservedOthers those of jobs that
	// other sessions submitted. Guarded by mu, like every send on out,
	// so that len(out)+reserved never exceeds cap(out): a job's outcome
	// always has its place, and only the session's own traffic can
	// overflow its queue.
	reserved       int
	reservedOthers int
	// bucket limits this session's submissions, beside its address's.
	bucket tokenBucket
}

// doneEntry is one remembered submission, in the order proved.
type doneEntry struct {
	key dupKey
	at  time.Time
}

// Reasons a session ends, for logs and metrics.
var (
	errIdle       = errors.New("idle")
	errSlowReader = errors.New("slow_reader")
	errProtocol   = errors.New("protocol")
	errTooLarge   = errors.New("too_large")
	errMalformed  = errors.New("malformed")
	errClosed     = errors.New("closed")
	errShutdown   = errors.New("shutdown")
	errWrite      = errors.New("write")
	errFull       = errors.New("busy")
)

// serveSession runs one session until it ends, then frees what it held. It
// owns addr's admission.
func (c *Cloud) serveSession(ctx context.Context, conn *pecwire.Conn, addr string) {
	sctx, cancel := context.WithCancelCause(ctx)
	s := &session{
		c: c, conn: conn, addr: addr, transport: conn.Transport(),
		out: make(chan pecwire.Message, c.cfg.MaxPending), ctx: sctx, cancel: cancel,
		inflight: map[dupKey]*job{}, done: map[dupKey]time.Time{}, otherBy: map[string]int{},
		bucket: tokenBucket{rate: c.cfg.SessionSubmitRate, burst: float64(c.cfg.SessionSubmitBurst)},
	}
	c.m.sessionsOpened.WithLabelValues(s.transport).Inc()
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		s.writeLoop()
	}()
	// A cancelled session (write failure, slow reader, shutdown) must not
	// leave the reader blocked until the idle timeout.
	stop := context.AfterFunc(sctx, func() { conn.Close() })
	err := s.readLoop()
	closedByCancel := !stop()
	s.cancel(err)
	<-writerDone
	if s.registered {
		c.unregister(s.id, s)
	}
	s.forgetAll()
	if s.final != nil && !closedByCancel {
		// Tell the peer why, and let the message reach it before the
		// connection goes.
		conn.Shutdown(s.final, time.Now().Add(min(c.cfg.WriteTimeout, maxLinger)))
	}
	conn.Close()
	c.leave(addr)
	reason := context.Cause(sctx)
	if errors.Is(reason, context.Canceled) && ctx.Err() != nil {
		reason = errShutdown
	}
	c.m.sessionsClosed.WithLabelValues(reasonLabel(reason)).Inc()
	c.log.Debug("session ended", "transport", s.transport, "remote", conn.RemoteAddr().String(),
		"client", s.idString(), "reason", reason)
}

func reasonLabel(err error) string {
	for _, e := range []error{errIdle, errSlowReader, errProtocol, errTooLarge, errMalformed, errClosed, errShutdown, errWrite, errFull} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return "other"
}

func (s *session) idString() string {
	if !s.registered {
		return "-"
	}
	return s.id.String()
}

// readLoop reads the session's messages until it ends and returns why.
func (s *session) readLoop() error {
	c := s.c
	deadline := time.Now().Add(c.cfg.HandshakeTimeout)
	for {
		m, err := s.conn.Recv(deadline)
		if err != nil {
			return s.recvError(err)
		}
		deadline = time.Now().Add(c.idleTimeout())
		switch m := m.(type) {
		case *pecwire.Register:
			if s.registered || s.submitted {
				return s.fail(pecwire.RejectInvalid, "Register must be a session's first message", errProtocol)
			}
			if m.Version != pecwire.Version {
				return s.fail(pecwire.RejectInvalid, fmt.Sprintf("protocol version %d, this cloud speaks %d", m.Version, pecwire.Version), errProtocol)
			}
			// The key exists before the identifier is published: a
			// submission for the client may arrive at once.
			key, err := s.conn.TicketKey()
			if err != nil {
				c.log.Error("exporting a session's ticket key", "err", err)
				return s.fail(pecwire.RejectInvalid, "the session's TLS connection exports no keying material", errProtocol)
			}
			s.ticketKey = key
			id, err := c.register(s)
			if err != nil {
				c.m.rejects.WithLabelValues(pecwire.RejectBusy.String()).Inc()
				if !errors.Is(err, errBusy) {
					c.log.Error("registration failed", "err", err)
				}
				return s.fail(pecwire.RejectBusy, "too many clients registered: try another point of presence", errFull)
			}
			s.id, s.registered = id, true
			c.m.registrations.Inc()
			if !s.push(&pecwire.Registered{Version: pecwire.Version, ClientID: id, Keepalive: c.cfg.Keepalive, MaxFrame: uint32(c.cfg.MaxFrame)}) {
				return errSlowReader
			}
		case *pecwire.Ping:
			if !s.push(&pecwire.Pong{Seq: m.Seq}) {
				return errSlowReader
			}
		case *pecwire.Submit:
			s.submitted = true
			if !c.submit(s, m, nil) {
				return errSlowReader
			}
		case *pecwire.ServerSubmit:
			s.submitted = true
			if !c.submit(s, &m.Submit, &m.Ticket) {
				return errSlowReader
			}
		case *pecwire.SealedSubmit:
			s.submitted = true
			if !c.submitSealed(s, m) {
				return errSlowReader
			}
		case *pecwire.ServerSealed:
			s.submitted = true
			if !c.submitServerSealed(s, m) {
				return errSlowReader
			}
		default:
			return s.fail(pecwire.RejectInvalid, fmt.Sprintf("a client does not send message type %d", m.Type()), errProtocol)
		}
	}
}

// recvError turns a failed Recv into the reason the session ends, telling
// the peer when it broke the protocol.
func (s *session) recvError(err error) error {
	var tl *pecwire.FrameTooLarge
	var ne net.Error
	switch {
	case s.ctx.Err() != nil:
		return context.Cause(s.ctx)
	case errors.As(err, &tl):
		return s.fail(pecwire.RejectTooLarge, fmt.Sprintf("frame of %d bytes, this cloud accepts %d", tl.Size, tl.Max), errTooLarge)
	case errors.As(err, &ne) && ne.Timeout():
		return errIdle
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return errClosed
	case isDecodeError(err):
		return s.fail(pecwire.RejectInvalid, "malformed message", fmt.Errorf("%w: %w", errMalformed, err))
	}
	return fmt.Errorf("%w: %w", errClosed, err)
}

// isDecodeError reports whether err is pecwire's refusal of a frame's
// bytes (Unmarshal's errors, which wrap no transport error) rather than a
// transport failure; transport failures were sorted out before.
func isDecodeError(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "pecwire: ") && !strings.HasPrefix(msg, "pecwire: frame body")
}

// maxLinger bounds how long an ending session waits for its last message
// to be taken.
const maxLinger = 2 * time.Second

// fail arranges for the peer to be told why its session ends and returns
// reason.
func (s *session) fail(code pecwire.RejectCode, text string, reason error) error {
	s.c.m.rejects.WithLabelValues(code.String()).Inc()
	s.final = &pecwire.Error{Code: code, Text: text}
	return reason
}

// push queues one of the session's own messages (Registered, Pong, a
// Reject of its submission). It returns false, and ends the session, when
// the queue has no place left beside those reserved for outcomes: a peer
// that does not read its messages gets no unbounded buffer.
func (s *session) push(m pecwire.Message) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return false
	}
	if len(s.out)+s.reserved >= cap(s.out) {
		s.cancel(errSlowReader)
		return false
	}
	s.out <- m // the check above, under mu, leaves a place
	return true
}

// controlRoom is the part of a session's queue that outcomes may never
// take: the session's own Pongs and Rejects always find a place, whatever
// is being proved for it.
func (s *session) controlRoom() int { return max(1, cap(s.out)/8) }

// reserve promises n places in the queue to the outcomes of one job, or
// reports that there is no room. Jobs submitted by other sessions may hold
// at most half of the room for outcomes, so the client's own submissions
// always find some.
func (s *session) reserve(n int, own bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	room := cap(s.out) - s.controlRoom()
	if len(s.out)+s.reserved+n > room {
		return false
	}
	if !own && s.reservedOthers+n > room/2 {
		return false
	}
	s.reserved += n
	if !own {
		s.reservedOthers += n
	}
	return true
}

// unreserve gives back n places promised to a job that did not use them.
func (s *session) unreserve(n int, own bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserved -= n
	if !own {
		s.reservedOthers -= n
	}
}

// pushOutcome queues one outcome in a place reserved for it. It never ends
// the session: the place was promised, and overflow caused by others'
// submissions must not cost the client its session. A client that stops
// reading is still dropped, by its own traffic or by the write deadline.
func (s *session) pushOutcome(m pecwire.Message, own bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserved--
	if !own {
		s.reservedOthers--
	}
	if s.ctx.Err() != nil {
		return
	}
	select {
	case s.out <- m:
	default:
		// Unreachable while every send on out goes through mu.
		s.c.log.Error("outcome dropped: no place in a session's queue despite a reservation", "client", s.idString())
	}
}

// writeLoop writes queued messages until the session ends.
func (s *session) writeLoop() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case m := <-s.out:
			if err := s.conn.Send(m, time.Now().Add(s.c.cfg.WriteTimeout)); err != nil {
				s.cancel(fmt.Errorf("%w: %w", errWrite, err))
				return
			}
		}
	}
}
