package sct

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"flag"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"

	"github.com/pkie/pkie/internal/testpki"
)

var update = flag.Bool("update", false, "rewrite generated fixtures in testdata/")

// serialize builds a v1 SCT's bytes from its fields.
func serialize(version uint8, id [32]byte, ts uint64, ext []byte, hash, sig uint8, signature []byte) []byte {
	b := []byte{version}
	b = append(b, id[:]...)
	b = appendUint64(b, ts)
	b = append(b, byte(len(ext)>>8), byte(len(ext)))
	b = append(b, ext...)
	b = append(b, hash, sig, byte(len(signature)>>8), byte(len(signature)))
	return append(b, signature...)
}

func appendUint64(b []byte, v uint64) []byte {
	for i := 7; i >= 0; i-- {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

func TestParse(t *testing.T) {
	id := sha256.Sum256([]byte("log"))
	sig := bytes.Repeat([]byte{7}, 71)
	leafIndex := []byte{0, 0, 5, 0, 0, 0, 1, 2} // leaf_index 258
	tests := []struct {
		name string
		raw  []byte
		want string // error substring; "" = ok
	}{
		{"v1", serialize(0, id, 1700000000000, nil, 4, 3, sig), ""},
		{"v1 with leaf_index", serialize(0, id, 1700000000000, leafIndex, 4, 3, sig), ""},
		{"empty", nil, "empty"},
		{"v2", serialize(1, id, 1, nil, 4, 3, sig), "version 1, only v1"},
		{"truncated log ID", serialize(0, id, 1, nil, 4, 3, sig)[:20], "truncated in log ID"},
		{"truncated extensions", serialize(0, id, 1, leafIndex, 4, 3, sig)[:44], "extensions truncated"},
		{"truncated signature", serialize(0, id, 1, nil, 4, 3, sig)[:60], "signature truncated"},
		{"trailing bytes", append(serialize(0, id, 1, nil, 4, 3, sig), 0), "1 bytes after the signature"},
		{"empty signature", serialize(0, id, 1, nil, 4, 3, nil), "signature of 0 bytes"},
		{"huge signature", serialize(0, id, 1, nil, 4, 1, make([]byte, MaxSignature+1)), "signature of 1025 bytes"},
		{"timestamp out of range", serialize(0, id, 1<<63, nil, 4, 3, sig), "out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.raw, TLSExtension)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Parse = %v, want an error containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(s.Raw, tc.raw) || s.LogID != id || s.Timestamp != 1700000000000 || !bytes.Equal(s.Signature, sig) ||
				s.HashAlg != 4 || s.SigAlg != 3 || s.Source != TLSExtension {
				t.Fatalf("Parse = %+v", s)
			}
			if got := s.Time(); !got.Equal(time.UnixMilli(1700000000000)) {
				t.Errorf("Time = %v", got)
			}
			if s.Hash() != sha256.Sum256(tc.raw) {
				t.Errorf("Hash is not SHA-256 of the serialized SCT")
			}
			idx, ok, err := s.LeafIndex()
			switch {
			case len(s.Extensions) == 0 && (ok || err != nil):
				t.Errorf("LeafIndex with no extensions = %d, %t, %v", idx, ok, err)
			case len(s.Extensions) > 0 && (!ok || err != nil || idx != 258):
				t.Errorf("LeafIndex = %d, %t, %v; want 258", idx, ok, err)
			}
			tc.raw[0] ^= 0xff
			if s.Raw[0] == tc.raw[0] {
				t.Error("Parse kept the caller's slice, not a copy")
			}
		})
	}
}

func TestLeafIndexMalformed(t *testing.T) {
	id := sha256.Sum256([]byte("log"))
	for _, ext := range [][]byte{{1, 0, 5, 0, 0, 0, 0, 1}, {0, 0, 4, 0, 0, 0, 1}, {0}} {
		s, err := Parse(serialize(0, id, 1, ext, 4, 3, []byte{1}), Embedded)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.LeafIndex(); ok || err == nil {
			t.Errorf("extensions %x: LeafIndex ok=%t err=%v, want an error", ext, ok, err)
		}
	}
}

func TestSourceString(t *testing.T) {
	for s, want := range map[Source]string{Embedded: "embedded", TLSExtension: "tls", OCSP: "ocsp", 9: "source(9)"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", s, s.String(), want)
		}
	}
}

func TestParseList(t *testing.T) {
	id := sha256.Sum256([]byte("log"))
	one := serialize(0, id, 1, nil, 4, 3, []byte{1, 2, 3})
	two := serialize(0, id, 2, nil, 4, 3, []byte{4, 5})
	list, err := MarshalList([][]byte{one, two})
	if err != nil {
		t.Fatal(err)
	}
	many := make([][]byte, MaxListSCTs+1)
	for i := range many {
		many[i] = one
	}
	var over []byte
	for range MaxListSCTs + 1 {
		over = append(over, byte(len(one)>>8), byte(len(one)))
		over = append(over, one...)
	}
	over = append([]byte{byte(len(over) >> 8), byte(len(over))}, over...)
	tests := []struct {
		name string
		list []byte
		want string
		n    int
	}{
		{"two", list, "", 2},
		{"empty list", []byte{0, 0}, "is empty", 0},
		{"no length", []byte{0}, "malformed length", 0},
		{"length too long", append([]byte{0xff, 0xff}, list[2:]...), "malformed length", 0},
		{"trailing byte", append(bytes.Clone(list), 0), "malformed length", 0},
		{"SCT truncated", []byte{0, 3, 0, 5, 0}, "SCT 1 truncated", 0},
		{"bad SCT", []byte{0, 3, 0, 1, 9}, "SCT 1: sct: version 9", 0},
		{"too many", over, "more than 64 SCTs", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseList(tc.list, OCSP)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("ParseList = %v, want an error containing %q", err, tc.want)
				}
				return
			}
			if err != nil || len(got) != tc.n {
				t.Fatalf("ParseList = %d SCTs, %v; want %d", len(got), err, tc.n)
			}
			if !bytes.Equal(got[0].Raw, one) || !bytes.Equal(got[1].Raw, two) || got[1].Source != OCSP {
				t.Fatalf("ParseList did not return the SCTs in order")
			}
		})
	}
	for _, bad := range []struct {
		name string
		in   [][]byte
	}{{"none", nil}, {"empty SCT", [][]byte{one, {}}}, {"too many", many}, {"too long", [][]byte{make([]byte, 40000), make([]byte, 40000)}}} {
		if _, err := MarshalList(bad.in); err == nil {
			t.Errorf("MarshalList(%s) succeeded", bad.name)
		}
	}
}

// ocspResponse returns a DER OCSP response for serial, signed by a
// throwaway responder, with exts in its SingleResponse.
func ocspResponse(t testing.TB, serial *big.Int, exts []pkix.Extension) []byte {
	t.Helper()
	ca, err := testpki.NewRootCA("OCSP responder", testpki.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	der, err := ocsp.CreateResponse(ca.Cert, ca.Cert, ocsp.Response{
		Status: ocsp.Good, SerialNumber: serial, ThisUpdate: now, NextUpdate: now.Add(7 * 24 * time.Hour),
		ExtraExtensions: exts,
	}, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// sctListExtension wraps serialized SCTs as the OCSP SCT list extension.
func sctListExtension(t testing.TB, scts ...[]byte) pkix.Extension {
	t.Helper()
	list, err := MarshalList(scts)
	if err != nil {
		t.Fatal(err)
	}
	v, err := asn1.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	return pkix.Extension{Id: oidOCSPSCTs, Value: v}
}

// TestOCSPFixture writes (with -update) and checks
// testdata/ocsp/test-cert-ocsp.der: an OCSP response for
// ctcpp/test-cert.pem carrying its SCT ctcpp/test-cert.proof.
func TestOCSPFixture(t *testing.T) {
	leaf := loadCert(t, "ctcpp/test-cert.pem")
	path := filepath.Join("testdata", "ocsp", "test-cert-ocsp.der")
	if *update {
		der := ocspResponse(t, leaf.SerialNumber, []pkix.Extension{sctListExtension(t, readFixture(t, "ctcpp/test-cert.proof"))})
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, der, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	scts, err := FromOCSP(readFixture(t, "ocsp/test-cert-ocsp.der"), leaf)
	if err != nil || len(scts) != 1 {
		t.Fatalf("FromOCSP = %d SCTs, %v; want 1", len(scts), err)
	}
	if scts[0].Source != OCSP || !bytes.Equal(scts[0].Raw, readFixture(t, "ctcpp/test-cert.proof")) {
		t.Fatalf("FromOCSP returned %+v", scts[0])
	}
}

func TestFromOCSP(t *testing.T) {
	leaf := loadCert(t, "ctcpp/test-cert.pem")
	proof := readFixture(t, "ctcpp/test-cert.proof")
	other := new(big.Int).Add(leaf.SerialNumber, big.NewInt(1))
	tests := []struct {
		name string
		resp []byte
		n    int
		want string
	}{
		{"the leaf's", ocspResponse(t, leaf.SerialNumber, []pkix.Extension{sctListExtension(t, proof)}), 1, ""},
		{"no SCT extension", ocspResponse(t, leaf.SerialNumber, nil), 0, ""},
		{"another certificate's", ocspResponse(t, other, []pkix.Extension{sctListExtension(t, proof)}), 0, "no response matching"},
		{"extension not an OCTET STRING", ocspResponse(t, leaf.SerialNumber, []pkix.Extension{{Id: oidOCSPSCTs, Value: []byte{5, 0}}}), 0, "not one OCTET STRING"},
		{"not OCSP", []byte("hello"), 0, "OCSP response"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromOCSP(tc.resp, leaf)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("FromOCSP = %v, want an error containing %q", err, tc.want)
				}
				return
			}
			if err != nil || len(got) != tc.n {
				t.Fatalf("FromOCSP = %d SCTs, %v; want %d", len(got), err, tc.n)
			}
		})
	}
}

// TestCollect: SCTs from all three sources are gathered, each verifies
// with the entry its source calls for, and a bad source is reported
// without hiding the others.
func TestCollect(t *testing.T) {
	embedded := loadCert(t, "ctcpp/test-embedded-cert.pem")
	issuer := loadCert(t, "ctcpp/ca-cert.pem")
	key, _ := loadKey(t, "ctcpp/ct-server-key-public.pem")
	plain := loadCert(t, "ctcpp/test-cert.pem")
	proof := readFixture(t, "ctcpp/test-cert.proof")
	ocspDER := readFixture(t, "ocsp/test-cert-ocsp.der")

	scts, errs := Collect(plain, [][]byte{proof}, ocspDER)
	if len(errs) > 0 || len(scts) != 2 || scts[0].Source != TLSExtension || scts[1].Source != OCSP {
		t.Fatalf("Collect(plain, tls, ocsp) = %v, %v", scts, errs)
	}
	for _, s := range scts {
		if err := pkieVerify(s, key, plain, nil); err != nil {
			t.Errorf("%s SCT: %v", s.Source, err)
		}
	}

	scts, errs = Collect(embedded, [][]byte{{0xff}, proof}, []byte("not OCSP"))
	if len(scts) != 2 || scts[0].Source != Embedded || scts[1].Source != TLSExtension {
		t.Fatalf("Collect with bad sources: SCTs %v", scts)
	}
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "tls SCT 1") || !strings.Contains(errs[1].Error(), "OCSP") {
		t.Fatalf("Collect with bad sources: errors %v", errs)
	}
	if err := pkieVerify(scts[0], key, embedded, issuer); err != nil {
		t.Errorf("embedded SCT: %v", err)
	}
	// The SCT for another certificate, delivered in this one's handshake.
	if err := pkieVerify(scts[1], key, embedded, issuer); err == nil {
		t.Errorf("test-cert's SCT verified for test-embedded-cert")
	}

	if scts, errs := Collect(plain, make([][]byte, MaxListSCTs+1), nil); len(scts) != 0 || len(errs) != 1 {
		t.Errorf("Collect with %d TLS SCTs = %v, %v", MaxListSCTs+1, scts, errs)
	}
	if scts, errs := Collect(plain, nil, nil); len(scts) != 0 || len(errs) != 0 {
		t.Errorf("Collect with no SCTs = %v, %v", scts, errs)
	}
}

func TestFromCertificateMalformed(t *testing.T) {
	ca, err := testpki.NewRootCA("SCT test CA", testpki.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(value []byte) *x509.Certificate {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "x"},
			NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1e9, 0),
			ExtraExtensions: []pkix.Extension{{Id: oidEmbeddedSCTs, Value: value}}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, ca.Key.Public(), ca.Key)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	emptyList, _ := asn1.Marshal([]byte{0, 0})
	for name, v := range map[string][]byte{
		"not an OCTET STRING":  {5, 0},
		"trailing bytes":       append(bytes.Clone(emptyList), 0),
		"empty list":           emptyList,
		"OCTET STRING, no SCT": {4, 0},
	} {
		if scts, err := FromCertificate(mk(v)); err == nil {
			t.Errorf("%s: FromCertificate = %v, want an error", name, scts)
		}
	}
	if scts, err := FromCertificate(ca.Cert); scts != nil || err != nil {
		t.Errorf("no SCT list: FromCertificate = %v, %v; want nil, nil", scts, err)
	}
}

// TestCache: a hit needs the same SCT, certificate, issuer and key; the
// cache stays within its bound; failures are not cached.
func TestCache(t *testing.T) {
	l := load(t, fixture1(t, "google 2025 embedded (Xenon2025h2, Yeti2025)")) // two SCTs, two logs
	if len(l.scts) != 2 {
		t.Fatalf("fixture has %d SCTs", len(l.scts))
	}
	c := NewCache(1)
	entries := make([]*Entry, 2)
	for i, s := range l.scts {
		e, err := EntryFor(s, l.leaf, l.issuer)
		if err != nil {
			t.Fatal(err)
		}
		entries[i] = e
		for range 2 {
			if err := c.Verify(s, e, l.keys[s.LogID]); err != nil {
				t.Fatalf("SCT %d: %v", i, err)
			}
		}
		if c.Len() != 1 {
			t.Fatalf("cache of 1 holds %d", c.Len())
		}
	}
	s0, k0, k1 := l.scts[0], l.keys[l.scts[0].LogID], l.keys[l.scts[1].LogID]
	if err := c.Verify(s0, entries[0], k1); err == nil {
		t.Error("SCT 0 verified with log 1's key")
	}
	// The SCT, verified, then presented for another certificate's entry.
	wrong, err := EntryFor(s0, l.leaf, loadCert(t, "ctcpp/ca-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Verify(s0, entries[0], k0); err != nil {
		t.Fatal(err)
	}
	if err := c.Verify(s0, wrong, k0); err == nil {
		t.Error("a cached SCT verified for another issuer")
	}
	if c.Len() != 1 {
		t.Errorf("failures were cached: %d entries", c.Len())
	}
	if err := c.Verify(s0, entries[0], nil); err == nil || !strings.Contains(err.Error(), "no key") {
		t.Errorf("no key: %v", err)
	}

	// Concurrent use (run with -race).
	big := NewCache(8)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				j := (g + i) % 2
				if err := big.Verify(l.scts[j], entries[j], l.keys[l.scts[j].LogID]); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if big.Len() != 2 {
		t.Errorf("cache holds %d, want 2", big.Len())
	}
}
