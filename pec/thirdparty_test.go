package pec

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"net"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/cloud"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/testbed"
)

// stallID is an enhancement whose prover never answers: what a submitter
// gets from the notary enhancement naming a target that accepts TCP and
// never speaks, in the test's time.
const stallID pkie.ID = 0xFF43

type stallProver struct{}

func (stallProver) ID() pkie.ID { return stallID }
func (stallProver) Prove(ctx context.Context, _ *pkie.ProveRequest) (*pkie.Proof, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// delayedGate answers as the gate prover does, after delay: longer than a
// copy's 1 ms budget.
type delayedGate struct {
	*gateProver
	delay time.Duration
}

func (d delayedGate) Prove(ctx context.Context, req *pkie.ProveRequest) (*pkie.Proof, error) {
	select {
	case <-time.After(d.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return d.gateProver.Prove(ctx, req)
}

// thirdPartyWorld is a cloud on loopback (TLS over TCP) hosting the gate
// and the stall enhancements, a client registered with it, a PEC server
// (pec.Listener) for site.test forwarding to it, and a client-server
// Dialer whose connections go through observe, if set, on their way to
// the server: an eavesdropper on the client's path.
type thirdPartyWorld struct {
	cl     *cloud.Cloud
	addr   string // the cloud's TCP address
	pin    [32]byte
	client *Client
	server *pecServer
	pki    *testPKI
	dialer *Dialer
	// metrics reads the cloud's /metrics.
	metrics *csWorld
}

func newThirdPartyWorld(t *testing.T, observe func(hello []byte)) *thirdPartyWorld {
	t.Helper()
	g := newGateProver(newEd25519(t))
	g.open()
	reg := testRegistry(t)
	cert, _, _, err := cloud.NewCertificate("third-party")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cloud.New(cloud.Config{Certificate: cert, Provers: []pkie.Prover{delayedGate{g, 20 * time.Millisecond}, stallProver{}}, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go cl.ServeTCP(ctx, ln)
	metrics := httptest.NewServer(cl.Handler())
	t.Cleanup(func() { cancel(); metrics.Close(); cl.Wait() })
	leafCert, _ := x509.ParseCertificate(cert.Certificate[0])
	w := &thirdPartyWorld{cl: cl, addr: ln.Addr().String(), pin: pecwire.SPKIHash(leafCert), pki: newTestPKI(t)}
	bundle := &Bundle{Version: pecwire.BundleVersion, Name: "third-party", Points: []pecwire.Point{{TCP: w.addr}},
		SPKISHA256: hex.EncodeToString(w.pin[:])}
	w.client = dialCloud(t, bundle, TransportTCP)
	cs := &csWorld{client: w.client, cloud: &testbed.Cloud{HTTP: metrics.URL}}
	w.metrics = cs
	allow, _ := AllowBundle(bundle)
	w.server = cs.startServer(t, ServerConfig{Clouds: allow, TLSConfig: &tls.Config{Certificates: []tls.Certificate{w.pki.leaf.TLSCertificate()}}})
	w.dialer = &Dialer{Cloud: w.client, Verifiers: []pkie.Verifier{gateVerifier{pub: g.key.Public().(ed25519.PublicKey)}}, Registry: reg,
		Require: []string{"ca", "gate"}, TLSConfig: &tls.Config{RootCAs: w.pki.root.Pool()}, ProofTimeout: 10 * time.Second,
		ServerGrace: 100 * time.Millisecond,
		NetDial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, w.server.addr)
			if err != nil || observe == nil {
				return c, err
			}
			return &observedConn{Conn: c, observe: observe}, nil
		}}
	return w
}

// observedConn hands the client's first flight to observe before it goes
// out, so that whoever observes is first at the cloud.
type observedConn struct {
	net.Conn
	once    sync.Once
	observe func([]byte)
}

func (c *observedConn) Write(b []byte) (int, error) {
	c.once.Do(func() { c.observe(bytes.Clone(b)) })
	return c.Conn.Write(b)
}

// attacker opens a session to the cloud that never registers.
func (w *thirdPartyWorld) attacker(t *testing.T) *pecwire.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pecwire.DialTCP(ctx, w.addr, pecwire.ClientTLS(w.pin))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dialSite dials site.test n times in a row, each connection to be
// trusted.
func (w *thirdPartyWorld) dialSite(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, err := w.dialer.Dial(ctx, "tcp", "site.test:"+w.server.port)
		cancel()
		if err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		if c.Verdict().Result != check.Trusted || !c.Evidence().Extension {
			t.Fatalf("connection %d: verdict %s, evidence %+v", i+1, c.Verdict().Result, c.Evidence())
		}
		c.Close()
	}
}

// TestDialerUnderIdentifierFlood: a client's identifier flooded, through the Dialer in
// client-server mode: two sessions that never registered keep 64
// submissions each in flight naming the client's identifier (the one its
// ClientHellos show), at an enhancement that never answers. Before the
// fix they held the client's whole share: the PEC server's forwarding and
// the client's own submission were both refused, and every connection in
// the attack failed (inconclusive).
func TestDialerUnderIdentifierFlood(t *testing.T) {
	w := newThirdPartyWorld(t, nil)
	chain := w.pki.leaf.Chain
	for range 2 {
		a := w.attacker(t)
		for i := range 64 {
			m := &pecwire.Submit{ClientID: pecwire.ClientID(w.client.ID()), Nonce: pecwire.Nonce{byte(i), 0xA7}, Budget: 10 * time.Second,
				ServerName: "site.test", Port: 443, Requests: []pkie.Request{{ID: stallID}}, Chain: chain}
			if err := a.Send(m, time.Now().Add(10*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		// The Pong comes after every submission was handled.
		if err := a.Send(&pecwire.Ping{Seq: 1}, time.Now().Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := a.Recv(time.Now().Add(10 * time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := m.(*pecwire.Pong); ok {
				break
			}
		}
	}
	w.dialSite(t, 5)
}

// TestDialerCopiedTicket: an eavesdropper on the client's path copies each
// ClientHello's PEC extension and, before the ClientHello reaches the
// server, submits with its ticket the connection's own submission (the
// server's chain, which the server sends to anyone) with a 1 ms budget
// (the copy's budget must not govern the client's), then the ticket
// again with another chain. Every connection is still trusted: the copy
// costs the client at most the server grace, nothing more.
func TestDialerCopiedTicket(t *testing.T) {
	var w *thirdPartyWorld
	var a *pecwire.Conn
	copies := 0
	w = newThirdPartyWorld(t, func(flight []byte) {
		_, h, err := readClientHello(bytes.NewReader(flight), MaxClientHello)
		if err != nil || !h.HasPEC {
			t.Errorf("the observer saw no PEC extension: %v", err)
			return
		}
		ext, err := ParseExtension(h.PEC)
		if err != nil {
			t.Errorf("the observer cannot parse the extension: %v", err)
			return
		}
		port, _ := strconv.Atoi(w.server.port)
		m := &pecwire.ServerSubmit{Ticket: pecwire.Ticket(ext.Ticket), Submit: pecwire.Submit{ClientID: pecwire.ClientID(ext.ClientID), Nonce: pecwire.Nonce(ext.Nonce),
			Budget: time.Millisecond, ServerName: h.ServerName, Port: uint16(port), Requests: ext.Requests, Chain: w.pki.leaf.Chain}}
		other := *m
		other.Submit.Chain = w.pki.leaf.Chain[len(w.pki.leaf.Chain)-1:]
		for _, x := range []*pecwire.ServerSubmit{m, &other} {
			if err := a.Send(x, time.Now().Add(10*time.Second)); err != nil {
				t.Error(err)
			}
		}
		// The copies reach the cloud before the ClientHello goes on to
		// the server: the cloud answers a Ping after every message sent
		// before it, so the copy is always first (under load the server
		// could otherwise win every race, and the budget rule go untested).
		copies++
		if err := a.Send(&pecwire.Ping{Seq: uint64(copies)}, time.Now().Add(10*time.Second)); err != nil {
			t.Error(err)
			return
		}
		for {
			m, err := a.Recv(time.Now().Add(10 * time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			if _, ok := m.(*pecwire.Pong); ok {
				return
			}
		}
	})
	a = w.attacker(t)
	w.dialSite(t, 6)
	if copies != 6 {
		t.Fatalf("the observer copied %d ClientHellos, want 6", copies)
	}
	// Of the three uses of each ticket (the copy, the copy with another
	// chain, the server's) one was taken; the copy, first at the cloud,
	// ran out of its 1 ms unheard by the client.
	if got := w.metrics.metric(t, `pkie_cloud_submissions_total{outcome="replayed_ticket"}`); got != 12 {
		t.Errorf("%d uses of a used ticket refused, want 12", got)
	}
	if got := w.metrics.metric(t, `pkie_cloud_proofs_total{pkie="gate",status="timeout_unsent"}`); got < 1 {
		t.Errorf("no copy ran out of its budget: the test did not test it")
	}
}
