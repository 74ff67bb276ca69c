package sctworld

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"time"

	"golang.org/x/crypto/ocsp"

	"github.com/pkie/pkie/internal/testbed"
)

// The RFC 6962 extensions: the precertificate poison (§3.1), the SCT list
// in a certificate (§3.3) and in an OCSP single response (§3.3).
var (
	OIDPoison      = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 3}
	OIDSCTList     = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}
	OIDOCSPSCTList = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 5}
)

// Precert is a precertificate (RFC 6962 §3.1) signed directly by its CA
// (no precertificate signing certificate), and what the CA needs to issue
// the final certificate once SCTs for it are back.
type Precert struct {
	CA    *testbed.CA
	Key   crypto.Signer
	Chain [][]byte // the precertificate, then the CA's chain: what add-pre-chain takes
	tmpl  *x509.Certificate
}

// template is a 90-day server certificate for host: short enough that
// Chrome's and Apple's policies ask for two SCTs.
func template(ca *testbed.CA, host string) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, err
	}
	now := time.Now().Truncate(time.Second)
	return &x509.Certificate{
		SerialNumber:   serial,
		Subject:        pkix.Name{CommonName: host},
		DNSNames:       []string{host},
		NotBefore:      now.Add(-time.Hour),
		NotAfter:       now.Add(90 * 24 * time.Hour),
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		AuthorityKeyId: ca.Cert.SubjectKeyId,
	}, nil
}

// IssuePrecert signs a precertificate for host under ca: the final
// certificate's fields and the critical poison extension.
func IssuePrecert(ca *testbed.CA, host string) (*Precert, error) {
	key, err := testbed.NewKey(testbed.ECDSAP256)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(ca, host)
	if err != nil {
		return nil, err
	}
	p := *tmpl
	p.ExtraExtensions = []pkix.Extension{{Id: OIDPoison, Critical: true, Value: asn1.NullBytes}}
	der, err := x509.CreateCertificate(rand.Reader, &p, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sctworld: precertificate for %s: %w", host, err)
	}
	return &Precert{CA: ca, Key: key, Chain: append([][]byte{der}, ca.Chain()...), tmpl: tmpl}, nil
}

// Final issues the certificate the precertificate announced, with scts
// (serialized SCTs) in its SCT list extension (RFC 6962 §3.3); with no
// SCT it has no such extension.
func (p *Precert) Final(scts ...[]byte) (*testbed.Leaf, error) {
	f := *p.tmpl
	if len(scts) > 0 {
		val, err := sctListExtension(scts)
		if err != nil {
			return nil, err
		}
		f.ExtraExtensions = []pkix.Extension{{Id: OIDSCTList, Value: val}}
	}
	der, err := x509.CreateCertificate(rand.Reader, &f, p.CA.Cert, p.Key.Public(), p.CA.Key)
	if err != nil {
		return nil, fmt.Errorf("sctworld: final certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &testbed.Leaf{Cert: cert, Key: p.Key, Chain: append([][]byte{der}, p.CA.Chain()...)}, nil
}

// IssueX509 signs an ordinary certificate for host (no poison, no SCT
// list), to be logged with add-chain and delivered with SCTs in the TLS
// extension or an OCSP response.
func IssueX509(ca *testbed.CA, host string) (*testbed.Leaf, error) {
	p, err := IssuePrecert(ca, host)
	if err != nil {
		return nil, err
	}
	return p.Final()
}

// MarshalSCTList is the TLS SignedCertificateTimestampList (RFC 6962
// §3.3) of serialized SCTs.
func MarshalSCTList(scts [][]byte) ([]byte, error) {
	var body []byte
	for _, s := range scts {
		if len(s) == 0 || len(s) > 0xffff {
			return nil, fmt.Errorf("sctworld: an SCT of %d bytes", len(s))
		}
		body = binary.BigEndian.AppendUint16(body, uint16(len(s)))
		body = append(body, s...)
	}
	if len(body) > 0xffff {
		return nil, errors.New("sctworld: SCT list too long")
	}
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(body))), body...), nil
}

// sctListExtension is the extension value that carries an SCT list in a
// certificate or an OCSP response: the TLS list in an OCTET STRING.
func sctListExtension(scts [][]byte) ([]byte, error) {
	list, err := MarshalSCTList(scts)
	if err != nil {
		return nil, err
	}
	return asn1.Marshal(list)
}

// OCSPResponse is a good OCSP response for leaf from its issuing CA (the
// CA signs it itself), carrying scts in its single response's SCT list
// extension, as a server staples it.
func OCSPResponse(ca *testbed.CA, leaf *x509.Certificate, scts [][]byte) ([]byte, error) {
	val, err := sctListExtension(scts)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := ocsp.Response{
		Status:          ocsp.Good,
		SerialNumber:    leaf.SerialNumber,
		ThisUpdate:      now.Add(-time.Hour),
		NextUpdate:      now.Add(72 * time.Hour),
		ExtraExtensions: []pkix.Extension{{Id: OIDOCSPSCTList, Value: val}},
	}
	der, err := ocsp.CreateResponse(ca.Cert, ca.Cert, tmpl, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sctworld: OCSP response: %w", err)
	}
	return der, nil
}

// Forge returns a copy of a serialized SCT whose signature no longer
// verifies: the last byte of the signature flipped, its framing intact,
// so that it parses and only the signature check refuses it.
func Forge(sct []byte) []byte {
	f := append([]byte(nil), sct...)
	f[len(f)-1] ^= 0x01
	return f
}
