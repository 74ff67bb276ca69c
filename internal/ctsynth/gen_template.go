//go:build ignore

// gen_template writes the certificate templates the synthetic log varies per
// entry (template/*.der). Run it with "go run gen_template.go" from this
// directory; the output is committed, so the log is the same on every machine.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"log"
	"math/big"
	"net"
	"os"
	"time"
)

func main() {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	check(err)
	leafKey, err := rsa.GenerateKey(rand.Reader, 2048)
	check(err)
	nb := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{Country: []string{"ZZ"}, Organization: []string{"pkie synthetic CT"}, CommonName: "pkie synthetic issuing CA"},
		NotBefore:             nb,
		NotAfter:              nb.AddDate(5, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, caKey.Public(), caKey)
	check(err)
	ca, err = x509.ParseCertificate(caDER)
	check(err)
	// A 16-byte serial whose bytes are easy to find and overwrite: the
	// generator locates them by value.
	serial := new(big.Int).SetBytes([]byte{0x42, 0x53, 0x59, 0x4e, 0x54, 0x48, 0x53, 0x45, 0x52, 0x49, 0x41, 0x4c, 0x30, 0x30, 0x30, 0x31})
	leaf := func(extra []pkix.Extension) []byte {
		t := &x509.Certificate{
			SerialNumber:          serial,
			Subject:               pkix.Name{CommonName: "www.synthetic-0001.example"},
			DNSNames:              []string{"www.synthetic-0001.example", "synthetic-0001.example", "mail.synthetic-0001.example"},
			IPAddresses:           []net.IP{net.IPv4(192, 0, 2, 1)},
			NotBefore:             nb.AddDate(0, 1, 0),
			NotAfter:              nb.AddDate(0, 1, 90),
			KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			BasicConstraintsValid: true,
			OCSPServer:            []string{"http://ocsp.synthetic.example"},
			IssuingCertificateURL: []string{"http://ca.synthetic.example/issuer.der"},
			CRLDistributionPoints: []string{"http://crl.synthetic.example/1.crl"},
			PolicyIdentifiers:     []asn1.ObjectIdentifier{{2, 23, 140, 1, 2, 1}},
			ExtraExtensions:       extra,
		}
		der, err := x509.CreateCertificate(rand.Reader, t, ca, leafKey.Public(), caKey)
		check(err)
		return der
	}
	poison := pkix.Extension{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 3}, Critical: true, Value: []byte{0x05, 0x00}}
	// Two SCTs of the size real ECDSA SCTs have (119 bytes each), in an
	// RFC 6962 SignedCertificateTimestampList inside an OCTET STRING.
	var list []byte
	for i := range 2 {
		sct := make([]byte, 119)
		sct[0] = 0 // v1
		for j := 1; j < 33; j++ {
			sct[j] = byte(0xa0 + i)
		}
		list = append(list, byte(len(sct)>>8), byte(len(sct)))
		list = append(list, sct...)
	}
	list = append([]byte{byte(len(list) >> 8), byte(len(list))}, list...)
	sctExt, err := asn1.Marshal(list)
	check(err)
	sctList := pkix.Extension{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}, Value: sctExt}
	write("template/issuer.der", caDER)
	write("template/leaf.der", leaf(nil))
	write("template/precert.der", leaf([]pkix.Extension{poison}))
	write("template/final.der", leaf([]pkix.Extension{sctList}))
}

func write(name string, b []byte) { check(os.WriteFile(name, b, 0o644)) }

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
