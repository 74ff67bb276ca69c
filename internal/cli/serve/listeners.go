package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/pkie/pkie/internal/cli/command"
	"github.com/pkie/pkie/internal/httplimit"
)

// sessionListeners are the sockets of a role that serves PEC sessions
// (the cloud, the forwarder): QUIC, TLS over TCP, and plain HTTP for
// /healthz and /metrics. Each is nil when its address is empty.
type sessionListeners struct {
	quic      net.PacketConn
	tcp, http net.Listener
}

// bindSessionListeners binds the addresses that are not empty, before
// anything else starts, so that a busy port is found at once. On an error
// the sockets already bound are closed.
func bindSessionListeners(quicAddr, tcpAddr, httpAddr string) (*sessionListeners, error) {
	l := &sessionListeners{}
	var err error
	if quicAddr != "" {
		if l.quic, err = net.ListenPacket("udp", quicAddr); err != nil {
			return nil, fmt.Errorf("--quic: %w", err)
		}
	}
	if tcpAddr != "" {
		if l.tcp, err = net.Listen("tcp", tcpAddr); err != nil {
			l.Close()
			return nil, fmt.Errorf("--tcp: %w", err)
		}
	}
	if httpAddr != "" {
		if l.http, err = net.Listen("tcp", httpAddr); err != nil {
			l.Close()
			return nil, fmt.Errorf("--http: %w", err)
		}
	}
	return l, nil
}

// Close closes every socket bound.
func (l *sessionListeners) Close() {
	if l.quic != nil {
		l.quic.Close()
	}
	if l.tcp != nil {
		l.tcp.Close()
	}
	if l.http != nil {
		l.http.Close()
	}
}

// sessionRole is what serve needs of a role that serves PEC sessions: the
// cloud and the forwarder both have these.
type sessionRole interface {
	ServeQUIC(ctx context.Context, pc net.PacketConn) error
	ServeTCP(ctx context.Context, ln net.Listener) error
	Handler() http.Handler
}

// serve serves every socket bound: QUIC and TCP sessions of r, and r's
// /healthz and /metrics on the HTTP socket behind caps, which keep scrapes
// within the descriptors sessions leave. It returns the addresses served
// and a wait function that prints the startup lines (info in --json),
// then blocks until every server has ended and returns the first error;
// an error of one server, or of printing, cancels ctx to end the others.
func (l *sessionListeners) serve(ctx context.Context, cancel context.CancelFunc, r sessionRole, caps httplimit.Options) (map[string]string, func(env *command.Env, asJSON bool, info map[string]any) error) {
	errc := make(chan error, 3)
	n := 0
	addrs := map[string]string{}
	if l.quic != nil {
		addrs["quic"] = l.quic.LocalAddr().String()
		n++
		go func() { errc <- r.ServeQUIC(ctx, l.quic) }()
	}
	if l.tcp != nil {
		addrs["tcp"] = l.tcp.Addr().String()
		n++
		go func() { errc <- r.ServeTCP(ctx, l.tcp) }()
	}
	if l.http != nil {
		addrs["http"] = l.http.Addr().String()
		srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
		context.AfterFunc(ctx, func() { srv.Close() })
		n++
		go func() {
			err := srv.Serve(httplimit.Listen(srv, l.http, caps))
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			errc <- err
		}()
	}
	wait := func(env *command.Env, asJSON bool, info map[string]any) error {
		info["listening"] = addrs
		first := printServing(env, asJSON, info, listeningLines(addrs)...)
		if first != nil {
			cancel()
		}
		for range n {
			if err := <-errc; err != nil && first == nil {
				first = err
				cancel()
			}
		}
		cancel()
		return first
	}
	return addrs, wait
}

// listeningLines are the text startup lines of a server with several
// listeners, in a fixed order.
func listeningLines(addrs map[string]string) []string {
	var lines []string
	for _, k := range []string{"quic", "tcp", "http"} {
		if a, ok := addrs[k]; ok {
			lines = append(lines, "listening "+k+" "+a)
		}
	}
	return lines
}
