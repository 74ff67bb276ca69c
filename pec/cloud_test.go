package pec

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
	"encoding/hex"
	"math/big"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/cloud"
	"github.com/pkie/pkie/internal/pecwire"
)

// These tests run the client against the real cloud (internal/cloud) on
// loopback, hosting a small real enhancement: its proof is an Ed25519
// signature over the server name and the leaf's hash, which the tests
// verify, so a delivered proof is known to be the one the cloud's prover
// made for this chain.

type signerProver struct {
	id  pkie.ID
	key ed25519.PrivateKey
	// gate, when not nil, holds every proof until it is closed or the
	// submission's budget ends: a prover that withholds.
	gate    chan struct{}
	started chan struct{}
}

func newSignerProver(id pkie.ID) *signerProver {
	_, k, _ := ed25519.GenerateKey(rand.Reader)
	return &signerProver{id: id, key: k}
}

func (s *signerProver) ID() pkie.ID { return s.id }

func signed(name string, leaf []byte) []byte {
	h := sha256.Sum256(leaf)
	return append([]byte("pec client test/"+name+"/"), h[:]...)
}

func (s *signerProver) Prove(ctx context.Context, req *pkie.ProveRequest) (*pkie.Proof, error) {
	if s.started != nil {
		select {
		case s.started <- struct{}{}:
		default:
		}
	}
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &pkie.Proof{ID: s.id, Version: 1, Body: ed25519.Sign(s.key, signed(req.ServerName, req.Chain[0]))}, nil
}

func (s *signerProver) verify(name string, leaf []byte, p *pkie.Proof) bool {
	return p != nil && p.ID == s.id && ed25519.Verify(s.key.Public().(ed25519.PublicKey), signed(name, leaf), p.Body)
}

// realCloud is one replica of the cloud serving QUIC and TCP on loopback.
type realCloud struct {
	*cloud.Cloud
	pt     Point
	cancel context.CancelFunc
	once   sync.Once
	done   chan struct{}
}

func newRealCloudCert(t testing.TB) (tls.Certificate, string) {
	t.Helper()
	cert, _, _, err := cloud.NewCertificate("pec client test")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	h := pecwire.SPKIHash(leaf)
	return cert, hex.EncodeToString(h[:])
}

func startRealCloud(t testing.TB, cert tls.Certificate, cfg cloud.Config) *realCloud {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return startRealCloudOn(t, cert, cfg, pc)
}

// startRealCloudOn starts a replica whose QUIC listener uses pc.
func startRealCloudOn(t testing.TB, cert tls.Certificate, cfg cloud.Config, pc net.PacketConn) *realCloud {
	t.Helper()
	cfg.Certificate = cert
	c, err := cloud.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rc := &realCloud{Cloud: c, pt: Point{QUIC: pc.LocalAddr().String(), TCP: ln.Addr().String()}, cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(func() { c.ServeQUIC(ctx, pc) })
	wg.Go(func() { c.ServeTCP(ctx, ln) })
	go func() {
		wg.Wait()
		c.Wait()
		pc.Close()
		close(rc.done)
	}()
	t.Cleanup(rc.stop)
	return rc
}

// stop ends the replica as its process ending would: listeners and every
// session closed.
func (rc *realCloud) stop() {
	rc.once.Do(rc.cancel)
	<-rc.done
}

// testLeaf is a real DER certificate for name: the cloud parses chains.
func testLeaf(t testing.TB, name string) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func realSubmission(t testing.TB, name string, budget time.Duration, ids ...pkie.ID) Submission {
	s := Submission{ServerName: name, Port: 443, Chain: [][]byte{testLeaf(t, name)}, Budget: budget}
	for _, id := range ids {
		s.Requests = append(s.Requests, pkie.Request{ID: id})
	}
	return s
}

// wantSigned checks that every outcome is a proof the prover made for the
// submission's chain, delivered by a cloud whose label contains from.
func wantSigned(t *testing.T, got map[pkie.ID]Outcome, sub Submission, from string, provers ...*signerProver) {
	t.Helper()
	if len(got) != len(provers) {
		t.Fatalf("%d outcomes, want %d: %+v", len(got), len(provers), got)
	}
	for _, p := range provers {
		o := got[p.id]
		if o.Status != ProofOK || !p.verify(sub.ServerName, sub.Chain[0], o.Proof) {
			t.Fatalf("outcome for %s: %+v, want the prover's proof for this chain", p.id, o)
		}
		if !strings.Contains(o.Cloud, from) {
			t.Fatalf("outcome for %s delivered by %q, want %q", p.id, o.Cloud, from)
		}
	}
}

func TestRealCloudTransports(t *testing.T) {
	cert, pin := newRealCloudCert(t)
	ct, rev := newSignerProver(pkie.CT), newSignerProver(pkie.Revocation)
	rc := startRealCloud(t, cert, cloud.Config{Provers: []pkie.Prover{ct, rev}, Keepalive: 200 * time.Millisecond})
	blocked := rc.pt
	blocked.QUIC = blackholeUDP(t)
	for _, tc := range []struct {
		name, transport string
		pt              Point
		want            string
	}{
		{"quic", TransportQUIC, rc.pt, "quic"},
		{"tcp", TransportTCP, rc.pt, "tcp"},
		{"auto", TransportAuto, rc.pt, "quic"},
		{"auto-udp-blocked", TransportAuto, blocked, "tcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, ClientConfig{Clouds: []*Bundle{{Version: pecwire.BundleVersion, Name: "real", Points: []Point{tc.pt}, SPKISHA256: pin}}, Transport: tc.transport, FallbackDelay: 100 * time.Millisecond})
			st := c.Status()
			if st.Transport != tc.want || st.Cloud != "real" || st.Keepalive != 200*time.Millisecond {
				t.Fatalf("status %+v, want %s", st, tc.want)
			}
			sub := realSubmission(t, "site.example", 10*time.Second, pkie.CT, pkie.Revocation, pkie.Notary)
			pend, err := c.Submit(context.Background(), sub)
			if err != nil {
				t.Fatal(err)
			}
			got := waitAll(t, pend)
			if o := got[pkie.Notary]; o.Status != ProofUnsupported {
				t.Fatalf("outcome for an enhancement the cloud does not host: %+v", o)
			}
			delete(got, pkie.Notary)
			wantSigned(t, got, sub, "via "+tc.want, ct, rev)
			eventually(t, "a pong", func() bool { return !c.Status().LastPong.IsZero() })
			if st := c.Status(); st.Failovers != 0 || st.ClientID != c.ID() {
				t.Fatalf("status %+v", st)
			}
		})
	}
}

// TestRealCloudFailover: the primary cloud's prover is slow and the
// primary stops with a submission pending; the client registers with the
// secondary cloud and resubmits there, which proves it.
func TestRealCloudFailover(t *testing.T) {
	for _, transport := range []string{TransportQUIC, TransportTCP} {
		t.Run(transport, func(t *testing.T) {
			certA, pinA := newRealCloudCert(t)
			certB, pinB := newRealCloudCert(t)
			slow := newSignerProver(pkie.CT)
			slow.gate = make(chan struct{})
			slow.started = make(chan struct{}, 1)
			ct := newSignerProver(pkie.CT)
			a := startRealCloud(t, certA, cloud.Config{Provers: []pkie.Prover{slow}})
			b := startRealCloud(t, certB, cloud.Config{Provers: []pkie.Prover{ct}})
			c := dial(t, ClientConfig{Clouds: []*Bundle{
				{Version: pecwire.BundleVersion, Name: "primary", Points: []Point{a.pt}, SPKISHA256: pinA},
				{Version: pecwire.BundleVersion, Name: "secondary", Points: []Point{b.pt}, SPKISHA256: pinB},
			}, Transport: transport})
			if c.Status().Cloud != "primary" {
				t.Fatalf("status %+v", c.Status())
			}
			sub := realSubmission(t, "site.example", 20*time.Second, pkie.CT)
			pend, err := c.Submit(context.Background(), sub)
			if err != nil {
				t.Fatal(err)
			}
			<-slow.started
			a.stop()
			wantSigned(t, waitAll(t, pend), sub, "secondary", ct)
			st := c.Status()
			if st.Cloud != "secondary" || st.Failovers != 1 || st.LastFailover <= 0 || st.Transport != transport {
				t.Fatalf("status %+v", st)
			}
			t.Logf("failover over %s took %v", transport, st.LastFailover)
		})
	}
}

// TestRealCloudBusy: a cloud at its bound on jobs refuses a submission as
// busy. OnBusy "next" retries it once at the next cloud, which proves it;
// "fail" delivers ProofBusy.
func TestRealCloudBusy(t *testing.T) {
	for _, policy := range []string{BusyNext, BusyFail} {
		t.Run(policy, func(t *testing.T) {
			certA, pinA := newRealCloudCert(t)
			certB, pinB := newRealCloudCert(t)
			slow := newSignerProver(pkie.CT)
			slow.gate = make(chan struct{})
			slow.started = make(chan struct{}, 1)
			ct := newSignerProver(pkie.CT)
			a := startRealCloud(t, certA, cloud.Config{Provers: []pkie.Prover{slow}, MaxJobs: 1})
			b := startRealCloud(t, certB, cloud.Config{Provers: []pkie.Prover{ct}})
			c := dial(t, ClientConfig{Clouds: []*Bundle{
				{Version: pecwire.BundleVersion, Name: "primary", Points: []Point{a.pt}, SPKISHA256: pinA},
				{Version: pecwire.BundleVersion, Name: "secondary", Points: []Point{b.pt}, SPKISHA256: pinB},
			}, OnBusy: policy})
			firstSub := realSubmission(t, "one.example", 20*time.Second, pkie.CT)
			first, err := c.Submit(context.Background(), firstSub)
			if err != nil {
				t.Fatal(err)
			}
			<-slow.started // the primary's one job is taken
			sub := realSubmission(t, "two.example", 20*time.Second, pkie.CT)
			pend, err := c.Submit(context.Background(), sub)
			if err != nil {
				t.Fatal(err)
			}
			got := waitAll(t, pend)
			if policy == BusyNext {
				wantSigned(t, got, sub, "secondary", ct)
			} else if o := got[pkie.CT]; o.Status != ProofBusy || !strings.Contains(o.Text, "busy") || !strings.Contains(o.Cloud, "primary") {
				t.Fatalf("outcome %+v, want busy from the primary", o)
			}
			if st := c.Status(); st.Cloud != "primary" || st.Failovers != 0 {
				t.Fatalf("status %+v: a busy submission moved the client", st)
			}
			close(slow.gate)
			wantSigned(t, waitAll(t, first), firstSub, "primary", slow)
		})
	}
}

// TestRealCloudWithholds: the cloud's prover never answers; the outcome is
// ProofTimeout at the budget, and the client stays registered.
func TestRealCloudWithholds(t *testing.T) {
	cert, pin := newRealCloudCert(t)
	slow := newSignerProver(pkie.CT)
	slow.gate = make(chan struct{})
	ct := newSignerProver(pkie.Revocation)
	rc := startRealCloud(t, cert, cloud.Config{Provers: []pkie.Prover{slow, ct}})
	c := dial(t, ClientConfig{Clouds: []*Bundle{{Version: pecwire.BundleVersion, Name: "real", Points: []Point{rc.pt}, SPKISHA256: pin}}})
	sub := realSubmission(t, "site.example", 500*time.Millisecond, pkie.CT, pkie.Revocation)
	pend, err := c.Submit(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	got := waitAll(t, pend)
	if o := got[pkie.CT]; o.Status != ProofTimeout || !strings.Contains(o.Text, "budget") {
		t.Fatalf("withheld proof: %+v", o)
	}
	delete(got, pkie.CT)
	wantSigned(t, got, sub, "real", ct)
	if st := c.Status(); !st.Connected || st.Failovers != 0 || st.Pending != 0 {
		t.Fatalf("status %+v", st)
	}
}

// cutConn is a cloud's UDP socket with a switch that silently drops every
// datagram both ways: the network path to a replica gone, the process
// still running.
type cutConn struct {
	net.PacketConn
	cut atomic.Bool
}

func (c *cutConn) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		n, a, err := c.PacketConn.ReadFrom(p)
		if err != nil || !c.cut.Load() {
			return n, a, err
		}
	}
}

// SetReadBuffer and SetWriteBuffer let quic-go size the socket's buffers
// as it does for a plain UDP socket.
func (c *cutConn) SetReadBuffer(n int) error  { return c.PacketConn.(*net.UDPConn).SetReadBuffer(n) }
func (c *cutConn) SetWriteBuffer(n int) error { return c.PacketConn.(*net.UDPConn).SetWriteBuffer(n) }

func (c *cutConn) WriteTo(p []byte, a net.Addr) (int, error) {
	if c.cut.Load() {
		return len(p), nil
	}
	return c.PacketConn.WriteTo(p, a)
}

// TestRealCloudSilentFailover: the path to the primary cloud goes silent
// (no close, no reset: datagrams just stop); after MissedPings unanswered
// pings the client registers with the secondary and resubmits the pending
// submission there.
func TestRealCloudSilentFailover(t *testing.T) {
	certA, pinA := newRealCloudCert(t)
	certB, pinB := newRealCloudCert(t)
	slow := newSignerProver(pkie.CT)
	slow.gate = make(chan struct{})
	slow.started = make(chan struct{}, 1)
	ct := newSignerProver(pkie.CT)
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cut := &cutConn{PacketConn: udp}
	// A stall of the loaded machine as long as three keepalives can end
	// the secondary's session too: the test wants at least one failover
	// and the secondary in the end, not an exact count.
	const keepalive = 250 * time.Millisecond
	a := startRealCloudOn(t, certA, cloud.Config{Provers: []pkie.Prover{slow}}, cut)
	b := startRealCloud(t, certB, cloud.Config{Provers: []pkie.Prover{ct}})
	c := dial(t, ClientConfig{Clouds: []*Bundle{
		{Version: pecwire.BundleVersion, Name: "primary", Points: []Point{{QUIC: a.pt.QUIC}}, SPKISHA256: pinA},
		{Version: pecwire.BundleVersion, Name: "secondary", Points: []Point{b.pt}, SPKISHA256: pinB},
	}, Keepalive: keepalive, MissedPings: 3})
	if st := c.Status(); st.Cloud != "primary" || st.Transport != "quic" {
		t.Fatalf("status %+v", st)
	}
	sub := realSubmission(t, "site.example", 20*time.Second, pkie.CT)
	pend, err := c.Submit(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	<-slow.started
	cut.cut.Store(true)
	wantSigned(t, waitAll(t, pend), sub, "secondary", ct)
	eventually(t, "a session with the secondary", func() bool { st := c.Status(); return st.Connected && st.Cloud == "secondary" })
	st := c.Status()
	if st.Failovers < 1 || !strings.Contains(st.LastError, "3 pings unanswered") || st.LastFailover <= 0 {
		t.Fatalf("status %+v", st)
	}
	t.Logf("failover after 3 missed pings at %v took %v from the first missed pong deadline", keepalive, st.LastFailover)
}
