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
	"strconv"
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
		if d, err := bounceDestination(a); err == nil {
			a = d
		}
		b.allowed[strings.ToLower(a)] = true
	}
	return b
}

// BounceHeader is the request header in which Convergence clients name
// further replicas of the notary they want to reach ("host+port"), and the
// response header in which the bouncer names the one it connected to.
const BounceHeader = "X-Convergence-Notary"

// maxBounceDestinations bounds the destinations one CONNECT may name: a
// notary bundle lists at most 32 replicas.
const maxBounceDestinations = 32

// bounceDestination normalizes a destination as Convergence clients write
// it, "host+port" in X-Convergence-Notary or "host:port" in the request
// line, to a lower-case host:port.
func bounceDestination(s string) (string, error) {
	s = strings.TrimSpace(s)
	var host, port string
	if i := strings.LastIndexByte(s, '+'); i >= 0 {
		host, port = strings.Trim(s[:i], "[]"), s[i+1:]
	} else {
		var err error
		if host, port, err = net.SplitHostPort(s); err != nil {
			return "", fmt.Errorf("destination %q is not host:port or host+port", clip(s))
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || ValidHost(host) != nil {
		return "", fmt.Errorf("destination %q is not host:port or host+port", clip(s))
	}
	return strings.ToLower(net.JoinHostPort(host, strconv.Itoa(n))), nil
}

// destinations returns the addresses a CONNECT asks for, as the original
// Convergence bouncer reads them: the request line's, then every
// X-Convergence-Notary header's, without repeats.
func destinations(r *http.Request) ([]string, error) {
	raw := []string{r.Host}
	for _, v := range r.Header.Values(BounceHeader) {
		// A host name cannot hold a comma; an intermediary may have
		// folded repeated headers into one.
		raw = append(raw, strings.Split(v, ",")...)
	}
	var out []string
	seen := map[string]bool{}
	for _, s := range raw {
		d, err := bounceDestination(s)
		if err != nil {
			return nil, err
		}
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	if len(out) > maxBounceDestinations {
		return nil, fmt.Errorf("CONNECT names %d destinations; at most %d allowed", len(out), maxBounceDestinations)
	}
	return out, nil
}

// ServeHTTP answers CONNECT as the original Convergence bouncer does: it
// refuses (403) a request naming any destination that is not a configured
// notary, dials every destination at once, relays to the first that
// answers and closes the others, and replies "200 Connection Established"
// with Proxy-Agent and X-Convergence-Notary naming the destination reached.
func (b *Bouncer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		w.Header().Set("Allow", "CONNECT")
		httpError(w, http.StatusMethodNotAllowed, "this is a notary bouncer: only CONNECT to configured notaries")
		return
	}
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
	up, dest, err := b.dialFirst(r.Context(), dests)
	if err != nil {
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
	host, port, _ := net.SplitHostPort(dest)
	reply := "HTTP/1.1 200 Connection Established\r\nProxy-Agent: pkie\r\n" + BounceHeader + ": " + host + "+" + port + "\r\n\r\n"
	if _, err := io.WriteString(conn, reply); err != nil {
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

// dialFirst dials every destination at once and returns the first
// connection made, closing the rest: a replica that is down costs the
// client no more than the fastest one that is up.
func (b *Bouncer) dialFirst(ctx context.Context, dests []string) (net.Conn, string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type dialed struct {
		conn net.Conn
		dest string
		err  error
	}
	results := make(chan dialed, len(dests))
	for _, d := range dests {
		go func() {
			c, err := b.dialer.DialContext(ctx, "tcp", d)
			results <- dialed{c, d, err}
		}()
	}
	var first dialed
	var errs []error
	for range dests {
		res := <-results
		switch {
		case res.err != nil:
			errs = append(errs, res.err)
		case first.conn == nil:
			first = res
			cancel() // the others are not needed
		default:
			res.conn.Close()
		}
	}
	if first.conn == nil {
		return nil, "", errors.Join(errs...)
	}
	return first.conn, first.dest, nil
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
