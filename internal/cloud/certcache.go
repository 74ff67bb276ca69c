package cloud

import (
	"container/list"
	"crypto/sha256"
	"crypto/x509"
	"sync"
)

// certCacheSize bounds the parsed certificates a cloud keeps: every
// intermediate CA in use and the leaves of the busiest sites. A parsed
// certificate with its raw bytes is a few kilobytes, so the cache stays
// under about 20 MB.
const certCacheSize = 4096

// certCache keeps parsed certificates by the SHA-256 of their DER, least
// recently used first out. Parsing the chain is most of what a submission
// costs the cloud (a profile of `pkie bench pec`'s throughput row: 54% of the
// cloud's CPU before this cache), and the same intermediates arrive in
// nearly every submission, the same leaves for every visit to a popular
// site. The key is the hash of the exact bytes, so a submitter can only ever
// get the parse of the bytes it sent; a certificate that does not parse is
// not cached.
type certCache struct {
	mu    sync.Mutex
	max   int
	byKey map[[32]byte]*list.Element
	lru   list.List // of *cachedCert, most recent at the front
}

type cachedCert struct {
	key  [32]byte
	cert *x509.Certificate
}

func newCertCache(max int) *certCache {
	return &certCache{max: max, byKey: make(map[[32]byte]*list.Element)}
}

// parse returns der parsed, from the cache when it is there. The
// certificate returned is shared between submissions and must not be
// modified.
func (c *certCache) parse(der []byte) (*x509.Certificate, error) {
	key := sha256.Sum256(der)
	c.mu.Lock()
	if e, ok := c.byKey[key]; ok {
		c.lru.MoveToFront(e)
		cert := e.Value.(*cachedCert).cert
		c.mu.Unlock()
		return cert, nil
	}
	c.mu.Unlock()
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok { // parsed meanwhile by another submission
		c.lru.MoveToFront(e)
		return e.Value.(*cachedCert).cert, nil
	}
	c.byKey[key] = c.lru.PushFront(&cachedCert{key: key, cert: cert})
	for c.lru.Len() > c.max {
		old := c.lru.Remove(c.lru.Back()).(*cachedCert)
		delete(c.byKey, old.key)
	}
	return cert, nil
}
