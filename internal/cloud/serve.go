package cloud

import (
	"context"
	"net"

	"github.com/pkie/pkie/internal/sessionserver"
)

// sessionServer is how the cloud accepts sessions: the bounds of its
// Config, its logger, and a QUIC stateless reset key derived from its TLS
// key, so a replica that restarts with its data directory, or another
// replica with a copy of it, answers packets of a connection it does not
// know with a stateless reset and the client fails over at once.
func (c *Cloud) sessionServer() *sessionserver.Server {
	return &sessionserver.Server{
		Role: "cloud", TLS: c.tls, QUIC: c.QUICConfig(), ResetKey: c.resetKey,
		HandshakeTimeout: c.cfg.HandshakeTimeout, MaxFrame: c.cfg.MaxFrame, Logger: c.log,
		Admit: func(addr string) string {
			why := c.admit(addr)
			if why != "" {
				c.m.refused.WithLabelValues(why).Inc()
			}
			return why
		},
		Leave:   c.leave,
		Session: c.serveSession,
		Go:      c.wg.Go,
	}
}

// ServeQUIC serves sessions over QUIC on pc until ctx ends, then closes
// every QUIC session and returns nil. It does not close pc.
func (c *Cloud) ServeQUIC(ctx context.Context, pc net.PacketConn) error {
	return c.sessionServer().ServeQUIC(ctx, pc)
}

// ServeTCP serves sessions over TLS on ln until ctx ends, then closes
// ln and every TCP session and returns nil.
func (c *Cloud) ServeTCP(ctx context.Context, ln net.Listener) error {
	return c.sessionServer().ServeTCP(ctx, ln)
}
