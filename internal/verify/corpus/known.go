package corpus

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"time"

	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/internal/verify"
)

// KnownSource is the Source of the cases Known builds.
const KnownSource = "known"

// Known builds the testbed's known cases, valid at now: chains that every
// correct validator accepts, and chains each broken in exactly one way
// that every correct validator rejects with the same code.
//
// They are built afresh with new keys on each call rather than committed
// as fixtures: no private keys in the repository, and validity windows
// placed around now, so the cases never expire under the tests. The
// shape of each case (names, extensions, validity relative to now,
// the byte flipped) is fixed, so the verdicts are the same on every run.
func Known(now time.Time) (*Corpus, error) {
	k := &knownBuilder{now: now}
	if err := k.build(); err != nil {
		return nil, fmt.Errorf("corpus: building known cases: %w", err)
	}
	return &Corpus{Cases: k.cases}, nil
}

type knownBuilder struct {
	now    time.Time
	cases  []Case
	serial int64
}

// certKey is a certificate and its key, for issuing below it.
type certKey struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func (k *knownBuilder) add(c Case) {
	c.Source = KnownSource
	if c.Time.IsZero() {
		c.Time = k.now
	}
	if c.Purpose == "" {
		c.Purpose = verify.Server
	}
	k.cases = append(k.cases, c)
}

// issue signs tmpl with parent (self-signed when parent is nil) under a
// new key of alg, filling in what every certificate here shares.
func (k *knownBuilder) issue(tmpl *x509.Certificate, parent *certKey, alg testbed.KeyAlg) (*certKey, error) {
	key, err := testbed.NewKey(alg)
	if err != nil {
		return nil, err
	}
	k.serial++
	tmpl.SerialNumber = big.NewInt(1000 + k.serial)
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = k.now.Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = k.now.Add(30 * 24 * time.Hour)
	}
	issuer, signer := tmpl, crypto.Signer(key)
	if parent != nil {
		issuer, signer = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("issuing %s: %w", tmpl.Subject.CommonName, err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &certKey{cert: c, key: key}, nil
}

func caTmpl(name string) *x509.Certificate {
	return &x509.Certificate{
		Subject:               pkix.Name{CommonName: name, Organization: []string{"pkie known cases"}},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
}

func leafTmpl(host string) *x509.Certificate {
	return &x509.Certificate{
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
}

const knownHost = "www.known.pkie.test"

func (k *knownBuilder) build() error {
	now := k.now
	// The valid hierarchies come from the testbed, as its sites do.
	for _, alg := range []testbed.KeyAlg{testbed.ECDSAP256, testbed.RSA2048} {
		root, err := testbed.NewRootCA("pkie known root "+string(alg), alg)
		if err != nil {
			return err
		}
		inter, err := root.NewIntermediate("pkie known intermediate "+string(alg), alg)
		if err != nil {
			return err
		}
		leaf, err := inter.Issue(testbed.LeafOptions{DNSNames: []string{knownHost}, Alg: alg})
		if err != nil {
			return err
		}
		k.add(Case{ID: "valid-" + string(alg), Roots: [][]byte{root.Cert.Raw}, Chain: leaf.Chain, Host: knownHost,
			Expect: Accept, ExpectCode: verify.OK, Note: "leaf, intermediate, root, all " + string(alg)})
	}

	root, err := testbed.NewRootCA("pkie known root", testbed.ECDSAP256)
	if err != nil {
		return err
	}
	inter, err := root.NewIntermediate("pkie known intermediate", testbed.ECDSAP256)
	if err != nil {
		return err
	}
	roots := [][]byte{root.Cert.Raw}
	rootCK := &certKey{cert: root.Cert, key: root.Key}
	interCK := &certKey{cert: inter.Cert, key: inter.Key}

	ipLeaf, err := inter.Issue(testbed.LeafOptions{IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		return err
	}
	k.add(Case{ID: "valid-ip-san", Roots: roots, Chain: ipLeaf.Chain, Host: "127.0.0.1",
		Expect: Accept, ExpectCode: verify.OK, Note: "the host is an IP address in an iPAddress SAN"})

	good, err := inter.Issue(testbed.LeafOptions{DNSNames: []string{knownHost}})
	if err != nil {
		return err
	}
	k.add(Case{ID: "wrong-name", Roots: roots, Chain: good.Chain, Host: "other.pkie.test",
		Expect: Reject, ExpectCode: verify.NameMismatch, Note: "valid path; the leaf names another host"})

	expired, err := inter.Issue(testbed.LeafOptions{DNSNames: []string{knownHost},
		NotBefore: now.Add(-60 * 24 * time.Hour), NotAfter: now.Add(-24 * time.Hour)})
	if err != nil {
		return err
	}
	k.add(Case{ID: "expired-leaf", Roots: roots, Chain: expired.Chain, Host: knownHost,
		Expect: Reject, ExpectCode: verify.Expired, Note: "the leaf's notAfter was a day ago"})

	future, err := inter.Issue(testbed.LeafOptions{DNSNames: []string{knownHost},
		NotBefore: now.Add(24 * time.Hour), NotAfter: now.Add(60 * 24 * time.Hour)})
	if err != nil {
		return err
	}
	k.add(Case{ID: "not-yet-valid-leaf", Roots: roots, Chain: future.Chain, Host: knownHost,
		Expect: Reject, ExpectCode: verify.NotYetValid, Note: "the leaf's notBefore is tomorrow"})

	other, err := testbed.NewRootCA("pkie known other root", testbed.ECDSAP256)
	if err != nil {
		return err
	}
	k.add(Case{ID: "unknown-root", Roots: [][]byte{other.Cert.Raw}, Chain: good.Chain, Host: knownHost,
		Expect: Reject, ExpectCode: verify.UnknownIssuer, Note: "the chain's root is not among the trust anchors"})

	bad := append([]byte(nil), good.Chain[0]...)
	// The last byte of a certificate is the last byte of its signature.
	bad[len(bad)-1] ^= 0x01
	k.add(Case{ID: "bad-signature", Roots: roots, Chain: [][]byte{bad, inter.Cert.Raw}, Host: knownHost,
		Expect: Reject, ExpectCode: verify.BadSignature, Note: "one bit of the leaf's signature flipped"})

	missing, err := inter.Issue(testbed.LeafOptions{DNSNames: []string{knownHost}, OmitIntermediates: true})
	if err != nil {
		return err
	}
	k.add(Case{ID: "missing-intermediate", Roots: roots, Chain: missing.Chain, Host: knownHost,
		Expect: Reject, ExpectCode: verify.UnknownIssuer, Note: "the leaf alone; its issuer is neither sent nor trusted"})

	// Shapes the testbed does not make: built here.
	t := caTmpl("pkie known expired intermediate")
	t.NotBefore, t.NotAfter = now.Add(-60*24*time.Hour), now.Add(-24*time.Hour)
	oldInter, err := k.issue(t, rootCK, testbed.ECDSAP256)
	if err != nil {
		return err
	}
	leaf, err := k.issue(leafTmpl(knownHost), oldInter, testbed.ECDSAP256)
	if err != nil {
		return err
	}
	k.add(Case{ID: "expired-intermediate", Roots: roots, Chain: [][]byte{leaf.cert.Raw, oldInter.cert.Raw}, Host: knownHost,
		Expect: Reject, ExpectCode: verify.Expired, Note: "the intermediate's notAfter was a day ago; the leaf is current"})

	t = caTmpl("pkie known constrained intermediate")
	t.PermittedDNSDomains = []string{"allowed.pkie.test"}
	t.PermittedDNSDomainsCritical = true
	ncInter, err := k.issue(t, rootCK, testbed.ECDSAP256)
	if err != nil {
		return err
	}
	leaf, err = k.issue(leafTmpl(knownHost), ncInter, testbed.ECDSAP256)
	if err != nil {
		return err
	}
	k.add(Case{ID: "name-constraint-violation", Roots: roots, Chain: [][]byte{leaf.cert.Raw, ncInter.cert.Raw}, Host: knownHost,
		Expect: Reject, ExpectCode: verify.NameConstraint, Note: "the intermediate permits only allowed.pkie.test; the leaf is " + knownHost})

	t = caTmpl("pkie known pathlen-0 intermediate")
	t.MaxPathLen, t.MaxPathLenZero = 0, true
	pl0, err := k.issue(t, rootCK, testbed.ECDSAP256)
	if err != nil {
		return err
	}
	below, err := k.issue(caTmpl("pkie known intermediate below pathlen 0"), pl0, testbed.ECDSAP256)
	if err != nil {
		return err
	}
	leaf, err = k.issue(leafTmpl(knownHost), below, testbed.ECDSAP256)
	if err != nil {
		return err
	}
	k.add(Case{ID: "path-too-long", Roots: roots, Chain: [][]byte{leaf.cert.Raw, below.cert.Raw, pl0.cert.Raw}, Host: knownHost,
		Expect: Reject, ExpectCode: verify.PathLength, Note: "an intermediate with pathLenConstraint 0 issued another intermediate"})

	t = leafTmpl("pkie known not-a-CA issuer")
	t.DNSNames = nil
	t.KeyUsage |= x509.KeyUsageCertSign
	notCA, err := k.issue(t, rootCK, testbed.ECDSAP256)
	if err != nil {
		return err
	}
	leaf, err = k.issue(leafTmpl(knownHost), notCA, testbed.ECDSAP256)
	if err != nil {
		return err
	}
	k.add(Case{ID: "intermediate-not-ca", Roots: roots, Chain: [][]byte{leaf.cert.Raw, notCA.cert.Raw}, Host: knownHost,
		Expect: Reject, ExpectCode: verify.NotCA, Note: "the issuer has basicConstraints cA=FALSE"})

	t = leafTmpl(knownHost)
	t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	clientLeaf, err := k.issue(t, interCK, testbed.ECDSAP256)
	if err != nil {
		return err
	}
	clientChain := [][]byte{clientLeaf.cert.Raw, inter.Cert.Raw}
	k.add(Case{ID: "wrong-eku", Roots: roots, Chain: clientChain, Host: knownHost,
		Expect: Reject, ExpectCode: verify.BadUsage, Note: "a clientAuth-only leaf presented for server authentication"})
	k.add(Case{ID: "valid-client", Roots: roots, Chain: clientChain, Purpose: verify.Client,
		Expect: Accept, ExpectCode: verify.OK, Note: "the same clientAuth-only leaf, for client authentication, no host"})
	return nil
}
