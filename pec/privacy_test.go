package pec

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/cloud"
	"github.com/pkie/pkie/internal/forwarder"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/pkies/builtin"
	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/pkies/revocation"
	ctprover "github.com/pkie/pkie/internal/provers/ct"
	revprover "github.com/pkie/pkie/internal/provers/revocation"
	"github.com/pkie/pkie/internal/testbed"
)

// The privacy tests give each party its own loopback address: the client
// dials from 127.0.0.1 (the system's choice for loopback), the forwarder
// listens on 127.0.0.2 and relays from it, the cloud listens on 127.0.0.3.
const (
	fwdIP   = "127.0.0.2"
	cloudIP = "127.0.0.3"
)

// captureListener records the remote address of every connection a
// listener accepts.
type captureListener struct {
	net.Listener
	mu      sync.Mutex
	remotes []string
}

func (l *captureListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.remotes = append(l.remotes, c.RemoteAddr().String())
		l.mu.Unlock()
	}
	return c, err
}

func (l *captureListener) seen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.remotes...)
}

// tap records every frame the forwarder receives and sends.
type tap struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	n       map[string]int
	frames  []tapFrame
	changed chan struct{} // closed, and replaced, at every frame
}

// tapFrame is one frame the forwarder received ("in") or sent ("out").
type tapFrame struct {
	dir   string
	frame []byte
}

func (t *tap) record(dir string, frame []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n = map[string]int{}
	}
	t.n[dir]++
	t.buf.Write(frame)
	t.frames = append(t.frames, tapFrame{dir, bytes.Clone(frame)})
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// since returns the frames recorded from the i-th on.
func (t *tap) since(i int) []tapFrame {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]tapFrame(nil), t.frames[i:]...)
}

// len is the number of frames recorded.
func (t *tap) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.frames)
}

// waitFor waits until ok holds of the frames recorded, or ctx ends.
func (t *tap) waitFor(ctx context.Context, ok func([]tapFrame) bool) error {
	for {
		t.mu.Lock()
		if ok(t.frames) {
			t.mu.Unlock()
			return nil
		}
		if t.changed == nil {
			t.changed = make(chan struct{})
		}
		ch := t.changed
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (t *tap) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.buf.Bytes())
}

type privWorld struct {
	cloud      *Bundle
	cloudLn    *captureListener
	fwd        *Bundle
	forwarder  *forwarder.Forwarder
	tap        *tap
	registry   *pkie.Registry
	hpkeKey    hpke.PrivateKey
	cloudCount int
}

// startPrivCloud runs a cloud with an HPKE key hosting provers on
// cloudIP, over TCP, recording who connects.
func startPrivCloud(t testing.TB, reg *pkie.Registry, provers ...pkie.Prover) (*Bundle, *captureListener) {
	t.Helper()
	return startPrivCloudCfg(t, cloud.Config{}, reg, provers...)
}

func startPrivCloudCfg(t testing.TB, cfg cloud.Config, reg *pkie.Registry, provers ...pkie.Prover) (*Bundle, *captureListener) {
	t.Helper()
	cert, _, _, err := cloud.NewCertificate("privacy-test-cloud")
	if err != nil {
		t.Fatal(err)
	}
	priv, err := hpke.DHKEM(ecdh.X25519()).GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Certificate, cfg.Provers, cfg.Registry, cfg.HPKEKey = cert, provers, reg, priv
	c, err := cloud.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", cloudIP+":0")
	if err != nil {
		t.Skipf("no %s on this host: %v", cloudIP, err)
	}
	ln := &captureListener{Listener: raw}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.ServeTCP(ctx, ln); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		c.Wait()
	})
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	pin := pecwire.SPKIHash(leaf)
	return &Bundle{Version: pecwire.BundleVersion, Name: "privacy-test-cloud",
		Points:     []pecwire.Point{{TCP: raw.Addr().String()}},
		SPKISHA256: hex.EncodeToString(pin[:]), HPKE: pecwire.NewHPKEKey(cloud.HPKEKeyID, priv)}, ln
}

// fwdSockets are a forwarder's certificate and listeners on fwdIP, made
// before the forwarder so that a cloud can list its bundle.
type fwdSockets struct {
	cert   tls.Certificate
	ln     net.Listener
	pc     net.PacketConn
	bundle *Bundle
}

func listenForwarder(t testing.TB) *fwdSockets {
	t.Helper()
	cert, _, _, err := cloud.NewCertificate("privacy-test-forwarder")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", fwdIP+":0")
	if err != nil {
		t.Skipf("no %s on this host: %v", fwdIP, err)
	}
	pc, err := net.ListenPacket("udp", fwdIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	pin := pecwire.SPKIHash(leaf)
	return &fwdSockets{cert: cert, ln: ln, pc: pc, bundle: &Bundle{Version: pecwire.BundleVersion, Name: "privacy-test-forwarder",
		Points:     []pecwire.Point{{QUIC: pc.LocalAddr().String(), TCP: ln.Addr().String()}},
		SPKISHA256: hex.EncodeToString(pin[:])}}
}

// startForwarder runs a forwarder on fwdIP, QUIC and TCP, relaying to
// clouds and recording every frame.
func startForwarder(t testing.TB, cfg forwarder.Config, clouds ...*Bundle) (*Bundle, *forwarder.Forwarder, *tap) {
	t.Helper()
	return startForwarderOn(t, listenForwarder(t), cfg, clouds...)
}

func startForwarderOn(t testing.TB, fs *fwdSockets, cfg forwarder.Config, clouds ...*Bundle) (*Bundle, *forwarder.Forwarder, *tap) {
	t.Helper()
	k := make([]byte, 32)
	rand.Read(k)
	tp := &tap{}
	cfg.Certificate, cfg.EphIDKey, cfg.Clouds, cfg.Tap = fs.cert, k, clouds, tp.record
	cfg.UpstreamBind = net.ParseIP(fwdIP)
	f, err := forwarder.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.ServeTCP(ctx, fs.ln) })
	wg.Go(func() { f.ServeQUIC(ctx, fs.pc) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		f.Wait()
		fs.pc.Close()
	})
	return fs.bundle, f, tp
}

func dialPrivateClient(t testing.TB, cloudB, fwdB *Bundle, transport string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, ClientConfig{Clouds: []*Bundle{cloudB}, Forwarder: fwdB, Transport: transport, EphIDBatch: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestPrivacyEndToEnd: a client in privacy mode, with the real ct and
// revocation enhancements, trusts a good site and refuses a revoked one;
// everything the cloud received came from the forwarder's address, never
// the client's; everything the forwarder received and sent holds no
// server name, no certificate and no proof body in the clear.
// privTTPWorld is a CT log and a revocation authority, their provers and
// verifiers, and sites good.test (logged) and revoked.test (logged, then
// revoked) on loopback.
type privTTPWorld struct {
	root    *testbed.CA
	addr    map[string]string
	leaves  map[string]*testbed.Leaf
	provers []pkie.Prover
	vs      []pkie.Verifier
}

func newPrivTTPWorld(t testing.TB) *privTTPWorld {
	t.Helper()
	return newPrivTTPWorldSites(t, privSite{name: "good.test"}, privSite{name: "revoked.test"})
}

// privSite is a site of a privTTPWorld: deep ones have a chain of three
// certificates (leaf, a second intermediate, the first), the others two.
// A site named revoked.test is revoked.
type privSite struct {
	name string
	deep bool
}

func newPrivTTPWorldSites(t testing.TB, sites ...privSite) *privTTPWorld {
	t.Helper()
	ctx := context.Background()
	root, err := testbed.NewRootCA("PEC Privacy Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{root}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ttp.Close() })
	ca, err := root.NewIntermediate("PEC Privacy CA", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	deep, err := ca.NewIntermediate("PEC Privacy Sub-CA", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	addr := map[string]string{}
	leaves := map[string]*testbed.Leaf{}
	for _, site := range sites {
		name, issuer := site.name, ca
		if site.deep {
			issuer = deep
		}
		leaf, err := issuer.Issue(testbed.LeafOptions{DNSNames: []string{name}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := testbed.StartSite(name, leaf, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		addr[name], leaves[name] = s.Addr.String(), leaf
		if _, err := ttp.LogChain(ctx, leaf.Chain); err != nil {
			t.Fatal(err)
		}
	}
	if l := leaves["revoked.test"]; l != nil {
		if err := ttp.Revoke(ctx, ca, l.Cert.SerialNumber); err != nil {
			t.Fatal(err)
		}
	}
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	ctP, err := ctprover.NewProver(ctx, pkie.ProverEnv{DataDir: t.TempDir()}, ttp.CTProverConfig().JSON())
	if err != nil {
		t.Fatal(err)
	}
	revP, err := revprover.NewProver(ctx, pkie.ProverEnv{DataDir: t.TempDir()}, revprover.ProverConfig{AuthorityURL: ttp.RevocationURL, AuthorityKey: ttp.RevocationKey}.JSON())
	if err != nil {
		t.Fatal(err)
	}
	ctV, err := ct.NewVerifier(ttp.CTVerifierConfig().JSON())
	if err != nil {
		t.Fatal(err)
	}
	revV, err := revocation.NewVerifier(revocation.VerifierConfig{Key: ttp.RevocationKey}.JSON())
	if err != nil {
		t.Fatal(err)
	}
	return &privTTPWorld{root: root, addr: addr, leaves: leaves, provers: []pkie.Prover{ctP, revP}, vs: []pkie.Verifier{ctV, revV}}
}

func TestPrivacyEndToEnd(t *testing.T) {
	ctx := context.Background()
	w := newPrivTTPWorld(t)
	root, addr, leaves := w.root, w.addr, w.leaves
	ctV, revV := w.vs[0], w.vs[1]
	reg := builtin.Registry()
	cloudB, cloudLn := startPrivCloud(t, reg, w.provers...)
	fwdB, _, tp := startForwarder(t, forwarder.Config{}, cloudB)

	var bodies [][]byte
	for _, transport := range []string{pecwire.TCP, pecwire.QUIC} {
		cl := dialPrivateClient(t, cloudB, fwdB, transport)
		if !cl.Private() {
			t.Fatal("client not in privacy mode")
		}
		for _, tt := range []struct {
			site string
			want check.Result
		}{{"good.test", check.Trusted}, {"revoked.test", check.Untrusted}} {
			t.Run(transport+"/"+tt.site, func(t *testing.T) {
				dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				d := &Dialer{Cloud: cl, Verifiers: []pkie.Verifier{ctV, revV}, Registry: reg,
					TLSConfig: &tls.Config{RootCAs: root.Pool(), ServerName: tt.site}, ProofTimeout: 15 * time.Second}
				c, err := d.Dial(dctx, "tcp", addr[tt.site])
				var v *check.Verdict
				if tt.want == check.Trusted {
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					v = c.Verdict()
				} else {
					var ve *VerdictError
					if !errors.As(err, &ve) {
						t.Fatalf("got %v, %v; want a *VerdictError", c, err)
					}
					v = ve.Verdict
				}
				if v.Result != tt.want {
					t.Fatalf("verdict %s: %s; want %s\n%s", v.Result, v.Headline, tt.want, strings.Join(v.Reasons, "\n"))
				}
				a, _ := v.Source("revocation")
				if want := map[check.Result]check.Status{check.Trusted: check.Pass, check.Untrusted: check.Fail}[tt.want]; a.Status != want {
					t.Errorf("revocation %+v, want %s", a, want)
				}
				if tt.want == check.Untrusted && !strings.Contains(a.Detail, "revoked") {
					t.Errorf("revocation failed with %q, want it to say revoked", a.Detail)
				}
			})
		}
		// The proof bodies themselves, to search the forwarder's bytes
		// for.
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		p, err := cl.Submit(sctx, Submission{ServerName: "good.test", Port: 443, Chain: leaves["good.test"].Chain,
			Requests: []pkie.Request{{ID: pkie.CT}, {ID: pkie.Revocation}}, Budget: 15 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		out := p.Wait(sctx)
		cancel()
		for _, id := range []pkie.ID{pkie.CT, pkie.Revocation} {
			o := out[id]
			if o.Status != ProofOK || o.Proof == nil || len(o.Proof.Body) < 32 {
				t.Fatalf("%s: %+v", id, o)
			}
			bodies = append(bodies, o.Proof.Body)
		}
	}

	// The cloud heard from the forwarder's address only.
	seen := cloudLn.seen()
	if len(seen) == 0 {
		t.Fatal("the cloud received no connection")
	}
	for _, a := range seen {
		if host, _, _ := net.SplitHostPort(a); host != fwdIP {
			t.Errorf("the cloud received a connection from %s; want only the forwarder's %s", a, fwdIP)
		}
	}
	// The forwarder saw traffic both ways, and none of it in the clear.
	capture := tp.bytes()
	if tp.n["in"] < 8 || tp.n["out"] < 8 {
		t.Fatalf("forwarder capture: %v frames", tp.n)
	}
	for _, name := range []string{"good.test", "revoked.test"} {
		if bytes.Contains(capture, []byte(name)) {
			t.Errorf("the forwarder's capture holds the server name %q", name)
		}
		for i, der := range leaves[name].Chain {
			if bytes.Contains(capture, der) || bytes.Contains(capture, der[len(der)-64:]) {
				t.Errorf("the forwarder's capture holds certificate %d of %s", i, name)
			}
		}
		if bytes.Contains(capture, leaves[name].Cert.RawSubjectPublicKeyInfo) {
			t.Errorf("the forwarder's capture holds the key of %s", name)
		}
	}
	for i, b := range bodies {
		if bytes.Contains(capture, b) || bytes.Contains(capture, b[:32]) {
			t.Errorf("the forwarder's capture holds proof body %d", i)
		}
	}
}

// forwarderSession opens a raw session with the forwarder, registers it
// and fetches n identifiers; n < 0: it does not register (a cloud's
// session).
func forwarderSession(t testing.TB, fwdB *Bundle, n int) (*pecwire.Conn, [][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pin, _ := fwdB.Pin()
	conn, err := pecwire.DialTCP(ctx, fwdB.Points[0].TCP, pecwire.ClientTLS(pin))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	dl := time.Now().Add(10 * time.Second)
	if n < 0 {
		return conn, nil
	}
	if err := conn.Send(&pecwire.Register{Version: pecwire.Version}, dl); err != nil {
		t.Fatal(err)
	}
	if m, err := conn.Recv(dl); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*pecwire.Registered); !ok {
		t.Fatalf("got %T", m)
	}
	if n == 0 {
		return conn, nil
	}
	if err := conn.Send(&pecwire.EphIDRequest{Count: uint8(n)}, dl); err != nil {
		t.Fatal(err)
	}
	m, err := conn.Recv(dl)
	if err != nil {
		t.Fatal(err)
	}
	ids, ok := m.(*pecwire.EphIDs)
	if !ok || len(ids.IDs) != n {
		t.Fatalf("got %+v", m)
	}
	seen := map[string]bool{}
	for _, id := range ids.IDs {
		if seen[string(id)] {
			t.Fatal("the forwarder issued one identifier twice")
		}
		seen[string(id)] = true
	}
	return conn, ids.IDs
}

// TestPrivacyEphIDOnce: an identifier's second use is refused by the
// forwarder, and so is another session's identifier, while a fresh one
// reaches the cloud.
func TestPrivacyEphIDOnce(t *testing.T) {
	sp := newSignerProver(pkie.CT)
	reg := builtin.Registry()
	cloudB, _ := startPrivCloud(t, reg, sp)
	fwdB, _, _ := startForwarder(t, forwarder.Config{}, cloudB)
	pki := newTestPKI(t)
	cpin, _ := cloudB.Pin()

	conn, ids := forwarderSession(t, fwdB, 2)
	_, others := forwarderSession(t, fwdB, 1)
	key := make([]byte, 32)
	rand.Read(key)
	submit := func(eph []byte) pecwire.Message {
		t.Helper()
		env, err := pecwire.SealEnvelope(cloudB.HPKE, eph, key, &pecwire.Submit{Budget: 5 * time.Second,
			ServerName: "site.test", Port: 443, Requests: []pkie.Request{{ID: pkie.CT}}, Chain: pki.leaf.Chain})
		if err != nil {
			t.Fatal(err)
		}
		dl := time.Now().Add(10 * time.Second)
		if err := conn.Send(&pecwire.SealedSubmit{Cloud: cpin, EphID: eph, Envelope: env}, dl); err != nil {
			t.Fatal(err)
		}
		m, err := conn.Recv(dl)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// First use: the cloud's sealed proof comes back and opens.
	m := submit(ids[0])
	sp2, ok := m.(*pecwire.SealedProof)
	if !ok {
		t.Fatalf("first use: got %+v, want a SealedProof", m)
	}
	p, err := pecwire.OpenProof(key, ids[0], sp2.Sealed)
	if err != nil || p.Status != pecwire.ProofOK || !sp.verify("site.test", pki.leaf.Chain[0], p.Proof) {
		t.Fatalf("first use: %+v, %v", p, err)
	}
	// Second use of the same identifier: refused by the forwarder.
	m = submit(ids[0])
	if r, ok := m.(*pecwire.EphIDReject); !ok || r.Code != pecwire.RejectReused || !bytes.Equal(r.EphID, ids[0]) {
		t.Fatalf("second use: got %+v, want EphIDReject reused", m)
	}
	// Another session's identifier: refused.
	m = submit(others[0])
	if r, ok := m.(*pecwire.EphIDReject); !ok || r.Code != pecwire.RejectReused {
		t.Fatalf("foreign identifier: got %+v, want EphIDReject reused", m)
	}
	// A forged identifier: refused.
	forged := bytes.Clone(ids[1])
	forged[len(forged)-1] ^= 1
	m = submit(forged)
	if r, ok := m.(*pecwire.EphIDReject); !ok || r.Code != pecwire.RejectReused {
		t.Fatalf("forged identifier: got %+v, want EphIDReject reused", m)
	}
	// The unused one still works.
	if m = submit(ids[1]); m.Type() != pecwire.TypeSealedProof {
		t.Fatalf("fresh identifier: got %+v", m)
	}
}

// TestPrivacyForgedProof: sealed proofs that do not open with the
// connection's key (tampered, sealed to another key, or to another
// identifier) are dropped by the client and counted; the genuine one is
// delivered.
// TestPrivacyForgedProof is the attack of a server, or anyone on path,
// that read the client's EphID from its ClientHello: on sessions of their
// own with the forwarder they send an EphIDReject and garbage sealed
// proofs under it, to fail the connection or spend the identifier's
// budget. The forwarder refuses them (no client certificate of a
// configured cloud) and ends those sessions; the genuine proof still
// arrives and is trusted. A forgery that did reach the client would be
// refused there (sealed to another key, tampered, under another EphID).
func TestPrivacyForgedProof(t *testing.T) {
	sp := newSignerProver(pkie.CT)
	sp.gate = make(chan struct{})
	sp.started = make(chan struct{}, 1)
	reg := builtin.Registry()
	cloudB, _ := startPrivCloud(t, reg, sp)
	fwdB, _, _ := startForwarder(t, forwarder.Config{MaxPerUse: 4}, cloudB)
	pki := newTestPKI(t)
	cl := dialPrivateClient(t, cloudB, fwdB, pecwire.TCP)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := cl.Submit(ctx, Submission{ServerName: "site.test", Port: 443, Chain: pki.leaf.Chain,
		Requests: []pkie.Request{{ID: pkie.CT}}, Budget: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sp.started:
	case <-ctx.Done():
		t.Fatal("the cloud's prover was never asked")
	}
	cl.mu.Lock()
	var eph []byte
	var key []byte
	for k, w := range cl.priv.waiting {
		eph, key = []byte(k), w.key
	}
	cl.mu.Unlock()
	if eph == nil {
		t.Fatal("nothing waiting")
	}
	genuine := &pecwire.Proof{ID: pkie.CT, Status: pecwire.ProofOK, Proof: &pkie.Proof{ID: pkie.CT, Version: 1, Body: []byte("forged proof body")}}
	otherKey := make([]byte, 32)
	rand.Read(otherKey)
	wrongKey, _ := pecwire.SealProof(otherKey, eph, genuine)
	tampered, _ := pecwire.SealProof(key, eph, genuine)
	tampered[len(tampered)-20] ^= 0x40
	otherEph := bytes.Clone(eph)
	otherEph[3] ^= 1
	wrongEph, _ := pecwire.SealProof(key, otherEph, genuine)
	forgeries := []pecwire.Message{&pecwire.EphIDReject{EphID: eph, Code: pecwire.RejectInvalid, Text: "forged"}}
	for _, sealed := range [][]byte{wrongKey, tampered, wrongEph, wrongKey, tampered, wrongEph} {
		forgeries = append(forgeries, &pecwire.SealedProof{EphID: eph, Sealed: sealed})
	}
	// The attacker, unregistered and then registered as a client: either
	// way the forwarder refuses the message and ends the session.
	for _, n := range []int{-1, 0} {
		for _, m := range forgeries {
			attacker, _ := forwarderSession(t, fwdB, n)
			dl := time.Now().Add(10 * time.Second)
			// The ping's Pong would come first were m accepted.
			if err := attacker.Send(m, dl); err != nil {
				t.Fatal(err)
			}
			attacker.Send(&pecwire.Ping{Seq: 1}, dl)
			got, err := attacker.Recv(dl)
			if e, ok := got.(*pecwire.Error); !ok || e.Code != pecwire.RejectInvalid {
				t.Errorf("attacker (registered %v) sent %T: got %v, %v; want the session refused", n == 0, m, got, err)
			}
		}
	}
	close(sp.gate)
	out := p.Wait(ctx)
	o := out[pkie.CT]
	if o.Status != ProofOK || !sp.verify("site.test", pki.leaf.Chain[0], o.Proof) {
		t.Fatalf("outcome %+v, want the prover's genuine proof", o)
	}
	if n := cl.PrivacyStatus().Forged; n != 0 {
		t.Errorf("forged %d reached the client, want 0", n)
	}
	// The forgeries, had they been relayed, would have been refused at
	// the client too.
	for i, sealed := range [][]byte{wrongKey, tampered, wrongEph} {
		if _, err := pecwire.OpenProof(key, eph, sealed); err == nil {
			t.Errorf("forgery %d opens with the connection's key", i)
		}
	}
}

// TestPrivacyExtensionReject: a rejection under the identifier the client
// put in its PEC extension (seen by the server and anyone on path, and
// not sealed) does not end the connection: it is counted, and the
// genuine sealed proof under that identifier is still delivered.
func TestPrivacyExtensionReject(t *testing.T) {
	reg := builtin.Registry()
	cloudB, _ := startPrivCloud(t, reg, newSignerProver(pkie.CT))
	fwdB, _, _ := startForwarder(t, forwarder.Config{}, cloudB)
	cl := dialPrivateClient(t, cloudB, fwdB, pecwire.TCP)
	e, p := cl.privateExtension([]pkie.Request{{ID: pkie.CT}}, 15*time.Second)
	if e == nil {
		t.Fatal("no extension: no identifier at hand")
	}
	cl.priv.onReject(&pecwire.EphIDReject{EphID: e.EphID, Code: pecwire.RejectInvalid, Text: "forged"})
	if cl.complete(p) {
		t.Fatal("an unsealed rejection under the extension's identifier ended the connection")
	}
	if n := cl.PrivacyStatus().IgnoredRejects; n != 1 {
		t.Errorf("ignored rejections %d, want 1", n)
	}
	// The handshake delivers the chain; the proof is of it.
	sub := Submission{ServerName: "site.test", Port: 443, Chain: [][]byte{{0x30, 0}}, Requests: []pkie.Request{{ID: pkie.CT}}}
	cl.bindExpected(p, sub)
	body := []byte("genuine proof body")
	sealed, err := pecwire.SealProof(e.Key[:], e.EphID, &pecwire.Proof{Digest: sealedDigest(sub), ID: pkie.CT, Status: pecwire.ProofOK, Proof: &pkie.Proof{ID: pkie.CT, Version: 1, Body: body}})
	if err != nil {
		t.Fatal(err)
	}
	cl.priv.onSealed(&pecwire.SealedProof{EphID: e.EphID, Sealed: sealed})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o := p.Wait(ctx)[pkie.CT]
	if o.Status != ProofOK || o.Proof == nil || !bytes.Equal(o.Proof.Body, body) {
		t.Fatalf("outcome %+v, want the sealed proof", o)
	}
}

// TestPrivacyBurst: more connections at once than the identifier batch
// holds: each gets an identifier of its own (waiting for the refill) and
// its proof.
func TestPrivacyBurst(t *testing.T) {
	sp := newSignerProver(pkie.CT)
	reg := builtin.Registry()
	cloudB, _ := startPrivCloud(t, reg, sp)
	fwdB, f, _ := startForwarder(t, forwarder.Config{}, cloudB)
	pki := newTestPKI(t)
	cl := dialPrivateClient(t, cloudB, fwdB, pecwire.TCP) // batches of 4
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			p, err := cl.Submit(ctx, Submission{ServerName: "site.test", Port: 443, Chain: pki.leaf.Chain,
				Requests: []pkie.Request{{ID: pkie.CT}}, Budget: 20 * time.Second})
			if err != nil {
				errs <- err
				return
			}
			if o := p.Wait(ctx)[pkie.CT]; o.Status != ProofOK || !sp.verify("site.test", pki.leaf.Chain[0], o.Proof) {
				errs <- errors.New("outcome " + o.Status.String() + ": " + o.Text)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if f.Config().MaxPerUse != forwarder.DefaultMaxPerUse {
		t.Fatal("defaults not applied")
	}
}

// TestPrivacyClientServer: the client–server deployment in privacy mode.
// The client's PEC extension carries an ephemeral identifier, a key and
// its forwarder's address; a PEC server (the listener under a stock
// net/http server) sends its chain with them to the cloud, which seals
// each proof to the key and sends it to the forwarder on a session of its
// own; the forwarder relays it to the client. With a server grace longer
// than the test, only that path can deliver: a good site is trusted with
// the server's proofs and the client never submitted; a revoked one is
// caught. The forwarder's capture holds no name and no certificate.
func TestPrivacyClientServer(t *testing.T) {
	w := newPrivTTPWorld(t)
	reg := builtin.Registry()
	fs := listenForwarder(t)
	cloudB, _ := startPrivCloudCfg(t, cloud.Config{Forwarders: []*Bundle{fs.bundle}}, reg, w.provers...)
	fwdB, _, tp := startForwarderOn(t, fs, forwarder.Config{}, cloudB)
	allowed, err := AllowBundle(cloudB)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{w.leaves["good.test"].TLSCertificate(), w.leaves["revoked.test"].TLSCertificate()}}
	l, err := NewListener(ln, ServerConfig{TLSConfig: tc, Clouds: allowed})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{TLSConfig: tc, Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Write([]byte("hello from " + r.Host))
	})}
	go srv.ServeTLS(l, "", "")
	t.Cleanup(func() { srv.Close(); l.Close() })

	cl := dialPrivateClient(t, cloudB, fwdB, pecwire.TCP)
	for _, tt := range []struct {
		site string
		want check.Result
	}{{"good.test", check.Trusted}, {"revoked.test", check.Untrusted}} {
		t.Run(tt.site, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			d := &Dialer{Cloud: cl, Verifiers: w.vs, Registry: reg, TLSConfig: &tls.Config{RootCAs: w.root.Pool(), ServerName: tt.site},
				ProofTimeout: 20 * time.Second, ServerGrace: time.Minute}
			c, err := d.Dial(ctx, "tcp", ln.Addr().String())
			var v *check.Verdict
			var ev Evidence
			if tt.want == check.Trusted {
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				v, ev = c.Verdict(), c.Evidence()
			} else {
				var ve *VerdictError
				if !errors.As(err, &ve) {
					t.Fatalf("got %v, %v; want a *VerdictError", c, err)
				}
				v = ve.Verdict
			}
			if v.Result != tt.want {
				t.Fatalf("verdict %s: %s; want %s\n%s", v.Result, v.Headline, tt.want, strings.Join(v.Reasons, "\n"))
			}
			if tt.want == check.Trusted && (!ev.Extension || ev.Submitted) {
				t.Errorf("evidence %+v: want the extension sent and nothing submitted by the client", ev)
			}
			if a, _ := v.Source("revocation"); tt.want == check.Untrusted && (a.Status != check.Fail || !strings.Contains(a.Detail, "revoked")) {
				t.Errorf("revocation %+v", a)
			}
		})
	}
	// The server counts a forward once its write returned, which may be
	// after the cloud has read it and the client has the proofs.
	deadline := time.Now().Add(10 * time.Second)
	for l.Stats().Forwarded < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := l.Stats(); st.Forwarded < 2 {
		t.Errorf("server stats %+v: want both chains forwarded", st)
	}
	capture := tp.bytes()
	for _, name := range []string{"good.test", "revoked.test"} {
		if bytes.Contains(capture, []byte(name)) {
			t.Errorf("the forwarder's capture holds the server name %q", name)
		}
		for i, der := range w.leaves[name].Chain {
			if bytes.Contains(capture, der[len(der)-64:]) {
				t.Errorf("the forwarder's capture holds certificate %d of %s", i, name)
			}
		}
	}
}

// TestPrivacyForwarderLost: when the forwarder shuts down the client
// notices (its session ends), reports it, and registers again with a
// forwarder at the same address; submissions work again with fresh
// identifiers.
func TestPrivacyForwarderLost(t *testing.T) {
	sp := newSignerProver(pkie.CT)
	reg := builtin.Registry()
	cloudB, _ := startPrivCloud(t, reg, sp)
	fs := listenForwarder(t)
	tcpAddr := fs.ln.Addr().String()
	// The forwarder announces a short keepalive; a second forwarder
	// with the same key takes over the address once the first is gone.
	cert := fs.cert
	k := make([]byte, 32)
	rand.Read(k)
	f1, err := forwarder.New(forwarder.Config{Certificate: cert, EphIDKey: k, Clouds: []*Bundle{cloudB}, Keepalive: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	done1 := make(chan struct{})
	go func() { f1.ServeTCP(ctx1, fs.ln); close(done1) }()
	fs.pc.Close()
	b := &Bundle{Version: pecwire.BundleVersion, Name: "lost", Points: []pecwire.Point{{TCP: tcpAddr}}, SPKISHA256: fs.bundle.SPKISHA256}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := Dial(ctx, ClientConfig{Clouds: []*Bundle{cloudB}, Forwarder: b, Transport: TransportTCP, EphIDBatch: 4, Retry: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pki := newTestPKI(t)
	prove := func() {
		t.Helper()
		p, err := cl.Submit(ctx, Submission{ServerName: "site.test", Port: 443, Chain: pki.leaf.Chain,
			Requests: []pkie.Request{{ID: pkie.CT}}, Budget: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if o := p.Wait(ctx)[pkie.CT]; o.Status != ProofOK {
			t.Fatalf("%+v", o)
		}
	}
	prove()
	cancel1()
	<-done1
	f1.Wait()
	for cl.PrivacyStatus().Connected {
		select {
		case <-ctx.Done():
			t.Fatal("the client never noticed the forwarder was gone")
		case <-time.After(10 * time.Millisecond):
		}
	}
	ln2, err := net.Listen("tcp", tcpAddr)
	if err != nil {
		t.Skipf("address taken meanwhile: %v", err)
	}
	f2, err := forwarder.New(forwarder.Config{Certificate: cert, EphIDKey: k, Clouds: []*Bundle{cloudB}})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan struct{})
	go func() { f2.ServeTCP(ctx2, ln2); close(done2) }()
	defer func() { cancel2(); <-done2; f2.Wait() }()
	for st := cl.PrivacyStatus(); !st.Connected || st.IDs == 0; st = cl.PrivacyStatus() {
		select {
		case <-ctx.Done():
			t.Fatalf("the client never registered again: %+v", st)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if st := cl.PrivacyStatus(); st.Reconnects < 1 || st.LastError == "" {
		t.Errorf("status %+v", st)
	}
	prove()
}

// recordListener wraps a listener so that the TLS records crossing each
// connection it accepts are seen as an eavesdropper on the path sees them:
// their lengths, in each direction.
type recordListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*recordConn
}

func (l *recordListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	rc := &recordConn{Conn: c}
	l.mu.Lock()
	l.conns = append(l.conns, rc)
	l.mu.Unlock()
	return rc, nil
}

// records returns the lengths of the records every accepted connection
// has received (in) and sent (out) so far.
func (l *recordListener) records() (in, out []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.mu.Lock()
		in = append(in, c.in.lens...)
		out = append(out, c.out.lens...)
		c.mu.Unlock()
	}
	return in, out
}

type recordConn struct {
	net.Conn
	mu      sync.Mutex
	in, out recordStream
}

func (c *recordConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	c.in.feed(b[:n])
	c.mu.Unlock()
	return n, err
}

func (c *recordConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.out.feed(b)
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// recordStream splits a byte stream into TLS records.
type recordStream struct {
	hdr  []byte
	left int
	lens []int
}

func (r *recordStream) feed(b []byte) {
	for len(b) > 0 {
		if r.left > 0 {
			n := min(r.left, len(b))
			r.left -= n
			b = b[n:]
			continue
		}
		n := min(5-len(r.hdr), len(b))
		r.hdr = append(r.hdr, b[:n]...)
		b = b[n:]
		if len(r.hdr) == 5 {
			r.left = int(r.hdr[3])<<8 | int(r.hdr[4])
			r.lens = append(r.lens, r.left)
			r.hdr = r.hdr[:0]
		}
	}
}

// TestPrivacySizesHideSite: the forwarder, and an eavesdropper on the
// client's path, see sealed submissions and sealed proofs of one size for
// sites with different names, chains of two and three certificates, and
// different proofs (a revoked leaf's revocation proof is a presence
// proof, the others' absence proofs), all within one size class: every
// frame the forwarder received and sent for a submission, and every TLS
// record between client and forwarder, has the same length whatever the
// site. Real sealed submissions, real ct and revocation provers, a real
// forwarder.
func TestPrivacySizesHideSite(t *testing.T) {
	sites := []privSite{{name: "good.test"}, {name: "revoked.test"}, {name: "www.a-much-longer-site-name.test", deep: true}}
	w := newPrivTTPWorldSites(t, sites...)
	reg := builtin.Registry()
	cloudB, _ := startPrivCloud(t, reg, w.provers...)
	fs := listenForwarder(t)
	rl := &recordListener{Listener: fs.ln}
	fs.ln = rl
	fwdB, _, tp := startForwarderOn(t, fs, forwarder.Config{}, cloudB)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A batch larger than the submissions: no identifier request in
	// between.
	cl, err := Dial(ctx, ClientConfig{Clouds: []*Bundle{cloudB}, Forwarder: fwdB, Transport: TransportTCP, EphIDBatch: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	reqs := []pkie.Request{{ID: pkie.CT}, {ID: pkie.Revocation}}

	views := map[string][]string{}
	plainSubmit, classes := map[int]bool{}, map[int]bool{}
	plainProof := map[int]bool{}
	for _, site := range sites {
		chain := w.leaves[site.name].Chain
		if want := map[bool]int{false: 2, true: 3}[site.deep]; len(chain) != want {
			t.Fatalf("%s: chain of %d certificates, want %d", site.name, len(chain), want)
		}
		frame, err := pecwire.Marshal(&pecwire.Submit{ServerName: site.name, Port: 443, Requests: reqs, Chain: chain})
		if err != nil {
			t.Fatal(err)
		}
		plainSubmit[len(frame)] = true
		classes[pecwire.PaddedSize(3+pecwire.ConnKeySize+len(frame)-4)] = true

		i0 := tp.len()
		in0, out0 := rl.records()
		p, err := cl.Submit(ctx, Submission{ServerName: site.name, Port: 443, Chain: chain, Requests: reqs, Budget: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		out := p.Wait(ctx)
		for _, r := range reqs {
			o := out[r.ID]
			if o.Status != ProofOK || o.Proof == nil {
				t.Fatalf("%s: %s outcome %+v", site.name, r.ID, o)
			}
			b, err := pecwire.Marshal(&pecwire.Proof{ID: o.ID, Status: pecwire.ProofStatus(o.Status), Proof: o.Proof})
			if err != nil {
				t.Fatal(err)
			}
			plainProof[len(b)] = true
			classes[pecwire.PaddedSize(3+len(b)-4)+1<<30] = true // the proofs' class, apart
		}
		var view []string
		for _, f := range tp.since(i0) {
			if typ := pecwire.Type(f.frame[0]); typ == pecwire.TypeSealedSubmit || typ == pecwire.TypeSealedProof {
				view = append(view, fmt.Sprintf("forwarder %s type %d: %d bytes", f.dir, typ, len(f.frame)))
			}
		}
		in1, out1 := rl.records()
		for _, n := range in1[len(in0):] {
			view = append(view, fmt.Sprintf("record client→forwarder: %d bytes", n))
		}
		for _, n := range out1[len(out0):] {
			view = append(view, fmt.Sprintf("record forwarder→client: %d bytes", n))
		}
		slices.Sort(view)
		views[site.name] = view
	}
	// The test means something only if the sites differ in the clear
	// and share one class (a fixture that grew across a class boundary
	// would show its class, by design).
	if len(plainSubmit) < 2 || len(plainProof) < 2 {
		t.Fatalf("unpadded submissions %v and proofs %v do not differ between sites: the fixture proves nothing", plainSubmit, plainProof)
	}
	if len(classes) != 2 {
		t.Fatalf("the sites' submissions and proofs span classes %v: want one class for each", classes)
	}
	first := views[sites[0].name]
	if len(first) < 2*len(reqs)+3 {
		t.Fatalf("%s: saw only %q", sites[0].name, first)
	}
	for _, site := range sites[1:] {
		if !slices.Equal(views[site.name], first) {
			t.Errorf("what the forwarder and the path see depends on the site:\n%s: %q\n%s: %q", sites[0].name, first, site.name, views[site.name])
		}
	}
}

// TestPrivacyEavesdropperForeignChain: in the client–server deployment the
// ClientHello carries the connection's EphID, key and forwarder in the
// clear. An eavesdropper on the client's path reads them and, before the
// ClientHello even reaches the server, has the cloud prove another site's
// chain under them (a ServerSealed of its own); the cloud's sealed
// outcomes reach the client through the forwarder and open with the key.
// They are of another submission than the chain the client saw, so they
// are dropped and counted, and the connection is decided on the server's
// genuine proofs: trusted.
func TestPrivacyEavesdropperForeignChain(t *testing.T) {
	w := newPrivTTPWorld(t)
	reg := builtin.Registry()
	fs := listenForwarder(t)
	cloudB, _ := startPrivCloudCfg(t, cloud.Config{Forwarders: []*Bundle{fs.bundle}}, reg, w.provers...)
	fwdB, _, tp := startForwarderOn(t, fs, forwarder.Config{}, cloudB)
	allowed, err := AllowBundle(cloudB)
	if err != nil {
		t.Fatal(err)
	}
	// The path: the client connects to the eavesdropper's relay, which
	// passes the bytes on to the server.
	pathLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pathLn.Close()
	port := pathLn.Addr().(*net.TCPAddr).Port
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{w.leaves["good.test"].TLSCertificate()}}
	l, err := NewListener(ln, ServerConfig{TLSConfig: tc, Clouds: allowed, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{TLSConfig: tc, Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {})}
	go srv.ServeTLS(l, "", "")
	t.Cleanup(func() { srv.Close(); l.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	attacked := make(chan error, 1)
	go func() {
		attacked <- func() error {
			c, err := pathLn.Accept()
			if err != nil {
				return err
			}
			defer c.Close()
			raw, hello, err := readClientHello(c, MaxExtension+16<<10)
			if err != nil {
				return err
			}
			e, err := ParseExtension(hello.PEC)
			if err != nil || len(e.EphID) == 0 {
				return fmt.Errorf("no privacy extension in the ClientHello: %v", err)
			}
			// Another site's chain under the connection's identifier,
			// key and forwarder, from a session of the eavesdropper's.
			pin, _ := cloudB.Pin()
			conn, err := pecwire.DialTCP(ctx, cloudB.Points[0].TCP, pecwire.ClientTLS(pin))
			if err != nil {
				return err
			}
			defer conn.Close()
			forged := &pecwire.ServerSealed{EphID: e.EphID, Key: e.Key, Forwarder: e.Forwarder.String(),
				Submit: pecwire.Submit{ServerName: "revoked.test", Port: uint16(port), Requests: e.Requests, Chain: w.leaves["revoked.test"].Chain}}
			if err := conn.Send(forged, time.Now().Add(10*time.Second)); err != nil {
				return err
			}
			// Its outcomes are on their way to the client before the
			// server has seen the ClientHello.
			err = tp.waitFor(ctx, func(fr []tapFrame) bool {
				n := 0
				for _, f := range fr {
					if m, err := pecwire.Unmarshal(pecwire.Type(f.frame[0]), f.frame[4:]); err == nil && f.dir == "out" {
						if sp, ok := m.(*pecwire.SealedProof); ok && bytes.Equal(sp.EphID, e.EphID) {
							n++
						}
					}
				}
				return n == len(e.Requests)
			})
			if err != nil {
				return fmt.Errorf("the eavesdropper's outcomes never left the forwarder: %w", err)
			}
			s, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				return err
			}
			defer s.Close()
			if _, err := s.Write(raw); err != nil {
				return err
			}
			go func() { io.Copy(s, c); s.Close() }()
			io.Copy(c, s)
			return nil
		}()
	}()

	cl := dialPrivateClient(t, cloudB, fwdB, pecwire.TCP)
	d := &Dialer{Cloud: cl, Verifiers: w.vs, Registry: reg, TLSConfig: &tls.Config{RootCAs: w.root.Pool(), ServerName: "good.test"},
		ProofTimeout: 20 * time.Second, ServerGrace: time.Minute}
	c, err := d.Dial(ctx, "tcp", pathLn.Addr().String())
	if err != nil {
		var ve *VerdictError
		if errors.As(err, &ve) {
			t.Fatalf("verdict %s: %s\n%s", ve.Verdict.Result, ve.Verdict.Headline, strings.Join(ve.Verdict.Reasons, "\n"))
		}
		t.Fatal(err)
	}
	v, ev := c.Verdict(), c.Evidence()
	c.Close()
	if v.Result != check.Trusted {
		t.Fatalf("verdict %s: %s", v.Result, v.Headline)
	}
	if !ev.Extension || ev.Submitted {
		t.Errorf("evidence %+v: want the extension sent and the server's proofs, nothing submitted by the client", ev)
	}
	if st := cl.PrivacyStatus(); st.Foreign != 2 {
		t.Errorf("foreign outcomes %d, want the eavesdropper's 2 dropped", st.Foreign)
	}
	select {
	case err := <-attacked:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the eavesdropper's relay never finished")
	}
}

// TestPrivacySealedDigest: a sealed outcome that opens counts only if it
// is of the connection's submission (chain, name, port, requests):
// under an extension's identifier, one that arrives before the handshake
// has delivered the chain is held and judged then, one after is judged
// at once; under the client's own submission's identifier, at once.
// Outcomes of another submission are counted as foreign and the
// connection keeps waiting for its own.
func TestPrivacySealedDigest(t *testing.T) {
	reg := builtin.Registry()
	// The cloud's own outcome of the client's submission is held back,
	// so that the outcomes this test seals decide.
	sp := newSignerProver(pkie.CT)
	sp.gate = make(chan struct{})
	cloudB, _ := startPrivCloud(t, reg, sp)
	t.Cleanup(func() { close(sp.gate) })
	fwdB, _, _ := startForwarder(t, forwarder.Config{}, cloudB)
	cl := dialPrivateClient(t, cloudB, fwdB, pecwire.TCP)
	pki := newTestPKI(t)
	reqs := []pkie.Request{{ID: pkie.CT}}
	sub := Submission{ServerName: "site.test", Port: 443, Chain: pki.leaf.Chain, Requests: reqs, Budget: 15 * time.Second}
	other := sub
	other.ServerName, other.Chain = "other.test", [][]byte{pki.leaf.Chain[len(pki.leaf.Chain)-1]}
	sealed := func(t *testing.T, key, eph []byte, of Submission, body string) *pecwire.SealedProof {
		t.Helper()
		b, err := pecwire.SealProof(key, eph, &pecwire.Proof{Digest: sealedDigest(of), ID: pkie.CT, Status: pecwire.ProofOK,
			Proof: &pkie.Proof{ID: pkie.CT, Version: 1, Body: []byte(body)}})
		if err != nil {
			t.Fatal(err)
		}
		return &pecwire.SealedProof{EphID: eph, Sealed: b}
	}
	for _, tc := range []struct {
		name string
		// extension: the identifier was in a PEC extension; bindFirst:
		// the handshake delivered the chain before the foreign outcome.
		extension bool
		bindFirst bool
	}{
		{name: "extension, foreign before the chain is known", extension: true},
		{name: "extension, foreign after the chain is known", extension: true, bindFirst: true},
		{name: "own submission"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := cl.PrivacyStatus().Foreign
			var p *Pending
			var eph, key []byte
			if tc.extension {
				e, pe := cl.privateExtension(reqs, 15*time.Second)
				if e == nil {
					t.Fatal("no extension: no identifier at hand")
				}
				p, eph, key = pe, e.EphID, e.Key[:]
				if tc.bindFirst {
					cl.bindExpected(p, sub)
				}
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				var err error
				if p, err = cl.Submit(ctx, sub); err != nil {
					t.Fatal(err)
				}
				cl.mu.Lock()
				for k, w := range cl.priv.waiting {
					if w.p == p {
						eph, key = []byte(k), w.key
					}
				}
				cl.mu.Unlock()
			}
			cl.priv.onSealed(sealed(t, key, eph, other, "foreign"))
			if tc.extension && !tc.bindFirst {
				cl.bindExpected(p, sub)
			}
			if cl.complete(p) {
				t.Fatal("an outcome of another submission ended the connection")
			}
			if n := cl.PrivacyStatus().Foreign - before; n != 1 {
				t.Errorf("foreign outcomes %d, want 1", n)
			}
			cl.priv.onSealed(sealed(t, key, eph, sub, "genuine"))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if o := p.Wait(ctx)[pkie.CT]; o.Status != ProofOK || o.Proof == nil || string(o.Proof.Body) != "genuine" {
				t.Fatalf("outcome %+v, want the connection's own", o)
			}
		})
	}
}
