// Package sessionserver accepts PEC sessions (internal/pecwire) over QUIC
// and over TLS on TCP, within bounds, for the roles that serve them: the
// cloud and the forwarder. What a session then does is the role's; how it
// is accepted, admitted, handshaken, logged and shut down is the same for
// both, so it is written once.
package sessionserver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/pkie/pkie/internal/httplimit"
	"github.com/pkie/pkie/internal/pecwire"
)

// Server accepts sessions. Fill in every field but Logger, ResetKey and Go,
// then call ServeQUIC and ServeTCP, each on its own goroutine.
type Server struct {
	// Role names the server in errors ("cloud: quic accept: …") and in the
	// reason a refused QUIC client is given ("cloud busy: sessions").
	Role string
	// TLS is the server's TLS configuration (pecwire.ServerTLS); QUIC its
	// QUIC settings.
	TLS  *tls.Config
	QUIC *quic.Config
	// ResetKey, when set, lets the QUIC transport answer packets of a
	// connection it does not know with a stateless reset (RFC 9000 §10.3):
	// derived from the TLS key (ResetKey), the same for a restarted
	// process or a replica, so a client learns at its next packet that its
	// session is gone, not after its idle timeout.
	ResetKey *quic.StatelessResetKey
	// HandshakeTimeout bounds the TLS handshake and, over QUIC, the wait
	// for the session's stream; MaxFrame the message bodies a session
	// reads (pecwire.Conn).
	HandshakeTimeout time.Duration
	MaxFrame         int
	// Logger receives a failed accept (Warn) and a session not opened
	// (Debug: scanners and impatient clients make many). Nil discards.
	Logger *slog.Logger

	// Admit counts a new session from the client address addr
	// (httplimit.ClientName) against the role's bounds, or returns the
	// name of the bound it is over, in which case the connection is
	// closed at once. Leave undoes an admission whose handshake failed.
	Admit func(addr string) (over string)
	Leave func(addr string)
	// Session runs one session whose handshake succeeded, until it ends;
	// it owns addr's admission from then on (it calls the role's leave).
	// ctx ends when the Serve call's context does.
	Session func(ctx context.Context, conn *pecwire.Conn, addr string)
	// Go runs f on a new goroutine; nil means the go statement. A role
	// passes its WaitGroup's Go so that its Wait waits for sessions too.
	Go func(f func())
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s *Server) spawn(f func()) {
	if s.Go != nil {
		s.Go(f)
		return
	}
	go f()
}

// ServeQUIC serves sessions over QUIC on pc until ctx ends, then closes
// every QUIC session, each with a CONNECTION_CLOSE, and returns nil. It
// does not close pc.
func (s *Server) ServeQUIC(ctx context.Context, pc net.PacketConn) error {
	tr := &quic.Transport{Conn: pc, StatelessResetKey: s.ResetKey}
	ln, err := tr.Listen(s.TLS, s.QUIC)
	if err != nil {
		return fmt.Errorf("%s: quic listen: %w", s.Role, err)
	}
	// Closing the transport destroys its connections without a word, so
	// the sessions are ended first, each with a CONNECTION_CLOSE that tells
	// its client to fail over now rather than after missed pings.
	ctx, cancel := context.WithCancel(ctx)
	var sessions sync.WaitGroup
	defer func() {
		cancel()
		ln.Close()
		sessions.Wait()
		tr.Close()
	}()
	for {
		qc, err := ln.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%s: quic accept: %w", s.Role, err)
		}
		addr := httplimit.ClientName(qc.RemoteAddr())
		if over := s.Admit(addr); over != "" {
			qc.CloseWithError(quic.ApplicationErrorCode(pecwire.RejectBusy), s.Role+" busy: "+over)
			continue
		}
		sessions.Add(1)
		s.spawn(func() {
			defer sessions.Done()
			hctx, hcancel := context.WithTimeout(ctx, s.HandshakeTimeout)
			conn, err := pecwire.AcceptQUIC(hctx, qc, s.MaxFrame)
			hcancel()
			if err != nil {
				s.Leave(addr)
				s.logger().Debug("quic session not opened", "remote", qc.RemoteAddr().String(), "err", err)
				return
			}
			s.Session(ctx, conn, addr)
		})
	}
}

// ServeTCP serves sessions over TLS on ln until ctx ends, then closes ln
// and returns nil; sessions end with ctx. An accept error other than a
// closed listener (out of file descriptors, say) is logged and retried
// after a backoff of up to a second: a listener that gave up would take
// the server down with it.
func (s *Server) ServeTCP(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("%s: tcp accept: %w", s.Role, err)
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.logger().Warn("tcp accept failed", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		addr := httplimit.ClientName(nc.RemoteAddr())
		if over := s.Admit(addr); over != "" {
			nc.Close()
			continue
		}
		s.spawn(func() {
			hctx, cancel := context.WithTimeout(ctx, s.HandshakeTimeout)
			conn, err := pecwire.AcceptTCP(hctx, nc, s.TLS, s.MaxFrame)
			cancel()
			if err != nil {
				s.Leave(addr)
				s.logger().Debug("tcp session not opened", "remote", nc.RemoteAddr().String(), "err", err)
				return
			}
			s.Session(ctx, conn, addr)
		})
	}
}

// ResetKey derives a QUIC stateless reset key from cert's private key: the
// same for every process of role holding that key, unknown to anyone else.
func ResetKey(role string, cert tls.Certificate) (*quic.StatelessResetKey, error) {
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("%s: TLS key: %w", role, err)
	}
	mac := hmac.New(sha256.New, der)
	mac.Write([]byte("pkie " + role + ": QUIC stateless reset key, v1"))
	var k quic.StatelessResetKey
	copy(k[:], mac.Sum(nil))
	return &k, nil
}
