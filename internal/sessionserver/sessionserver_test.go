package sessionserver

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/pkie/pkie/internal/pecwire"
)

// testCert returns a self-signed certificate, as a cloud's is.
func testCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// syncBuffer is a log destination safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// echo is a server whose sessions answer each Ping with a Pong, counting
// admissions the way a role does: at most max sessions at once.
type echo struct {
	*Server
	log *syncBuffer
	pin [32]byte

	mu       sync.Mutex
	sessions int
	max      int
	refused  []string
	wg       sync.WaitGroup
}

func newEcho(t *testing.T, cert tls.Certificate, resetKey *quic.StatelessResetKey, max int) *echo {
	t.Helper()
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{log: new(syncBuffer), pin: pecwire.SPKIHash(leaf), max: max}
	e.Server = &Server{
		Role: "test", TLS: pecwire.ServerTLS(cert), ResetKey: resetKey,
		QUIC:             &quic.Config{MaxIdleTimeout: time.Minute, HandshakeIdleTimeout: 5 * time.Second},
		HandshakeTimeout: 5 * time.Second,
		Logger:           slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Admit: func(addr string) string {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.sessions >= e.max {
				e.refused = append(e.refused, addr)
				return "sessions"
			}
			e.sessions++
			return ""
		},
		Leave: e.leave,
		Session: func(ctx context.Context, conn *pecwire.Conn, addr string) {
			defer e.leave(addr)
			stop := context.AfterFunc(ctx, func() { conn.Close() })
			defer stop()
			defer conn.Close()
			for {
				m, err := conn.Recv(time.Time{})
				if err != nil {
					return
				}
				if p, ok := m.(*pecwire.Ping); ok {
					conn.Send(&pecwire.Pong{Seq: p.Seq}, time.Now().Add(5*time.Second))
				}
			}
		},
		Go: e.wg.Go,
	}
	return e
}

func (e *echo) leave(string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sessions--
}

func (e *echo) open() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sessions
}

// ping sends a Ping and waits for its Pong.
func ping(t *testing.T, c *pecwire.Conn, seq uint64) {
	t.Helper()
	if err := c.Send(&pecwire.Ping{Seq: seq}, time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	m, err := c.Recv(time.Now().Add(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := m.(*pecwire.Pong); !ok || p.Seq != seq {
		t.Fatalf("got %#v, want Pong %d", m, seq)
	}
}

// serve runs e on loopback, QUIC and TCP, until the test ends; it returns
// the two addresses.
func serve(t *testing.T, e *echo) (quicAddr, tcpAddr string) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := e.ServeQUIC(ctx, pc); err != nil {
			t.Errorf("ServeQUIC: %v", err)
		}
	})
	wg.Go(func() {
		if err := e.ServeTCP(ctx, ln); err != nil {
			t.Errorf("ServeTCP: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		e.wg.Wait()
		pc.Close()
	})
	return pc.LocalAddr().String(), ln.Addr().String()
}

func TestSessions(t *testing.T) {
	e := newEcho(t, testCert(t), nil, 2)
	quicAddr, tcpAddr := serve(t, e)
	ctx := context.Background()
	qc, err := pecwire.DialQUIC(ctx, quicAddr, pecwire.ClientTLS(e.pin), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer qc.Close()
	ping(t, qc, 1)
	tc, err := pecwire.DialTCP(ctx, tcpAddr, pecwire.ClientTLS(e.pin))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	ping(t, tc, 2)
	if n := e.open(); n != 2 {
		t.Errorf("%d sessions admitted, want 2", n)
	}

	// A third is over the bound: refused, over either transport.
	over, err := pecwire.DialQUIC(ctx, quicAddr, pecwire.ClientTLS(e.pin), nil)
	if err == nil {
		over.Send(&pecwire.Ping{Seq: 3}, time.Now().Add(5*time.Second))
		_, err = over.Recv(time.Now().Add(5 * time.Second))
		over.Close()
	}
	var appErr *quic.ApplicationError
	if !errors.As(err, &appErr) || !strings.Contains(appErr.ErrorMessage, "test busy: sessions") {
		t.Errorf("third QUIC session: err = %v, want the busy close", err)
	}

	// Ending one frees its admission for the next.
	tc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for e.open() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	tc2, err := pecwire.DialTCP(ctx, tcpAddr, pecwire.ClientTLS(e.pin))
	if err != nil {
		t.Fatal(err)
	}
	defer tc2.Close()
	ping(t, tc2, 4)
}

// A handshake that fails is logged and gives its admission back.
func TestFailedHandshakeLogged(t *testing.T) {
	e := newEcho(t, testCert(t), nil, 1)
	e.HandshakeTimeout = 300 * time.Millisecond
	quicAddr, tcpAddr := serve(t, e)
	// TCP: a client that speaks no TLS.
	c, err := net.Dial("tcp", tcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	c.Close()
	// QUIC: a client whose connection opens but never opens the session's
	// stream, so the server's wait for it ends at the handshake timeout.
	qconn, err := quic.DialAddr(context.Background(), quicAddr, pecwire.ClientTLS(e.pin), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer qconn.CloseWithError(0, "")
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		l := e.log.String()
		if strings.Contains(l, "tcp session not opened") && strings.Contains(l, "quic session not opened") && e.open() == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	l := e.log.String()
	for _, want := range []string{"tcp session not opened", "quic session not opened"} {
		if !strings.Contains(l, want) {
			t.Errorf("log lacks %q:\n%s", want, l)
		}
	}
	if n := e.open(); n != 0 {
		t.Errorf("%d sessions still admitted after failed handshakes, want 0", n)
	}
}

// A server restarted with the same reset key (same TLS key) answers a
// packet of a connection it does not know with a stateless reset, so the
// client learns at once that its session is gone; without a key, it would
// wait for its idle timeout (a minute here).
func TestStatelessReset(t *testing.T) {
	cert := testCert(t)
	key, err := ResetKey("test", cert)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := ResetKey("test", cert); *again != *key {
		t.Fatal("ResetKey is not a function of the certificate's key")
	}
	if other, _ := ResetKey("other", cert); *other == *key {
		t.Fatal("ResetKey is the same for two roles")
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	first := newEcho(t, cert, key, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		first.ServeQUIC(ctx, pc)
		close(done)
	}()
	c, err := pecwire.DialQUIC(context.Background(), addr, pecwire.ClientTLS(first.pin), &quic.Config{MaxIdleTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ping(t, c, 1)

	// The process "dies": its socket goes without a CONNECTION_CLOSE.
	pc.Close()
	cancel()
	<-done
	first.wg.Wait()

	pc2, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Skipf("cannot bind %s again: %v", addr, err)
	}
	second := newEcho(t, cert, key, 1)
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan struct{})
	go func() {
		second.ServeQUIC(ctx2, pc2)
		close(done2)
	}()
	defer func() { cancel2(); <-done2; second.wg.Wait(); pc2.Close() }()

	c.Send(&pecwire.Ping{Seq: 2}, time.Now().Add(5*time.Second))
	_, err = c.Recv(time.Now().Add(10 * time.Second))
	var reset *quic.StatelessResetError
	if !errors.As(err, &reset) {
		t.Fatalf("after the restart: err = %v, want a stateless reset", err)
	}
}
