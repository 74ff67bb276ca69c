package sct

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ct "github.com/google/certificate-transparency-go"
	"github.com/google/certificate-transparency-go/ctutil"
	cttestdata "github.com/google/certificate-transparency-go/testdata"
	cttls "github.com/google/certificate-transparency-go/tls"
	ctx509 "github.com/google/certificate-transparency-go/x509"

	"github.com/pkie/pkie/internal/ctwire"
)

// ctgo names fixtures that are constants of certificate-transparency-go's
// testdata package rather than files.
var ctgo = map[string][]byte{
	"ctgo:CACertPEM":                  []byte(cttestdata.CACertPEM),
	"ctgo:TestCertPEM":                []byte(cttestdata.TestCertPEM),
	"ctgo:TestEmbeddedCertPEM":        []byte(cttestdata.TestEmbeddedCertPEM),
	"ctgo:TestInvalidEmbeddedCertPEM": []byte(cttestdata.TestInvalidEmbeddedCertPEM),
	"ctgo:LogPublicKeyPEM":            []byte(cttestdata.LogPublicKeyPEM),
	"ctgo:TestCertProof":              cttestdata.TestCertProof,
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	if b, ok := ctgo[name]; ok {
		return b
	}
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// loadCert reads a PEM or DER certificate.
func loadCert(t testing.TB, name string) *x509.Certificate {
	t.Helper()
	b := readFixture(t, name)
	if p, _ := pem.Decode(b); p != nil {
		b = p.Bytes
	}
	c, err := x509.ParseCertificate(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

// p256SPKIPrefix is the DER SubjectPublicKeyInfo of a P-256 key up to its
// uncompressed point.
var p256SPKIPrefix = []byte{0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01,
	0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00}

// loadKey reads a log's public key as PEM, DER SubjectPublicKeyInfo, a raw
// uncompressed P-256 point, or a formats/note RFC 6962 verifier key
// (name+hash+base64(0x05 || SPKI)). It returns the key and its log ID.
func loadKey(t testing.TB, name string) (crypto.PublicKey, [32]byte) {
	t.Helper()
	b := readFixture(t, name)
	var spki []byte
	switch {
	case bytes.HasPrefix(b, []byte("-----BEGIN")):
		p, _ := pem.Decode(b)
		spki = p.Bytes
	case len(b) == 65 && b[0] == 4:
		spki = append(append([]byte(nil), p256SPKIPrefix...), b...)
	case strings.Count(string(b), "+") >= 2 && !bytes.HasPrefix(b, []byte{0x30}):
		parts := strings.Split(strings.TrimSpace(string(b)), "+")
		raw, err := base64.StdEncoding.DecodeString(parts[len(parts)-1])
		if err != nil || len(raw) < 2 || raw[0] != 5 {
			t.Fatalf("%s: not an RFC 6962 note verifier key", name)
		}
		spki = raw[1:]
	default:
		spki = b
	}
	k, err := x509.ParsePKIXPublicKey(spki)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return k, sha256.Sum256(spki)
}

// chromeListKeys in a fixture's keys stands for every key of Chrome's log
// list in testdata/loglist.
const chromeListKeys = "chrome list"

// A chain with SCTs, and the keys of the logs that issued them.
type fixture struct {
	name         string
	leaf, issuer string
	tls          []string // SCTs delivered in the TLS extension
	ocsp         string   // a stapled OCSP response
	keys         []string
	scts, valid  int // SCTs collected, and how many verify
}

// fixtures are every certificate with SCTs testdata/README.md lists, and
// certificate-transparency-go's own test certificates.
var fixtures = []fixture{
	{name: "ctgo embedded", leaf: "ctgo:TestEmbeddedCertPEM", issuer: "ctgo:CACertPEM",
		keys: []string{"ctgo:LogPublicKeyPEM"}, scts: 1, valid: 1},
	{name: "ctgo invalid embedded", leaf: "ctgo:TestInvalidEmbeddedCertPEM", issuer: "ctgo:CACertPEM",
		keys: []string{"ctgo:LogPublicKeyPEM"}, scts: 1, valid: 0},
	{name: "ctgo tls", leaf: "ctgo:TestCertPEM", tls: []string{"ctgo:TestCertProof"},
		keys: []string{"ctgo:LogPublicKeyPEM"}, scts: 1, valid: 1},
	{name: "ctcpp embedded", leaf: "ctcpp/test-embedded-cert.pem", issuer: "ctcpp/ca-cert.pem",
		keys: []string{"ctcpp/ct-server-key-public.pem"}, scts: 1, valid: 1},
	{name: "ctcpp embedded, precertificate signing certificate", leaf: "ctcpp/test-embedded-with-preca-cert.pem", issuer: "ctcpp/ca-cert.pem",
		keys: []string{"ctcpp/ct-server-key-public.pem"}, scts: 1, valid: 1},
	{name: "ctcpp embedded under an intermediate", leaf: "ctcpp/test-embedded-with-intermediate-cert.pem", issuer: "ctcpp/intermediate-cert.pem",
		keys: []string{"ctcpp/ct-server-key-public.pem"}, scts: 1, valid: 1},
	{name: "ctcpp embedded under an intermediate's precertificate signing certificate", leaf: "ctcpp/test-embedded-with-intermediate-preca-cert.pem", issuer: "ctcpp/intermediate-cert.pem",
		keys: []string{"ctcpp/ct-server-key-public.pem"}, scts: 1, valid: 1},
	{name: "ctcpp tls ecdsa", leaf: "ctcpp/test-cert.pem", tls: []string{"ctcpp/test-cert.proof"},
		keys: []string{"ctcpp/ct-server-key-public.pem"}, scts: 1, valid: 1},
	{name: "ctcpp tls rsa", leaf: "ctcpp/test-cert.pem", tls: []string{"ctcpp/test-cert-rsa.proof"},
		keys: []string{"ctcpp/ct-server-key-public-rsa.pem"}, scts: 1, valid: 1},
	{name: "ctcpp ocsp", leaf: "ctcpp/test-cert.pem", ocsp: "ocsp/test-cert-ocsp.der",
		keys: []string{"ctcpp/ct-server-key-public.pem"}, scts: 1, valid: 1},
	{name: "google 2025 embedded (Xenon2025h2, Yeti2025)", leaf: "google2025/leaf_google-cert.bin", issuer: "google2025/issuer_google-cert.bin",
		keys: []string{"google2025/log0-pubkey.bin", "google2025/log1-pubkey.bin"}, scts: 2, valid: 2},
	{name: "reddit 2021 embedded (Argon2022, Nessie2022, Nimbus2022)", leaf: "reddit2021/leaf.der", issuer: "reddit2021/issuer.der",
		keys: []string{chromeListKeys}, scts: 3, valid: 3},
	{name: "google 2017 tls (Pilot, Symantec)", leaf: "google2017/google-cert.bin", tls: []string{"google2017/google-sct0.bin", "google2017/google-sct1.bin"},
		keys: []string{"google2017/google-pilot-pubkey.bin", "google2017/symantec-log-pubkey.bin"}, scts: 2, valid: 2},
}

// fixture1 returns the fixture of that name.
func fixture1(t testing.TB, name string) fixture {
	for _, f := range fixtures {
		if f.name == name {
			return f
		}
	}
	t.Fatalf("no fixture %q", name)
	return fixture{}
}

// loaded is a fixture read from disk.
type loaded struct {
	leaf, issuer *x509.Certificate
	scts         []*SCT
	keys         map[[32]byte]crypto.PublicKey
}

func load(t testing.TB, f fixture) *loaded {
	t.Helper()
	l := &loaded{leaf: loadCert(t, f.leaf), keys: map[[32]byte]crypto.PublicKey{}}
	if f.issuer != "" {
		l.issuer = loadCert(t, f.issuer)
	}
	var tls [][]byte
	for _, n := range f.tls {
		tls = append(tls, readFixture(t, n))
	}
	for _, n := range f.keys {
		if n == chromeListKeys {
			for id, log := range chromeList(t) {
				l.keys[id] = log.key
			}
			continue
		}
		k, id := loadKey(t, n)
		l.keys[id] = k
	}
	var ocspResp []byte
	if f.ocsp != "" {
		ocspResp = readFixture(t, f.ocsp)
	}
	var errs []error
	l.scts, errs = Collect(l.leaf, tls, ocspResp)
	if len(errs) > 0 {
		t.Fatalf("Collect: %v", errs)
	}
	return l
}

// ctutilVerify is certificate-transparency-go's verdict on s.
func ctutilVerify(t testing.TB, key crypto.PublicKey, s *SCT, leaf, issuer *x509.Certificate) error {
	t.Helper()
	var chain []*ctx509.Certificate
	for _, c := range []*x509.Certificate{leaf, issuer} {
		if c == nil {
			continue
		}
		cc, err := ctx509.ParseCertificate(c.Raw)
		if err != nil {
			t.Fatalf("ct-go x509: %v", err)
		}
		chain = append(chain, cc)
	}
	var cs ct.SignedCertificateTimestamp
	if rest, err := cttls.Unmarshal(s.Raw, &cs); err != nil || len(rest) > 0 {
		return fmt.Errorf("ct-go cannot parse the SCT: %v", err)
	}
	return ctutil.VerifySCT(key, chain, &cs, s.Source == Embedded)
}

func pkieVerify(s *SCT, key crypto.PublicKey, leaf, issuer *x509.Certificate) error {
	e, err := EntryFor(s, leaf, issuer)
	if err != nil {
		return err
	}
	return Verify(s, e, key)
}

// TestVerifyAgreesWithCTUtil checks pkie's verdict against ctutil.VerifySCT
// on every SCT of every fixture, and on tampered copies of each.
func TestVerifyAgreesWithCTUtil(t *testing.T) {
	wrongIssuer := loadCert(t, "ctcpp/intermediate-pre-cert.pem")
	wrongLeaf := loadCert(t, "ctcpp/test-embedded-with-intermediate-cert.pem")
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			l := load(t, f)
			if len(l.scts) != f.scts {
				t.Fatalf("collected %d SCTs, want %d", len(l.scts), f.scts)
			}
			valid := 0
			for i, s := range l.scts {
				key, ok := l.keys[s.LogID]
				if !ok {
					t.Fatalf("SCT %d: no key for log %x", i, s.LogID)
				}
				got := pkieVerify(s, key, l.leaf, l.issuer)
				want := ctutilVerify(t, key, s, l.leaf, l.issuer)
				if (got == nil) != (want == nil) {
					t.Fatalf("SCT %d (%s): pkie says %v, ctutil says %v", i, s.Source, got, want)
				}
				if got != nil {
					t.Logf("SCT %d: both reject: pkie %v; ctutil %v", i, got, want)
					continue
				}
				valid++
				checkLeafHash(t, s, l.leaf, l.issuer)

				tampered := []struct {
					name         string
					raw          func([]byte) []byte
					leaf, issuer *x509.Certificate
				}{
					{"signature byte flipped", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, l.leaf, l.issuer},
					{"timestamp changed", func(b []byte) []byte { b[1+32+7]++; return b }, l.leaf, l.issuer},
					{"extensions added", func([]byte) []byte {
						return serialize(s.Version, s.LogID, s.Timestamp, append(bytes.Clone(s.Extensions), 0, 0, 1, 9), s.HashAlg, s.SigAlg, s.Signature)
					}, l.leaf, l.issuer},
					{"wrong issuer", nil, l.leaf, wrongIssuer},
					{"wrong certificate", nil, wrongLeaf, l.issuer},
				}
				for _, tc := range tampered {
					if tc.leaf.Equal(l.leaf) && tc.issuer.Equal(l.issuer) && tc.raw == nil {
						continue // the fixture is the wrong certificate's own
					}
					ts := s
					if tc.raw != nil {
						var err error
						if ts, err = Parse(tc.raw(bytes.Clone(s.Raw)), s.Source); err != nil {
							t.Fatalf("%s: %v", tc.name, err)
						}
					}
					issuer := tc.issuer
					if s.Source != Embedded && tc.name == "wrong issuer" {
						continue // an x509_entry does not involve the issuer
					}
					got := pkieVerify(ts, key, tc.leaf, issuer)
					want := ctutilVerify(t, key, ts, tc.leaf, issuer)
					if got == nil || want == nil {
						t.Errorf("SCT %d, %s: pkie says %v, ctutil says %v; want both to reject", i, tc.name, got, want)
					}
				}
			}
			if valid != f.valid {
				t.Errorf("%d SCTs verified, want %d", valid, f.valid)
			}
		})
	}
}

// checkLeafHash checks LeafHash against ctutil.LeafHash and SignedInput
// against ct.SerializeSCTSignatureInput.
func checkLeafHash(t *testing.T, s *SCT, leaf, issuer *x509.Certificate) {
	t.Helper()
	e, err := EntryFor(s, leaf, issuer)
	if err != nil {
		t.Fatal(err)
	}
	var chain []*ctx509.Certificate
	for _, c := range []*x509.Certificate{leaf, issuer} {
		if c != nil {
			cc, err := ctx509.ParseCertificate(c.Raw)
			if err != nil {
				t.Fatal(err)
			}
			chain = append(chain, cc)
		}
	}
	var cs ct.SignedCertificateTimestamp
	if _, err := cttls.Unmarshal(s.Raw, &cs); err != nil {
		t.Fatal(err)
	}
	want, err := ctutil.LeafHash(chain, &cs, s.Source == Embedded)
	if err != nil {
		t.Fatalf("ctutil.LeafHash: %v", err)
	}
	if got := e.LeafHash(s); got != want {
		t.Errorf("LeafHash = %x, ctutil.LeafHash = %x", got, want)
	}
	leafEntry := ct.LogEntry{Leaf: ct.MerkleTreeLeaf{TimestampedEntry: &ct.TimestampedEntry{}}}
	if e.Precert {
		leafEntry.Leaf.TimestampedEntry.EntryType = ct.PrecertLogEntryType
		leafEntry.Leaf.TimestampedEntry.PrecertEntry = &ct.PreCert{IssuerKeyHash: e.IssuerKeyHash, TBSCertificate: e.TBS}
	} else {
		leafEntry.Leaf.TimestampedEntry.EntryType = ct.X509LogEntryType
		leafEntry.Leaf.TimestampedEntry.X509Entry = &ct.ASN1Cert{Data: e.Cert}
	}
	in, err := ct.SerializeSCTSignatureInput(cs, leafEntry)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(e.SignedInput(s), in) {
		t.Errorf("SignedInput differs from ct.SerializeSCTSignatureInput")
	}
	// The same entry as a monitor reads it from the log.
	w := ctwire.Entry{Timestamp: s.Timestamp, Precert: e.Precert, IssuerKeyHash: e.IssuerKeyHash, Extensions: s.Extensions, Certificate: e.Cert}
	if e.Precert {
		w.Certificate = e.TBS
	}
	if h, err := w.LeafHash(); err != nil || h != e.LeafHash(s) {
		t.Errorf("ctwire.Entry.LeafHash = %x, %v; want %x", h, err, e.LeafHash(s))
	}
}

// TestVerifyErrors checks that Verify says what was wrong.
func TestVerifyErrors(t *testing.T) {
	l := load(t, fixture1(t, "ctcpp embedded")) // ECDSA
	s := l.scts[0]
	e, err := EntryFor(s, l.leaf, l.issuer)
	if err != nil {
		t.Fatal(err)
	}
	ecKey := l.keys[s.LogID]
	rsaKey, _ := loadKey(t, "ctcpp/ct-server-key-public-rsa.pem")
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(*SCT)) *SCT { c := *s; f(&c); return &c }
	tests := []struct {
		name string
		s    *SCT
		e    *Entry
		key  crypto.PublicKey
		want string
	}{
		{"ok", s, e, ecKey, ""},
		{"hash algorithm", with(func(c *SCT) { c.HashAlg = 5 }), e, ecKey, "hash algorithm 5"},
		{"RSA bytes, ECDSA key", with(func(c *SCT) { c.SigAlg = sigRSA }), e, ecKey, "signature algorithm 1, but the log's key is ECDSA"},
		{"ECDSA bytes, RSA key", s, e, rsaKey, "signature algorithm 3, but the log's key is RSA"},
		{"P-384 key", s, e, &p384.PublicKey, "not on P-256"},
		{"no key", s, e, nil, "no key"},
		{"unknown key type", s, e, "key", "key of type string"},
		{"version", with(func(c *SCT) { c.Version = 1 }), e, ecKey, "version 1"},
		{"empty entry", s, &Entry{}, ecKey, "empty or too large"},
		{"other entry", s, &Entry{Cert: l.leaf.Raw}, ecKey, "invalid ECDSA signature over the x509_entry"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(tc.s, tc.e, tc.key)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestEntryForErrors(t *testing.T) {
	l := load(t, fixture1(t, "ctcpp embedded"))
	s := l.scts[0]
	if _, err := EntryFor(s, l.leaf, nil); err == nil || !strings.Contains(err.Error(), "no issuer") {
		t.Errorf("embedded SCT without issuer: %v", err)
	}
	plain := loadCert(t, "ctcpp/test-cert.pem")
	if _, err := EntryFor(s, plain, l.issuer); err == nil || !strings.Contains(err.Error(), "no SCT list") {
		t.Errorf("embedded SCT, certificate without SCT list: %v", err)
	}
	tlsS := *s
	tlsS.Source = TLSExtension
	e, err := EntryFor(&tlsS, l.leaf, nil)
	if err != nil || e.Precert || !bytes.Equal(e.Cert, l.leaf.Raw) {
		t.Errorf("TLS SCT: %+v, %v; want an x509_entry of the leaf", e, err)
	}
}
