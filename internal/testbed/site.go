package testbed

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Site is a TLS web server on loopback.
type Site struct {
	Name string
	Addr netip.AddrPort

	leaf atomic.Pointer[Leaf]
	ln   net.Listener
	srv  *http.Server
}

// StartSite serves HTTPS for name with leaf on 127.0.0.1 at a free port.
// A nil handler serves a small page naming the site.
func StartSite(name string, leaf *Leaf, h http.Handler) (*Site, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testbed: site %s: %w", name, err)
	}
	s := &Site{Name: name, ln: ln, Addr: ln.Addr().(*net.TCPAddr).AddrPort()}
	s.leaf.Store(leaf)
	if h == nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<html><body><h1>%s</h1></body></html>\n", name)
		})
	}
	s.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          discardLog(),
		TLSConfig: &tls.Config{
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				c := s.leaf.Load().TLSCertificate()
				return &c, nil
			},
		},
	}
	go s.srv.ServeTLS(ln, "", "")
	return s, nil
}

// Leaf returns the certificate the site currently serves.
func (s *Site) Leaf() *Leaf { return s.leaf.Load() }

// SetLeaf rotates the site's certificate, as a real site renews.
func (s *Site) SetLeaf(l *Leaf) { s.leaf.Store(l) }

// Close stops the site.
func (s *Site) Close() error { return s.srv.Close() }

// MitM is an interceptor on a client's path. Every TLS connection that
// reaches it is terminated with a chain forged for the requested name and
// signed by the forger CA, and relayed to the real site, which the MitM
// reaches through its own upstream lookup. Whether a client is intercepted
// depends only on whether that client's path (its Resolver) leads here.
type MitM struct {
	Addr netip.AddrPort

	forger   *CA
	upstream func(host string) (netip.AddrPort, error)
	ln       net.Listener
	mu       sync.Mutex
	forged   map[string]*Leaf
	wg       sync.WaitGroup
}

// StartMitM listens on loopback. upstream resolves the real sites.
func StartMitM(forger *CA, upstream *Resolver) (*MitM, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testbed: mitm: %w", err)
	}
	m := &MitM{
		Addr:   ln.Addr().(*net.TCPAddr).AddrPort(),
		forger: forger,
		ln:     ln,
		forged: map[string]*Leaf{},
		upstream: func(host string) (netip.AddrPort, error) {
			a, err := upstream.Lookup(context.Background(), host, 0)
			if err != nil || len(a) == 0 {
				return netip.AddrPort{}, fmt.Errorf("mitm: cannot reach %s: %v", host, err)
			}
			return a[0], nil
		},
	}
	m.wg.Add(1)
	go m.serve()
	return m, nil
}

// Forged returns the chain the MitM presents for name, forging it on first
// use.
func (m *MitM) Forged(name string) (*Leaf, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.forged[name]; ok {
		return l, nil
	}
	l, err := m.forger.Issue(LeafOptions{DNSNames: []string{name}})
	if err != nil {
		return nil, err
	}
	m.forged[name] = l
	return l, nil
}

func (m *MitM) serve() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			return
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.relay(c)
		}()
	}
}

func (m *MitM) relay(raw net.Conn) {
	defer raw.Close()
	var sni string
	client := tls.Server(raw, &tls.Config{
		GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
			sni = hi.ServerName
			l, err := m.Forged(sni)
			if err != nil {
				return nil, err
			}
			c := l.TLSCertificate()
			return &c, nil
		},
	})
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	if err := client.Handshake(); err != nil {
		return
	}
	raw.SetDeadline(time.Time{})
	addr, err := m.upstream(sni)
	if err != nil {
		return
	}
	up, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr.String(),
		&tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		return
	}
	defer up.Close()
	splice(client, up)
}

// Close stops the MitM and waits for its relays to end.
func (m *MitM) Close() error {
	err := m.ln.Close()
	m.wg.Wait()
	return err
}

// splice copies both ways until either side ends.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	a.SetDeadline(time.Now().Add(time.Second))
	b.SetDeadline(time.Now().Add(time.Second))
	<-done
}
