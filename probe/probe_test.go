package probe_test

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

func lookupTo(a netip.AddrPort) probe.Lookup {
	return func(context.Context, string, int) ([]netip.AddrPort, error) { return []netip.AddrPort{a}, nil }
}

func TestProbeGoServers(t *testing.T) {
	root, _ := testbed.NewRootCA("Root", testbed.ECDSAP256)
	inter, _ := root.NewIntermediate("Inter", testbed.RSA2048)
	tests := []struct {
		name     string
		ca       *testbed.CA
		alg      testbed.KeyAlg
		maxVer   uint16
		sendRoot bool
		chainLen int
		// staple: the server sends SCTs in the TLS extension and a
		// stapled OCSP response, which the observation must carry
		// (as bytes: a probe does not judge them).
		staple bool
	}{
		{"ecdsa tls1.3 via intermediate", inter, testbed.ECDSAP256, tls.VersionTLS13, false, 2, false},
		{"rsa tls1.2 via intermediate", inter, testbed.RSA2048, tls.VersionTLS12, false, 2, false},
		{"ed25519 from root, root sent", root, testbed.Ed25519, tls.VersionTLS13, true, 2, false},
		{"p384 from root", root, testbed.ECDSAP384, tls.VersionTLS12, false, 1, false},
		{"tls1.3 with SCTs and a stapled OCSP response", inter, testbed.ECDSAP256, tls.VersionTLS13, false, 2, true},
		{"tls1.2 with SCTs and a stapled OCSP response", inter, testbed.RSA2048, tls.VersionTLS12, false, 2, true},
	}
	scts := [][]byte{[]byte("first SCT as the server sent it"), []byte("second SCT")}
	staple := []byte("an OCSP response")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leaf, err := tc.ca.Issue(testbed.LeafOptions{DNSNames: []string{"site.test"}, Alg: tc.alg, SendRoot: tc.sendRoot})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var gotSNI string
			srv := tls.NewListener(ln, &tls.Config{MaxVersion: tc.maxVer, GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
				gotSNI = hi.ServerName
				c := leaf.TLSCertificate()
				if tc.staple {
					c.SignedCertificateTimestamps, c.OCSPStaple = scts, staple
				}
				return &c, nil
			}})
			defer srv.Close()
			go func() {
				for {
					c, err := srv.Accept()
					if err != nil {
						return
					}
					c.(*tls.Conn).Handshake()
					c.Close()
				}
			}()
			addr := ln.Addr().(*net.TCPAddr).AddrPort()
			p := probe.New(probe.Options{AllowPrivate: true, Lookup: lookupTo(addr), Vantage: "v1"})
			obs, err := p.Probe(context.Background(), probe.Target{Host: "site.test", Port: 443})
			if err != nil {
				t.Fatal(err)
			}
			if len(obs.Chain) != tc.chainLen || !bytes.Equal(obs.Chain[0], leaf.Cert.Raw) {
				t.Fatalf("chain of %d certificates, want %d with the leaf first", len(obs.Chain), tc.chainLen)
			}
			if obs.SHA256 != sha256.Sum256(leaf.Cert.Raw) || obs.SHA1 != sha1.Sum(leaf.Cert.Raw) {
				t.Error("fingerprints do not match the leaf")
			}
			if obs.Version != tc.maxVer || gotSNI != "site.test" || obs.Addr != addr || obs.Vantage != "v1" {
				t.Errorf("version %x sni %q addr %v vantage %q", obs.Version, gotSNI, obs.Addr, obs.Vantage)
			}
			if obs.Timings.Handshake <= 0 || obs.Timings.Total < obs.Timings.Handshake || obs.Time.IsZero() {
				t.Errorf("timings %+v", obs.Timings)
			}
			switch {
			case !tc.staple && (obs.SCTs != nil || obs.OCSPResponse != nil):
				t.Errorf("SCTs %q and OCSP response %q from a server that sent none", obs.SCTs, obs.OCSPResponse)
			case tc.staple && (len(obs.SCTs) != 2 || !bytes.Equal(obs.SCTs[0], scts[0]) || !bytes.Equal(obs.SCTs[1], scts[1]) || !bytes.Equal(obs.OCSPResponse, staple)):
				t.Errorf("SCTs %q and OCSP response %q, want %q and %q", obs.SCTs, obs.OCSPResponse, scts, staple)
			}
		})
	}
}

// TestProbeOpenSSL probes "openssl s_server", a TLS stack other than Go's.
func TestProbeOpenSSL(t *testing.T) {
	bin, err := exec.LookPath("openssl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("openssl is not installed (CI installs it)")
		}
		t.Skip("openssl is not installed")
	}
	root, _ := testbed.NewRootCA("Root", testbed.ECDSAP256)
	for _, tc := range []struct {
		name string
		alg  testbed.KeyAlg
		flag string
		ver  uint16
	}{
		{"rsa tls1.2", testbed.RSA2048, "-tls1_2", tls.VersionTLS12},
		{"ecdsa tls1.3", testbed.ECDSAP256, "-tls1_3", tls.VersionTLS13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaf, err := root.Issue(testbed.LeafOptions{DNSNames: []string{"openssl.test"}, Alg: tc.alg})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			keyDER, _ := x509.MarshalPKCS8PrivateKey(leaf.Key)
			certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
			os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Cert.Raw}), 0o600)
			os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			port := ln.Addr().(*net.TCPAddr).Port
			ln.Close()
			cmd := exec.Command(bin, "s_server", "-accept", fmt.Sprintf("127.0.0.1:%d", port), "-cert", certFile, "-key", keyFile, tc.flag, "-www", "-quiet")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			p := probe.New(probe.Options{AllowPrivate: true, Timeout: time.Second})
			var obs *probe.Observation
			deadline := time.Now().Add(10 * time.Second)
			for {
				obs, err = p.Probe(context.Background(), probe.Target{Host: "127.0.0.1", Port: port, ServerName: "openssl.test"})
				if err == nil || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				t.Fatal(err)
			}
			if obs.SHA256 != sha256.Sum256(leaf.Cert.Raw) || obs.Version != tc.ver {
				t.Fatalf("openssl: fingerprint or version (%x) wrong", obs.Version)
			}
		})
	}
}

func TestProbeErrors(t *testing.T) {
	silent, _ := net.Listen("tcp", "127.0.0.1:0")
	defer silent.Close()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().(*net.TCPAddr).AddrPort()
	closed.Close()
	plain, _ := net.Listen("tcp", "127.0.0.1:0")
	defer plain.Close()
	go func() {
		for {
			c, err := plain.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	failing := func(context.Context, string, int) ([]netip.AddrPort, error) { return nil, errors.New("NXDOMAIN") }
	tests := []struct {
		name   string
		opts   probe.Options
		target probe.Target
		want   error
	}{
		{"refused", probe.Options{AllowPrivate: true}, probe.Target{Host: "127.0.0.1", Port: int(closedAddr.Port())}, probe.ErrConnect},
		{"timeout", probe.Options{AllowPrivate: true, Timeout: 200 * time.Millisecond, Lookup: lookupTo(silent.Addr().(*net.TCPAddr).AddrPort())}, probe.Target{Host: "x.test", Port: 443}, probe.ErrTimeout},
		{"not tls", probe.Options{AllowPrivate: true, Lookup: lookupTo(plain.Addr().(*net.TCPAddr).AddrPort())}, probe.Target{Host: "x.test", Port: 443}, probe.ErrHandshake},
		{"unresolvable", probe.Options{Lookup: failing}, probe.Target{Host: "nowhere.test", Port: 443}, probe.ErrResolve},
		{"loopback refused", probe.Options{}, probe.Target{Host: "127.0.0.1", Port: 443}, probe.ErrForbiddenAddress},
		{"pinned private IP refused", probe.Options{}, probe.Target{Host: "x.test", Port: 443, IP: netip.MustParseAddr("10.0.0.1")}, probe.ErrForbiddenAddress},
		// A public-looking name whose DNS answer is private (rebinding).
		{"rebinding refused", probe.Options{Lookup: lookupTo(netip.MustParseAddrPort("127.0.0.1:443"))}, probe.Target{Host: "public.example", Port: 443}, probe.ErrForbiddenAddress},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := probe.New(tc.opts).Probe(context.Background(), tc.target)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	for _, bad := range []probe.Target{{Host: "", Port: 443}, {Host: "x", Port: 0}, {Host: "x", Port: 65536}} {
		if _, err := probe.New(probe.Options{}).Probe(context.Background(), bad); err == nil {
			t.Errorf("target %+v accepted", bad)
		}
	}
}

func TestColonHex(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		ok   bool
		want []byte
	}{
		{"AB:CD", 2, true, []byte{0xab, 0xcd}},
		{"ab:cd", 2, true, []byte{0xab, 0xcd}},
		{"ABCD", 2, false, nil},
		{"AB:CD:", 2, false, nil},
		{"AB-CD", 2, false, nil},
		{"ZZ:CD", 2, false, nil},
		{"", 1, false, nil},
	}
	for _, tc := range tests {
		got, err := probe.ParseColonHex(tc.in, tc.n)
		if (err == nil) != tc.ok || tc.ok && !bytes.Equal(got, tc.want) {
			t.Errorf("ParseColonHex(%q) = %x, %v", tc.in, got, err)
		}
	}
	if s := probe.ColonHex([]byte{0x0a, 0xff}); s != "0A:FF" {
		t.Errorf("ColonHex = %q", s)
	}
}

func FuzzParseColonHex(f *testing.F) {
	f.Add("AB:CD:EF", 3)
	f.Add("zz", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 64 {
			return
		}
		b, err := probe.ParseColonHex(s, n)
		if err != nil {
			return
		}
		if len(b) != n || !bytes.EqualFold([]byte(probe.ColonHex(b)), []byte(s)) {
			t.Fatalf("%q parsed to %x, which renders differently", s, b)
		}
	})
}

// TestProbeOldServers probes servers Go's client defaults refuse: TLS 1.2
// with RSA key exchange only, TLS 1.0 or 1.1 only, 3DES or RC4 only. A
// probe observes, so it must see their certificates.
func TestProbeOldServers(t *testing.T) {
	root, _ := testbed.NewRootCA("Root", testbed.ECDSAP256)
	for _, tc := range []struct {
		name     string
		min, max uint16
		suites   []uint16
	}{
		{"tls1.2 rsa key exchange only", tls.VersionTLS12, tls.VersionTLS12, []uint16{tls.TLS_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_RSA_WITH_AES_256_CBC_SHA}},
		{"tls1.0 only", tls.VersionTLS10, tls.VersionTLS10, nil},
		{"tls1.1 only", tls.VersionTLS11, tls.VersionTLS11, nil},
		{"tls1.0 rsa key exchange only", tls.VersionTLS10, tls.VersionTLS10, []uint16{tls.TLS_RSA_WITH_AES_128_CBC_SHA}},
		{"tls1.2 3des only", tls.VersionTLS12, tls.VersionTLS12, []uint16{tls.TLS_RSA_WITH_3DES_EDE_CBC_SHA}},
		{"tls1.2 rc4 only", tls.VersionTLS12, tls.VersionTLS12, []uint16{tls.TLS_ECDHE_RSA_WITH_RC4_128_SHA}},
		{"tls1.2 cbc-sha256 only", tls.VersionTLS12, tls.VersionTLS12, []uint16{tls.TLS_RSA_WITH_AES_128_CBC_SHA256}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaf, err := root.Issue(testbed.LeafOptions{DNSNames: []string{"old.test"}, Alg: testbed.RSA2048})
			if err != nil {
				t.Fatal(err)
			}
			site, err := testbed.StartSiteWith("old.test", testbed.SiteOptions{Leaves: []*testbed.Leaf{leaf}, MinVersion: tc.min, MaxVersion: tc.max, CipherSuites: tc.suites})
			if err != nil {
				t.Fatal(err)
			}
			defer site.Close()
			p := probe.New(probe.Options{AllowPrivate: true, Lookup: lookupTo(site.Addr)})
			obs, err := p.Probe(context.Background(), probe.Target{Host: "old.test", Port: 443})
			if err != nil {
				t.Fatalf("probe of a %s server: %v", tc.name, err)
			}
			if obs.SHA256 != sha256.Sum256(leaf.Cert.Raw) || obs.Version != tc.max {
				t.Errorf("version %x, leaf match %v", obs.Version, obs.SHA256 == sha256.Sum256(leaf.Cert.Raw))
			}
			if tc.suites != nil && obs.CipherSuite != tc.suites[0] {
				t.Errorf("cipher suite %s, want %s", tls.CipherSuiteName(obs.CipherSuite), tls.CipherSuiteName(tc.suites[0]))
			}
		})
	}
}
