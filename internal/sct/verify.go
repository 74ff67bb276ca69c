package sct

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"

	"github.com/pkie/pkie/internal/lru"
)

// minRSABits is the smallest RSA log key accepted, as RFC 6962 logs and
// certificate-transparency-go require.
const minRSABits = 2048

// Verify checks that key signed s over e: the SCT's digitally-signed struct
// (SignedInput) under ECDSA P-256 with SHA-256 or RSA PKCS#1 v1.5 with
// SHA-256, the two algorithms RFC 6962 logs use. The SCT's algorithm bytes
// must name the key's algorithm and SHA-256. The caller picks key by
// s.LogID from its log list; the log ID itself is not signed.
func Verify(s *SCT, e *Entry, key crypto.PublicKey) error {
	if s == nil || e == nil {
		return errors.New("sct: no SCT or no entry")
	}
	if s.Version != 0 {
		return fmt.Errorf("sct: log %x: version %d, only v1 (0) is supported", s.LogID[:4], s.Version)
	}
	if s.HashAlg != hashSHA256 {
		return fmt.Errorf("sct: log %x: hash algorithm %d, want SHA-256 (4)", s.LogID[:4], s.HashAlg)
	}
	input := e.SignedInput(s)
	if input == nil {
		return fmt.Errorf("sct: log %x: the entry is empty or too large", s.LogID[:4])
	}
	digest := sha256.Sum256(input)
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return fmt.Errorf("sct: log %x: ECDSA key not on P-256", s.LogID[:4])
		}
		if s.SigAlg != sigECDSA {
			return fmt.Errorf("sct: log %x: signature algorithm %d, but the log's key is ECDSA (3)", s.LogID[:4], s.SigAlg)
		}
		if !ecdsa.VerifyASN1(k, digest[:], s.Signature) {
			return fmt.Errorf("sct: log %x: invalid ECDSA signature over the %s", s.LogID[:4], e.kind())
		}
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return fmt.Errorf("sct: log %x: RSA key of %d bits, want at least %d", s.LogID[:4], k.N.BitLen(), minRSABits)
		}
		if s.SigAlg != sigRSA {
			return fmt.Errorf("sct: log %x: signature algorithm %d, but the log's key is RSA (1)", s.LogID[:4], s.SigAlg)
		}
		if err := rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], s.Signature); err != nil {
			return fmt.Errorf("sct: log %x: invalid RSA signature over the %s", s.LogID[:4], e.kind())
		}
	case nil:
		return fmt.Errorf("sct: log %x: no key", s.LogID[:4])
	default:
		return fmt.Errorf("sct: log %x: key of type %T, want ECDSA P-256 or RSA", s.LogID[:4], key)
	}
	return nil
}

// kind names the entry in an error.
func (e *Entry) kind() string {
	if e.Precert {
		return "precert_entry"
	}
	return "x509_entry"
}

// Cache remembers SCT signatures that verified, so a client that sees the
// same certificate again (each connection to a site does) pays a hash
// instead of a signature check. It is bounded (least recently used entries
// go first) and safe for concurrent use.
//
// An entry is keyed by SHA-256 over the serialized SCT, the signed input
// (which holds the certificate or precertificate and its issuer key hash)
// and the key's SubjectPublicKeyInfo, each length-prefixed: a success
// cached for one certificate, issuer or key is never one for another.
// Failures are not cached.
type Cache struct {
	verified *lru.Cache[[32]byte, struct{}]
	mu       sync.Mutex
	// spkis remembers each key's encoding: a verifier asks about the same
	// few log keys on every connection, and encoding one again is a tenth
	// of a cached answer's cost. Keys are compared by identity (pointers
	// from the log list); a key that is not comparable is encoded each time.
	spkis map[crypto.PublicKey][]byte
}

// maxSPKIs bounds Cache.spkis: more keys than any log list holds.
const maxSPKIs = 4096

// NewCache returns a Cache of at most n verified SCTs (at least 1).
func NewCache(n int) *Cache {
	if n < 1 {
		n = 1
	}
	return &Cache{verified: lru.New[[32]byte, struct{}](n), spkis: make(map[crypto.PublicKey][]byte)}
}

// Verify is Verify, answered from the cache when this SCT, entry and key
// verified before.
func (c *Cache) Verify(s *SCT, e *Entry, key crypto.PublicKey) error {
	if s == nil || e == nil {
		return errors.New("sct: no SCT or no entry")
	}
	input := e.SignedInput(s)
	spki, err := c.spki(key)
	if input == nil || err != nil {
		return Verify(s, e, key) // says what is wrong
	}
	k := cacheKey(s.Raw, input, spki)
	if _, ok := c.verified.Get(k); ok {
		return nil
	}
	if err := Verify(s, e, key); err != nil {
		return err
	}
	c.verified.Put(k, struct{}{})
	return nil
}

// spki returns key's SubjectPublicKeyInfo, encoding it once per key.
func (c *Cache) spki(key crypto.PublicKey) ([]byte, error) {
	comparable := false
	switch key.(type) {
	case *ecdsa.PublicKey, *rsa.PublicKey:
		comparable = true
	}
	if comparable {
		c.mu.Lock()
		der, ok := c.spkis[key]
		c.mu.Unlock()
		if ok {
			return der, nil
		}
	}
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil || !comparable {
		return der, err
	}
	c.mu.Lock()
	if len(c.spkis) >= maxSPKIs {
		clear(c.spkis)
	}
	c.spkis[key] = der
	c.mu.Unlock()
	return der, nil
}

// Len returns the number of verified SCTs the cache holds.
func (c *Cache) Len() int { return c.verified.Len() }

func cacheKey(parts ...[]byte) [32]byte {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		l := uint64(len(p))
		for i := range n {
			n[i] = byte(l >> (56 - 8*i))
		}
		h.Write(n[:])
		h.Write(p)
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}
