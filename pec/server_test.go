package pec

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/cloud"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/sct"
	"github.com/pkie/pkie/internal/testbed"
	utls "github.com/refraction-networking/utls"
	"golang.org/x/crypto/ocsp"
)

// csWorld is a CT log and a revocation authority, a cloud hosting their
// provers, and certificates for good.test (logged) and revoked.test
// (logged, then revoked): what the client–server tests serve from PEC
// servers of their own.
type csWorld struct {
	ttp    *testbed.TTPs
	root   *testbed.CA
	cloud  *testbed.Cloud
	leaves map[string]*testbed.Leaf
	vs     []pkie.Verifier
	client *Client
}

func newCSWorld(t testing.TB) *csWorld {
	t.Helper()
	ctx := context.Background()
	root, err := testbed.NewRootCA("PEC Server Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{root}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ttp.Close() })
	ca, err := root.NewIntermediate("PEC Server CA", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	w := &csWorld{ttp: ttp, root: root, leaves: map[string]*testbed.Leaf{}}
	for _, name := range []string{"good.test", "revoked.test"} {
		leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{name}})
		if err != nil {
			t.Fatal(err)
		}
		w.leaves[name] = leaf
		if _, err := ttp.LogChain(ctx, leaf.Chain); err != nil {
			t.Fatal(err)
		}
	}
	if err := ttp.Revoke(ctx, ca, w.leaves["revoked.test"].Cert.SerialNumber); err != nil {
		t.Fatal(err)
	}
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	w.cloud, err = testbed.StartCloud(ctx, testbed.CloudOptions{TTPs: ttp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.cloud.Close() })
	if w.vs, err = ttp.ClientVerifiers(); err != nil {
		t.Fatal(err)
	}
	w.client = dialCloud(t, w.cloud.Bundle, TransportTCP)
	return w
}

// tlsConfig serves both sites' certificates.
func (w *csWorld) tlsConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{
		w.leaves["good.test"].TLSCertificate(), w.leaves["revoked.test"].TLSCertificate()}}
}

// pecServer is a stock net/http server behind the PEC listener.
type pecServer struct {
	l    *Listener
	addr string
	port string
}

func (w *csWorld) startServer(t testing.TB, cfg ServerConfig) *pecServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLSConfig == nil {
		cfg.TLSConfig = w.tlsConfig()
	}
	l, err := NewListener(ln, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		TLSConfig: cfg.TLSConfig,
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(rw, "hello from %s", r.Host)
		}),
	}
	go srv.ServeTLS(l, "", "")
	t.Cleanup(func() { srv.Close(); l.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return &pecServer{l: l, addr: ln.Addr().String(), port: port}
}

// dialer returns a client-server Dialer that reaches every name on
// loopback, with a server grace long enough that a forwarding server's
// proofs always come first.
func (w *csWorld) dialer(grace time.Duration) *Dialer {
	return &Dialer{Cloud: w.client, Verifiers: w.vs, TLSConfig: &tls.Config{RootCAs: w.root.Pool()},
		ProofTimeout: 20 * time.Second, ServerGrace: grace,
		NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			_, port, _ := net.SplitHostPort(addr)
			return (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:"+port)
		}}
}

// get sends one HTTP request on c and returns the body.
func get(t *testing.T, c net.Conn, host string) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metric reads one counter of the cloud's /metrics (0 when absent).
func (w *csWorld) metric(t testing.TB, series string) int {
	t.Helper()
	resp, err := http.Get(w.cloud.HTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\d+)$`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	v, _ := strconv.Atoi(string(m[1]))
	return v
}

// submissions reads the cloud's submission counters.
func (w *csWorld) submissions(t testing.TB) (accepted, duplicate int) {
	t.Helper()
	return w.metric(t, `pkie_cloud_submissions_total{outcome="accepted"}`), w.metric(t, `pkie_cloud_submissions_total{outcome="duplicate"}`)
}

// TestClientServerListener: a stock http.Server behind the PEC listener
// forwards its chain at the ClientHello; the client, whose grace outlasts
// the proofs, never submits: the cloud proves each connection once, from
// the server's submission, which therefore came first. A revoked
// certificate is caught on the server's proofs.
func TestClientServerListener(t *testing.T) {
	w := newCSWorld(t)
	allow, err := AllowBundle(w.cloud.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	s := w.startServer(t, ServerConfig{Clouds: allow})
	d := w.dialer(time.Minute)

	c, err := d.Dial(context.Background(), "tcp", "good.test:"+s.port)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ev := c.Evidence()
	if c.Verdict().Result != check.Trusted || !ev.Extension || ev.Submitted || !ev.ServerForwarded {
		t.Fatalf("verdict %s, evidence %+v; want trusted on the server's forwarding alone", c.Verdict().Result, ev)
	}
	if body := get(t, c, "good.test"); body != "hello from good.test" {
		t.Fatalf("body %q", body)
	}
	if acc, dup := w.submissions(t); acc != 1 || dup != 0 {
		t.Fatalf("cloud saw %d accepted and %d duplicate submissions; want the server's alone", acc, dup)
	}
	if st := s.l.Stats(); st.Forwarded != 1 || st.WithExtension != 1 {
		t.Fatalf("listener stats %+v", st)
	}

	_, err = d.Dial(context.Background(), "tcp", "revoked.test:"+s.port)
	var ve *VerdictError
	if !errors.As(err, &ve) || ve.Verdict.Result != check.Untrusted || !strings.Contains(ve.Error(), "revocation") {
		t.Fatalf("revoked.test: %v; want untrusted on revocation", err)
	}
	if acc, dup := w.submissions(t); acc != 2 || dup != 0 {
		t.Fatalf("cloud saw %d accepted and %d duplicate submissions after revoked.test; want 2 and 0", acc, dup)
	}
	// The server forwarded both over one pooled session: the cloud saw
	// two sessions in all, the client's and the server's.
	if n := w.metric(t, `pkie_cloud_sessions_opened_total{transport="tcp"}`) + w.metric(t, `pkie_cloud_sessions_opened_total{transport="quic"}`); n != 2 {
		t.Fatalf("the cloud saw %d sessions; want the client's and one of the server's", n)
	}
}

// TestClientServerProvedOnce: when the client submits too (no grace) while
// the server's submission is being proved, the cloud takes the two for one
// and proves the connection once. The prover holds its answer until both
// submissions have reached the cloud.
func TestClientServerProvedOnce(t *testing.T) {
	g := newGateProver(newEd25519(t))
	reg := testRegistry(t)
	cert, _, _, err := cloud.NewCertificate("proved-once")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cloud.New(cloud.Config{Certificate: cert, Provers: []pkie.Prover{g}, Registry: reg})
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
	pin := pecwire.SPKIHash(leafCert)
	bundle := &Bundle{Version: pecwire.BundleVersion, Name: "proved-once", Points: []pecwire.Point{{TCP: ln.Addr().String()}},
		SPKISHA256: hex.EncodeToString(pin[:])}
	w := &csWorld{client: dialCloud(t, bundle, TransportTCP), cloud: &testbed.Cloud{HTTP: metrics.URL}}

	pki := newTestPKI(t)
	allow, _ := AllowBundle(bundle)
	s := w.startServer(t, ServerConfig{Clouds: allow, TLSConfig: &tls.Config{Certificates: []tls.Certificate{pki.leaf.TLSCertificate()}}})
	d := &Dialer{Cloud: w.client, Verifiers: []pkie.Verifier{gateVerifier{pub: g.key.Public().(ed25519.PublicKey)}}, Registry: reg,
		TLSConfig: &tls.Config{RootCAs: pki.root.Pool()}, ProofTimeout: 20 * time.Second, ServerGrace: -1,
		NetDial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, s.addr)
		}}
	type result struct {
		c   *Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := d.Dial(context.Background(), "tcp", "site.test:"+s.port)
		done <- result{c, err}
	}()
	waitFor(t, func() bool { acc, dup := w.submissions(t); return acc+dup == 2 })
	g.open()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.c.Close()
	if ev := r.c.Evidence(); r.c.Verdict().Result != check.Trusted || !ev.Extension || !ev.Submitted {
		t.Fatalf("verdict %s, evidence %+v; want trusted, the chain submitted by both", r.c.Verdict().Result, ev)
	}
	if acc, dup := w.submissions(t); acc != 1 || dup != 1 || g.calls.Load() != 1 {
		t.Fatalf("cloud accepted %d and merged %d submissions, the prover ran %d times; want one proving", acc, dup, g.calls.Load())
	}
	waitFor(t, func() bool { return s.l.Stats().Forwarded == 1 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 400 {
		if cond() {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatal("condition not reached in 10 s")
}

// TestStrippedExtension: a server that ignores the extension (a stock
// server, or a PEC server whose allowlist lacks the cloud) leaves the
// client to submit the chain itself after the grace: the checks run as in
// client-only mode, and a revoked certificate is still caught.
func TestStrippedExtension(t *testing.T) {
	w := newCSWorld(t)
	stock, err := tls.Listen("tcp", "127.0.0.1:0", w.tlsConfig())
	if err != nil {
		t.Fatal(err)
	}
	stockSrv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { fmt.Fprint(rw, "stock") })}
	go stockSrv.Serve(stock)
	t.Cleanup(func() { stockSrv.Close() })
	_, stockPort, _ := net.SplitHostPort(stock.Addr().String())
	ignoring := w.startServer(t, ServerConfig{}) // allows no cloud
	d := w.dialer(50 * time.Millisecond)
	for _, port := range []string{stockPort, ignoring.port} {
		c, err := d.Dial(context.Background(), "tcp", "good.test:"+port)
		if err != nil {
			t.Fatal(err)
		}
		ev := c.Evidence()
		if c.Verdict().Result != check.Trusted || !ev.Extension || !ev.Submitted || ev.ServerForwarded {
			t.Fatalf("port %s: verdict %s, evidence %+v; want trusted on the client's own submission", port, c.Verdict().Result, ev)
		}
		c.Close()
		_, err = d.Dial(context.Background(), "tcp", "revoked.test:"+port)
		var ve *VerdictError
		if !errors.As(err, &ve) || ve.Verdict.Result != check.Untrusted {
			t.Fatalf("port %s: revoked.test: %v; want untrusted", port, err)
		}
	}
	if st := ignoring.l.Stats(); st.NotAllowed != 2 || st.Forwarded != 0 {
		t.Fatalf("ignoring server's stats %+v", st)
	}
}

// TestStrippedOnTheWire: removing the extension on the way changes the
// ClientHello, which both sides hash into the handshake transcript, so the
// handshake fails at Finished (PEC paper §7): a middlebox can make the
// connection fail, never make it go on unchecked. The proxy here renames
// the extension (same length, so the records stay well formed).
func TestStrippedOnTheWire(t *testing.T) {
	w := newCSWorld(t)
	allow, _ := AllowBundle(w.cloud.Bundle)
	s := w.startServer(t, ServerConfig{Clouds: allow})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var renamed atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", s.addr)
				if err != nil {
					return
				}
				defer up.Close()
				raw, hello, err := readClientHello(c, MaxClientHello)
				if err == nil && hello.HasPEC {
					// The extension's header: type 0xFFCE, then its length.
					hdr := append([]byte{0xFF, 0xCE}, byte(len(hello.PEC)>>8), byte(len(hello.PEC)))
					if i := bytes.Index(raw, append(hdr, hello.PEC...)); i >= 0 {
						raw[i+1] = 0xCD
						renamed.Add(1)
					}
				}
				up.Write(raw)
				go io.Copy(up, c)
				io.Copy(c, up)
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	d := w.dialer(50 * time.Millisecond)
	d.NetDial = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:"+port)
	}
	_, err = d.Dial(context.Background(), "tcp", "good.test:443")
	if err == nil || !strings.Contains(err.Error(), "handshake") {
		t.Fatalf("dial through the renaming proxy: %v; want a failed handshake", err)
	}
	if renamed.Load() != 1 {
		t.Fatal("the proxy found no extension to rename")
	}
	if st := s.l.Stats(); st.WithExtension != 0 || st.Forwarded != 0 {
		t.Fatalf("server stats %+v: the server saw an extension", st)
	}
}

// rawDial completes a handshake whose ClientHello carries ext as given.
func rawDial(t *testing.T, addr string, ext *Extension, roots *tls.Config) error {
	t.Helper()
	body, err := ext.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	uc := utls.UClient(raw, &utls.Config{ServerName: "good.test", InsecureSkipVerify: true, OmitEmptyPsk: true}, utls.HelloCustom)
	if err := uc.ApplyPreset(goLikeSpec(body, &tls.Config{})); err != nil {
		t.Fatal(err)
	}
	uc.SetDeadline(time.Now().Add(20 * time.Second))
	return uc.Handshake()
}

// TestForgedCloudNotReflected: a ClientHello naming a cloud address that
// is not on the server's allowlist (an attacker using PEC servers to flood
// a victim, paper §7) makes the server contact nobody: the victim's
// listener sees no connection.
func TestForgedCloudNotReflected(t *testing.T) {
	w := newCSWorld(t)
	victim, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	go func() {
		for {
			c, err := victim.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			c.Close()
		}
	}()
	defer victim.Close()
	allow, _ := AllowBundle(w.cloud.Bundle)
	s := w.startServer(t, ServerConfig{Clouds: allow})
	ext := &Extension{ClientID: w.client.ID(), Nonce: Nonce(pecwire.Nonce{1}), Requests: []pkie.Request{{ID: pkie.CT}},
		Cloud: Addr{Transport: pecwire.TCP, HostPort: victim.Addr().String()}}
	for range 3 {
		if err := rawDial(t, s.addr, ext, nil); err != nil {
			t.Fatal(err)
		}
	}
	s.l.Close() // waits for any forward under way
	if n := hits.Load(); n != 0 {
		t.Fatalf("the forged cloud address received %d connections", n)
	}
	if st := s.l.Stats(); st.NotAllowed != 3 || st.Forwarded != 0 || st.Failed != 0 {
		t.Fatalf("listener stats %+v; want 3 refused by the allowlist", st)
	}
}

// TestForwardRateLimited: beyond the total or the per-client budget the
// server forwards nothing more, and the clients, getting no proofs within
// the grace, submit themselves.
func TestForwardRateLimited(t *testing.T) {
	w := newCSWorld(t)
	allow, _ := AllowBundle(w.cloud.Bundle)
	for _, tc := range []struct {
		name string
		cfg  ServerConfig
	}{
		{"total", ServerConfig{Clouds: allow, ForwardRate: 1e-6, ForwardBurst: 2}},
		{"per client", ServerConfig{Clouds: allow, PerClientRate: 1e-6, PerClientBurst: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := w.startServer(t, tc.cfg)
			d := w.dialer(50 * time.Millisecond)
			for range 4 {
				c, err := d.Dial(context.Background(), "tcp", "good.test:"+s.port)
				if err != nil {
					t.Fatal(err)
				}
				if c.Verdict().Result != check.Trusted {
					t.Fatalf("verdict %s", c.Verdict().Result)
				}
				c.Close()
			}
			s.l.Close()
			if st := s.l.Stats(); st.Forwarded != 2 || st.RateLimited != 2 {
				t.Fatalf("listener stats %+v; want 2 forwarded and 2 limited", st)
			}
		})
	}
}

// TestClientServerResumption checks the resumption policies on the wire:
// under reuse a resumed connection carries no extension and nothing is
// submitted by anyone; under fresh the extension goes out again and the
// server's forwarded chain is proved anew.
func TestClientServerResumption(t *testing.T) {
	w := newCSWorld(t)
	allow, _ := AllowBundle(w.cloud.Bundle)
	for _, policy := range []string{ResumeReuse, ResumeFresh} {
		for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			t.Run(policy+"/"+versionName(v), func(t *testing.T) {
				cfg := w.tlsConfig()
				cfg.MaxVersion = v
				s := w.startServer(t, ServerConfig{Clouds: allow, TLSConfig: cfg})
				d := w.dialer(time.Minute)
				d.Resumption = policy
				acc0, _ := w.submissions(t)
				c1, err := d.Dial(context.Background(), "tcp", "good.test:"+s.port)
				if err != nil {
					t.Fatal(err)
				}
				if c1.Evidence().Resumed || !c1.Evidence().ServerForwarded {
					t.Fatalf("first connection: evidence %+v", c1.Evidence())
				}
				get(t, c1, "good.test") // takes TLS 1.3's tickets in
				c1.Close()
				c2, err := d.Dial(context.Background(), "tcp", "good.test:"+s.port)
				if err != nil {
					t.Fatal(err)
				}
				defer c2.Close()
				ev := c2.Evidence()
				if !ev.Resumed {
					t.Fatalf("second connection did not resume: %+v", ev)
				}
				s.l.Close() // waits for the forwards under way
				acc, _ := w.submissions(t)
				st := s.l.Stats()
				switch policy {
				case ResumeReuse:
					if !ev.Reused || ev.Extension || st.WithExtension != 1 || acc-acc0 != 1 {
						t.Fatalf("reuse: evidence %+v, listener %+v, %d new submissions; want the first connection's alone", ev, st, acc-acc0)
					}
				case ResumeFresh:
					if ev.Reused || !ev.Extension || !ev.ServerForwarded || st.Forwarded != 2 || acc-acc0 != 2 {
						t.Fatalf("fresh: evidence %+v, listener %+v, %d new submissions; want one per connection", ev, st, acc-acc0)
					}
				}
			})
		}
	}
}

// BenchmarkClientServer measures a full TLS 1.3 handshake through the
// Dialer, the cloud (ct and revocation) on loopback over TLS on TCP: in
// client-only mode against a stock server, and in client-server mode
// against a PEC server (pec.Listener) and against a stock server (which
// costs the server grace). first-proof-µs and last-proof-µs are when the
// first and the last proof arrived, from the start of the dial.
func BenchmarkClientServer(b *testing.B) {
	w := newCSWorld(b)
	allow, _ := AllowBundle(w.cloud.Bundle)
	pecSrv := w.startServer(b, ServerConfig{Clouds: allow, ForwardRate: 1e6, ForwardBurst: 1e6, PerClientRate: 1e6, PerClientBurst: 1e6})
	stock := w.startServer(b, ServerConfig{})
	for _, bc := range []struct {
		name string
		mode string
		port string
	}{
		{"client-only", ModeClientOnly, stock.port},
		{"client-server/pec-server", ModeClientServer, pecSrv.port},
		{"client-server/stock-server", ModeClientServer, stock.port},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d := w.dialer(0)
			d.Mode = bc.mode
			d.TLSConfig.SessionTicketsDisabled = true
			var first, last, total time.Duration
			for b.Loop() {
				c, err := d.Dial(context.Background(), "tcp", "good.test:"+bc.port)
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
				tm := c.Timings()
				first += tm.FirstProof
				last += tm.LastProof
				total += tm.Total
			}
			n := float64(b.N)
			b.ReportMetric(float64(first.Microseconds())/n, "first-proof-µs")
			b.ReportMetric(float64(last.Microseconds())/n, "last-proof-µs")
			b.ReportMetric(float64(total.Microseconds())/n, "dial-µs")
		})
	}
}

// TestClientServerRemembersForwarders: with the adaptive grace the Dialer
// remembers which servers forwarded, and does not wait again for one that
// did not; both kinds of server are trusted either way.
func TestClientServerRemembersForwarders(t *testing.T) {
	w := newCSWorld(t)
	allow, _ := AllowBundle(w.cloud.Bundle)
	pecSrv := w.startServer(t, ServerConfig{Clouds: allow})
	stock := w.startServer(t, ServerConfig{})
	d := w.dialer(0)
	key := func(port string) string { return "good.test\x00good.test:" + port }
	for _, s := range []*pecServer{stock, pecSrv, stock} {
		c, err := d.Dial(context.Background(), "tcp", "good.test:"+s.port)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		ev := c.Evidence()
		if c.Verdict().Result != check.Trusted {
			t.Fatalf("verdict %s", c.Verdict().Result)
		}
		// A stock server never forwards; whether the PEC server's proofs
		// beat the adaptive grace depends on the machine's load, and the
		// memo follows what happened.
		if s == stock && (ev.ServerForwarded || !ev.Submitted) {
			t.Fatalf("stock server: evidence %+v", ev)
		}
		if got := d.forwarders.silent(key(s.port)); got != !ev.ServerForwarded {
			t.Fatalf("port %s: remembered silent %v after evidence %+v", s.port, got, ev)
		}
	}
}

// TestClientServerListenerSCTs: a server that delivers SCTs in the TLS
// extension and a stapled OCSP response puts them in the ct request's
// parameters of its submission
// (ct.RequestParams), and the client computes the same parameters from the
// handshake: the cloud takes the server's ticket although the client could
// not know the SCTs in its ClientHello, and the client takes the server's
// proofs (one digest), never submitting itself.
func TestClientServerListenerSCTs(t *testing.T) {
	w := newCSWorld(t)
	allow, err := AllowBundle(w.cloud.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	// Two SCTs as a log would serialize them (v1, a log ID, a timestamp,
	// no extensions, an ECDSA signature's place): the client's verifiers
	// here pin a mirror only, so the SCTs travel without being judged.
	sctOf := func(b byte) []byte {
		raw := append([]byte{0}, bytes.Repeat([]byte{b}, 32)...)
		raw = append(raw, 0, 0, 1, 0x9a, 0, 0, 0, 0, 0, 0, 4, 3, 0, 4, 0x30, 2, 2, 1)
		return raw
	}
	cert := w.leaves["good.test"].TLSCertificate()
	cert.SignedCertificateTimestamps = [][]byte{sctOf(0xa1), sctOf(0xb2)}
	// And a stapled OCSP response carrying a third, in the leaf's single
	// response (RFC 6962 §3.3).
	list, err := sct.MarshalList([][]byte{sctOf(0xc3)})
	if err != nil {
		t.Fatal(err)
	}
	ext, _ := asn1.Marshal(list)
	cert.OCSPStaple, err = ocsp.CreateResponse(w.root.Cert, w.root.Cert, ocsp.Response{Status: ocsp.Good,
		SerialNumber: cert.Leaf.SerialNumber, ThisUpdate: time.Now().Add(-time.Hour), NextUpdate: time.Now().Add(time.Hour),
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 5}, Value: ext}}}, w.root.Key)
	if err != nil {
		t.Fatal(err)
	}
	if scts, err := sct.ParseList(ct.RequestParams(&pkie.Subject{SCTs: cert.SignedCertificateTimestamps, OCSPResponse: cert.OCSPStaple,
		Certs: []*x509.Certificate{cert.Leaf}}), sct.TLSExtension); err != nil || len(scts) != 3 {
		t.Fatalf("the ct parameters hold %d SCTs (%v), want the two TLS ones and the OCSP one", len(scts), err)
	}
	s := w.startServer(t, ServerConfig{Clouds: allow, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}})
	d := w.dialer(time.Minute)
	c, err := d.Dial(context.Background(), "tcp", "good.test:"+s.port)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.ConnectionState().SignedCertificateTimestamps; len(got) != 2 {
		t.Fatalf("the handshake delivered %d SCTs, want 2", len(got))
	}
	ev := c.Evidence()
	if c.Verdict().Result != check.Trusted || !ev.Extension || ev.Submitted || !ev.ServerForwarded {
		t.Fatalf("verdict %s, evidence %+v; want trusted on the server's forwarding alone", c.Verdict().Result, ev)
	}
	if acc, dup := w.submissions(t); acc != 1 || dup != 0 {
		t.Fatalf("cloud saw %d accepted and %d duplicate submissions; want the server's alone", acc, dup)
	}
	if st := s.l.Stats(); st.Forwarded != 1 {
		t.Fatalf("listener stats %+v", st)
	}

	// Client-only, the verifiers see the SCTs the handshake delivered,
	// and the client's own submission carries them.
	rec := &sctRecorder{}
	vs := []pkie.Verifier{rec}
	for _, v := range w.vs {
		if v.ID() != pkie.CT {
			vs = append(vs, v)
		}
	}
	co := w.dialer(0)
	co.Mode, co.Verifiers = ModeClientOnly, vs
	c2, err := co.Dial(context.Background(), "tcp", "good.test:"+s.port)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := rec.seen(); len(got.SCTs) != 2 || got.Proof == nil || got.Params == nil || !bytes.Equal(got.SCTs[1], cert.SignedCertificateTimestamps[1]) ||
		!bytes.Equal(got.OCSPResponse, cert.OCSPStaple) {
		t.Fatalf("the ct verifier saw %d SCTs, OCSP response %v and proof %v", len(got.SCTs), got.OCSPResponse != nil, got.Proof != nil)
	}
	if acc, _ := w.submissions(t); acc != 2 {
		t.Fatalf("cloud accepted %d submissions, want the client's own too", acc)
	}
}

// sctRecorder is a ct verifier that passes a certificate delivered with
// SCTs and remembers what it was given.
type sctRecorder struct {
	mu  sync.Mutex
	got pkie.VerifyRequest
}

func (*sctRecorder) ID() pkie.ID { return pkie.CT }
func (r *sctRecorder) Verify(_ context.Context, req *pkie.VerifyRequest) pkie.Assertion {
	r.mu.Lock()
	r.got = *req
	r.mu.Unlock()
	if len(req.SCTs) == 0 {
		return pkie.Assertion{Status: pkie.Fail, Reason: "no SCT in the TLS extension"}
	}
	return pkie.Assertion{Status: pkie.Pass, Reason: "SCTs delivered"}
}

func (r *sctRecorder) seen() pkie.VerifyRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got
}
