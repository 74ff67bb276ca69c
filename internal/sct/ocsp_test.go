package sct

import (
	"bytes"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"testing"
	"time"
)

// The RFC 6960 structures, enough to write a response with several
// SingleResponses, which golang.org/x/crypto/ocsp cannot create.
type (
	ocspCertID struct {
		HashAlgorithm pkix.AlgorithmIdentifier
		NameHash      []byte
		KeyHash       []byte
		Serial        *big.Int
	}
	ocspSingle struct {
		CertID     ocspCertID
		Good       asn1.Flag        `asn1:"tag:0,optional"`
		ThisUpdate time.Time        `asn1:"generalized"`
		Extensions []pkix.Extension `asn1:"explicit,tag:1,optional"`
	}
	ocspData struct {
		ResponderID asn1.RawValue
		ProducedAt  time.Time `asn1:"generalized"`
		Responses   []ocspSingle
	}
	ocspBasic struct {
		TBS       ocspData
		SigAlg    pkix.AlgorithmIdentifier
		Signature asn1.BitString
	}
	ocspBytes struct {
		Type     asn1.ObjectIdentifier
		Response []byte
	}
	ocspOuter struct {
		Status asn1.Enumerated
		Bytes  ocspBytes `asn1:"explicit,tag:0"`
	}
)

// multiOCSP returns a DER OCSP response (unsigned: FromOCSP does not check
// the responder's signature) with one Good SingleResponse per serial, the
// i-th carrying scts[i] in its SCT list extension when non-nil.
func multiOCSP(t testing.TB, serials []*big.Int, scts [][]byte) []byte {
	t.Helper()
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	keyHash, _ := asn1.Marshal(make([]byte, 20))
	data := ocspData{
		ResponderID: asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 2, IsCompound: true, Bytes: keyHash},
		ProducedAt:  now,
	}
	for i, serial := range serials {
		s := ocspSingle{
			CertID: ocspCertID{HashAlgorithm: pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 3, 14, 3, 2, 26}},
				NameHash: make([]byte, 20), KeyHash: make([]byte, 20), Serial: serial},
			Good: true, ThisUpdate: now,
		}
		if scts[i] != nil {
			s.Extensions = []pkix.Extension{sctListExtension(t, scts[i])}
		}
		data.Responses = append(data.Responses, s)
	}
	basic, err := asn1.Marshal(ocspBasic{TBS: data,
		SigAlg:    pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}},
		Signature: asn1.BitString{Bytes: []byte{0}, BitLength: 8}})
	if err != nil {
		t.Fatal(err)
	}
	der, err := asn1.Marshal(ocspOuter{Bytes: ocspBytes{Type: asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 48, 1, 1}, Response: basic}})
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// TestFromOCSPPicksTheLeafsResponse: of several SingleResponses, the SCTs
// come from the one whose serial is the leaf's, wherever it is.
func TestFromOCSPPicksTheLeafsResponse(t *testing.T) {
	leaf := loadCert(t, "ctcpp/test-cert.pem")
	mine := readFixture(t, "ctcpp/test-cert.proof")
	theirs := readFixture(t, "ctcpp/test-embedded-pre-cert.proof")
	other := new(big.Int).Add(leaf.SerialNumber, big.NewInt(100))
	tests := []struct {
		name    string
		serials []*big.Int
		scts    [][]byte
		want    []byte // nil: no SCTs
	}{
		{"leaf second", []*big.Int{other, leaf.SerialNumber}, [][]byte{theirs, mine}, mine},
		{"leaf first", []*big.Int{leaf.SerialNumber, other}, [][]byte{mine, theirs}, mine},
		{"only the other has SCTs", []*big.Int{other, leaf.SerialNumber}, [][]byte{theirs, nil}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			scts, err := FromOCSP(multiOCSP(t, tc.serials, tc.scts), leaf)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if len(scts) != 0 {
					t.Fatalf("FromOCSP = %d SCTs, want none", len(scts))
				}
				return
			}
			if len(scts) != 1 || !bytes.Equal(scts[0].Raw, tc.want) {
				t.Fatalf("FromOCSP returned another SingleResponse's SCTs")
			}
		})
	}
}
