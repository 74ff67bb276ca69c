package roots

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// Store is a trust store: the set of roots a verified path may end at.
type Store struct {
	Name  string
	Certs []*x509.Certificate

	pool        *x509.CertPool
	bySubject   map[string][]*x509.Certificate // by RawSubject
	constrained map[string]bool                // by Raw: roots with extra constraints
}

func newStore(name string) *Store {
	return &Store{Name: name, pool: x509.NewCertPool(), bySubject: map[string][]*x509.Certificate{}, constrained: map[string]bool{}}
}

func (s *Store) add(c *x509.Certificate, constraint func([]*x509.Certificate) error) {
	for _, o := range s.bySubject[string(c.RawSubject)] {
		if bytes.Equal(o.Raw, c.Raw) {
			return // a bundle listing a root twice must not count it twice
		}
	}
	s.Certs = append(s.Certs, c)
	s.bySubject[string(c.RawSubject)] = append(s.bySubject[string(c.RawSubject)], c)
	if constraint != nil {
		s.constrained[string(c.Raw)] = true
		s.pool.AddCertWithConstraint(c, constraint)
	} else {
		s.pool.AddCert(c)
	}
}

// Pool returns the store as a pool for x509.VerifyOptions.Roots, with
// every root's constraint.
func (s *Store) Pool() *x509.CertPool { return s.pool }

// Mozilla returns the roots of Mozilla's NSS store as embedded by
// golang.org/x/crypto/x509roots/fallback, with their distrust-after
// constraints, whatever the operating system trusts.
func Mozilla() (*Store, error) {
	s := newStore("mozilla")
	for r := range bundle.Roots() {
		c, err := x509.ParseCertificate(r.Certificate)
		if err != nil {
			return nil, fmt.Errorf("roots: Mozilla bundle: %w", err)
		}
		s.add(c, r.Constraint)
	}
	return s, nil
}

// systemBundles are where Linux and BSD distributions keep the system's
// roots (the list crypto/x509 itself reads).
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
	"/usr/local/share/certs/ca-root-nss.crt",
}

// System returns the operating system's roots, read from its PEM bundle
// (SSL_CERT_FILE if set). crypto/x509's system pool cannot be listed, and
// ranking needs the certificates themselves.
func System(getenv func(string) string) (*Store, error) {
	paths := systemBundles
	if getenv != nil && getenv("SSL_CERT_FILE") != "" {
		paths = []string{getenv("SSL_CERT_FILE")}
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s, err := ParsePEM("system", b)
		if err != nil {
			return nil, fmt.Errorf("roots: system bundle %s: %w", p, err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("roots: no system root bundle found (looked in %v)", paths)
}

// LoadPEM reads a PEM file of root certificates.
func LoadPEM(path string) (*Store, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("roots: %w", err)
	}
	s, err := ParsePEM(path, b)
	if err != nil {
		return nil, fmt.Errorf("roots: %s: %w", path, err)
	}
	return s, nil
}

// ParsePEM parses every CERTIFICATE block of data. Other blocks are
// ignored; a certificate that does not parse is an error, and so is a file
// without any.
func ParsePEM(name string, data []byte) (*Store, error) {
	s := newStore(name)
	n := 0
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		n++
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		s.add(c, nil)
	}
	if len(s.Certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE blocks")
	}
	return s, nil
}

// WritePEM writes certs as PEM CERTIFICATE blocks, each preceded by a
// comment line naming its subject and SHA-256, as Mozilla's bundles do.
func WritePEM(w io.Writer, certs []*x509.Certificate) error {
	for _, c := range certs {
		sum := sha256.Sum256(c.Raw)
		if _, err := fmt.Fprintf(w, "# %s\n# SHA256 %x\n", c.Subject, sum); err != nil {
			return err
		}
		if err := pem.Encode(w, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}); err != nil {
			return err
		}
	}
	return nil
}
