package consensus

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// BundleExt is the file name extension of Convergence notary bundles.
const BundleExt = ".notary"

// Limits on bundle files: generous for real bundles, small enough that a
// hostile file cannot make the client allocate much.
const (
	maxBundleSize  = 1 << 20
	maxBundleHosts = 32
	minRSABits     = 2048
)

// Bundle is a Convergence notary bundle: one logical notary, served by one
// or more replica hosts that share its key. However many hosts it lists, a
// bundle is one vote.
type Bundle struct {
	// Version is the bundle format the file used: 1, or 0 for the
	// original single-host layout (with "version": 0 or no version at
	// all), which ParseBundle turns into one host named after itself.
	Version        int    `json:"version"`
	Name           string `json:"name"`
	BundleLocation string `json:"bundle_location"`
	Region         string `json:"region,omitempty"`
	Hosts          []Host `json:"hosts"`
}

// Host is one replica of a notary.
type Host struct {
	Host        string `json:"host"`
	SSLPort     int    `json:"ssl_port"`
	HTTPPort    int    `json:"http_port"` // the bouncing (CONNECT) listener; 0 if none
	Certificate string `json:"certificate"`
	// V1Key is pkie's extension to the Convergence format: the base64
	// Ed25519 public key that signs the notary's v1 answers. It is
	// optional; Convergence clients ignore it, and a host without it is
	// asked over the Convergence API only.
	V1Key string `json:"pkie_v1_ed25519,omitempty"`

	cert *x509.Certificate
	v1   ed25519.PublicKey
}

// V1FieldName is the bundle host field carrying the v1 Ed25519 key.
const V1FieldName = "pkie_v1_ed25519"

// Cert returns the host's parsed pinned certificate. It is nil for a Host
// that did not come from ParseBundle or NewHost.
func (h *Host) Cert() *x509.Certificate { return h.cert }

// PublicKey returns the RSA key that signs the notary's answers.
func (h *Host) PublicKey() *rsa.PublicKey {
	if h.cert == nil {
		return nil
	}
	k, _ := h.cert.PublicKey.(*rsa.PublicKey)
	return k
}

// V1PublicKey returns the pinned Ed25519 key of the notary's v1 API, or
// nil if the bundle does not carry one.
func (h *Host) V1PublicKey() ed25519.PublicKey { return h.v1 }

// PinV1 sets the host's v1 key (and its V1Key field).
func (h *Host) PinV1(pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%s key is %d bytes; an Ed25519 public key has %d", V1FieldName, len(pub), ed25519.PublicKeySize)
	}
	h.V1Key = base64.StdEncoding.EncodeToString(pub)
	h.v1 = bytes.Clone(pub)
	return nil
}

// SSLAddr returns host:ssl_port.
func (h *Host) SSLAddr() string { return net.JoinHostPort(h.Host, strconv.Itoa(h.SSLPort)) }

// HTTPAddr returns host:http_port, or "" if the host does not bounce.
func (h *Host) HTTPAddr() string {
	if h.HTTPPort == 0 {
		return ""
	}
	return net.JoinHostPort(h.Host, strconv.Itoa(h.HTTPPort))
}

// NewHost returns a Host pinned to cert, which must carry an RSA key of at
// least 2048 bits.
func NewHost(host string, sslPort, httpPort int, cert *x509.Certificate) (Host, error) {
	h := Host{
		Host: host, SSLPort: sslPort, HTTPPort: httpPort,
		Certificate: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})),
	}
	if err := h.check(); err != nil {
		return Host{}, err
	}
	return h, nil
}

// ParseBundle parses a Convergence bundle and checks every field: a bundle
// that parses is one the client can use. It reads the two layouts the
// Convergence Firefox client reads, and decides between them as it does,
// by the version field:
//
//   - version 1: name, bundle_location, region and a hosts list;
//   - version 0, or no version at all (what the original notary's
//     convergence-bundle.py wrote): one host's host, ssl_port, http_port and
//     certificate at the top level. The bundle is named after that host.
//
// Unknown fields are ignored so that bundles from newer notaries still
// load.
func ParseBundle(data []byte) (*Bundle, error) {
	if len(data) > maxBundleSize {
		return nil, fmt.Errorf("bundle is %d bytes; at most %d allowed", len(data), maxBundleSize)
	}
	var layout struct {
		Version json.RawMessage `json:"version"`
		Hosts   json.RawMessage `json:"hosts"`
	}
	if err := decodeOne(data, &layout); err != nil {
		return nil, err
	}
	version := 0
	if layout.Version != nil {
		if err := json.Unmarshal(layout.Version, &version); err != nil {
			return nil, fmt.Errorf("bundle version %s is not a number (want 1, or 0 for a single-host bundle)", truncate(string(layout.Version), 20))
		}
	}
	var b Bundle
	switch version {
	case 1:
		if err := decodeOne(data, &b); err != nil {
			return nil, err
		}
	case 0:
		if layout.Hosts != nil {
			return nil, errors.New(`bundle has a hosts list but is not marked "version": 1; a version-0 bundle (or one without a version) describes one host at its top level (host, ssl_port, http_port, certificate)`)
		}
		var h Host
		if err := decodeOne(data, &h); err != nil {
			return nil, err
		}
		b = Bundle{Version: 0, Name: h.Host, Hosts: []Host{h}}
		if h.Host == "" {
			return nil, errors.New("version-0 bundle (one host at its top level) has no host")
		}
	default:
		return nil, fmt.Errorf("bundle version %d is not supported (want 1, or 0 for a single-host bundle)", version)
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	return &b, nil
}

// decodeOne decodes data, which must hold exactly one JSON object, into v.
func decodeOne(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bundle is not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("bundle has data after its JSON object")
	}
	return nil
}

// Check validates a bundle built field by field, as ParseBundle validates
// a parsed one, and parses its hosts' pinned keys: only a checked bundle
// can be asked.
func (b *Bundle) Check() error { return b.check() }

func (b *Bundle) check() error {
	if b.Version != 0 && b.Version != 1 {
		return fmt.Errorf("bundle version %d is not supported (want 1, or 0 for a single-host bundle)", b.Version)
	}
	if strings.TrimSpace(b.Name) == "" {
		return errors.New("bundle has no name")
	}
	if len(b.Name) > 255 {
		return fmt.Errorf("bundle name is %d bytes long; at most 255 allowed", len(b.Name))
	}
	if len(b.Hosts) == 0 {
		return fmt.Errorf("bundle %q lists no hosts", b.Name)
	}
	if len(b.Hosts) > maxBundleHosts {
		return fmt.Errorf("bundle %q lists %d hosts; at most %d allowed", b.Name, len(b.Hosts), maxBundleHosts)
	}
	for i := range b.Hosts {
		if err := b.Hosts[i].check(); err != nil {
			return fmt.Errorf("bundle %q host %d: %w", b.Name, i, err)
		}
	}
	return nil
}

func (h *Host) check() error {
	if h.Host == "" {
		return errors.New("empty host name")
	}
	if len(h.Host) > 253 || strings.ContainsAny(h.Host, "/?#@ \t\r\n[]") {
		return fmt.Errorf("host %q is not a host name or IP address", truncate(h.Host, 80))
	}
	if h.SSLPort < 1 || h.SSLPort > 65535 {
		return fmt.Errorf("ssl_port %d is out of range 1-65535", h.SSLPort)
	}
	if h.HTTPPort < 0 || h.HTTPPort > 65535 {
		return fmt.Errorf("http_port %d is out of range 0-65535", h.HTTPPort)
	}
	block, rest := pem.Decode([]byte(h.Certificate))
	if block == nil {
		return errors.New("certificate is not PEM")
	}
	if block.Type != "CERTIFICATE" {
		return fmt.Errorf("certificate PEM block is %q, want CERTIFICATE", block.Type)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return errors.New("certificate field holds more than one PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("certificate does not parse: %w", err)
	}
	key, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return fmt.Errorf("certificate key is %T; Convergence notaries sign with RSA", cert.PublicKey)
	}
	if key.N.BitLen() < minRSABits {
		return fmt.Errorf("certificate RSA key has %d bits; at least %d required", key.N.BitLen(), minRSABits)
	}
	h.cert = cert
	h.v1 = nil
	if h.V1Key != "" {
		k, err := base64.StdEncoding.Strict().DecodeString(h.V1Key)
		if err != nil {
			return fmt.Errorf("%s is not base64: %w", V1FieldName, err)
		}
		if len(k) != ed25519.PublicKeySize {
			return fmt.Errorf("%s key is %d bytes; an Ed25519 public key has %d", V1FieldName, len(k), ed25519.PublicKeySize)
		}
		h.v1 = ed25519.PublicKey(k)
	}
	return nil
}

// Marshal renders the bundle as an indented Convergence version-1 JSON
// file; a bundle read from a version-0 file becomes its version-1
// equivalent.
func (b *Bundle) Marshal() ([]byte, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	v1 := *b
	v1.Version = 1
	out, err := json.MarshalIndent(&v1, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// ReadBundle reads and parses one bundle file; errors name the file.
func ReadBundle(path string) (*Bundle, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("notary bundle: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxBundleSize+1))
	if err != nil {
		return nil, fmt.Errorf("notary bundle %s: %w", path, err)
	}
	b, err := ParseBundle(data)
	if err != nil {
		return nil, fmt.Errorf("notary bundle %s: %w", path, err)
	}
	return b, nil
}

// LoadDir reads every *.notary file in dir, in name order, or the one bundle
// dir names if it is a file. A malformed file
// is an error naming it, never silently skipped: a client that quietly lost
// a notary would vote with fewer than its user chose. Two bundles pinning
// the same certificate are an error too, since they would give one notary
// two votes.
func LoadDir(dir string) ([]*Bundle, error) {
	if fi, err := os.Stat(dir); err == nil && fi.Mode().IsRegular() {
		// One bundle file given where a directory was expected.
		b, err := ReadBundle(dir)
		if err != nil {
			return nil, err
		}
		return []*Bundle{b}, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("notaries directory: %w", err)
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), BundleExt) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var out []*Bundle
	seen := map[[32]byte]string{}
	for _, n := range names {
		p := filepath.Join(dir, n)
		b, err := ReadBundle(p)
		if err != nil {
			return nil, err
		}
		for _, h := range b.Hosts {
			fp := sha256.Sum256(h.cert.Raw)
			if prev, dup := seen[fp]; dup && prev != p {
				return nil, fmt.Errorf("notary bundles %s and %s pin the same certificate: one notary would vote twice", prev, p)
			}
			seen[fp] = p
		}
		out = append(out, b)
	}
	return out, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
