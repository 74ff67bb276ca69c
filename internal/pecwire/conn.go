package pecwire

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// ALPN is the application protocol both transports negotiate.
const ALPN = "pkie-pec/1"

// Transports.
const (
	QUIC = "quic"
	TCP  = "tcp"
)

// stream is what both transports give a session: an ordered byte stream
// with deadlines.
type stream interface {
	io.ReadWriter
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// Conn is one session's message stream, over either transport. Send is safe
// for concurrent use; Recv is for one reader.
type Conn struct {
	s         stream
	br        *bufio.Reader
	closeFn   func() error
	closeSend func() error // ends the sending direction only
	transport string
	remote    net.Addr
	maxFrame  int
	// export is the TLS keying-material exporter of the session's
	// connection (TicketKey).
	export func(label string, context []byte, n int) ([]byte, error)
	// state is the TLS connection state of the session's connection.
	state func() tls.ConnectionState

	wmu sync.Mutex
}

// NewConn wraps a stream. maxFrame bounds the bodies Recv accepts (zero:
// DefaultMaxFrame); closeFn closes the underlying connection.
func newConn(s stream, closeFn, closeSend func() error, transport string, remote net.Addr, maxFrame int) *Conn {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	return &Conn{s: s, br: bufio.NewReaderSize(s, 16<<10), closeFn: closeFn, closeSend: closeSend, transport: transport, remote: remote, maxFrame: maxFrame}
}

// ConnectionState returns the TLS state of the session's connection: the
// peer's certificates tell a server which of its peers (a cloud
// authenticated to a forwarder, say) it is talking to.
func (c *Conn) ConnectionState() tls.ConnectionState {
	if c.state == nil {
		return tls.ConnectionState{}
	}
	return c.state()
}

// Transport returns QUIC or TCP.
func (c *Conn) Transport() string { return c.transport }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetMaxFrame changes the largest frame body Recv accepts.
func (c *Conn) SetMaxFrame(n int) {
	if n > 0 && n <= MaxFrameLimit {
		c.maxFrame = n
	}
}

// Send writes one message, giving up at deadline (zero: none).
func (c *Conn) Send(m Message, deadline time.Time) error {
	b, err := Marshal(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.s.SetWriteDeadline(deadline); err != nil {
		return err
	}
	if _, err := c.s.Write(b); err != nil {
		return fmt.Errorf("pecwire: send %T: %w", m, err)
	}
	return nil
}

// Recv reads one message, giving up at deadline (zero: none). A frame over
// the size limit or a body that does not decode is an error after which
// the session cannot continue.
func (c *Conn) Recv(deadline time.Time) (Message, error) {
	if err := c.s.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	var h [4]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return nil, err
	}
	n := int(h[1])<<16 | int(h[2])<<8 | int(h[3])
	if n > c.maxFrame {
		return nil, &FrameTooLarge{Type: Type(h[0]), Size: n, Max: c.maxFrame}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.br, body); err != nil {
		return nil, fmt.Errorf("pecwire: frame body: %w", err)
	}
	return Unmarshal(Type(h[0]), body)
}

// Close closes the session's connection.
func (c *Conn) Close() error { return c.closeFn() }

// maxLingerBytes bounds what Shutdown reads and discards.
const maxLingerBytes = 1 << 20

// Shutdown sends m (unless nil) as the session's last message, ends the
// sending direction and, until deadline, reads and discards what the peer
// still sends until it closes too; then it closes the connection. Closing
// at once would lose m: a QUIC CONNECTION_CLOSE abandons stream data not
// yet acknowledged, and a TCP close with unread input sends a reset that
// may destroy m in the peer's receive buffer before it is read.
func (c *Conn) Shutdown(m Message, deadline time.Time) error {
	defer c.closeFn()
	if m != nil {
		if err := c.Send(m, deadline); err != nil {
			return err
		}
	}
	c.wmu.Lock()
	err := c.closeSend()
	c.wmu.Unlock()
	if err != nil {
		return err
	}
	if err := c.s.SetReadDeadline(deadline); err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(c.br, maxLingerBytes))
	return nil
}

// FrameTooLarge is the error for a frame beyond the receiver's limit.
type FrameTooLarge struct {
	Type      Type
	Size, Max int
}

func (e *FrameTooLarge) Error() string {
	return fmt.Sprintf("pecwire: frame of type %d has %d bytes, limit %d", e.Type, e.Size, e.Max)
}

// SPKIHash is the SHA-256 of a certificate's SubjectPublicKeyInfo: what a
// client pins a cloud by.
func SPKIHash(cert *x509.Certificate) [32]byte { return sha256.Sum256(cert.RawSubjectPublicKeyInfo) }

// ClientTLS returns the TLS configuration a client dials a cloud with: the
// cloud's certificate is accepted if and only if its key is one of pins.
// The certificate is self-signed and names nothing; the pin from the bundle
// is the whole of the trust, as with a .notary bundle.
func ClientTLS(pins ...[32]byte) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		NextProtos:         []string{ALPN},
		InsecureSkipVerify: true, // replaced by the pin check below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("pecwire: cloud sent no certificate")
			}
			got := SPKIHash(cs.PeerCertificates[0])
			for _, p := range pins {
				if subtle.ConstantTimeCompare(got[:], p[:]) == 1 {
					return nil
				}
			}
			return fmt.Errorf("pecwire: cloud key %x… is not the pinned key", got[:8])
		},
	}
}

// ServerTLS returns the TLS configuration a cloud listens with.
func ServerTLS(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{ALPN},
		Certificates: []tls.Certificate{cert},
	}
}

// DialQUIC opens a session over QUIC: a connection to addr and one
// bidirectional stream on it. qc may be nil.
func DialQUIC(ctx context.Context, addr string, tc *tls.Config, qc *quic.Config) (*Conn, error) {
	qconn, err := quic.DialAddr(ctx, addr, tc, qc)
	if err != nil {
		return nil, fmt.Errorf("pecwire: quic %s: %w", addr, err)
	}
	st, err := qconn.OpenStreamSync(ctx)
	if err != nil {
		qconn.CloseWithError(0, "")
		return nil, fmt.Errorf("pecwire: quic %s: open stream: %w", addr, err)
	}
	return newConn(st, func() error {
		st.Close()
		return qconn.CloseWithError(0, "")
	}, st.Close, QUIC, qconn.RemoteAddr(), 0).withTLS(quicState(qconn)), nil
}

// AcceptQUIC waits for the session stream a client opens on an accepted
// QUIC connection.
func AcceptQUIC(ctx context.Context, qconn *quic.Conn, maxFrame int) (*Conn, error) {
	st, err := qconn.AcceptStream(ctx)
	if err != nil {
		qconn.CloseWithError(0, "")
		return nil, fmt.Errorf("pecwire: quic %s: accept stream: %w", qconn.RemoteAddr(), err)
	}
	return newConn(st, func() error {
		st.Close()
		return qconn.CloseWithError(0, "")
	}, st.Close, QUIC, qconn.RemoteAddr(), maxFrame).withTLS(quicState(qconn)), nil
}

// DialTCP opens a session over TLS on TCP.
func DialTCP(ctx context.Context, addr string, tc *tls.Config) (*Conn, error) {
	d := &tls.Dialer{Config: tc}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pecwire: tcp %s: %w", addr, err)
	}
	tcp := c.(*tls.Conn)
	return newConn(tcp, tcp.Close, tcp.CloseWrite, TCP, tcp.RemoteAddr(), 0).withTLS(tcp.ConnectionState), nil
}

// AcceptTCP completes the TLS handshake of an accepted TCP connection
// (tc from ServerTLS) by ctx's deadline.
func AcceptTCP(ctx context.Context, c net.Conn, tc *tls.Config, maxFrame int) (*Conn, error) {
	t := tls.Server(c, tc)
	if err := t.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("pecwire: tcp %s: handshake: %w", c.RemoteAddr(), err)
	}
	return newConn(t, t.Close, t.CloseWrite, TCP, c.RemoteAddr(), maxFrame).withTLS(t.ConnectionState), nil
}

// withTLS gives c its connection's TLS state and, from it, its keying
// material exporter.
func (c *Conn) withTLS(state func() tls.ConnectionState) *Conn {
	c.state = state
	c.export = func(label string, context []byte, n int) ([]byte, error) {
		cs := state()
		return cs.ExportKeyingMaterial(label, context, n)
	}
	return c
}

func quicState(qc *quic.Conn) func() tls.ConnectionState {
	return func() tls.ConnectionState { return qc.ConnectionState().TLS }
}
