package sct

import (
	"bytes"
	"math/big"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// seedSCTs returns every serialized SCT in testdata: the SCT files and the
// SCTs embedded in the fixtures' certificates.
func seedSCTs(t testing.TB) [][]byte {
	var out [][]byte
	for _, pat := range []string{"testdata/*/*.proof", "testdata/*/google-sct*.bin"} {
		files, _ := filepath.Glob(pat)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
	}
	for _, f := range fixtures {
		for _, s := range load(t, f).scts {
			out = append(out, s.Raw)
		}
	}
	return out
}

// embeddedValues returns the SCT list extension values of the fixtures'
// certificates.
func embeddedValues(t testing.TB) [][]byte {
	var out [][]byte
	for _, f := range fixtures {
		for _, e := range loadCert(t, f.leaf).Extensions {
			if e.Id.Equal(oidEmbeddedSCTs) {
				out = append(out, e.Value)
			}
		}
	}
	return out
}

// FuzzParse: Parse never panics, and what it accepts re-encodes from its
// fields to the same bytes.
func FuzzParse(f *testing.F) {
	for _, s := range seedSCTs(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b, TLSExtension)
		if err != nil {
			return
		}
		if re := serialize(s.Version, s.LogID, s.Timestamp, s.Extensions, s.HashAlg, s.SigAlg, s.Signature); !bytes.Equal(re, b) {
			t.Fatalf("Parse(%x) re-encodes to %x", b, re)
		}
		s.LeafIndex() // must not panic
	})
}

// FuzzParseList: ParseList never panics, stays within its bounds, and
// what it accepts MarshalList re-encodes to the same bytes.
func FuzzParseList(f *testing.F) {
	seeds := seedSCTs(f)
	for _, s := range seeds {
		l, err := MarshalList([][]byte{s})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(l)
	}
	if l, err := MarshalList(seeds); err == nil {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		scts, err := ParseList(b, Embedded)
		if err != nil {
			return
		}
		if len(scts) == 0 || len(scts) > MaxListSCTs {
			t.Fatalf("ParseList accepted %d SCTs", len(scts))
		}
		raws := make([][]byte, len(scts))
		for i, s := range scts {
			if len(s.Signature) > MaxSignature || s.Source != Embedded {
				t.Fatalf("SCT %d: %d-byte signature, source %s", i, len(s.Signature), s.Source)
			}
			raws[i] = s.Raw
		}
		re, err := MarshalList(raws)
		if err != nil || !bytes.Equal(re, b) {
			t.Fatalf("ParseList(%x) re-encodes to %x, %v", b, re, err)
		}
	})
}

// FuzzEmbedded: the embedded SCT list extension's value (an OCTET STRING
// wrapping the list) never panics the parser, and what it accepts
// re-encodes to the same bytes.
func FuzzEmbedded(f *testing.F) {
	for _, v := range embeddedValues(f) {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		scts, err := parseExtension(b, Embedded)
		if err != nil {
			return
		}
		raws := make([][]byte, len(scts))
		for i, s := range scts {
			raws[i] = s.Raw
		}
		list, err := MarshalList(raws)
		if err != nil {
			t.Fatal(err)
		}
		var out cryptobyte.Builder
		out.AddASN1(cbasn1.OCTET_STRING, func(b *cryptobyte.Builder) { b.AddBytes(list) })
		if re := out.BytesOrPanic(); !bytes.Equal(re, b) {
			t.Fatalf("extension %x re-encodes to %x", b, re)
		}
	})
}

// FuzzFromOCSP: an OCSP response never panics FromOCSP, and every SCT it
// returns is marked as delivered by OCSP.
func FuzzFromOCSP(f *testing.F) {
	leaf := loadCert(f, "ctcpp/test-cert.pem")
	f.Add(readFixture(f, "ocsp/test-cert-ocsp.der"))
	other := new(big.Int).Add(leaf.SerialNumber, big.NewInt(1))
	f.Add(multiOCSP(f, []*big.Int{other, leaf.SerialNumber}, [][]byte{readFixture(f, "ctcpp/test-embedded-pre-cert.proof"), readFixture(f, "ctcpp/test-cert.proof")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		scts, err := FromOCSP(b, leaf)
		if err != nil {
			return
		}
		for _, s := range scts {
			if s.Source != OCSP {
				t.Fatalf("an SCT from OCSP has source %s", s.Source)
			}
		}
	})
}
