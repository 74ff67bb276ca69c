package verifybench

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"time"

	"github.com/pkie/pkie/internal/testbed"
)

// RSA4096 is a key type testbed does not generate: the size of many roots
// still trusted (COMODO RSA Certification Authority, DigiCert's and
// GlobalSign's newer roots).
const RSA4096 testbed.KeyAlg = "rsa-4096"

// Shape is a certification path's form: the key type of each certificate
// from the leaf up to the root, and what the server sends.
type Shape struct {
	Name string `json:"name"`
	// Leaf, Intermediates (from the leaf's issuer upward) and Root are
	// the key types along the path.
	Leaf          testbed.KeyAlg   `json:"leaf"`
	Intermediates []testbed.KeyAlg `json:"intermediates,omitempty"`
	Root          testbed.KeyAlg   `json:"root"`
	// SendRoot makes the server send the root as well, as many did.
	SendRoot bool `json:"send_root,omitempty"`
}

// Depth is the number of certificates on the path, root included.
func (s Shape) Depth() int { return len(s.Intermediates) + 2 }

// Sent is the number of certificates the server sends.
func (s Shape) Sent() int {
	if s.SendRoot {
		return s.Depth()
	}
	return s.Depth() - 1
}

// String gives the path leaf first, e.g. "ecdsa-p256 ← rsa-2048 ← rsa-2048".
func (s Shape) String() string {
	parts := []string{string(s.Leaf)}
	for _, a := range s.Intermediates {
		parts = append(parts, string(a))
	}
	return strings.Join(append(parts, string(s.Root)), " ← ")
}

// Shapes are the paths the per-shape benchmark measures: one key type
// throughout at two and three certificates, the mixed paths of 2017's big
// sites (an ECDSA leaf under RSA CAs; an RSA-4096 root), and a longer RSA
// path, where checking signatures concurrently has most to gain.
var Shapes = []Shape{
	{Name: "p256-2", Leaf: testbed.ECDSAP256, Root: testbed.ECDSAP256},
	{Name: "p256-3", Leaf: testbed.ECDSAP256, Intermediates: []testbed.KeyAlg{testbed.ECDSAP256}, Root: testbed.ECDSAP256},
	{Name: "p384-3", Leaf: testbed.ECDSAP384, Intermediates: []testbed.KeyAlg{testbed.ECDSAP384}, Root: testbed.ECDSAP384},
	{Name: "ed25519-3", Leaf: testbed.Ed25519, Intermediates: []testbed.KeyAlg{testbed.Ed25519}, Root: testbed.Ed25519},
	{Name: "rsa2048-2", Leaf: testbed.RSA2048, Root: testbed.RSA2048},
	{Name: "rsa2048-3", Leaf: testbed.RSA2048, Intermediates: []testbed.KeyAlg{testbed.RSA2048}, Root: testbed.RSA2048},
	{Name: "rsa2048-4", Leaf: testbed.RSA2048, Intermediates: []testbed.KeyAlg{testbed.RSA2048, testbed.RSA2048}, Root: testbed.RSA2048},
	{Name: "rsa4096-root", Leaf: testbed.RSA2048, Intermediates: []testbed.KeyAlg{testbed.RSA2048}, Root: RSA4096},
	{Name: "p256-under-rsa", Leaf: testbed.ECDSAP256, Intermediates: []testbed.KeyAlg{testbed.RSA2048}, Root: testbed.RSA2048},
}

// ShapeNames lists the names of Shapes.
func ShapeNames() []string {
	var out []string
	for _, s := range Shapes {
		out = append(out, s.Name)
	}
	return out
}

// LookupShape finds a shape of Shapes by name.
func LookupShape(name string) (Shape, bool) {
	for _, s := range Shapes {
		if s.Name == name {
			return s, true
		}
	}
	return Shape{}, false
}

// Chain is an issued path of some Shape.
type Chain struct {
	Shape Shape
	Root  *testbed.CA
	Leaf  *testbed.Leaf
	// Path is leaf first, root last.
	Path []*x509.Certificate
}

// Sent is what the server presents, DER, leaf first.
func (c *Chain) Sent() [][]byte { return c.Leaf.Chain }

// hierarchy builds CAs, reusing one already built under the same name so
// that sites sharing a CA share its keys, as they did.
type hierarchy struct {
	mu  sync.Mutex
	cas map[string]*testbed.CA
}

func newHierarchy() *hierarchy { return &hierarchy{cas: map[string]*testbed.CA{}} }

// ca returns the CA called name with key type alg under parent (nil for
// a root), creating it the first time.
func (h *hierarchy) ca(parent *testbed.CA, name string, alg testbed.KeyAlg) (*testbed.CA, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ca, ok := h.cas[name]; ok {
		return ca, nil
	}
	ca, err := newCA(parent, name, alg)
	if err != nil {
		return nil, err
	}
	h.cas[name] = ca
	return ca, nil
}

// newCA is testbed's CA constructors with RSA4096 added.
func newCA(parent *testbed.CA, name string, alg testbed.KeyAlg) (*testbed.CA, error) {
	if alg != RSA4096 {
		if parent == nil {
			return testbed.NewRootCA(name, alg)
		}
		return parent.NewIntermediate(name, alg)
	}
	key, err := rsa.GenerateKey(rand.Reader, 4096)
	if err != nil {
		return nil, fmt.Errorf("verifybench: RSA-4096 key for %s: %w", name, err)
	}
	// A random serial: testbed's own counter is unexported, and a
	// random one cannot collide with the serials it gives.
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63))
	if err != nil {
		return nil, err
	}
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	ski := sha1.Sum(pub)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial.Add(serial, big.NewInt(1<<20)),
		Subject:               pkix.Name{CommonName: name, Organization: []string{name + " Org"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		SubjectKeyId:          ski[:],
	}
	issuer, signer := tmpl, crypto.Signer(key)
	if parent != nil {
		issuer, signer = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, &key.PublicKey, signer)
	if err != nil {
		return nil, fmt.Errorf("verifybench: creating CA %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &testbed.CA{Cert: cert, Key: key, Parent: parent}, nil
}

// issue builds s's path under CAs named by names (root first, then each
// intermediate from the top down; nil names the CAs after s) and a leaf
// for dnsNames.
func (h *hierarchy) issue(s Shape, names []string, dnsNames []string) (*Chain, error) {
	if names == nil {
		names = []string{s.Name + " root"}
		for i := len(s.Intermediates) - 1; i >= 0; i-- {
			names = append(names, fmt.Sprintf("%s intermediate %d", s.Name, i+1))
		}
	}
	if len(names) != 1+len(s.Intermediates) {
		return nil, fmt.Errorf("verifybench: shape %s has %d CAs, %d names given", s.Name, 1+len(s.Intermediates), len(names))
	}
	if s.Leaf == RSA4096 {
		return nil, errors.New("verifybench: RSA-4096 leaves are not supported (testbed issues leaves)")
	}
	ca, err := h.ca(nil, names[0], s.Root)
	if err != nil {
		return nil, err
	}
	root := ca
	for i := len(s.Intermediates) - 1; i >= 0; i-- {
		if ca, err = h.ca(ca, names[len(s.Intermediates)-i], s.Intermediates[i]); err != nil {
			return nil, err
		}
	}
	leaf, err := ca.Issue(testbed.LeafOptions{DNSNames: dnsNames, Alg: s.Leaf, SendRoot: s.SendRoot})
	if err != nil {
		return nil, err
	}
	path := []*x509.Certificate{leaf.Cert}
	for c := ca; c != nil; c = c.Parent {
		path = append(path, c.Cert)
	}
	return &Chain{Shape: s, Root: root, Leaf: leaf, Path: path}, nil
}

// IssueShape builds a fresh path of shape s for dnsNames.
func IssueShape(s Shape, dnsNames ...string) (*Chain, error) {
	return newHierarchy().issue(s, nil, dnsNames)
}

// CheckSignaturesSerial checks each signature along path (leaf first,
// root last; the root's own is not checked, as no verifier does) one after
// another: the least a path validator must do.
func CheckSignaturesSerial(path []*x509.Certificate) error {
	for i := 0; i+1 < len(path); i++ {
		if err := path[i].CheckSignatureFrom(path[i+1]); err != nil {
			return fmt.Errorf("signature %d of %d: %w", i+1, len(path)-1, err)
		}
	}
	return nil
}

// CheckSignaturesParallel checks the same signatures as
// CheckSignaturesSerial, one goroutine each: what checking them
// concurrently can save at best.
func CheckSignaturesParallel(path []*x509.Certificate) error {
	if len(path) < 2 {
		return nil
	}
	errs := make([]error, len(path)-1)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := path[i].CheckSignatureFrom(path[i+1]); err != nil {
				errs[i] = fmt.Errorf("signature %d of %d: %w", i+1, len(path)-1, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
