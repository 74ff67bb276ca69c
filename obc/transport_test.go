package obc_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/obc"
)

// seen is what the test site reports of a request: the client identity
// it saw, the connection it came on, and how.
type seen struct {
	Host     string `json:"host"`
	Identity string `json:"identity"`
	Remote   string `json:"remote"`
	Proto    string `json:"proto"`
	Resumed  bool   `json:"resumed"`
}

// newCA returns a throwaway CA and a server certificate for names: one
// certificate for every name, as HTTP/2 coalescing needs.
func newCA(t *testing.T, names ...string) (*testbed.CA, tls.Certificate) {
	t.Helper()
	ca, err := testbed.NewRootCA("obc test root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: names, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	return ca, leaf.TLSCertificate()
}

func reportHandler(w http.ResponseWriter, r *http.Request) {
	s := seen{Host: r.Host, Remote: r.RemoteAddr, Proto: r.Proto, Resumed: r.TLS.DidResume}
	if len(r.TLS.PeerCertificates) > 0 {
		h := sha256.Sum256(r.TLS.PeerCertificates[0].RawSubjectPublicKeyInfo)
		s.Identity = hex.EncodeToString(h[:])
	}
	json.NewEncoder(w).Encode(s)
}

// newSite starts ONE TLS server (HTTP/2 on) serving every name of cert on
// one loopback address, asking every client for a certificate.
func newSite(t *testing.T, cert tls.Certificate) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(reportHandler))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// baseTo returns a transport that sends every connection to addr, as if
// every name resolved to it.
func baseTo(addr string, ca *testbed.CA) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		TLSClientConfig:   &tls.Config{RootCAs: ca.Pool()},
		ForceAttemptHTTP2: true,
	}
}

func fetch(t *testing.T, c *http.Client, url string) seen {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var s seen
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatalf("GET %s: %v (%q)", url, err, body)
	}
	return s
}

func openStore(t *testing.T, opts obc.StoreOptions) *obc.Store {
	t.Helper()
	s, err := obc.Open(context.Background(), filepath.Join(t.TempDir(), "obc.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestTransportNoReuseAcrossOrigins: two origins served by one TLS server
// on one address with one certificate for both, so that a shared
// connection pool or HTTP/2 coalescing could merge them: each origin
// still gets its own connection and, in strict mode, its own identity;
// in legacy mode subdomains of one registrable domain share the identity
// but still not the connection. A second request to an origin reuses
// its connection (the pool works; it is only never shared).
func TestTransportNoReuseAcrossOrigins(t *testing.T) {
	ca, cert := newCA(t, "a.test", "b.test", "a.example.com", "b.example.com")
	srv := newSite(t, cert)
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	for _, tc := range []struct {
		mode         obc.Mode
		a, b         string
		sameIdentity bool
	}{
		{obc.Strict, "a.test", "b.test", false},
		{obc.Strict, "a.example.com", "b.example.com", false},
		{obc.Legacy, "a.example.com", "b.example.com", true},
	} {
		t.Run(tc.mode.String()+" "+tc.a+" "+tc.b, func(t *testing.T) {
			st := openStore(t, obc.StoreOptions{Mode: tc.mode})
			c := &http.Client{Transport: obc.Transport(baseTo(srv.Listener.Addr().String(), ca), st)}
			defer c.CloseIdleConnections()
			a1 := fetch(t, c, "https://"+tc.a+":"+port+"/")
			b1 := fetch(t, c, "https://"+tc.b+":"+port+"/")
			a2 := fetch(t, c, "https://"+tc.a+":"+port+"/")
			if a1.Proto != "HTTP/2.0" {
				t.Fatalf("proto %s: the test needs HTTP/2 to show coalescing does not happen", a1.Proto)
			}
			if a1.Identity == "" || b1.Identity == "" {
				t.Fatalf("no client certificate presented: %+v %+v", a1, b1)
			}
			if a1.Remote == b1.Remote {
				t.Errorf("%s and %s shared connection %s", tc.a, tc.b, a1.Remote)
			}
			if (a1.Identity == b1.Identity) != tc.sameIdentity {
				t.Errorf("identities %s (%s) and %s (%s): same = %v, want %v", a1.Identity, tc.a, b1.Identity, tc.b, a1.Identity == b1.Identity, tc.sameIdentity)
			}
			if a2.Remote != a1.Remote || a2.Identity != a1.Identity {
				t.Errorf("second request to %s: connection %s identity %s, want the first's (%s, %s)", tc.a, a2.Remote, a2.Identity, a1.Remote, a1.Identity)
			}
			want, err := st.Get(context.Background(), obc.Origin{Scheme: "https", Host: tc.a, Port: uint16(srv.Listener.Addr().(*net.TCPAddr).Port)})
			if err != nil {
				t.Fatal(err)
			}
			if a1.Identity != want.Identity.String() {
				t.Errorf("server saw %s, the store holds %s", a1.Identity, want.Identity)
			}
		})
	}
}

// TestTransportSessionsPerOrigin: a resumed TLS session carries the
// identity of the handshake that made its ticket, and Go's session cache
// is keyed by server name, not port. Two origins on one host (two ports of
// one server, sharing ticket keys) must therefore not share a cache: the
// second origin would resume the first's session and show the first
// origin's identity.
func TestTransportSessionsPerOrigin(t *testing.T) {
	ca, cert := newCA(t, "a.test")
	// One ticket key for both ports, as servers behind one name share
	// them (ServeTLS clones the configuration, and each clone would
	// otherwise make its own).
	var ticketKey [32]byte
	rand.Read(ticketKey[:])
	srv := &http.Server{Handler: http.HandlerFunc(reportHandler), TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert, SessionTicketKey: ticketKey,
	}}
	var ports []string
	var wg sync.WaitGroup
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
		wg.Add(1)
		go func() { defer wg.Done(); srv.ServeTLS(l, "", "") }()
	}
	t.Cleanup(func() { srv.Close(); wg.Wait() })

	st := openStore(t, obc.StoreOptions{})
	base := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ClientSessionCache: tls.NewLRUClientSessionCache(16)},
		// A new connection per request, so that every request after the
		// first may resume.
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			_, port, _ := net.SplitHostPort(addr)
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
		},
	}
	c := &http.Client{Transport: obc.Transport(base, st)}
	a1 := fetch(t, c, "https://a.test:"+ports[0]+"/")
	a2 := fetch(t, c, "https://a.test:"+ports[0]+"/")
	b1 := fetch(t, c, "https://a.test:"+ports[1]+"/")
	if !a2.Resumed || a2.Identity != a1.Identity {
		t.Fatalf("second request to port %s: resumed %v identity %s; the test needs resumption within an origin to work", ports[0], a2.Resumed, a2.Identity)
	}
	if b1.Resumed || b1.Identity == a1.Identity {
		t.Errorf("port %s: resumed %v with identity %s; want a fresh handshake with its own identity (port %s has %s)", ports[1], b1.Resumed, b1.Identity, ports[0], a1.Identity)
	}
}

// TestHandshakeEveryAlg: every algorithm's certificate works as a TLS
// client certificate against Go's server in TLS 1.2 and 1.3 (RSA-1024
// included: Go 1.26 accepts it on both sides), through ClientConfig, the
// hook for protocols other than HTTP; the server sees the identity the
// store reports.
func TestHandshakeEveryAlg(t *testing.T) {
	ca, cert := newCA(t, "alg.test")
	for _, alg := range obc.Algs() {
		for _, ver := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			t.Run(string(alg)+" "+tls.VersionName(ver), func(t *testing.T) {
				l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
					Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert, MaxVersion: ver,
				})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				got := make(chan string, 1)
				go func() {
					c, err := l.Accept()
					if err != nil {
						got <- err.Error()
						return
					}
					defer c.Close()
					tc := c.(*tls.Conn)
					if err := tc.Handshake(); err != nil {
						got <- "server: " + err.Error()
						return
					}
					id := obc.IdentityOf(tc.ConnectionState().PeerCertificates[0])
					got <- id.String()
				}()
				st := openStore(t, obc.StoreOptions{Alg: alg})
				port := uint16(l.Addr().(*net.TCPAddr).Port)
				o := obc.Origin{Scheme: "https", Host: "alg.test", Port: port}
				cfg := st.ClientConfig(o)
				cfg.RootCAs = ca.Pool()
				conn, err := tls.Dial("tcp", l.Addr().String(), cfg)
				if err != nil {
					t.Fatalf("client: %v (server: %s)", err, <-got)
				}
				defer conn.Close()
				if v := conn.ConnectionState().Version; v != ver {
					t.Fatalf("version %x, want %x", v, ver)
				}
				r, err := st.Get(context.Background(), o)
				if err != nil {
					t.Fatal(err)
				}
				if s := <-got; s != r.Identity.String() {
					t.Errorf("server saw %s, store holds %s (%s)", s, r.Identity, r.Alg)
				}
				if r.Alg != alg {
					t.Errorf("alg %s, want %s", r.Alg, alg)
				}
			})
		}
	}
}
