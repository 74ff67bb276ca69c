package pec_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"log"
	"net"

	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/pec"
)

// This file stands up the world ExampleDialer runs in (a CT log, a
// revocation authority, a PEC cloud and two sites on loopback) with the
// project's internal testbed. It is not part of what an application
// writes: example_test.go is, and imports public packages only
// (TestExampleImportsArePublic).

type exampleWorld struct {
	bundle                           *pec.Bundle
	roots                            *x509.CertPool
	mirrorKey, logKey, revocationKey string
	addr                             map[string]string
	closers                          []func() error
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
	root, err := testbed.NewRootCA("Example Root", testbed.ECDSAP256)
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Roots: []*testbed.CA{root}})
	must(err)
	w.closers = append(w.closers, ttp.Close)
	w.mirrorKey, w.logKey, w.revocationKey = ttp.MirrorKey, ttp.LogKey, ttp.RevocationKey
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
