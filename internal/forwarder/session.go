package forwarder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/pkie/pkie/internal/pecwire"
)

// session is one client's, or one cloud's, message stream.
type session struct {
	f      *Forwarder
	conn   *pecwire.Conn
	addr   string
	out    chan pecwire.Message
	ctx    context.Context
	cancel context.CancelCauseFunc

	// cloud is the name of the cloud the session authenticated as with
	// its client certificate, "" for a client: only a cloud's session
	// may send proofs and rejections under identifiers.
	cloud      string
	id         pecwire.ClientID
	registered bool
	final      pecwire.Message

	bucketMu sync.Mutex
	tokens   float64
	last     time.Time
}

var (
	errIdle       = errors.New("idle")
	errSlowReader = errors.New("slow_reader")
	errProtocol   = errors.New("protocol")
	errTooLarge   = errors.New("too_large")
	errClosed     = errors.New("closed")
	errWrite      = errors.New("write")
)

func (f *Forwarder) serveSession(ctx context.Context, conn *pecwire.Conn, addr, cloud string) {
	sctx, cancel := context.WithCancelCause(ctx)
	s := &session{f: f, conn: conn, addr: addr, cloud: cloud, out: make(chan pecwire.Message, f.cfg.MaxPending),
		ctx: sctx, cancel: cancel, tokens: 2 * f.cfg.SubmitRate, last: time.Now()}
	f.m.sessionsOpened.WithLabelValues(conn.Transport()).Inc()
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		s.writeLoop()
	}()
	stop := context.AfterFunc(sctx, func() { conn.Close() })
	err := s.readLoop()
	closedByCancel := !stop()
	s.cancel(err)
	<-writerDone
	if s.registered {
		f.unregister(s.id, s)
	}
	if s.final != nil && !closedByCancel {
		conn.Shutdown(s.final, time.Now().Add(min(f.cfg.WriteTimeout, 2*time.Second)))
	}
	conn.Close()
	f.leave(addr)
	f.log.Debug("session ended", "remote", conn.RemoteAddr().String(), "reason", context.Cause(sctx))
}

func (s *session) readLoop() error {
	f := s.f
	deadline := time.Now().Add(f.cfg.HandshakeTimeout)
	for {
		// A session that is neither a registered client nor an
		// authenticated cloud has the handshake timeout, not the idle
		// one, to become either: it cannot hold a place by pinging.
		if s.registered || s.cloud != "" {
			deadline = time.Now().Add(f.idleTimeout())
		}
		m, err := s.conn.Recv(deadline)
		if err != nil {
			return s.recvError(err)
		}
		f.tap("in", m)
		if s.cloud != "" {
			if err := s.fromCloud(m); err != nil {
				return err
			}
			continue
		}
		switch m := m.(type) {
		case *pecwire.Register:
			if s.registered {
				return s.fail(pecwire.RejectInvalid, "Register must be a session's first message", errProtocol)
			}
			if m.Version != pecwire.Version {
				return s.fail(pecwire.RejectInvalid, fmt.Sprintf("protocol version %d, this forwarder speaks %d", m.Version, pecwire.Version), errProtocol)
			}
			id, err := f.register(s)
			if err != nil {
				return s.fail(pecwire.RejectBusy, "too many clients registered: try later", errBusy)
			}
			s.id, s.registered = id, true
			f.m.registrations.Inc()
			if !s.push(&pecwire.Registered{Version: pecwire.Version, ClientID: id, Keepalive: f.cfg.Keepalive, MaxFrame: uint32(f.cfg.MaxFrame)}) {
				return errSlowReader
			}
		case *pecwire.Ping:
			if !s.push(&pecwire.Pong{Seq: m.Seq}) {
				return errSlowReader
			}
		case *pecwire.EphIDRequest:
			if !s.registered {
				return s.fail(pecwire.RejectInvalid, "register before asking for identifiers", errProtocol)
			}
			if !s.allow(float64(m.Count) / float64(pecwire.MaxEphIDBatch)) {
				return s.fail(pecwire.RejectLimited, "over the rate of identifier requests", errProtocol)
			}
			exp := time.Now().Add(f.cfg.EphIDLifetime)
			batch := &pecwire.EphIDs{Expires: uint64(exp.Unix())}
			for range m.Count {
				id, err := f.ids.issue(s.id, exp)
				if err != nil {
					f.log.Error("issuing an identifier", "err", err)
					return s.fail(pecwire.RejectBusy, "the forwarder cannot issue identifiers now", errProtocol)
				}
				batch.IDs = append(batch.IDs, id)
			}
			f.m.issued.Add(float64(m.Count))
			if !s.push(batch) {
				return errSlowReader
			}
		case *pecwire.SealedSubmit:
			if !s.registered {
				return s.fail(pecwire.RejectInvalid, "register before submitting", errProtocol)
			}
			if !s.submit(m) {
				return errSlowReader
			}
		case *pecwire.SealedProof, *pecwire.EphIDReject:
			// Relaying them from anyone would let whoever saw an EphID
			// in a ClientHello fail the client's connection or spend its
			// identifier's budget.
			f.m.relayed.WithLabelValues("unauthenticated").Inc()
			return s.fail(pecwire.RejectInvalid, "only a cloud authenticated by its client certificate sends proofs and rejections", errProtocol)
		default:
			return s.fail(pecwire.RejectInvalid, fmt.Sprintf("the forwarder does not take message type %d", m.Type()), errProtocol)
		}
	}
}

// fromCloud handles one message on an authenticated cloud's session:
// proofs and rejections under identifiers, and pings.
func (s *session) fromCloud(m pecwire.Message) error {
	switch m := m.(type) {
	case *pecwire.Ping:
		if !s.push(&pecwire.Pong{Seq: m.Seq}) {
			return errSlowReader
		}
	case *pecwire.SealedProof:
		s.f.route(m.EphID, m)
	case *pecwire.EphIDReject:
		s.f.route(m.EphID, m)
	default:
		return s.fail(pecwire.RejectInvalid, fmt.Sprintf("a cloud's session sends proofs, rejections and pings, not message type %d", m.Type()), errProtocol)
	}
	return nil
}

// submit relays a client's sealed submission to its cloud, after checking
// that the identifier is the client's own and unused.
func (s *session) submit(m *pecwire.SealedSubmit) bool {
	f := s.f
	refuse := func(code pecwire.RejectCode, text string) bool {
		f.m.submissions.WithLabelValues(code.String()).Inc()
		return s.push(&pecwire.EphIDReject{EphID: m.EphID, Code: code, Text: text})
	}
	if !s.allow(1) {
		return refuse(pecwire.RejectLimited, "over the rate of submissions")
	}
	client, exp, err := f.ids.open(m.EphID)
	if err != nil || client != s.id {
		// Another client's identifier is as good as none: it would let
		// one client have proofs sent to another.
		return refuse(pecwire.RejectReused, "not an identifier issued to this session")
	}
	u := f.clouds[m.Cloud]
	if u == nil {
		return refuse(pecwire.RejectInvalid, "this forwarder relays to no such cloud")
	}
	if !pecwire.EnvelopePadded(len(m.Envelope)) {
		// Its length has told the path what it holds already; relayed,
		// the cloud would only say that it does not open. Refused
		// before its use, so the identifier is not spent.
		return refuse(pecwire.RejectInvalid, fmt.Sprintf("a sealed submission of %d bytes is not padded to a size class: this client predates padding and must be updated", len(m.Envelope)))
	}
	if err := f.used.open(m.EphID, exp, time.Now()); err != nil {
		code := pecwire.RejectReused
		if errors.Is(err, errFull) {
			code = pecwire.RejectBusy
		}
		return refuse(code, err.Error())
	}
	if err := u.send(s.ctx, m); err != nil {
		f.log.Warn("relaying to a cloud failed", "cloud", u.bundle.Name, "err", err)
		return refuse(pecwire.RejectBusy, "the cloud is unreachable from the forwarder")
	}
	f.m.submissions.WithLabelValues("relayed").Inc()
	return true
}

// allow takes cost tokens from the session's bucket (SubmitRate a second,
// burst twice that).
func (s *session) allow(cost float64) bool {
	s.bucketMu.Lock()
	defer s.bucketMu.Unlock()
	now := time.Now()
	rate := s.f.cfg.SubmitRate
	s.tokens = min(2*rate, s.tokens+now.Sub(s.last).Seconds()*rate)
	s.last = now
	if s.tokens < cost {
		return false
	}
	s.tokens -= cost
	return true
}

func (s *session) recvError(err error) error {
	var tl *pecwire.FrameTooLarge
	var ne net.Error
	switch {
	case s.ctx.Err() != nil:
		return context.Cause(s.ctx)
	case errors.As(err, &tl):
		return s.fail(pecwire.RejectTooLarge, fmt.Sprintf("frame of %d bytes, this forwarder accepts %d", tl.Size, tl.Max), errTooLarge)
	case errors.As(err, &ne) && ne.Timeout():
		return errIdle
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return errClosed
	}
	return s.fail(pecwire.RejectInvalid, "malformed message", fmt.Errorf("%w: %w", errProtocol, err))
}

func (s *session) fail(code pecwire.RejectCode, text string, reason error) error {
	s.final = &pecwire.Error{Code: code, Text: text}
	return reason
}

// push queues m; a session with MaxPending messages queued is dropped.
func (s *session) push(m pecwire.Message) bool {
	if s.ctx.Err() != nil {
		return false
	}
	select {
	case s.out <- m:
		return true
	default:
		s.cancel(errSlowReader)
		return false
	}
}

func (s *session) writeLoop() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case m := <-s.out:
			s.f.tap("out", m)
			if err := s.conn.Send(m, time.Now().Add(s.f.cfg.WriteTimeout)); err != nil {
				s.cancel(fmt.Errorf("%w: %w", errWrite, err))
				return
			}
		}
	}
}
