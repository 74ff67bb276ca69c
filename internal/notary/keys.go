package notary

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/atomicfile"
)

// Identity is a notary's keys: an RSA-2048 key and self-signed certificate
// (the Convergence API signs SHA1withRSA, and clients pin this certificate
// for the TLS connection too), and an Ed25519 key for the v1 API.
type Identity struct {
	Name    string
	RSA     *rsa.PrivateKey
	Cert    *x509.Certificate
	V1      ed25519.PrivateKey
	TLS     tls.Certificate
	CertPEM []byte
}

// Files in a notary data directory.
const (
	fileRSAKey  = "notary.key"
	fileCert    = "notary.crt"
	fileV1Key   = "v1.key"
	FileHistory = "history.db"
)

// NewIdentity generates fresh keys. hosts become the certificate's subject
// alternative names (DNS names or IP addresses).
func NewIdentity(name string, hosts []string) (*Identity, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	_, v1, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"pkie notary"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	for _, h := range hosts {
		// x509 takes any ASCII as a DNS name: "bad host!" would be signed
		// into a certificate no client can match.
		if err := CheckHost(h); err != nil {
			return nil, fmt.Errorf("notary: certificate host %w", err)
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("notary: creating certificate: %w", err)
	}
	return newIdentity(name, key, der, v1)
}

// CheckHost reports whether host can name a notary in its certificate and
// its bundle: a DNS name (letters, digits, '-' and '_' in dot-separated
// labels of 1 to 63 bytes, 253 bytes at most) or an IP address, written
// without brackets or zone.
func CheckHost(host string) error {
	if host == "" {
		return errors.New("is empty: want a DNS name or an IP address")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return fmt.Errorf("%q has a zone, which names an interface of one machine, not the notary", host)
		}
		return nil
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return fmt.Errorf("%q: write an IPv6 address without brackets", host)
	}
	if len(host) > 253 {
		return fmt.Errorf("%q is %d bytes; a DNS name has at most 253", host[:32]+"…", len(host))
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("%q is not a DNS name or an IP address: it has an empty label or one over 63 bytes", host)
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("%q is not a DNS name or an IP address: %q is not allowed in a host name", host, rune(c))
			}
		}
	}
	return nil
}

func newIdentity(name string, key *rsa.PrivateKey, der []byte, v1 ed25519.PrivateKey) (*Identity, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("notary: parsing certificate: %w", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("notary: certificate does not match the RSA key")
	}
	if name == "" {
		name = cert.Subject.CommonName
	}
	return &Identity{
		Name: name, RSA: key, Cert: cert, V1: v1,
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert},
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}, nil
}

// Save writes the identity into dir (created 0700 if missing); key files are
// 0600. It refuses to overwrite existing keys.
func (id *Identity) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("notary: creating data directory: %w", err)
	}
	for _, f := range []string{fileRSAKey, fileV1Key, fileCert} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return fmt.Errorf("notary: %s already exists; refusing to overwrite a notary's keys", filepath.Join(dir, f))
		}
	}
	rsaDER, err := x509.MarshalPKCS8PrivateKey(id.RSA)
	if err != nil {
		return err
	}
	v1DER, err := x509.MarshalPKCS8PrivateKey(id.V1)
	if err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
		mode fs.FileMode
	}{
		{fileRSAKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: rsaDER}), 0o600},
		{fileV1Key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: v1DER}), 0o600},
		{fileCert, id.CertPEM, 0o644},
	}
	for _, f := range files {
		// Exclusive and synced: two inits racing on one directory cannot
		// both win, and a key the notary has served with survives a crash.
		if err := atomicfile.CreateExclusive(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return fmt.Errorf("notary: writing %s: %w", f.name, err)
		}
	}
	return nil
}

// LoadIdentity reads the identity saved in dir. Key files readable by others
// are refused.
func LoadIdentity(dir string) (*Identity, error) {
	readKey := func(name string) (any, error) {
		path := filepath.Join(dir, name)
		st, err := os.Stat(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("notary: %s is missing; run \"pkie notary init --data %s\" first", path, dir)
			}
			return nil, err
		}
		if st.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("notary: %s has mode %v; a private key must not be readable by others (chmod 600)", path, st.Mode().Perm())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		blk, _ := pem.Decode(b)
		if blk == nil || blk.Type != "PRIVATE KEY" {
			return nil, fmt.Errorf("notary: %s holds no PEM \"PRIVATE KEY\" block", path)
		}
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("notary: %s: %w", path, err)
		}
		return k, nil
	}
	rk, err := readKey(fileRSAKey)
	if err != nil {
		return nil, err
	}
	rsaKey, ok := rk.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("notary: %s is not an RSA key", filepath.Join(dir, fileRSAKey))
	}
	vk, err := readKey(fileV1Key)
	if err != nil {
		return nil, err
	}
	v1, ok := vk.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("notary: %s is not an Ed25519 key", filepath.Join(dir, fileV1Key))
	}
	cb, err := os.ReadFile(filepath.Join(dir, fileCert))
	if err != nil {
		return nil, fmt.Errorf("notary: %w", err)
	}
	blk, _ := pem.Decode(cb)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("notary: %s holds no PEM certificate", filepath.Join(dir, fileCert))
	}
	return newIdentity("", rsaKey, blk.Bytes, v1)
}
