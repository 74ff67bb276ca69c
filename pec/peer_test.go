package pec

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

// A peer is a minimal cloud written against internal/pecwire: a real
// protocol peer on loopback (QUIC and TLS over TCP) whose behaviour a test
// chooses, including hostile behaviour the real cloud never shows: pings
// left unanswered, proofs for other nonces and clients, registrations held
// back.

// cloudKey is one cloud's identity, shared by its points of presence.
type cloudKey struct {
	cert tls.Certificate
	pin  string
}

func newCloudKey(t testing.TB) cloudKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pec test cloud"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	h := pecwire.SPKIHash(cert)
	return cloudKey{cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}, pin: hex.EncodeToString(h[:])}
}

// peerBehaviour says how a peer answers. Nil funcs take the defaults:
// register everyone, answer every ping, prove every submission at once.
type peerBehaviour struct {
	keepalive time.Duration
	// beforeRegistered runs before Registered is sent; it may block.
	beforeRegistered func()
	// dropAfterRegistered ends each session right after Registered.
	dropAfterRegistered bool
	// pongSeq, when set, is the sequence number a Pong carries for a Ping.
	pongSeq func(seq uint64) uint64
	// onSubmit answers a submission; the default proves each request.
	onSubmit func(ps *peerSession, m *pecwire.Submit)
}

type peer struct {
	t   testing.TB
	key cloudKey
	b   peerBehaviour
	ql  *quic.Listener
	udp net.PacketConn
	tcp net.Listener

	silent   atomic.Bool // stop answering pings
	mu       sync.Mutex
	sessions []*peerSession
	submits  []*pecwire.Submit
	regs     int
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	closed   bool
}

type peerSession struct {
	p    *peer
	conn *pecwire.Conn
	id   pecwire.ClientID
}

func newPeer(t testing.TB, key cloudKey, b peerBehaviour) *peer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return newPeerOn(t, key, b, ln)
}

// newPeerOn starts a peer whose TCP listener is ln.
func newPeerOn(t testing.TB, key cloudKey, b peerBehaviour, ln net.Listener) *peer {
	t.Helper()
	if b.keepalive == 0 {
		b.keepalive = time.Minute
	}
	p := &peer{t: t, key: key, b: b}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	var err error
	if p.udp, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if p.ql, err = quic.Listen(p.udp, pecwire.ServerTLS(key.cert), &quic.Config{MaxIdleTimeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	p.tcp = ln
	p.wg.Go(func() {
		for {
			qc, err := p.ql.Accept(p.ctx)
			if err != nil {
				return
			}
			p.wg.Go(func() {
				conn, err := pecwire.AcceptQUIC(p.ctx, qc, 0)
				if err == nil {
					p.serve(conn)
				}
			})
		}
	})
	p.wg.Go(func() {
		for {
			c, err := p.tcp.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() {
				ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
				conn, err := pecwire.AcceptTCP(ctx, c, pecwire.ServerTLS(key.cert), 0)
				cancel()
				if err == nil {
					p.serve(conn)
				}
			})
		}
	})
	t.Cleanup(p.close)
	return p
}

func (p *peer) point() Point {
	return Point{QUIC: p.udp.LocalAddr().String(), TCP: p.tcp.Addr().String()}
}

// close stops the peer as a process exit would: listeners and every
// session closed.
func (p *peer) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	ss := p.sessions
	p.mu.Unlock()
	p.cancel()
	for _, s := range ss {
		s.conn.Close()
	}
	p.ql.Close()
	p.udp.Close()
	p.tcp.Close()
	p.wg.Wait()
}

func (p *peer) serve(conn *pecwire.Conn) {
	defer conn.Close()
	stop := context.AfterFunc(p.ctx, func() { conn.Close() })
	defer stop()
	ps := &peerSession{p: p, conn: conn}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.sessions = append(p.sessions, ps)
	p.mu.Unlock()
	for {
		m, err := conn.Recv(time.Time{})
		if err != nil {
			return
		}
		switch m := m.(type) {
		case *pecwire.Register:
			if p.b.beforeRegistered != nil {
				p.b.beforeRegistered()
			}
			rand.Read(ps.id[:])
			p.mu.Lock()
			p.regs++
			p.mu.Unlock()
			ps.send(&pecwire.Registered{Version: pecwire.Version, ClientID: ps.id, Keepalive: p.b.keepalive, MaxFrame: pecwire.DefaultMaxFrame})
			if p.b.dropAfterRegistered {
				ps.send(&pecwire.Error{Code: pecwire.RejectInvalid, Text: "go away"})
				return
			}
		case *pecwire.Ping:
			if !p.silent.Load() {
				seq := m.Seq
				if p.b.pongSeq != nil {
					seq = p.b.pongSeq(seq)
				}
				ps.send(&pecwire.Pong{Seq: seq})
			}
		case *pecwire.Submit:
			p.mu.Lock()
			p.submits = append(p.submits, m)
			p.mu.Unlock()
			if p.b.onSubmit != nil {
				p.b.onSubmit(ps, m)
			} else {
				ps.proveAll(m)
			}
		}
	}
}

func (ps *peerSession) send(m pecwire.Message) {
	ps.conn.Send(m, time.Now().Add(5*time.Second))
}

// proofFor is the proof a peer returns: its body names the nonce, so a
// test can tell which submission it answers.
func proofFor(id pkie.ID, nonce pecwire.Nonce) *pkie.Proof {
	return &pkie.Proof{ID: id, Version: 1, Body: append([]byte("proof for "), nonce[:]...)}
}

func (ps *peerSession) prove(m *pecwire.Submit, id pkie.ID) {
	ps.send(&pecwire.Proof{ClientID: m.ClientID, Nonce: m.Nonce, Digest: m.Digest(), ID: id, Status: pecwire.ProofOK, Proof: proofFor(id, m.Nonce)})
}

func (ps *peerSession) proveAll(m *pecwire.Submit) {
	for _, r := range m.Requests {
		ps.prove(m, r.ID)
	}
}

func (p *peer) registrations() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.regs
}

func (p *peer) submitted() []*pecwire.Submit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*pecwire.Submit(nil), p.submits...)
}

// blackholeUDP is a UDP port that takes datagrams and never answers: what
// a client sees when a firewall drops UDP.
func blackholeUDP(t testing.TB) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.LocalAddr().String()
}

func bundleOf(name string, key cloudKey, points ...Point) *Bundle {
	return &Bundle{Version: pecwire.BundleVersion, Name: name, Points: points, SPKISHA256: key.pin}
}
