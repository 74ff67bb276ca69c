package forwarder

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pkie/pkie/internal/atomicfile"
	"github.com/pkie/pkie/internal/cloud"
	"github.com/pkie/pkie/internal/pecwire"
)

// Files of a forwarder data directory.
const (
	FileKey   = "forwarder.key"  // TLS private key, PKCS #8 PEM, 0600
	FileCert  = "forwarder.crt"  // self-signed TLS certificate, PEM
	FileEphID = "ephid.key"      // the AES-256 key k of ephemeral identifiers, hex, 0600
	FileName  = "forwarder.name" // the name shown in its bundle
)

// DataDir is a loaded forwarder data directory.
type DataDir struct {
	Dir         string
	Name        string
	Certificate tls.Certificate
	Leaf        *x509.Certificate
	EphIDKey    []byte
}

// SPKIHash returns the hex SHA-256 of the forwarder's public key, as its
// bundle pins it.
func (d *DataDir) SPKIHash() string {
	h := pecwire.SPKIHash(d.Leaf)
	return hex.EncodeToString(h[:])
}

// Init creates a data directory: a TLS key (0600) and certificate, the
// identifier key k (0600) and the name. It refuses to overwrite any of
// them.
func Init(dir, name string) (*DataDir, error) {
	if name == "" {
		return nil, errors.New("forwarder: a forwarder needs a name")
	}
	for _, f := range []string{FileKey, FileCert, FileEphID, FileName} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return nil, fmt.Errorf("forwarder: %s already exists; refusing to overwrite it", filepath.Join(dir, f))
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	_, certPEM, keyPEM, err := cloud.NewCertificate(name)
	if err != nil {
		return nil, err
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{FileKey, keyPEM, 0o600}, {FileCert, certPEM, 0o644},
		{FileEphID, []byte(hex.EncodeToString(k) + "\n"), 0o600}, {FileName, []byte(name + "\n"), 0o644},
	} {
		if err := writeExcl(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return nil, err
		}
	}
	return Load(dir)
}

// writeExcl creates a key or settings file that must not exist yet,
// durably (atomicfile.CreateExclusive).
func writeExcl(path string, data []byte, mode os.FileMode) error {
	if err := atomicfile.CreateExclusive(path, data, mode); err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}
	return nil
}

// readSecret reads a file that must not be readable by others.
func readSecret(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("forwarder: %s is readable by others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	return os.ReadFile(path)
}

// Load reads a data directory made by Init.
func Load(dir string) (*DataDir, error) {
	keyPEM, err := readSecret(filepath.Join(dir, FileKey))
	if err != nil {
		return nil, fmt.Errorf("forwarder: %w (run pkie forwarder init --data %s)", err, dir)
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, FileCert))
	if err != nil {
		return nil, fmt.Errorf("forwarder: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("forwarder: %s and %s: %w", FileCert, FileKey, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("forwarder: %s: %w", FileCert, err)
	}
	raw, err := readSecret(filepath.Join(dir, FileEphID))
	if err != nil {
		return nil, fmt.Errorf("forwarder: %w", err)
	}
	k, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(k) != 32 {
		return nil, fmt.Errorf("forwarder: %s must hold 64 hex digits", filepath.Join(dir, FileEphID))
	}
	name, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		return nil, fmt.Errorf("forwarder: %w", err)
	}
	return &DataDir{Dir: dir, Name: strings.TrimSpace(string(name)), Certificate: cert, Leaf: leaf, EphIDKey: k}, nil
}
