package pec_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/pkies/builtin"
	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/pkies/revocation"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/pec"
)

// An application fetches a page through the PEC dialer: the server's chain
// goes to the cloud during the handshake, and the request leaves only once
// the CT, revocation and notary proofs verified. A revoked site is refused
// before any request is sent.
func ExampleDialer() {
	// A CT log, a revocation authority, a PEC cloud and two sites on
	// loopback, for the example.
	w := startExampleWorld()
	defer w.close()
	ctx := context.Background()

	cloud, err := pec.Dial(ctx, pec.ClientConfig{Clouds: []*pec.Bundle{w.bundle}})
	if err != nil {
		log.Fatal(err)
	}
	defer cloud.Close()

	// The TTP keys are the client's own pins; the cloud's notary key comes
	// with its bundle.
	reg := builtin.Registry()
	ctV, err := ct.NewVerifier(ct.VerifierConfig{Key: w.logKey}.JSON())
	if err != nil {
		log.Fatal(err)
	}
	revV, err := revocation.NewVerifier(revocation.VerifierConfig{Key: w.revocationKey}.JSON())
	if err != nil {
		log.Fatal(err)
	}
	notaryVs, _, err := pec.BundleVerifiers(reg, []*pec.Bundle{w.bundle})
	if err != nil {
		log.Fatal(err)
	}
	d := &pec.Dialer{
		Cloud:     cloud,
		Registry:  reg,
		Verifiers: append([]pkie.Verifier{ctV, revV}, notaryVs...),
		TLSConfig: &tls.Config{RootCAs: w.roots},
		NetDial:   w.dial, // the example's names live on loopback
	}

	client := &http.Client{Transport: &http.Transport{DialTLSContext: d.DialContext}}
	resp, err := client.Get(w.url("good.test"))
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("good.test:", resp.Status)

	_, err = client.Get(w.url("revoked.test"))
	var refused *pec.VerdictError
	if errors.As(err, &refused) {
		a, _ := refused.Verdict.Source("revocation")
		fmt.Println("revoked.test:", refused.Verdict.Result, "-", a.Source, a.Status, strings.HasPrefix(a.Detail, "revoked"))
	}
	// Output:
	// good.test: 200 OK
	// revoked.test: untrusted - revocation fail true
}

type exampleWorld struct {
	bundle                *pec.Bundle
	roots                 *x509.CertPool
	logKey, revocationKey string
	addr                  map[string]string
	closers               []func() error
}

func (w *exampleWorld) url(site string) string {
	_, port, _ := net.SplitHostPort(w.addr[site])
	return "https://" + net.JoinHostPort(site, port) + "/"
}

func (w *exampleWorld) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	a, ok := w.addr[host]
	if !ok {
		return nil, fmt.Errorf("example: %s is not one of the example's sites", host)
	}
	return (&net.Dialer{}).DialContext(ctx, network, a)
}

func (w *exampleWorld) close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
}

func startExampleWorld() *exampleWorld {
	ctx := context.Background()
	must := func(err error) {
		if err != nil {
			log.Fatal(err)
		}
	}
	w := &exampleWorld{addr: map[string]string{}}
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{})
	must(err)
	w.closers = append(w.closers, ttp.Close)
	w.logKey, w.revocationKey = ttp.LogKey, ttp.RevocationKey
	root, err := testbed.NewRootCA("Example Root", testbed.ECDSAP256)
	must(err)
	ca, err := root.NewIntermediate("Example CA", testbed.ECDSAP256)
	must(err)
	w.roots = root.Pool()
	resolve := map[string]string{}
	for _, name := range []string{"good.test", "revoked.test"} {
		leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{name}})
		must(err)
		s, err := testbed.StartSite(name, leaf, nil)
		must(err)
		w.closers = append(w.closers, s.Close)
		w.addr[name] = s.Addr.String()
		resolve[name] = "127.0.0.1"
		_, err = ttp.LogChain(ctx, leaf.Chain)
		must(err)
		if name == "revoked.test" {
			must(ttp.Revoke(ctx, ca, leaf.Cert.SerialNumber))
		}
	}
	must(ttp.Refresh(ctx))
	c, err := testbed.StartCloud(ctx, testbed.CloudOptions{TTPs: ttp, Notary: true, Resolve: resolve})
	must(err)
	w.closers = append(w.closers, c.Close)
	w.bundle = c.Bundle
	return w
}
