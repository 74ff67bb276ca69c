package testbed

import (
	"context"
	"crypto/x509"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pecwire"
)

// cloudWorld is a CA, the TTPs and three leaves: logged, logged and
// revoked, never logged.
type cloudWorld struct {
	root, inter             *CA
	ttps                    *TTPs
	good, revoked, unlogged *Leaf
}

func newCloudWorld(t *testing.T) *cloudWorld {
	t.Helper()
	ctx := context.Background()
	w := &cloudWorld{}
	var err error
	if w.root, err = NewRootCA("cloud test root", ECDSAP256); err != nil {
		t.Fatal(err)
	}
	if w.inter, err = w.root.NewIntermediate("cloud test intermediate", ECDSAP256); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct {
		p    **Leaf
		name string
	}{{&w.good, "good.test"}, {&w.revoked, "revoked.test"}, {&w.unlogged, "unlogged.test"}} {
		if *l.p, err = w.inter.Issue(LeafOptions{DNSNames: []string{l.name}}); err != nil {
			t.Fatal(err)
		}
	}
	if w.ttps, err = StartTTPs(TTPOptions{Roots: []*CA{w.root}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.ttps.Close() })
	for _, l := range []*Leaf{w.good, w.revoked} {
		if _, err := w.ttps.LogChain(ctx, l.Chain); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.ttps.Revoke(ctx, w.inter, w.revoked.Cert.SerialNumber); err != nil {
		t.Fatal(err)
	}
	if err := w.ttps.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	return w
}

// prove submits chain over a raw session and returns the outcomes by id.
func prove(t *testing.T, c *Cloud, transport string, name string, chain [][]byte, ids ...pkie.ID) map[pkie.ID]*pecwire.Proof {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pin, err := c.Bundle.Pin()
	if err != nil {
		t.Fatal(err)
	}
	var conn *pecwire.Conn
	if transport == pecwire.QUIC {
		conn, err = pecwire.DialQUIC(ctx, c.Bundle.Points[0].QUIC, pecwire.ClientTLS(pin), nil)
	} else {
		conn, err = pecwire.DialTCP(ctx, c.Bundle.Points[0].TCP, pecwire.ClientTLS(pin))
	}
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.Send(&pecwire.Register{Version: pecwire.Version}, deadline); err != nil {
		t.Fatal(err)
	}
	m, err := conn.Recv(deadline)
	if err != nil {
		t.Fatal(err)
	}
	reg, ok := m.(*pecwire.Registered)
	if !ok {
		t.Fatalf("registration answered %T", m)
	}
	sub := &pecwire.Submit{ClientID: reg.ClientID, Nonce: pecwire.Nonce{1}, Budget: 10 * time.Second, ServerName: name, Port: 443, Chain: chain}
	for _, id := range ids {
		sub.Requests = append(sub.Requests, pkie.Request{ID: id})
	}
	if err := conn.Send(sub, deadline); err != nil {
		t.Fatal(err)
	}
	out := map[pkie.ID]*pecwire.Proof{}
	for len(out) < len(ids) {
		m, err := conn.Recv(deadline)
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := m.(*pecwire.Proof); ok {
			out[p.ID] = p
		} else if _, ok := m.(*pecwire.Pong); !ok {
			t.Fatalf("answered %T %+v", m, m)
		}
	}
	return out
}

func TestStartCloud(t *testing.T) {
	w := newCloudWorld(t)
	c, err := StartCloud(context.Background(), CloudOptions{TTPs: w.ttps})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Bundle.Check(); err != nil {
		t.Fatalf("bundle: %v", err)
	}
	if got := c.Hosted(); len(got) != 2 || got[0] != pkie.CT || got[1] != pkie.Revocation {
		t.Fatalf("hosted %v", got)
	}
	vs, err := w.ttps.ClientVerifiers()
	if err != nil {
		t.Fatal(err)
	}
	verify := func(t *testing.T, l *Leaf, p *pecwire.Proof) pkie.Status {
		t.Helper()
		if p.Status != pecwire.ProofOK {
			t.Fatalf("%s for %s: %s %s", p.ID, l.Cert.Subject.CommonName, p.Status, p.Text)
		}
		inter := x509.NewCertPool()
		inter.AddCert(w.inter.Cert)
		chains, err := l.Cert.Verify(x509.VerifyOptions{Roots: w.root.Pool(), Intermediates: inter, DNSName: l.Cert.DNSNames[0]})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if v.ID() == p.ID {
				a := v.Verify(context.Background(), &pkie.VerifyRequest{
					Subject: pkie.Subject{ServerName: l.Cert.DNSNames[0], Port: 443, Chain: l.Chain, Certs: []*x509.Certificate{l.Cert, w.inter.Cert}},
					Proof:   p.Proof, Now: time.Now(), VerifiedChains: chains,
				})
				return a.Status
			}
		}
		t.Fatalf("no verifier for %s", p.ID)
		return ""
	}
	for _, tr := range []string{pecwire.QUIC, pecwire.TCP} {
		t.Run(tr, func(t *testing.T) {
			for _, tc := range []struct {
				leaf    *Leaf
				ct, rev pkie.Status
			}{
				{w.good, pkie.Pass, pkie.Pass},
				{w.revoked, pkie.Pass, pkie.Fail},
				{w.unlogged, pkie.Fail, pkie.Pass},
			} {
				out := prove(t, c, tr, tc.leaf.Cert.DNSNames[0], tc.leaf.Chain, pkie.CT, pkie.Revocation)
				if got := verify(t, tc.leaf, out[pkie.CT]); got != tc.ct {
					t.Errorf("%s: ct %s, want %s", tc.leaf.Cert.DNSNames[0], got, tc.ct)
				}
				if got := verify(t, tc.leaf, out[pkie.Revocation]); got != tc.rev {
					t.Errorf("%s: revocation %s, want %s", tc.leaf.Cert.DNSNames[0], got, tc.rev)
				}
			}
		})
	}
	resp, err := http.Get(c.HTTP + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %d %s", resp.StatusCode, body)
	}

	// Stopped, the cloud answers nothing more.
	c.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pin, _ := c.Bundle.Pin()
	if conn, err := pecwire.DialTCP(ctx, c.TCP, pecwire.ClientTLS(pin)); err == nil {
		conn.Close()
		t.Error("a stopped cloud accepted a TCP session")
	}
}

func TestStartCloudNotary(t *testing.T) {
	root, err := NewRootCA("cloud notary root", ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := root.Issue(LeafOptions{DNSNames: []string{"site.test"}})
	if err != nil {
		t.Fatal(err)
	}
	site, err := StartSite("site.test", leaf, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	c, err := StartCloud(context.Background(), CloudOptions{Notary: true, Resolve: map[string]string{"site.test": site.Addr.String()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nv, err := c.NotaryVerifier()
	if err != nil || nv == nil {
		t.Fatalf("notary verifier from the bundle: %v %v", nv, err)
	}
	out := prove(t, c, pecwire.QUIC, "site.test", leaf.Chain, pkie.Notary)
	p := out[pkie.Notary]
	if p.Status != pecwire.ProofOK {
		t.Fatalf("notary: %s %s", p.Status, p.Text)
	}
	subj := pkie.Subject{ServerName: "site.test", Port: 443, Chain: leaf.Chain, Certs: []*x509.Certificate{leaf.Cert}}
	if a := nv.Verify(context.Background(), &pkie.VerifyRequest{Subject: subj, Proof: p.Proof, Now: time.Now()}); a.Status != pkie.Pass {
		t.Errorf("notary on the real certificate: %s %s", a.Status, a.Reason)
	}
	// A MitM's certificate is not what the cloud's notary saw.
	forged, err := root.Issue(LeafOptions{DNSNames: []string{"site.test"}})
	if err != nil {
		t.Fatal(err)
	}
	out = prove(t, c, pecwire.QUIC, "site.test", forged.Chain, pkie.Notary)
	subj = pkie.Subject{ServerName: "site.test", Port: 443, Chain: forged.Chain, Certs: []*x509.Certificate{forged.Cert}}
	if a := nv.Verify(context.Background(), &pkie.VerifyRequest{Subject: subj, Proof: out[pkie.Notary].Proof, Now: time.Now()}); a.Status != pkie.Fail {
		t.Errorf("notary on a forged certificate: %s %s", a.Status, a.Reason)
	}
}

// TestStartCloudError: a cloud whose provers cannot be built does not
// start, and what it had started is cleaned up; one whose TTPs are
// unreachable starts, its CT and revocation reported unhealthy.
func TestStartCloudError(t *testing.T) {
	ttps, err := StartTTPs(TTPOptions{Dir: t.TempDir()}) // the mirror's key outlives Close
	if err != nil {
		t.Fatal(err)
	}
	ttps.Close() // unreachable: the provers' first sync fails
	c, err := StartCloud(context.Background(), CloudOptions{TTPs: ttps, DataDir: t.TempDir()})
	if err != nil {
		t.Fatalf("a cloud on unreachable TTPs: %v", err)
	}
	h := c.Health()
	c.Close()
	if h.Status == "ok" || h.PKIEs["ct"] == "ok" || h.PKIEs["revocation"] == "ok" {
		t.Errorf("a cloud on unreachable TTPs: %+v", h)
	}
	bad := *ttps
	bad.LogKey = "not a key"
	if c, err := StartCloud(context.Background(), CloudOptions{TTPs: &bad, DataDir: t.TempDir()}); err == nil {
		c.Close()
		t.Fatal("a cloud started with a malformed log key")
	}
}
