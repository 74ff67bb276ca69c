package cloud

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/atomicfile"
	"github.com/pkie/pkie/internal/pecwire"
)

// Files of a cloud data directory.
const (
	FileKey      = "cloud.key"  // TLS private key, PKCS #8 PEM, 0600
	FileCert     = "cloud.crt"  // self-signed TLS certificate, PEM
	FileSettings = "cloud.json" // name and enabled enhancements
	DirPKIEs     = "pkies"      // pkies/<name>/: each prover's own state
)

// ConfigVersion is the version of cloud.json.
const ConfigVersion = 1

// FileConfig is cloud.json.
type FileConfig struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	// PKIEs are the enabled enhancements, by registry name, each with its
	// prover configuration (the enhancement's own JSON schema).
	PKIEs []PKIEConfig `json:"pkies"`
}

// PKIEConfig enables one enhancement.
type PKIEConfig struct {
	Name   string          `json:"name"`
	Config json.RawMessage `json:"config"`
}

// DataDir is a loaded cloud data directory.
type DataDir struct {
	Dir         string
	Config      FileConfig
	Certificate tls.Certificate
	Leaf        *x509.Certificate
}

// SPKIHash returns the hex SHA-256 of the cloud's public key, as a bundle
// pins it.
func (d *DataDir) SPKIHash() string {
	h := pecwire.SPKIHash(d.Leaf)
	return hex.EncodeToString(h[:])
}

// ProverDir is the state directory of the prover of enhancement name.
func (d *DataDir) ProverDir(name string) string { return filepath.Join(d.Dir, DirPKIEs, name) }

// NewCertificate returns a fresh ECDSA P-256 key and a self-signed
// certificate for it. The certificate names nothing a client checks: the
// client pins the key (its SPKI hash) from the bundle.
func NewCertificate(name string) (tls.Certificate, []byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"pkie PEC cloud"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(20 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, nil, fmt.Errorf("cloud: creating certificate: %w", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	return c, certPEM, keyPEM, err
}

// Init creates a data directory: a TLS key (0600) and certificate and
// cloud.json. It refuses to overwrite any of them.
func Init(dir string, cfg FileConfig) (*DataDir, error) {
	if cfg.Name == "" {
		return nil, errors.New("cloud: a cloud needs a name")
	}
	cfg.Version = ConfigVersion
	if cfg.PKIEs == nil {
		cfg.PKIEs = []PKIEConfig{}
	}
	for _, f := range []string{FileKey, FileCert, FileSettings, FileHPKE} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return nil, fmt.Errorf("cloud: %s already exists; refusing to overwrite it", filepath.Join(dir, f))
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, DirPKIEs), 0o700); err != nil {
		return nil, err
	}
	cert, certPEM, keyPEM, err := NewCertificate(cfg.Name)
	if err != nil {
		return nil, err
	}
	conf, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	// O_EXCL: two inits racing on one directory cannot both win.
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{FileKey, keyPEM, 0o600}, {FileCert, certPEM, 0o644}, {FileSettings, append(conf, '\n'), 0o644}} {
		if err := writeExcl(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return nil, err
		}
	}
	if _, err := NewHPKEKey(dir); err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, err
	}
	return &DataDir{Dir: dir, Config: cfg, Certificate: cert, Leaf: leaf}, nil
}

// writeExcl creates a key or settings file that must not exist yet,
// durably (atomicfile.CreateExclusive).
func writeExcl(path string, data []byte, mode os.FileMode) error {
	if err := atomicfile.CreateExclusive(path, data, mode); err != nil {
		return fmt.Errorf("cloud: %w", err)
	}
	return nil
}

// Load reads a data directory made by Init.
func Load(dir string) (*DataDir, error) {
	keyPEM, err := os.ReadFile(filepath.Join(dir, FileKey))
	if err != nil {
		return nil, fmt.Errorf("cloud: %w (run pkie cloud init --data %s)", err, dir)
	}
	if fi, err := os.Stat(filepath.Join(dir, FileKey)); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("cloud: %s is readable by others (mode %v); chmod 600 it", filepath.Join(dir, FileKey), fi.Mode().Perm())
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, FileCert))
	if err != nil {
		return nil, fmt.Errorf("cloud: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("cloud: %s and %s: %w", FileCert, FileKey, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("cloud: %s: %w", FileCert, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, FileSettings))
	if err != nil {
		return nil, fmt.Errorf("cloud: %w", err)
	}
	var cfg FileConfig
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("cloud: %s: %w", filepath.Join(dir, FileSettings), err)
	}
	if cfg.Version != ConfigVersion {
		return nil, fmt.Errorf("cloud: %s has version %d, this pkie reads %d", filepath.Join(dir, FileSettings), cfg.Version, ConfigVersion)
	}
	return &DataDir{Dir: dir, Config: cfg, Certificate: cert, Leaf: leaf}, nil
}

// ProverOptions are what BuildProvers gives every prover besides its state
// directory.
type ProverOptions struct {
	// HTTP reaches the TTPs and the peers; nil: a client with a 30s
	// timeout.
	HTTP *http.Client
	// Log receives the provers' messages, each with the attribute
	// pkie=<name>; nil discards them.
	Log *slog.Logger
	// Peers are other replicas of this cloud, the base URLs of their HTTP
	// listeners: a CT or revocation prover without state of its own
	// learns from them what its TTP signed before (GET /v1/heads/{pkie}).
	Peers []string
	// TrustFirstHead lets a CT or revocation prover that has no state and
	// learns no head from a peer accept the first head its TTP signs. By
	// default it serves nothing until it knows one, since the TTP may have
	// forked since it published what clients already hold.
	TrustFirstHead bool
}

// BuildProvers builds the prover of every enhancement in pkies from reg,
// each with <data>/pkies/<name> as its state directory. An enhancement
// named twice, unknown to reg, or without a prover half is an error, as is
// a configuration its Kind refuses. A prover whose TTP is unreachable, or
// whose TTP's tree it refuses, is built all the same and serves nothing
// until a sync succeeds (see treeproof.NewProver).
//
// A prover that is an io.Closer is closed if a later one fails to build;
// otherwise closing them is the caller's.
func (d *DataDir) BuildProvers(ctx context.Context, reg *pkie.Registry, pkies []PKIEConfig, o ProverOptions) (ps []pkie.Prover, err error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hc := o.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	defer func() {
		if err != nil {
			for _, p := range ps {
				if c, ok := p.(io.Closer); ok {
					c.Close()
				}
			}
			ps = nil
		}
	}()
	seen := map[string]bool{}
	for _, pc := range pkies {
		k, ok := reg.ByName(pc.Name)
		if !ok {
			return nil, fmt.Errorf("cloud: unknown enhancement %q", pc.Name)
		}
		if seen[k.Name] {
			return nil, fmt.Errorf("cloud: enhancement %q enabled twice", k.Name)
		}
		seen[k.Name] = true
		if k.NewProver == nil {
			return nil, fmt.Errorf("cloud: enhancement %q has no prover", k.Name)
		}
		dir := d.ProverDir(k.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("cloud: %w", err)
		}
		conf := pc.Config
		if len(conf) == 0 {
			conf = json.RawMessage("{}")
		}
		plog := log.With("pkie", k.Name)
		env := pkie.ProverEnv{DataDir: dir, HTTP: hc, Log: plog, RequireHistory: !o.TrustFirstHead}
		if len(o.Peers) > 0 {
			env.Peers = peerHeads(o.Peers, k.Name, hc, plog)
		}
		p, err := k.NewProver(ctx, env, conf)
		if err != nil {
			return nil, fmt.Errorf("cloud: %s prover: %w", k.Name, err)
		}
		if p.ID() != k.ID {
			return nil, fmt.Errorf("cloud: %s prover says it is %s, registered as %s", k.Name, p.ID(), k.ID)
		}
		ps = append(ps, p)
	}
	return ps, nil
}
