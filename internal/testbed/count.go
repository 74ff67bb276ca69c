package testbed

import (
	"net"
	"sync/atomic"
)

// CountConn returns c with the bytes read from and written to it added to
// n: TCP payload both ways (for a TLS connection counted beneath TLS, its
// records and handshakes), not IP and TCP headers.
func CountConn(c net.Conn, n *atomic.Int64) net.Conn {
	return &countConn{Conn: c, n: n}
}

type countConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countConn) Read(b []byte) (int, error) {
	k, err := c.Conn.Read(b)
	c.n.Add(int64(k))
	return k, err
}

func (c *countConn) Write(b []byte) (int, error) {
	k, err := c.Conn.Write(b)
	c.n.Add(int64(k))
	return k, err
}

// CountingListener is a net.Listener that counts the connections it
// accepts and the bytes they carry both ways (as CountConn counts them).
// A server behind it (a notary, the world's TLS servers) is measured
// without being changed.
type CountingListener struct {
	net.Listener
	bytes, accepts atomic.Int64
}

// NewCountingListener counts what ln accepts.
func NewCountingListener(ln net.Listener) *CountingListener {
	return &CountingListener{Listener: ln}
}

// Accept implements net.Listener.
func (l *CountingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.accepts.Add(1)
	return CountConn(c, &l.bytes), nil
}

// Bytes is the bytes the accepted connections have carried so far.
func (l *CountingListener) Bytes() int64 { return l.bytes.Load() }

// Accepts is the connections accepted so far.
func (l *CountingListener) Accepts() int64 { return l.accepts.Load() }
