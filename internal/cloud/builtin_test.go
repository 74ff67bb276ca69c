package cloud_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/cloud"
	"github.com/pkie/pkie/internal/pecwire"
	pkienotary "github.com/pkie/pkie/internal/pkies/notary"
	"github.com/pkie/pkie/internal/pkies/revocation"
	"github.com/pkie/pkie/internal/provers"
	notaryprover "github.com/pkie/pkie/internal/provers/notary"
	revprover "github.com/pkie/pkie/internal/provers/revocation"
	"github.com/pkie/pkie/internal/testbed"
)

// TestBuiltins hosts the three built-in enhancements, built from a data
// directory and the built-in registry as `pkie cloud serve` builds them,
// against a real log, revocation authority and site on loopback, and
// proves chains for clients over QUIC and over TCP. Each proof is checked
// by the enhancement's own verifier with the TTP keys a client pins: a
// logged, unrevoked certificate passes all three; a revoked one fails
// revocation; an unlogged one fails CT; a certificate the site does not
// serve (a MitM's) fails the notary.
func TestBuiltins(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root, _ := testbed.NewRootCA("Cloud Root", testbed.ECDSAP256)
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{root}})
	if err != nil {
		t.Fatal(err)
	}
	defer ttp.Close()
	ca, _ := root.NewIntermediate("Cloud CA", testbed.ECDSAP256)
	issue := func() *testbed.Leaf {
		l, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{"bank.test"}})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	good, revoked, unlogged := issue(), issue(), issue()
	for _, l := range []*testbed.Leaf{good, revoked} {
		if _, err := ttp.LogChain(ctx, l.Chain); err != nil {
			t.Fatal(err)
		}
	}
	if err := ttp.Revoke(ctx, ca, revoked.Cert.SerialNumber); err != nil {
		t.Fatal(err)
	}
	if err := ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	site, err := testbed.StartSite("bank.test", good, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()

	d, err := cloud.Init(filepath.Join(t.TempDir(), "cloud"), cloud.FileConfig{Name: "pec.test", PKIEs: []cloud.PKIEConfig{
		{Name: "ct", Config: ttp.CTProverConfig().JSON()},
		{Name: "revocation", Config: revprover.ProverConfig{AuthorityURL: ttp.RevocationURL, AuthorityKey: ttp.RevocationKey}.JSON()},
		{Name: "notary", Config: notaryprover.ProverConfig{AllowPrivate: true, Resolve: map[string]string{"bank.test:443": site.Addr.String()}}.JSON()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// `pkie cloud init` makes the notary's keys; BuildProvers never does.
	if _, err := notaryprover.Init(d.ProverDir("notary"), d.Config.PKIEs[2].Config); err != nil {
		t.Fatal(err)
	}
	reg := provers.Registry()
	provers, err := d.BuildProvers(ctx, reg, d.Config.PKIEs, cloud.ProverOptions{TrustFirstHead: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cloud.New(cloud.Config{Certificate: d.Certificate, Provers: provers, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	runDone := make(chan struct{})
	go func() { c.Run(ctx); close(runDone) }()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 2)
	go func() { served <- c.ServeQUIC(ctx, pc) }()
	go func() { served <- c.ServeTCP(ctx, ln) }()
	defer func() {
		cancel()
		<-served
		<-served
		<-runDone
		c.Wait()
		pc.Close()
	}()

	notaryKey, err := notaryprover.PublicKey(d.ProverDir("notary"))
	if err != nil {
		t.Fatal(err)
	}
	verifiers := map[pkie.ID]pkie.Verifier{}
	for id, conf := range map[pkie.ID]json.RawMessage{
		pkie.CT:         ttp.CTVerifierConfig().JSON(),
		pkie.Revocation: revocation.VerifierConfig{Key: ttp.RevocationKey}.JSON(),
		pkie.Notary:     pkienotary.VerifierConfig{Key: notaryKey}.JSON(),
	} {
		k, _ := reg.Lookup(id)
		if verifiers[id], err = k.NewVerifier(conf); err != nil {
			t.Fatal(err)
		}
	}
	pin := pecwire.SPKIHash(d.Leaf)
	all := []pkie.ID{pkie.CT, pkie.Revocation, pkie.Notary}
	cases := []struct {
		name string
		leaf *testbed.Leaf
		want map[pkie.ID]pkie.Status
	}{
		{"good", good, map[pkie.ID]pkie.Status{pkie.CT: pkie.Pass, pkie.Revocation: pkie.Pass, pkie.Notary: pkie.Pass}},
		{"revoked", revoked, map[pkie.ID]pkie.Status{pkie.CT: pkie.Pass, pkie.Revocation: pkie.Fail, pkie.Notary: pkie.Fail}},
		{"unlogged", unlogged, map[pkie.ID]pkie.Status{pkie.CT: pkie.Fail, pkie.Revocation: pkie.Pass, pkie.Notary: pkie.Fail}},
	}
	for _, tr := range []string{pecwire.QUIC, pecwire.TCP} {
		t.Run(tr, func(t *testing.T) {
			dctx, dcancel := context.WithTimeout(ctx, 20*time.Second)
			defer dcancel()
			var conn *pecwire.Conn
			if tr == pecwire.QUIC {
				conn, err = pecwire.DialQUIC(dctx, pc.LocalAddr().String(), pecwire.ClientTLS(pin), nil)
			} else {
				conn, err = pecwire.DialTCP(dctx, ln.Addr().String(), pecwire.ClientTLS(pin))
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			must(t, conn.Send(&pecwire.Register{Version: pecwire.Version}, time.Now().Add(10*time.Second)))
			id := recv(t, conn).(*pecwire.Registered).ClientID
			for i, k := range cases {
				sub := subject(k.leaf)
				nonce := pecwire.Nonce{byte(i + 1)}
				s := &pecwire.Submit{ClientID: id, Nonce: nonce, Budget: 15 * time.Second, ServerName: sub.ServerName, Port: 443, Chain: k.leaf.Chain}
				for _, x := range all {
					s.Requests = append(s.Requests, pkie.Request{ID: x})
				}
				must(t, conn.Send(s, time.Now().Add(10*time.Second)))
				for range all {
					p, ok := recv(t, conn).(*pecwire.Proof)
					if !ok || p.Nonce != nonce || p.Status != pecwire.ProofOK {
						t.Fatalf("%s: %+v", k.name, p)
					}
					a := verifiers[p.ID].Verify(ctx, &pkie.VerifyRequest{Subject: sub, Proof: p.Proof, Now: time.Now(), VerifiedChains: verified(t, k.leaf, root)})
					if a.Status != k.want[p.ID] {
						t.Errorf("%s: %s: %s (%s), want %s", k.name, reg.Name(p.ID), a.Status, a.Reason, k.want[p.ID])
					}
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func recv(t *testing.T, c *pecwire.Conn) pecwire.Message {
	t.Helper()
	m, err := c.Recv(time.Now().Add(30 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := m.(*pecwire.Error); ok {
		t.Fatalf("cloud error: %v", e)
	}
	if r, ok := m.(*pecwire.Reject); ok {
		t.Fatalf("cloud reject: %v %s", r.Code, r.Text)
	}
	return m
}

func subject(l *testbed.Leaf) pkie.Subject {
	certs := make([]*x509.Certificate, len(l.Chain))
	for i, der := range l.Chain {
		certs[i], _ = x509.ParseCertificate(der)
	}
	return pkie.Subject{ServerName: "bank.test", Port: 443, Chain: l.Chain, Certs: certs}
}

// verified builds the chain classic validation would, as a client does
// before it verifies proofs.
func verified(t *testing.T, l *testbed.Leaf, root *testbed.CA) [][]*x509.Certificate {
	t.Helper()
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(root.Cert)
	for _, der := range l.Chain[1:] {
		c, _ := x509.ParseCertificate(der)
		inter.AddCert(c)
	}
	chains, err := l.Cert.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: "bank.test"})
	if err != nil {
		t.Fatal(err)
	}
	return chains
}
