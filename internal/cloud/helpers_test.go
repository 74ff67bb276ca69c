package cloud

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

// signer is a real enhancement for the tests: its proof is an Ed25519
// signature over the server name, port, the leaf's SHA-256 and the
// client's parameters, verified by signerVerify. It can be told to wait
// for a gate (a slow TTP), to fail or to be busy.
type signer struct {
	id    pkie.ID
	key   ed25519.PrivateKey
	gate  chan struct{} // nil: answer at once; else wait for it or ctx
	err   error         // returned instead of a proof
	calls atomic.Int64
	// started, when set, receives one value per call as it starts.
	started chan struct{}
	// pad lengthens each proof by this many zero bytes after the
	// signature (a large proof).
	pad int
}

func newSigner(id pkie.ID) *signer {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return &signer{id: id, key: k}
}

func (s *signer) ID() pkie.ID { return s.id }

func signedMessage(req *pkie.Subject, params []byte) []byte {
	leaf := sha256.Sum256(req.Chain[0])
	var m []byte
	m = append(m, "test-signer/1\x00"...)
	m = append(m, byte(len(req.ServerName)))
	m = append(m, req.ServerName...)
	m = binary.BigEndian.AppendUint16(m, uint16(req.Port))
	m = append(m, leaf[:]...)
	return append(m, params...)
}

func (s *signer) Prove(ctx context.Context, req *pkie.ProveRequest) (*pkie.Proof, error) {
	s.calls.Add(1)
	if s.started != nil {
		s.started <- struct{}{}
	}
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if s.err != nil {
		return nil, s.err
	}
	if req.Leaf() == nil {
		return nil, errors.New("no parsed leaf")
	}
	sig := ed25519.Sign(s.key, signedMessage(&req.Subject, req.Params))
	return &pkie.Proof{ID: s.id, Version: 1, Body: append(sig, make([]byte, s.pad)...)}, nil
}

// verify checks a proof as a client would.
func (s *signer) verify(sub *pkie.Subject, params []byte, p *pkie.Proof) error {
	if p == nil || p.ID != s.id || p.Version != 1 {
		return fmt.Errorf("not a proof of %s: %+v", s.id, p)
	}
	if len(p.Body) != ed25519.SignatureSize+s.pad || !ed25519.Verify(s.key.Public().(ed25519.PublicKey), signedMessage(sub, params), p.Body[:ed25519.SignatureSize]) {
		return errors.New("signature does not verify")
	}
	return nil
}

// testChain returns a DER leaf for name.
func testChain(t testing.TB, name string) [][]byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return [][]byte{der}
}

// testCloud is a cloud serving QUIC and TCP on loopback.
type testCloud struct {
	*Cloud
	quicAddr, tcpAddr string
	pin               [32]byte
	cancel            context.CancelFunc
}

func startCloud(t testing.TB, cfg Config) *testCloud {
	t.Helper()
	cert, _, _, err := NewCertificate("test-cloud")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Certificate = cert
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { c.ServeQUIC(ctx, pc); done <- struct{}{} }()
	go func() { c.ServeTCP(ctx, ln); done <- struct{}{} }()
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	tc := &testCloud{Cloud: c, quicAddr: pc.LocalAddr().String(), tcpAddr: ln.Addr().String(), pin: pecwire.SPKIHash(leaf), cancel: cancel}
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
		c.Wait()
		pc.Close()
	})
	return tc
}

// dial opens a session over transport.
func (tc *testCloud) dial(t testing.TB, transport string) *pecwire.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var c *pecwire.Conn
	var err error
	switch transport {
	case pecwire.QUIC:
		c, err = pecwire.DialQUIC(ctx, tc.quicAddr, pecwire.ClientTLS(tc.pin), nil)
	case pecwire.TCP:
		c, err = pecwire.DialTCP(ctx, tc.tcpAddr, pecwire.ClientTLS(tc.pin))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func send(t testing.TB, c *pecwire.Conn, m pecwire.Message) {
	t.Helper()
	if err := c.Send(m, time.Now().Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

func recv(t testing.TB, c *pecwire.Conn) pecwire.Message {
	t.Helper()
	m, err := c.Recv(time.Now().Add(20 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func recvAs[M pecwire.Message](t testing.TB, c *pecwire.Conn) M {
	t.Helper()
	m := recv(t, c)
	v, ok := m.(M)
	if !ok {
		t.Fatalf("got %T %+v, want %T", m, m, *new(M))
	}
	return v
}

// register opens a session and registers.
func (tc *testCloud) register(t testing.TB, transport string) (*pecwire.Conn, pecwire.ClientID) {
	t.Helper()
	c := tc.dial(t, transport)
	send(t, c, &pecwire.Register{Version: pecwire.Version})
	r := recvAs[*pecwire.Registered](t, c)
	return c, r.ClientID
}

// rawTLS is a TLS-over-TCP session from a chosen local address, framed
// by hand: pecwire's dialer cannot pick the source address, and the
// shares tests need two.
type rawTLS struct {
	*tls.Conn
}

func dialFrom(t testing.TB, tc *testCloud, local string) *rawTLS {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	nc, err := d.Dial("tcp", tc.tcpAddr)
	if err != nil {
		t.Skipf("cannot dial from %s: %v", local, err)
	}
	c := tls.Client(nc, pecwire.ClientTLS(tc.pin))
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawTLS{c}
}

func (r *rawTLS) send(t testing.TB, m pecwire.Message) {
	t.Helper()
	b, err := pecwire.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write(b); err != nil {
		t.Fatal(err)
	}
}

func (r *rawTLS) recv(t testing.TB) pecwire.Message {
	t.Helper()
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(h[1])<<16|int(h[2])<<8|int(h[3]))
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatal(err)
	}
	m, err := pecwire.Unmarshal(pecwire.Type(h[0]), body)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// minter mints a registered client's tickets, as the client does for its
// PEC extensions: what a PEC server (or whoever copies a ClientHello)
// submits with.
type minter struct {
	key []byte
	n   uint32
}

func newMinter(t testing.TB, c *pecwire.Conn) *minter {
	t.Helper()
	key, err := c.TicketKey()
	if err != nil {
		t.Fatal(err)
	}
	return &minter{key: key}
}

// forward returns m as a PEC server sends it, with the next ticket for m.
func (mt *minter) forward(m *pecwire.Submit) *pecwire.ServerSubmit {
	tk := pecwire.MintTicket(mt.key, mt.n, m)
	mt.n++
	return &pecwire.ServerSubmit{Ticket: tk, Submit: *m}
}

// newRawMinter is newMinter for a session framed by hand: the exporter
// label is docs/formats/pec.md's.
func newRawMinter(t testing.TB, r *rawTLS) *minter {
	t.Helper()
	cs := r.ConnectionState()
	key, err := cs.ExportKeyingMaterial("EXPORTER-pkie pec ticket key v1", nil, 32)
	if err != nil {
		t.Fatal(err)
	}
	return &minter{key: key}
}

// unticketed is m as a server sends it for a client it has no ticket of:
// an unknown identifier.
func unticketed(m *pecwire.Submit) *pecwire.ServerSubmit { return &pecwire.ServerSubmit{Submit: *m} }
