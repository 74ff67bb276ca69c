package sctworld

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/pkie/pkie/internal/testbed"
)

// Site is an HTTPS site on loopback serving one certificate, with SCTs in
// the TLS extension and a stapled OCSP response when it has them.
type Site struct {
	Name string
	Addr netip.AddrPort
	Leaf *testbed.Leaf
	// SCTs are what the site sends in the TLS signed_certificate_timestamp
	// extension; OCSP is the response it staples. Either may be empty.
	SCTs [][]byte
	OCSP []byte

	srv *http.Server
}

// StartSite serves name on 127.0.0.1 at a free port.
func StartSite(name string, leaf *testbed.Leaf, scts [][]byte, ocspResp []byte) (*Site, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sctworld: site %s: %w", name, err)
	}
	s := &Site{Name: name, Addr: ln.Addr().(*net.TCPAddr).AddrPort(), Leaf: leaf, SCTs: scts, OCSP: ocspResp}
	cert := tls.Certificate{Certificate: leaf.Chain, PrivateKey: leaf.Key, Leaf: leaf.Cert,
		SignedCertificateTimestamps: scts, OCSPStaple: ocspResp}
	s.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<html><body><h1>%s</h1></body></html>\n", name)
		}),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
	}
	go s.srv.ServeTLS(ln, "", "")
	return s, nil
}

// Close stops the site.
func (s *Site) Close() error { return s.srv.Close() }
