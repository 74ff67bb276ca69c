package testbed

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// SiteOptions shape a site that real deployments have and StartSite does
// not: several certificates served at once (a CDN or a balancer whose
// edges differ, a rotation under way) and old protocol versions or cipher
// suites.
type SiteOptions struct {
	// Leaves are served in turn, one per TLS handshake, as a client
	// landing on different edges of a site sees them. At least one.
	Leaves []*Leaf
	// MinVersion and MaxVersion bound the TLS versions offered; 0 means
	// crypto/tls's default. A MinVersion below TLS 1.2 is set explicitly,
	// which is what lets a Go server speak it.
	MinVersion, MaxVersion uint16
	// CipherSuites, if set, are the only TLS 1.0–1.2 suites the site
	// accepts (e.g. only RSA key exchange).
	CipherSuites []uint16
}

// StartSiteWith serves HTTPS for name on 127.0.0.1 at a free port, as
// StartSite does, shaped by o. Leaf and SetLeaf concern the first leaf;
// SetLeaf replaces the whole rotation by that one leaf.
func StartSiteWith(name string, o SiteOptions) (*Site, error) {
	if len(o.Leaves) == 0 {
		return nil, fmt.Errorf("testbed: site %s: no leaf", name)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testbed: site %s: %w", name, err)
	}
	s := &Site{Name: name, ln: ln, Addr: ln.Addr().(*net.TCPAddr).AddrPort()}
	s.leaf.Store(o.Leaves[0])
	leaves := o.Leaves
	var next atomic.Uint64
	s.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<html><body><h1>%s</h1></body></html>\n", name)
		}),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          discardLog(),
		// HTTP/2 refuses to serve over the old suites some options ask
		// for (ServeTLS would fail at once); HTTP/1.1 serves anything.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	s.srv.TLSConfig = &tls.Config{
		MinVersion:   o.MinVersion,
		MaxVersion:   o.MaxVersion,
		CipherSuites: o.CipherSuites,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			l := s.leaf.Load()
			if l == leaves[0] && len(leaves) > 1 {
				l = leaves[(next.Add(1)-1)%uint64(len(leaves))]
			}
			c := l.TLSCertificate()
			return &c, nil
		},
	}
	go s.srv.ServeTLS(ln, "", "")
	return s, nil
}
