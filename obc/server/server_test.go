package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/pkie/pkie/obc"
)

func TestTLSConfig(t *testing.T) {
	base := &tls.Config{MinVersion: tls.VersionTLS10, ServerName: "kept"}
	c := TLSConfig(base)
	if c.ClientAuth != tls.RequestClientCert || c.MinVersion != tls.VersionTLS12 || c.ServerName != "kept" {
		t.Errorf("TLSConfig: ClientAuth %v MinVersion %#x ServerName %q", c.ClientAuth, c.MinVersion, c.ServerName)
	}
	if base.ClientAuth != tls.NoClientCert || base.VerifyPeerCertificate != nil {
		t.Error("TLSConfig modified its base")
	}
	if c := TLSConfig(&tls.Config{MinVersion: tls.VersionTLS13}, RequireCertificate()); c.ClientAuth != tls.RequireAnyClientCert || c.MinVersion != tls.VersionTLS13 {
		t.Errorf("RequireCertificate: ClientAuth %v MinVersion %#x", c.ClientAuth, c.MinVersion)
	}
	// The leaf check, and a hook of base still running after it.
	hookRan := false
	c = TLSConfig(&tls.Config{VerifyPeerCertificate: func([][]byte, [][]*x509.Certificate) error { hookRan = true; return errors.New("hook says no") }})
	if err := c.VerifyPeerCertificate([][]byte{[]byte("junk")}, nil); err == nil || hookRan {
		t.Errorf("junk leaf: %v (hook ran: %v), want refused before the hook", err, hookRan)
	}
	if err := c.VerifyPeerCertificate([][]byte{selfSigned(t).Certificate[0]}, nil); err == nil || !hookRan {
		t.Errorf("good leaf: %v (hook ran: %v), want the hook's refusal", err, hookRan)
	}
	if err := TLSConfig(nil).VerifyPeerCertificate(nil, nil); err != nil {
		t.Errorf("no certificate in request mode: %v", err)
	}
}

// TestIdentityOverTLS: over a real handshake, a self-signed client
// certificate is accepted and the handler sees its key's identity; without
// one the handler sees none (RequestClientCert) or the handshake fails
// (RequireCertificate); Require answers 403 with its message.
func TestIdentityOverTLS(t *testing.T) {
	srvCert := selfSigned(t, "127.0.0.1")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := Identity(r)
		if !ok {
			io.WriteString(w, "none")
			return
		}
		io.WriteString(w, id.String())
	})
	cfg := &tls.Config{Certificates: []tls.Certificate{srvCert}}
	open := serveTLS(t, h, TLSConfig(cfg))
	required := serveTLS(t, h, TLSConfig(cfg, RequireCertificate()))
	guarded := serveTLS(t, Require(h), TLSConfig(cfg))
	client := selfSigned(t)
	want := obc.IdentityOf(client.Leaf).String()

	get := func(addr string, cert *tls.Certificate) (int, string, error) {
		c := &http.Client{Transport: transportTo(addr, poolOf(srvCert), cert)}
		resp, err := c.Get("https://" + addr + "/")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	for _, tt := range []struct {
		name     string
		addr     string
		cert     *tls.Certificate
		code     int
		body     string
		handshak bool // want the request to fail in the handshake
	}{
		{"request mode, cert", open, &client, 200, want, false},
		{"request mode, none", open, nil, 200, "none", false},
		{"require mode, cert", required, &client, 200, want, false},
		{"require mode, none", required, nil, 0, "", true},
		{"Require, cert", guarded, &client, 200, want, false},
		{"Require, none", guarded, nil, 403, NoCertificateMessage, false},
	} {
		code, body, err := get(tt.addr, tt.cert)
		if tt.handshak {
			if err == nil {
				t.Errorf("%s: got %d %q, want a failed handshake", tt.name, code, body)
			}
			continue
		}
		if err != nil || code != tt.code || body != tt.body {
			t.Errorf("%s: %d %q %v, want %d %q", tt.name, code, body, err, tt.code, tt.body)
		}
	}
	// A certificate whose bytes do not parse fails the handshake.
	junk := tls.Certificate{Certificate: [][]byte{[]byte("not a certificate")}, PrivateKey: client.PrivateKey}
	if code, body, err := get(open, &junk); err == nil {
		t.Errorf("junk client certificate: %d %q, want a failed handshake", code, body)
	}
}

// recordingRelay accepts one connection at a time on loopback, relays it to
// target and records every byte in both directions.
type recordingRelay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	bytes  bytes.Buffer
	wg     sync.WaitGroup
}

func newRecordingRelay(t *testing.T, target string) *recordingRelay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recordingRelay{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			r.wg.Add(2)
			go r.pipe(s, c)
			go r.pipe(c, s)
		}
	}()
	return r
}

type recorder struct{ r *recordingRelay }

func (w recorder) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.r.bytes.Write(p)
}

func (r *recordingRelay) pipe(dst, src net.Conn) {
	defer r.wg.Done()
	io.Copy(io.MultiWriter(dst, recorder{r}), src)
	// Pass the end on, so that the other direction ends too.
	if tc, ok := dst.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
}

// recorded waits for every relayed connection to end and returns the bytes.
func (r *recordingRelay) recorded() []byte {
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.bytes.Bytes())
}

// TestClientCertificateEncryptedInTLS13 answers the paper's §7.2 privacy
// concern ("Origin-Bound Certificates, USENIX Security 2012, §7.2": a
// reused client certificate sent in the clear lets an eavesdropper track a
// user): a relay between a client presenting a certificate and the server
// records every byte both ways. With TLS 1.3 neither the certificate's DER
// nor its public key appears in them; with TLS 1.2, where the Certificate
// message precedes encryption, both do, which shows the search finds what
// is there.
func TestClientCertificateEncryptedInTLS13(t *testing.T) {
	srvCert := selfSigned(t, "127.0.0.1")
	for _, tt := range []struct {
		version   uint16
		wantClear bool
	}{
		{tls.VersionTLS13, false},
		{tls.VersionTLS12, true},
	} {
		name := tls.VersionName(tt.version)
		t.Run(name, func(t *testing.T) {
			ln, err := tls.Listen("tcp", "127.0.0.1:0", TLSConfig(&tls.Config{Certificates: []tls.Certificate{srvCert}}))
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			seen := make(chan string, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					seen <- err.Error()
					return
				}
				defer c.Close()
				tc := c.(*tls.Conn)
				buf := make([]byte, 4)
				if _, err := io.ReadFull(tc, buf); err != nil {
					seen <- err.Error()
					return
				}
				id, ok := ConnIdentity(tc.ConnectionState())
				if !ok {
					seen <- "no identity"
					return
				}
				tc.Write([]byte("pong"))
				seen <- id.String()
			}()
			relay := newRecordingRelay(t, ln.Addr().String())
			client := selfSigned(t)
			conn, err := tls.Dial("tcp", relay.ln.Addr().String(), &tls.Config{
				RootCAs: poolOf(srvCert), Certificates: []tls.Certificate{client},
				MinVersion: tt.version, MaxVersion: tt.version,
			})
			if err != nil {
				t.Fatal(err)
			}
			if v := conn.ConnectionState().Version; v != tt.version {
				t.Fatalf("negotiated %s", tls.VersionName(v))
			}
			conn.Write([]byte("ping"))
			buf := make([]byte, 4)
			if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "pong" {
				t.Fatalf("read %q: %v", buf, err)
			}
			conn.Close()
			if got, want := <-seen, obc.IdentityOf(client.Leaf).String(); got != want {
				t.Fatalf("server saw identity %s, want %s: the certificate was not presented", got, want)
			}
			wire := relay.recorded()
			if len(wire) < 500 {
				t.Fatalf("recorded only %d bytes", len(wire))
			}
			der, spki := client.Certificate[0], client.Leaf.RawSubjectPublicKeyInfo
			pub := spki[len(spki)-65:] // the uncompressed P-256 point
			for what, b := range map[string][]byte{"certificate DER": der, "SPKI": spki, "public key point": pub} {
				if got := bytes.Contains(wire, b); got != tt.wantClear {
					t.Errorf("%s: %s in the %d recorded bytes: %v, want %v", name, what, len(wire), got, tt.wantClear)
				}
			}
			// The server's certificate goes the same way.
			if got := bytes.Contains(wire, srvCert.Certificate[0]); got != tt.wantClear {
				t.Errorf("%s: server certificate in the clear: %v, want %v", name, got, tt.wantClear)
			}
			t.Logf("%s: %d bytes recorded; client certificate (%d bytes) in the clear: %v", name, len(wire), len(der), bytes.Contains(wire, der))
		})
	}
}
