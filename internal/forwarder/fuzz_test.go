package forwarder

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/pecwire"
)

// selfSigned returns a fresh ECDSA P-256 certificate for name.
func selfSigned(t testing.TB, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func bundleFor(name string, cert tls.Certificate, tcp string) *pecwire.Bundle {
	pin := pecwire.SPKIHash(cert.Leaf)
	return &pecwire.Bundle{Version: pecwire.BundleVersion, Name: name,
		Points: []pecwire.Point{{TCP: tcp}}, SPKISHA256: hex.EncodeToString(pin[:])}
}

// FuzzSession feeds arbitrary frame sequences into a real forwarder
// session over loopback TLS, as a client (no certificate) when in[0] is
// even and as the configured cloud (its client certificate) when odd. The
// forwarder must answer only with messages of its own kinds, never panic,
// and free the session, its registration and its address's share when
// the peer is done. Sealed submissions name the cloud, whose point is a
// closed loopback port, so relaying fails fast and stays on loopback.
func FuzzSession(f *testing.F) {
	frames := func(cloud bool, ms ...pecwire.Message) []byte {
		b := []byte{0}
		if cloud {
			b[0] = 1
		}
		for _, m := range ms {
			fr, err := pecwire.Marshal(m)
			if err != nil {
				f.Fatal(err)
			}
			b = append(b, fr...)
		}
		return b
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	deadAddr := closed.Addr().String()
	closed.Close()
	cloudCert := selfSigned(f, "fuzz-cloud")
	cloudB := bundleFor("fuzz-cloud", cloudCert, deadAddr)
	cloudPin, _ := cloudB.Pin()
	fw, err := New(Config{Certificate: selfSigned(f, "fuzz-forwarder"), EphIDKey: testKey(), Clouds: []*pecwire.Bundle{cloudB},
		MaxFrame: 16 << 10, HandshakeTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	eph, _ := fw.ids.issue(pecwire.ClientID{9}, time.Now().Add(time.Hour))

	f.Add(frames(false, &pecwire.Register{Version: pecwire.Version}, &pecwire.Ping{Seq: 1}, &pecwire.EphIDRequest{Count: 3}))
	f.Add(frames(false, &pecwire.Register{Version: pecwire.Version}, &pecwire.SealedSubmit{Cloud: cloudPin, EphID: eph, Envelope: []byte("sealed")}))
	f.Add(frames(false, &pecwire.Register{Version: pecwire.Version}, &pecwire.EphIDRequest{Count: 1}, &pecwire.Register{Version: pecwire.Version}))
	f.Add(frames(false, &pecwire.EphIDReject{EphID: eph, Code: pecwire.RejectInvalid, Text: "forged"}))
	f.Add(frames(false, &pecwire.SealedProof{EphID: eph, Sealed: []byte("garbage")}))
	f.Add(frames(true, &pecwire.Ping{Seq: 1}, &pecwire.SealedProof{EphID: eph, Sealed: []byte("garbage")}, &pecwire.EphIDReject{EphID: []byte("x")}))
	f.Add(frames(true, &pecwire.Register{Version: pecwire.Version}))
	f.Add([]byte{0, byte(pecwire.TypeRegister), 0xff, 0xff, 0xff})
	f.Add([]byte{1, byte(pecwire.TypeRegister), 0, 0, 1})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { fw.ServeTCP(ctx, ln) })
	f.Cleanup(func() {
		cancel()
		wg.Wait()
		fw.Wait()
	})
	fwdPin := pecwire.SPKIHash(fw.cfg.Certificate.Leaf)
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		asCloud := in[0]&1 == 1
		in = in[1:]
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		tc := pecwire.ClientTLS(fwdPin)
		if asCloud {
			tc.Certificates = []tls.Certificate{cloudCert}
		}
		c := tls.Client(nc, tc)
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		// The forwarder may end the session before taking all of in.
		go func() {
			c.Write(in)
			c.CloseWrite()
		}()
		for {
			var h [4]byte
			if _, err := io.ReadFull(c, h[:]); err != nil {
				break
			}
			body := make([]byte, int(h[1])<<16|int(h[2])<<8|int(h[3]))
			if _, err := io.ReadFull(c, body); err != nil {
				break
			}
			m, err := pecwire.Unmarshal(pecwire.Type(h[0]), body)
			if err != nil {
				t.Fatalf("the forwarder sent an undecodable frame: %v", err)
			}
			switch m.(type) {
			case *pecwire.Registered, *pecwire.Pong, *pecwire.EphIDs, *pecwire.EphIDReject, *pecwire.Error:
			default:
				t.Fatalf("the forwarder sent a %T", m)
			}
			if asCloud {
				if _, ok := m.(*pecwire.Pong); !ok {
					if _, ok := m.(*pecwire.Error); !ok {
						t.Fatalf("the forwarder sent a cloud's session a %T", m)
					}
				}
			}
		}
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
			fw.mu.Lock()
			s, cl := fw.sessions, len(fw.clients)
			fw.mu.Unlock()
			if s == 0 && cl == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("session not freed: %d sessions, %d clients", s, cl)
			}
		}
	})
}
