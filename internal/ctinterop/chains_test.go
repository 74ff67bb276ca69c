package ctinterop

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"math/big"
	"testing"
	"time"

	ct "github.com/google/certificate-transparency-go"
	cttls "github.com/google/certificate-transparency-go/tls"
	ctx509 "github.com/google/certificate-transparency-go/x509"
	"github.com/pkie/pkie/internal/testbed"
)

var (
	oidCTPoison  = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 3}
	oidCTSCTList = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}
)

// precert is a precertificate (RFC 6962 §3.1) and what its CA needs to
// issue the final certificate once an SCT for it is back.
type precert struct {
	ca    *testbed.CA
	tmpl  *x509.Certificate
	key   crypto.Signer
	chain [][]byte // precertificate first, then ca's chain
}

// issuePrecert signs a precertificate for host under ca directly (no
// precertificate signing certificate): the poison extension, critical.
func issuePrecert(t *testing.T, ca *testbed.CA, host string) *precert {
	t.Helper()
	key, err := testbed.NewKey(testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber:   serial,
		Subject:        pkix.Name{CommonName: host},
		DNSNames:       []string{host},
		NotBefore:      time.Now().Add(-time.Hour).Truncate(time.Second),
		NotAfter:       time.Now().Add(90 * 24 * time.Hour).Truncate(time.Second),
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		AuthorityKeyId: ca.Cert.SubjectKeyId,
	}
	p := *tmpl
	p.ExtraExtensions = []pkix.Extension{{Id: oidCTPoison, Critical: true, Value: asn1.NullBytes}}
	der, err := x509.CreateCertificate(rand.Reader, &p, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatalf("precertificate for %s: %v", host, err)
	}
	return &precert{ca: ca, tmpl: tmpl, key: key, chain: append([][]byte{der}, ca.Chain()...)}
}

// final issues the certificate the precertificate announced, with the SCTs
// embedded (RFC 6962 §3.3); its chain is leaf first.
func (p *precert) final(t *testing.T, scts ...*ct.SignedCertificateTimestamp) [][]byte {
	t.Helper()
	var list ctx509.SignedCertificateTimestampList
	for _, sct := range scts {
		b, err := cttls.Marshal(*sct)
		if err != nil {
			t.Fatal(err)
		}
		list.SCTList = append(list.SCTList, ctx509.SerializedSCT{Val: b})
	}
	raw, err := cttls.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	val, err := asn1.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	f := *p.tmpl
	f.ExtraExtensions = []pkix.Extension{{Id: oidCTSCTList, Value: val}}
	der, err := x509.CreateCertificate(rand.Reader, &f, p.ca.Cert, p.key.Public(), p.ca.Key)
	if err != nil {
		t.Fatalf("final certificate: %v", err)
	}
	return append([][]byte{der}, p.ca.Chain()...)
}

// asn1Chain converts DER certificates to certificate-transparency-go's form.
func asn1Chain(chain [][]byte) []ct.ASN1Cert {
	out := make([]ct.ASN1Cert, len(chain))
	for i, der := range chain {
		out[i] = ct.ASN1Cert{Data: der}
	}
	return out
}

// ctgoChain parses DER certificates with certificate-transparency-go's
// x509 fork, as ctutil wants them.
func ctgoChain(t *testing.T, chain [][]byte) []*ctx509.Certificate {
	t.Helper()
	out := make([]*ctx509.Certificate, len(chain))
	for i, der := range chain {
		c, err := ctx509.ParseCertificate(der)
		if err != nil {
			t.Fatalf("ct-go x509: certificate %d: %v", i, err)
		}
		out[i] = c
	}
	return out
}

// tileLeaf is one entry of a static-ct-api data tile as
// certificate-transparency-go's TLS decoder reads it: RFC 6962's
// TimestampedEntry, then for a precert_entry the precertificate, then the
// chain's fingerprints (Fingerprint certificate_chain<0..2^16-1>).
type tileLeaf struct {
	Entry          ct.TimestampedEntry
	Precertificate []byte     // precert_entry only
	Chain          [][32]byte // fingerprints (SHA-256) of the chain after the (pre)certificate
}

type x509Extra struct {
	Chain [][32]byte `tls:"minlen:0,maxlen:65535"`
}

type precertExtra struct {
	Precertificate []byte     `tls:"minlen:1,maxlen:16777215"`
	Chain          [][32]byte `tls:"minlen:0,maxlen:65535"`
}

// parseTileCTGo splits a static-ct-api data tile with ct-go's TLS decoder
// (github.com/google/certificate-transparency-go/tls), independently of
// pkie's ctwire.ParseDataTile.
func parseTileCTGo(b []byte) ([]tileLeaf, error) {
	var out []tileLeaf
	for len(b) > 0 {
		var l tileLeaf
		rest, err := cttls.Unmarshal(b, &l.Entry)
		if err != nil {
			return nil, fmt.Errorf("entry %d: TimestampedEntry: %w", len(out), err)
		}
		switch l.Entry.EntryType {
		case ct.X509LogEntryType:
			var x x509Extra
			if rest, err = cttls.Unmarshal(rest, &x); err != nil {
				return nil, fmt.Errorf("entry %d: certificate_chain: %w", len(out), err)
			}
			l.Chain = x.Chain
		case ct.PrecertLogEntryType:
			var p precertExtra
			if rest, err = cttls.Unmarshal(rest, &p); err != nil {
				return nil, fmt.Errorf("entry %d: pre_certificate, precertificate_chain: %w", len(out), err)
			}
			l.Precertificate, l.Chain = p.Precertificate, p.Chain
		default:
			return nil, fmt.Errorf("entry %d: entry type %d", len(out), l.Entry.EntryType)
		}
		out = append(out, l)
		b = rest
	}
	return out, nil
}

// merkleLeaf is the RFC 6962 MerkleTreeLeaf of a tile entry, in ct-go's
// types: the leaf the log's tree commits to.
func (l *tileLeaf) merkleLeaf() *ct.MerkleTreeLeaf {
	te := l.Entry
	return &ct.MerkleTreeLeaf{Version: ct.V1, LeafType: ct.TimestampedEntryLeafType, TimestampedEntry: &te}
}
