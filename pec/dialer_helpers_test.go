package pec

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/cloud"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/pkies/builtin"
	"github.com/pkie/pkie/internal/testbed"
)

// gateID is the test enhancement's identifier, in the private-use range.
const gateID pkie.ID = 0xFF42

// gateProver is a real enhancement for the dialer's tests, hosted by a
// real cloud: its TTP signs (Ed25519) the server name, port and the leaf's
// SHA-256, and it answers only when its gate opens, so a test decides when
// the proof is delivered. A gate never opened is a cloud that withholds.
type gateProver struct {
	key   ed25519.PrivateKey
	gate  chan struct{}
	calls atomic.Int64
	// started receives one value per call as it starts, if not nil.
	started chan struct{}
	// busy makes every call answer pkie.ErrBusy; otherLeaf, when set, is
	// the leaf signed instead of the one submitted (a proof replayed from
	// another connection).
	busy      bool
	otherLeaf []byte
	// now is the TTP's clock; nil means time.Now.
	now func() time.Time
}

func newGateProver(key ed25519.PrivateKey) *gateProver {
	return &gateProver{key: key, gate: make(chan struct{})}
}

func (g *gateProver) ID() pkie.ID { return gateID }

func (g *gateProver) open() { close(g.gate) }

func gateMessage(name string, port int, leaf []byte, at int64) []byte {
	h := sha256.Sum256(leaf)
	m := append([]byte("pkie-test-gate/1\x00"), byte(len(name)))
	m = append(m, name...)
	m = binary.BigEndian.AppendUint16(m, uint16(port))
	m = binary.BigEndian.AppendUint64(m, uint64(at))
	return append(m, h[:]...)
}

// gateBody is a gate proof's body: the signing time (Unix seconds) and the
// signature over gateMessage.
func gateBody(key ed25519.PrivateKey, name string, port int, leaf []byte, at time.Time) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(at.Unix()))
	return append(b, ed25519.Sign(key, gateMessage(name, port, leaf, at.Unix()))...)
}

func (g *gateProver) Prove(ctx context.Context, req *pkie.ProveRequest) (*pkie.Proof, error) {
	g.calls.Add(1)
	if g.started != nil {
		select {
		case g.started <- struct{}{}:
		default:
		}
	}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if g.busy {
		return nil, fmt.Errorf("%w: the test says so", pkie.ErrBusy)
	}
	leaf := req.Chain[0]
	if g.otherLeaf != nil {
		leaf = g.otherLeaf
	}
	now := time.Now()
	if g.now != nil {
		now = g.now()
	}
	return &pkie.Proof{ID: gateID, Version: 1, Body: gateBody(g.key, req.ServerName, req.Port, leaf, now)}, nil
}

// gateVerifier checks a gate proof against the TTP key the client pinned
// and, with maxAge, that it was signed recently.
type gateVerifier struct {
	pub    ed25519.PublicKey
	maxAge time.Duration
}

func (v gateVerifier) ID() pkie.ID { return gateID }

func (v gateVerifier) Verify(_ context.Context, req *pkie.VerifyRequest) pkie.Assertion {
	switch {
	case req.Proof == nil:
		return pkie.Assertion{Status: pkie.Unknown, Reason: "no gate proof"}
	case req.Proof.ID != gateID || req.Proof.Version != 1 || len(req.Proof.Body) != 8+ed25519.SignatureSize:
		return pkie.Assertion{Status: pkie.Fail, Reason: "not a gate proof of version 1"}
	}
	at := int64(binary.BigEndian.Uint64(req.Proof.Body))
	if len(req.Chain) == 0 || !ed25519.Verify(v.pub, gateMessage(req.ServerName, req.Port, req.Chain[0], at), req.Proof.Body[8:]) {
		return pkie.Assertion{Status: pkie.Fail, Reason: "gate signature does not verify under the pinned key"}
	}
	signed := time.Unix(at, 0)
	if v.maxAge > 0 && req.Now.Sub(signed) > v.maxAge {
		return pkie.Assertion{Status: pkie.Fail, Reason: fmt.Sprintf("gate proof signed %s ago, older than %s", req.Now.Sub(signed), v.maxAge), Time: signed}
	}
	return pkie.Assertion{Status: pkie.Pass, Reason: "signed by the gate TTP", Time: signed}
}

// testRegistry is the built-in enhancements plus the gate.
func testRegistry(t testing.TB) *pkie.Registry {
	t.Helper()
	reg := builtin.Registry()
	if err := reg.Register(pkie.Kind{ID: gateID, Name: "gate", Summary: "the test TTP signed this chain",
		NewVerifier: func(json.RawMessage) (pkie.Verifier, error) { return nil, errors.New("configured in Go only") }}); err != nil {
		t.Fatal(err)
	}
	return reg
}

func newEd25519(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// startCloud runs a real cloud hosting provers on loopback, QUIC and TCP,
// and returns its bundle.
func startCloud(t testing.TB, reg *pkie.Registry, provers ...pkie.Prover) *Bundle {
	t.Helper()
	cert, _, _, err := cloud.NewCertificate("dialer-test-cloud")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cloud.New(cloud.Config{Certificate: cert, Provers: provers, Registry: reg})
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
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
		c.Wait()
		pc.Close()
	})
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pin := pecwire.SPKIHash(leaf)
	return &Bundle{Version: pecwire.BundleVersion, Name: "dialer-test-cloud",
		Points:     []pecwire.Point{{QUIC: pc.LocalAddr().String(), TCP: ln.Addr().String()}},
		SPKISHA256: hex.EncodeToString(pin[:])}
}

// dialCloud opens a session with b over transport.
func dialCloud(t testing.TB, b *Bundle, transport string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, ClientConfig{Clouds: []*Bundle{b}, Transport: transport})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testPKI is a root and a leaf for "site.test".
type testPKI struct {
	root *testbed.CA
	leaf *testbed.Leaf
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	root, err := testbed.NewRootCA("Dialer Test Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	inter, err := root.NewIntermediate("Dialer Test Intermediate", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := inter.Issue(testbed.LeafOptions{DNSNames: []string{"site.test"}})
	if err != nil {
		t.Fatal(err)
	}
	return &testPKI{root: root, leaf: leaf}
}

// stamped is one application byte as the server received it.
type stamped struct {
	b  byte
	at time.Time
}

// serverConn is what the recording server saw of one connection.
type serverConn struct {
	handshakeAt time.Time
	resumed     bool
	handshook   chan struct{} // closed when the handshake completed (or failed)
	done        chan struct{} // closed when the connection ended

	mu    sync.Mutex
	bytes []stamped
	err   error // why the connection ended
}

func (sc *serverConn) received() []stamped {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return append([]stamped(nil), sc.bytes...)
}

// recordingServer is a real TLS server on loopback that records when each
// application byte arrives, after its own decryption: what a server's
// application would see. It answers every line with "pong\n".
type recordingServer struct {
	ln    net.Listener
	addr  string
	conns chan *serverConn
}

func startRecordingServer(t testing.TB, leaf *testbed.Leaf, maxVersion uint16) *recordingServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &recordingServer{ln: ln, addr: ln.Addr().String(), conns: make(chan *serverConn, 16)}
	conf := &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}, MaxVersion: maxVersion}
	go func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			sc := &serverConn{handshook: make(chan struct{}), done: make(chan struct{})}
			s.conns <- sc
			go serveRecording(tls.Server(raw, conf), sc)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

func serveRecording(c *tls.Conn, sc *serverConn) {
	defer close(sc.done)
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	err := c.Handshake()
	sc.handshakeAt = time.Now()
	sc.resumed = c.ConnectionState().DidResume
	close(sc.handshook)
	if err != nil {
		sc.mu.Lock()
		sc.err = err
		sc.mu.Unlock()
		return
	}
	buf := make([]byte, 1024)
	var line []byte
	for {
		n, err := c.Read(buf)
		now := time.Now()
		sc.mu.Lock()
		for _, b := range buf[:n] {
			sc.bytes = append(sc.bytes, stamped{b, now})
		}
		sc.mu.Unlock()
		line = append(line, buf[:n]...)
		for {
			i := bytes.IndexByte(line, '\n')
			if i < 0 {
				break
			}
			line = line[i+1:]
			c.Write([]byte("pong\n"))
		}
		if err != nil {
			sc.mu.Lock()
			sc.err = err
			sc.mu.Unlock()
			return
		}
	}
}

// next returns the server's next connection.
func (s *recordingServer) next(t testing.TB) *serverConn {
	t.Helper()
	select {
	case sc := <-s.conns:
		return sc
	case <-time.After(20 * time.Second):
		t.Fatal("the server saw no connection")
	}
	return nil
}

// pingPong writes a line on c and reads the answer: the round trip also
// makes crypto/tls process the session tickets a TLS 1.3 server sent.
func pingPong(t testing.TB, c net.Conn) {
	t.Helper()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "pong\n" {
		t.Fatalf("read %q, %v; want pong", got, err)
	}
}

func waitClosed(t testing.TB, sc *serverConn) {
	t.Helper()
	select {
	case <-sc.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the server's connection did not end")
	}
}

func versionName(v uint16) string {
	switch v {
	case tls.VersionTLS12:
		return "TLS1.2"
	case tls.VersionTLS13:
		return "TLS1.3"
	}
	return fmt.Sprintf("0x%04x", v)
}
