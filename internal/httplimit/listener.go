package httplimit

import (
	"container/list"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// Default connection bounds. See docs/operations/notary.md for why each has its
// value.
const (
	// DefaultMaxConnsPerClient lets a NAT or a busy client open many
	// connections at once, while a single address cannot take more than a
	// small part of DefaultMaxConns.
	DefaultMaxConnsPerClient = 64
	// DefaultMaxStreams is the number of concurrent HTTP/2 streams per
	// connection: what RFC 9113 recommends as the least, well under Go's
	// default of 250. A client needing more parallelism opens connections,
	// which the per-client cap counts.
	DefaultMaxStreams = 100
	// DefaultReceiveBuffer is each HTTP/2 connection's and stream's receive
	// window: the request bodies pkie's services accept are small, and the
	// window bounds what a client can make the server buffer per connection
	// before a handler reads it (64 KiB × 4096 connections = 256 MiB).
	DefaultReceiveBuffer = 64 << 10
)

// DefaultMaxConns returns the default cap on open connections: half the
// process's open-file limit (the rest is for the server's own files,
// databases and outbound connections), at most 4096 and at least 64.
func DefaultMaxConns() int {
	n := FileLimit() / 2
	return max(64, min(n, 4096))
}

// Options bound one listener and the http.Server serving it.
type Options struct {
	// MaxConns caps open connections in total; 0 means DefaultMaxConns().
	MaxConns int
	// MaxConnsPerClient caps open connections per client address
	// (ClientKey); 0 means DefaultMaxConnsPerClient.
	MaxConnsPerClient int
	// HighWater is the number of open connections above which idle
	// keep-alive connections are closed, oldest first, to make room for new
	// ones; 0 means three quarters of MaxConns.
	HighWater int
	// MaxStreams caps concurrent HTTP/2 streams per connection; 0 means
	// DefaultMaxStreams. Per client, streams are thereby bounded by
	// MaxConnsPerClient × MaxStreams; Handler's per-client share bounds how
	// many of them hold a request slot.
	MaxStreams int
}

func (o Options) withDefaults() Options {
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns()
	}
	if o.MaxConnsPerClient <= 0 {
		o.MaxConnsPerClient = DefaultMaxConnsPerClient
	}
	if o.HighWater <= 0 || o.HighWater > o.MaxConns {
		o.HighWater = max(1, o.MaxConns*3/4)
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	return o
}

// Listen returns ln wrapped to enforce o's connection caps, and configures
// srv for it: its ConnState hook (any hook already set is still called)
// tells the listener which connections are idle, and its HTTP/2
// configuration bounds streams and receive buffers. Serve srv on the
// returned listener.
func Listen(srv *http.Server, ln net.Listener, o Options) *Listener {
	o = o.withDefaults()
	l := &Listener{Listener: ln, o: o, by: make(map[netip.Prefix]int)}
	prev := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		l.connState(c, s)
		if prev != nil {
			prev(c, s)
		}
	}
	h2 := &http.HTTP2Config{}
	if srv.HTTP2 != nil {
		*h2 = *srv.HTTP2
	}
	h2.MaxConcurrentStreams = o.MaxStreams
	if h2.MaxReceiveBufferPerConnection == 0 {
		h2.MaxReceiveBufferPerConnection = DefaultReceiveBuffer
	}
	if h2.MaxReceiveBufferPerStream == 0 {
		h2.MaxReceiveBufferPerStream = DefaultReceiveBuffer
	}
	srv.HTTP2 = h2
	return l
}

// Listener is a net.Listener that caps open connections in total and per
// client address. Create it with Listen.
type Listener struct {
	net.Listener
	o Options

	mu      sync.Mutex
	open    int
	by      map[netip.Prefix]int
	idle    list.List // of *conn, least recently idle first
	refused int64
	shed    int64
}

// Stats is a snapshot of a Listener's counters.
type Stats struct {
	Open    int   // connections open now
	Idle    int   // of which idle between requests
	Refused int64 // connections closed at once, over a cap, since Listen
	Shed    int64 // idle connections closed to make room, since Listen
}

// Stats returns the listener's counters.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Open: l.open, Idle: l.idle.Len(), Refused: l.refused, Shed: l.shed}
}

// Accept returns the next connection within the caps. A connection beyond
// them is closed at once, with a reset so that it leaves no state behind on
// the server, and Accept waits for the next.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := l.admit(nc); c != nil {
			return c, nil
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		nc.Close()
	}
}

func (l *Listener) admit(nc net.Conn) *conn {
	key := ClientKey(nc.RemoteAddr())
	var shed []*conn
	defer func() {
		// Closed outside the lock: their Close would take it.
		for _, c := range shed {
			c.Conn.Close()
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by[key] >= l.o.MaxConnsPerClient {
		l.refused++
		return nil
	}
	for l.open >= l.o.HighWater && l.idle.Len() > 0 {
		c := l.idle.Remove(l.idle.Front()).(*conn)
		c.idleAt = nil
		l.releaseLocked(c)
		shed = append(shed, c)
		l.shed++
	}
	if l.open >= l.o.MaxConns {
		l.refused++
		return nil
	}
	l.open++
	l.by[key]++
	return &conn{Conn: nc, l: l, key: key}
}

// releaseLocked stops counting c. l.mu must be held.
func (l *Listener) releaseLocked(c *conn) {
	if c.released {
		return
	}
	c.released = true
	if c.idleAt != nil {
		l.idle.Remove(c.idleAt)
		c.idleAt = nil
	}
	l.open--
	if l.by[c.key]--; l.by[c.key] <= 0 {
		delete(l.by, c.key)
	}
}

// connState tracks which connections are idle between requests: those are
// the ones closed first under pressure. HTTP/2 connections report idle when
// they have no open stream.
func (l *Listener) connState(nc net.Conn, s http.ConnState) {
	c := unwrap(nc)
	if c == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released {
		return
	}
	if s == http.StateIdle {
		if c.idleAt == nil {
			c.idleAt = l.idle.PushBack(c)
		}
		return
	}
	if c.idleAt != nil {
		l.idle.Remove(c.idleAt)
		c.idleAt = nil
	}
}

// unwrap finds the listener's conn under nc, which the server may have
// wrapped (crypto/tls does).
func unwrap(nc net.Conn) *conn {
	for nc != nil {
		switch v := nc.(type) {
		case *conn:
			return v
		case interface{ NetConn() net.Conn }:
			nc = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// conn is a counted connection.
type conn struct {
	net.Conn
	l   *Listener
	key netip.Prefix

	// Guarded by l.mu.
	released bool
	idleAt   *list.Element
}

func (c *conn) Close() error {
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// CloseWrite half-closes the connection when the underlying one can (a
// CONNECT tunnel relays the client's end of stream this way).
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// ReadFrom keeps the underlying connection's sendfile and splice paths.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}
