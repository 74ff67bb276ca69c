package notary

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Bouncer is Convergence's privacy relay: a plain-HTTP listener that accepts
// CONNECT only towards configured notary addresses, so a client can reach
// another notary through this one and that notary never learns the client's
// address. It sees who asks but, the tunnel being TLS to the other notary,
// never what is asked.
type Bouncer struct {
	allowed map[string]bool
	sem     chan struct{}
	dialer  net.Dialer
	idle    time.Duration
}

// NewBouncer allows CONNECT to the given host:port notary addresses, with at
// most maxConns tunnels open at once (0 means 1024).
func NewBouncer(allowed []string, maxConns int) *Bouncer {
	if maxConns <= 0 {
		maxConns = 1024
	}
	b := &Bouncer{allowed: map[string]bool{}, sem: make(chan struct{}, maxConns), dialer: net.Dialer{Timeout: 5 * time.Second}, idle: 60 * time.Second}
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
	target := strings.ToLower(r.Host)
	if !b.allowed[target] {
		httpError(w, http.StatusForbidden, "CONNECT to "+clip(target)+" is not allowed: not a configured notary")
		return
	}
	select {
	case b.sem <- struct{}{}:
		defer func() { <-b.sem }()
	default:
		httpError(w, http.StatusServiceUnavailable, "bouncer overloaded")
		return
	}
	up, err := b.dialer.DialContext(r.Context(), "tcp", target)
	if err != nil {
		httpError(w, http.StatusBadGateway, "cannot reach "+target)
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
	conn.SetDeadline(time.Time{})
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	// Bytes the client sent after the CONNECT request may already be
	// buffered.
	if n := rw.Reader.Buffered(); n > 0 {
		buf, _ := rw.Reader.Peek(n)
		if _, err := up.Write(buf); err != nil {
			return
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			src.SetReadDeadline(time.Now().Add(b.idle))
			n, err := src.Read(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go pipe(up, conn)
	pipe(conn, up)
	wg.Wait()
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
		ReadTimeout:       b.idle,
		WriteTimeout:      b.idle,
		IdleTimeout:       b.idle,
		MaxHeaderBytes:    4 << 10,
		ErrorLog:          slog.NewLogLogger(slog.DiscardHandler, slog.LevelError),
	}
	go func() { <-ctx.Done(); srv.Close() }()
	err := srv.Serve(ln)
	if err == http.ErrServerClosed {
		return nil
	}
	return err
}
