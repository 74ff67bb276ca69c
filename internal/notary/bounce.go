package notary

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pkie/pkie/internal/httplimit"
)

// Bouncer is Convergence's privacy relay: a plain-HTTP listener that accepts
// CONNECT only towards configured notary addresses, so a client can reach
// another notary through this one and that notary never learns the client's
// address. It sees who asks but, the tunnel being TLS to the other notary,
// never what is asked.
type Bouncer struct {
	// IdleTimeout closes a tunnel through which no byte has moved, either
	// way, for this long, and one whose client (or notary) has stopped
	// reading what the other end sends; it also bounds the bouncer's own
	// reads and writes before a tunnel opens. NewBouncer sets 60 s.
	IdleTimeout time.Duration
	// Conns bounds the bouncer's connections, tunnels included, in total
	// and per client address; zero fields mean httplimit's defaults.
	Conns httplimit.Options

	allowed map[string]bool
	sem     chan struct{}
	dialer  net.Dialer
}

// NewBouncer allows CONNECT to the given host:port notary addresses, with at
// most maxConns tunnels open at once (0 means 1024).
func NewBouncer(allowed []string, maxConns int) *Bouncer {
	if maxConns <= 0 {
		maxConns = 1024
	}
	b := &Bouncer{allowed: map[string]bool{}, sem: make(chan struct{}, maxConns), dialer: net.Dialer{Timeout: 5 * time.Second}, IdleTimeout: 60 * time.Second}
	for _, a := range allowed {
		b.allowed[strings.ToLower(a)] = true
	}
	return b
}

func (b *Bouncer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		w.Header().Set("Allow", "CONNECT")
		httpError(w, http.StatusMethodNotAllowed, "this is a notary bouncer: only CONNECT to configured notaries")
		return
	}
	// Like Convergence's bouncer, the request line names one notary and
	// X-Convergence-Notary headers (host+port, or host:port) name its
	// replicas: every one must be allowed, all are tried at once, and the
	// first to connect carries the tunnel.
	dests, err := destinations(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	for _, d := range dests {
		if !b.allowed[d] {
			httpError(w, http.StatusForbidden, "CONNECT to "+clip(d)+" is not allowed: not a configured notary")
			return
		}
	}
	select {
	case b.sem <- struct{}{}:
		defer func() { <-b.sem }()
	default:
		httpError(w, http.StatusServiceUnavailable, "bouncer overloaded")
		return
	}
	up, target, err := b.dialFirst(r.Context(), dests)
	if err != nil {
		slog.Warn("bouncer: no destination answered", "destinations", dests, "err", err)
		httpError(w, http.StatusBadGateway, "cannot reach "+strings.Join(dests, ", "))
		return
	}
	defer up.Close()
	hj, ok := w.(http.Hijacker)
	if !ok {
		httpError(w, http.StatusInternalServerError, "connection cannot be hijacked")
		return
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	t := &tunnel{idle: b.idle()}
	conn.SetDeadline(time.Time{})
	conn.SetWriteDeadline(time.Now().Add(t.idle))
	head := "HTTP/1.1 200 Connection Established\r\nProxy-Agent: pkie\r\nX-Convergence-Notary: " + plusForm(target) + "\r\n\r\n"
	if _, err := conn.Write([]byte(head)); err != nil {
		return
	}
	// Bytes the client sent after the CONNECT request may already be
	// buffered.
	if n := rw.Reader.Buffered(); n > 0 {
		buf, _ := rw.Reader.Peek(n)
		up.SetWriteDeadline(time.Now().Add(t.idle))
		if _, err := up.Write(buf); err != nil {
			return
		}
	}
	t.touch()
	done := make(chan struct{})
	go func() { t.relay(up, conn); close(done) }()
	t.relay(conn, up)
	<-done
}

// maxDestinations bounds the notaries one CONNECT may name: a bundle lists
// a few replicas, and each costs the bouncer a dial.
const maxDestinations = 8

// destinations returns the CONNECT target and every X-Convergence-Notary
// header value, as lower-case host:port, without duplicates.
func destinations(r *http.Request) ([]string, error) {
	var out []string
	add := func(d string) error {
		d = strings.ToLower(strings.TrimSpace(d))
		if i := strings.LastIndexByte(d, '+'); i >= 0 && !strings.Contains(d[i:], ":") {
			d = net.JoinHostPort(strings.Trim(d[:i], "[]"), d[i+1:])
		}
		if _, _, err := net.SplitHostPort(d); err != nil {
			return fmt.Errorf("destination %q is not host:port or host+port", clip(d))
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
		return nil
	}
	if err := add(r.Host); err != nil {
		return nil, err
	}
	for _, v := range r.Header.Values("X-Convergence-Notary") {
		for _, d := range strings.Split(v, ",") {
			if err := add(d); err != nil {
				return nil, err
			}
		}
	}
	if len(out) > maxDestinations {
		return nil, fmt.Errorf("%d destinations; at most %d", len(out), maxDestinations)
	}
	return out, nil
}

// dialFirst dials every destination at once and returns the first
// connection made, closing the others.
func (b *Bouncer) dialFirst(ctx context.Context, dests []string) (net.Conn, string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		c    net.Conn
		dest string
		err  error
	}
	ch := make(chan result, len(dests))
	for _, d := range dests {
		go func() {
			c, err := b.dialer.DialContext(ctx, "tcp", d)
			ch <- result{c, d, err}
		}()
	}
	var errs []error
	var won *result
	for range dests {
		r := <-ch
		switch {
		case r.err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", r.dest, r.err))
		case won == nil:
			won = &r
			cancel() // the others need not finish connecting
		default:
			r.c.Close()
		}
	}
	if won == nil {
		return nil, "", errors.Join(errs...)
	}
	return won.c, won.dest, nil
}

// plusForm writes host:port as Convergence's host+port.
func plusForm(hostport string) string {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	return h + "+" + p
}

func (b *Bouncer) idle() time.Duration {
	if b.IdleTimeout <= 0 {
		return 60 * time.Second
	}
	return b.IdleTimeout
}

// tunnel relays bytes both ways between a client and a notary. Both
// directions' reads and writes have deadlines: a hijacked connection has
// none of the server's, and without one a client that stops reading would
// block the relay's write, and so the tunnel and its slot, forever.
type tunnel struct {
	idle time.Duration
	last atomic.Int64 // UnixNano of the last byte moved either way
}

func (t *tunnel) touch() { t.last.Store(time.Now().UnixNano()) }

// relay copies src to dst until src ends. A clean end of stream is passed
// on as a half-close, and the other direction goes on. Anything else ends
// the whole tunnel: a read idle for IdleTimeout while the other direction
// is idle too, a write that could not complete within IdleTimeout (the
// receiver stopped reading), or an error.
func (t *tunnel) relay(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		src.SetReadDeadline(time.Now().Add(t.idle))
		n, err := src.Read(buf)
		if n > 0 {
			t.touch()
			dst.SetWriteDeadline(time.Now().Add(t.idle))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
			t.touch()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && time.Since(time.Unix(0, t.last.Load())) < t.idle {
			continue // this way is quiet, the other is not
		}
		if err == io.EOF {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
				return
			}
		}
		if err != nil {
			break
		}
	}
	// Unblock the other direction, whatever it is waiting on.
	src.Close()
	dst.Close()
}

// ServeBouncer serves b over plain HTTP on ln until ctx ends.
func ServeBouncer(ctx context.Context, ln net.Listener, b *Bouncer) error {
	// Without ReadTimeout and IdleTimeout a client could hold a connection
	// (and its goroutine) forever: idle after a refused request, or
	// trickling a request body. A tunnel clears these deadlines once
	// hijacked and is bounded by its own idle timeout instead.
	srv := &http.Server{
		Handler:           b,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       b.idle(),
		WriteTimeout:      b.idle(),
		IdleTimeout:       b.idle(),
		MaxHeaderBytes:    4 << 10,
		ErrorLog:          slog.NewLogLogger(slog.DiscardHandler, slog.LevelError),
	}
	go func() { <-ctx.Done(); srv.Close() }()
	err := srv.Serve(httplimit.Listen(srv, ln, b.Conns))
	if err == http.ErrServerClosed {
		return nil
	}
	return err
}
