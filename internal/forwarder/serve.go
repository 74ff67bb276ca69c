package forwarder

import (
	"context"
	"net"

	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/sessionserver"
)

// sessionServer is how the forwarder accepts sessions: the bounds of its
// Config, its logger, and a QUIC stateless reset key derived from its TLS
// key, so a client of a restarted forwarder learns at its next packet that
// its session is gone.
func (f *Forwarder) sessionServer() *sessionserver.Server {
	return &sessionserver.Server{
		Role: "forwarder", TLS: f.tls, QUIC: f.QUICConfig(), ResetKey: f.resetKey,
		HandshakeTimeout: f.cfg.HandshakeTimeout, MaxFrame: f.cfg.MaxFrame, Logger: f.log,
		Admit: func(addr string) string {
			why := f.admit(addr)
			if why != "" {
				f.m.refused.WithLabelValues(why).Inc()
			}
			return why
		},
		Leave: f.leave,
		Session: func(ctx context.Context, conn *pecwire.Conn, addr string) {
			// The handshake's VerifyConnection has refused any unknown
			// certificate already: a peer with one is a configured cloud,
			// one without a client.
			cloud, _ := f.peerCloud(conn.ConnectionState())
			f.serveSession(ctx, conn, addr, cloud)
		},
		Go: f.wg.Go,
	}
}

// ServeQUIC serves sessions over QUIC on pc until ctx ends. It does not
// close pc.
func (f *Forwarder) ServeQUIC(ctx context.Context, pc net.PacketConn) error {
	return f.sessionServer().ServeQUIC(ctx, pc)
}

// ServeTCP serves sessions over TLS on ln until ctx ends, then closes ln.
func (f *Forwarder) ServeTCP(ctx context.Context, ln net.Listener) error {
	return f.sessionServer().ServeTCP(ctx, ln)
}
