package verify

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"
)

type testCert struct {
	cert *x509.Certificate
	key  crypto.Signer
}

var serial int64

func mint(t *testing.T, tmpl *x509.Certificate, parent *testCert) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial++
	tmpl.SerialNumber = big.NewInt(serial)
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = time.Now().Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	}
	p, pk := tmpl, crypto.Signer(key)
	if parent != nil {
		p, pk = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p, key.Public(), pk)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCert{c, key}
}

func ca(name string) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
}

func leafTmpl(names ...string) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
}

// The Go back end puts crypto/x509's errors in pkie's words, including
// those crypto/x509 reports only as a hint to "unknown authority".
func TestGoCodes(t *testing.T) {
	now := time.Now()
	root := mint(t, ca("Root"), nil)
	inter := mint(t, ca("Inter"), root)
	good := mint(t, leafTmpl("a.test"), inter)

	old := ca("Old Inter")
	old.NotBefore, old.NotAfter = now.Add(-48*time.Hour), now.Add(-24*time.Hour)
	oldInter := mint(t, old, root)
	underOld := mint(t, leafTmpl("a.test"), oldInter)

	nc := ca("Constrained")
	nc.PermittedDNSDomains = []string{"allowed.test"}
	ncInter := mint(t, nc, root)
	outside := mint(t, leafTmpl("a.test"), ncInter)

	pl := ca("PathLen0")
	pl.MaxPathLenZero = true
	plInter := mint(t, pl, root)
	sub := mint(t, ca("Sub"), plInter)
	tooDeep := mint(t, leafTmpl("a.test"), sub)

	future := leafTmpl("a.test")
	future.NotBefore = now.Add(time.Hour)
	notYet := mint(t, future, inter)

	bad := append([]byte(nil), good.cert.Raw...)
	bad[len(bad)-5] ^= 0x40

	notCA := mint(t, leafTmpl("ee.test"), root)
	underEE := mint(t, leafTmpl("a.test"), notCA)

	other := mint(t, ca("Other Root"), nil)

	raw := func(cs ...*testCert) [][]byte {
		var out [][]byte
		for _, c := range cs {
			out = append(out, c.cert.Raw)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		chain [][]byte
		roots [][]byte
		host  string
		want  Code
	}{
		{"valid", raw(good, inter), nil, "a.test", OK},
		{"wrong name", raw(good, inter), nil, "b.test", NameMismatch},
		{"expired intermediate", raw(underOld, oldInter), nil, "a.test", Expired},
		{"not yet valid", raw(notYet, inter), nil, "a.test", NotYetValid},
		{"name constraints", raw(outside, ncInter), nil, "a.test", NameConstraint},
		{"path length", raw(tooDeep, sub, plInter), nil, "a.test", PathLength},
		{"bad signature", append([][]byte{bad}, inter.cert.Raw), nil, "a.test", BadSignature},
		{"issuer not a CA", raw(underEE, notCA), nil, "a.test", NotCA},
		{"unknown root", raw(good, inter), raw(other), "a.test", UnknownIssuer},
		{"missing intermediate", raw(good), nil, "a.test", UnknownIssuer},
		{"malformed leaf", [][]byte{{0x30, 0x03, 1, 2, 3}}, nil, "a.test", Malformed},
	} {
		for _, parallel := range []bool{false, true} {
			b := NewGo(parallel)
			t.Run(tc.name+"/"+b.Name(), func(t *testing.T) {
				roots := tc.roots
				if roots == nil {
					roots = raw(root)
				}
				res, err := b.Verify(context.Background(), &Request{Roots: roots, Chain: tc.chain, Host: tc.host, Time: now})
				if err != nil {
					t.Fatal(err)
				}
				if res.Code != tc.want || res.Valid != (tc.want == OK) {
					t.Fatalf("got %s (%s), want %s", res.Code, res.Reason, tc.want)
				}
				if res.Valid && res.Depth != 3 {
					t.Errorf("depth %d, want 3", res.Depth)
				}
				if parallel && tc.want != Malformed && (res.Phases.Parallel <= 0 || res.Phases.Verify <= 0) {
					t.Errorf("go-parallel should time its concurrent checks, then crypto/x509: %+v", res.Phases)
				}
				if !parallel && res.Phases.Parallel != 0 {
					t.Errorf("serial back end timed a parallel phase: %+v", res.Phases)
				}
			})
		}
	}
}

// A presented certificate that is not on the valid path (an old
// intermediate with the issuer's name and another key, sent first) fails
// go-parallel's concurrent check of the presented order, but crypto/x509
// finds the path around it, and decides.
func TestParallelBypassedLink(t *testing.T) {
	root := mint(t, ca("Root"), nil)
	inter := mint(t, ca("Inter"), root)
	old := mint(t, ca("Inter"), root)
	leaf := mint(t, leafTmpl("a.test"), inter)
	r := &Request{Roots: [][]byte{root.cert.Raw}, Chain: [][]byte{leaf.cert.Raw, old.cert.Raw, inter.cert.Raw}, Host: "a.test", Time: time.Now()}
	for _, b := range []Backend{NewGo(false), NewGo(true)} {
		res, err := b.Verify(context.Background(), r)
		if err != nil || !res.Valid {
			t.Errorf("%s: %+v, %v", b.Name(), res, err)
		}
	}
}

// go-parallel checks every link of the presented path, the last one
// against a root found by name.
func TestParallelLinks(t *testing.T) {
	root := mint(t, ca("Root"), nil)
	inter := mint(t, ca("Inter"), root)
	leaf := mint(t, leafTmpl("a.test"), inter)
	certs := []*x509.Certificate{leaf.cert, inter.cert}
	if err := checkSignaturesParallel(certs, []*x509.Certificate{root.cert}); err != nil {
		t.Fatal(err)
	}
	// A root with the right name but another key fails the top link.
	impostor := mint(t, ca("Root"), nil)
	if err := checkSignaturesParallel(certs, []*x509.Certificate{impostor.cert}); err == nil {
		t.Fatal("the intermediate's signature by an impostor root passed")
	}
	// Both roots: either may sign.
	if err := checkSignaturesParallel(certs, []*x509.Certificate{impostor.cert, root.cert}); err != nil {
		t.Fatal(err)
	}
}

func TestRequestCheck(t *testing.T) {
	ok := Request{Roots: [][]byte{{1}}, Chain: [][]byte{{1}}, Time: time.Now()}
	for _, tc := range []struct {
		name string
		mod  func(r *Request)
	}{
		{"no roots", func(r *Request) { r.Roots = nil }},
		{"no chain", func(r *Request) { r.Chain = nil }},
		{"no time", func(r *Request) { r.Time = time.Time{} }},
		{"before 1970", func(r *Request) { r.Time = time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"purpose", func(r *Request) { r.Purpose = "email" }},
		{"long chain", func(r *Request) { r.Chain = make([][]byte, MaxChain+1) }},
		{"empty cert", func(r *Request) { r.Chain = [][]byte{{}} }},
		{"huge cert", func(r *Request) { r.Roots = [][]byte{make([]byte, MaxCertBytes+1)} }},
	} {
		r := ok
		tc.mod(&r)
		if err := r.Check(); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
}
