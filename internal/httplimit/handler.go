package httplimit

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"path"
	"strings"
	"sync"
	"time"
)

// Default request bounds. See docs/operations/notary.md for why each has its value.
const (
	// DefaultTimeout bounds the handling of one request.
	DefaultTimeout = 30 * time.Second
	// DefaultBodyTimeout is the grace a request body has before its first
	// byte, beyond which it must keep up DefaultMinBodyRate. A client that
	// declared a body sends it right behind the headers; five seconds
	// cover a slow link's retransmissions.
	DefaultBodyTimeout = 5 * time.Second
	// DefaultMinBodyRate (bytes a second) lets the largest body pkie
	// accepts (1 MiB, a log add-chain) arrive in 16 s beyond the grace:
	// slower than any link that should submit to a log, yet fast enough
	// that a trickling client cannot hold a slot for long.
	DefaultMinBodyRate = 64 << 10
)

// Slots is a pool of request slots with a per-client share, so that one
// client address cannot take every slot.
type Slots struct {
	max, perClient int

	mu   sync.Mutex
	used int
	by   map[netip.Prefix]int
}

// NewSlots returns a pool of size slots of which one client address
// (ClientKey) may hold at most perClient; perClient 0 means a quarter of
// size, and at least 1.
func NewSlots(size, perClient int) *Slots {
	size = max(1, size)
	if perClient <= 0 {
		perClient = size / 4
	}
	perClient = min(size, max(1, perClient))
	return &Slots{max: size, perClient: perClient, by: make(map[netip.Prefix]int)}
}

// Cap returns the pool's size and the per-client share.
func (s *Slots) Cap() (total, perClient int) { return s.max, s.perClient }

// acquire takes a slot for client. It reports whether the pool as a whole
// (rather than the client's share) was full when it could not.
func (s *Slots) acquire(client netip.Prefix) (release func(), ok, poolFull bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used >= s.max {
		return nil, false, true
	}
	if s.by[client] >= s.perClient {
		return nil, false, false
	}
	s.used++
	s.by[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.used--
			if s.by[client]--; s.by[client] <= 0 {
				delete(s.by, client)
			}
			s.mu.Unlock()
		})
	}, true, false
}

// HandlerOptions configure Handler.
type HandlerOptions struct {
	// Pool returns the pool r takes a slot in while it is handled, or nil
	// for a request that takes none: health checks and metrics, which are
	// cheap and must answer when every pool is full.
	Pool func(r *http.Request) *Slots
	// Timeout bounds the handling of one request (its context's deadline);
	// 0 means DefaultTimeout.
	Timeout time.Duration
	// BodyTimeout and MinBodyRate bound how long a request body may take:
	// the body must have arrived by BodyTimeout plus the time its bytes
	// so far take at MinBodyRate (bytes a second), and never later than
	// Timeout. 0 means DefaultBodyTimeout and DefaultMinBodyRate.
	BodyTimeout time.Duration
	MinBodyRate int
	// ParsesPath, if not nil, reports the requests whose handler parses the
	// raw path itself and answers a malformed one with a precise error;
	// they skip the canonical-path check.
	ParsesPath func(r *http.Request) bool
	// Overloaded, if not nil, is called for each request refused for want
	// of a slot, e.g. to count it.
	Overloaded func(r *http.Request)
}

// Handler returns h bounded by o: a non-canonical path gets a JSON 400; a
// request body gets a deadline; a request takes a slot from its pool or
// gets 503 with Retry-After at once; and its context ends after o.Timeout.
// Error bodies are {"error": "…"}, as in every pkie API.
func Handler(h http.Handler, o HandlerOptions) http.Handler {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.MinBodyRate <= 0 {
		o.MinBodyRate = DefaultMinBodyRate
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect && (o.ParsesPath == nil || !o.ParsesPath(r)) {
			if p := r.URL.EscapedPath(); p != canonicalPath(p) {
				Error(w, http.StatusBadRequest, "path is not in canonical form (no empty, . or .. segments)")
				return
			}
		}
		// Before the slot: a request refused a slot must not hold its
		// connection reading a body it will discard either.
		limitBody(w, r, o)
		if o.Pool != nil {
			if pool := o.Pool(r); pool != nil {
				release, ok, full := pool.acquire(clientKeyString(r.RemoteAddr))
				if !ok {
					if o.Overloaded != nil {
						o.Overloaded(r)
					}
					w.Header().Set("Retry-After", "1")
					if r.ProtoMajor == 1 && r.ContentLength != 0 {
						// Else the server would read the body it is
						// refusing before answering (to keep the
						// connection), as long as the client takes to
						// send it.
						w.Header().Set("Connection", "close")
					}
					msg := "server overloaded: too many requests in progress"
					if !full {
						msg = "too many requests in progress from your address"
					}
					Error(w, http.StatusServiceUnavailable, msg)
					return
				}
				defer release()
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), o.Timeout)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// canonicalPath is the path http.ServeMux would redirect p to: cleaned,
// with a trailing slash kept.
func canonicalPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if strings.HasSuffix(p, "/") && np != "/" {
		np += "/"
	}
	return np
}

// limitBody gives r's body its deadline (see HandlerOptions). Where the
// connection cannot take a read deadline (an httptest recorder) the body is
// left alone.
func limitBody(w http.ResponseWriter, r *http.Request, o HandlerOptions) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	rc := http.NewResponseController(w)
	b := &deadlineBody{ReadCloser: r.Body, rc: rc, start: time.Now(), o: o, length: r.ContentLength}
	b.limit = b.start.Add(o.Timeout)
	b.set = b.deadline()
	if err := rc.SetReadDeadline(b.set); err != nil {
		return
	}
	r.Body = b
}

// deadlineBody extends its connection's (or HTTP/2 stream's) read deadline
// as bytes arrive, by the time they take at the minimum rate.
type deadlineBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	o      HandlerOptions
	start  time.Time
	limit  time.Time
	length int64 // declared; -1 if unknown
	n      int64
	set    time.Time
	done   bool
}

func (b *deadlineBody) deadline() time.Time {
	d := b.start.Add(b.o.BodyTimeout + time.Duration(float64(b.n)/float64(b.o.MinBodyRate)*float64(time.Second)))
	if d.After(b.limit) {
		d = b.limit
	}
	return d
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.done {
		return n, err
	}
	b.n += int64(n)
	switch {
	case err == io.EOF || b.n >= b.length && b.length > 0:
		// The whole body is in (a handler decoding JSON may stop at the
		// last declared byte without seeing EOF). On HTTP/1 the
		// connection's deadline would otherwise go on running while the
		// handler works, and the server's background read would cancel
		// the request when it passes; the server sets new deadlines for
		// the next request.
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	case n > 0:
		// Moving the deadline costs a message to the HTTP/2 connection's
		// loop, so it moves in steps of at least 100 ms.
		if d := b.deadline(); d.Sub(b.set) >= 100*time.Millisecond {
			b.set = d
			b.rc.SetReadDeadline(d)
		}
	}
	return n, err
}

// Error writes the JSON error body every pkie API uses.
func Error(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(map[string]string{"error": msg})
}
