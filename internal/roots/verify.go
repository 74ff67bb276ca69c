package roots

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"hash/maphash"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Status is the outcome of building paths from a site's chain.
type Status uint8

// Outcomes of path building.
const (
	StatusFailed           Status = iota // the site did not answer (scan error)
	StatusValid                          // at least one path to the store
	StatusExpired                        // a certificate was outside its validity at scan time
	StatusUnknownAuthority               // no path reaches the store
	StatusUnparseable                    // a certificate did not parse
	StatusInvalid                        // any other verification error
	statusMalformed                      // not base64: the line is not a record
)

var statusNames = [...]string{"failed", "valid", "expired", "unknown_authority", "unparseable", "invalid", "malformed"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// outcome is the result of verifying one chain at one time.
type outcome struct {
	status  Status
	anchors int32 // id of the set of anchoring roots (StatusValid only)
	chain   int32 // id of the distinct chain, for comparing vantages
}

// verifier builds and caches paths. A chain is verified once for every
// stretch of time in which none of the certificates that could matter to
// it changes validity, however many sites send it: sites share chains, and
// verification, not parsing, is the cost.
type verifier struct {
	store *Store

	shards [64]struct {
		mu sync.Mutex
		m  map[[2]uint64]*chainEntry
	}
	seed1, seed2 maphash.Seed
	nchains      atomic.Int32

	mu      sync.Mutex // guards the root and anchor-set tables
	rootID  map[[32]byte]int32
	roots   []*x509.Certificate
	setID   map[string]int32
	sets    [][]int32
	verifs  atomic.Int64
	lookups atomic.Int64
}

type chainEntry struct {
	id    int32
	mu    sync.Mutex
	spans []span // verification results by time interval
}

type span struct {
	lo, hi time.Time // [lo, hi); zero means unbounded
	o      outcome
}

func (s span) covers(t time.Time) bool {
	return (s.lo.IsZero() || !t.Before(s.lo)) && (s.hi.IsZero() || t.Before(s.hi))
}

func newVerifier(s *Store) *verifier {
	v := &verifier{store: s, rootID: map[[32]byte]int32{}, setID: map[string]int32{}, seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed()}
	for i := range v.shards {
		v.shards[i].m = map[[2]uint64]*chainEntry{}
	}
	// Anchor set 0 is the empty set, so a zero outcome means "no anchors".
	v.setID[""] = 0
	v.sets = append(v.sets, nil)
	return v
}

// chainKey identifies a chain by two 64-bit hashes of its base64 text
// (randomly seeded per process, so no input can be built to collide),
// which costs neither decoding nor a cryptographic hash per record.
func (v *verifier) chainKey(chain [][]byte) [2]uint64 {
	var h1, h2 maphash.Hash
	h1.SetSeed(v.seed1)
	h2.SetSeed(v.seed2)
	for _, c := range chain {
		h1.Write(c)
		h1.WriteByte(',')
		h2.Write(c)
		h2.WriteByte(',')
	}
	return [2]uint64{h1.Sum64(), h2.Sum64()}
}

// verify returns the outcome for a chain (base64 text, leaf first) seen at
// time t.
func (v *verifier) verify(chain [][]byte, t time.Time) outcome {
	v.lookups.Add(1)
	if t.IsZero() {
		t = time.Now()
	}
	k := v.chainKey(chain)
	sh := &v.shards[k[0]&63]
	sh.mu.Lock()
	e, ok := sh.m[k]
	if !ok {
		e = &chainEntry{id: v.nchains.Add(1) - 1}
		sh.m[k] = e
	}
	sh.mu.Unlock()

	// Holding the entry's lock while verifying makes concurrent sites with
	// the same chain wait for one verification instead of each doing it.
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.spans {
		if s.covers(t) {
			return s.o
		}
	}
	s := v.verifyNow(chain, t)
	s.o.chain = e.id
	e.spans = append(e.spans, s)
	return s.o
}

func (v *verifier) verifyNow(chain [][]byte, t time.Time) span {
	v.verifs.Add(1)
	certs := make([]*x509.Certificate, 0, len(chain))
	for _, b64 := range chain {
		der, err := base64.StdEncoding.DecodeString(string(b64))
		if err != nil {
			return span{o: outcome{status: statusMalformed}}
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return span{o: outcome{status: StatusUnparseable}}
		}
		certs = append(certs, c)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	paths, err := certs[0].Verify(x509.VerifyOptions{
		// No DNSName: the question is which root anchors the chain, not
		// whether it names the site.
		Roots:         v.store.pool,
		Intermediates: inter,
		CurrentTime:   t,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	// The result holds while no certificate involved changes validity:
	// those sent, those on the paths found, and the store's roots that
	// could have issued any of them.
	involved := certs
	for _, p := range paths {
		involved = append(involved, p...)
	}
	lo, hi := v.stableSpan(involved, t)
	sp := span{lo: lo, hi: hi}
	if err != nil {
		sp.o.status = classify(err)
		return sp
	}
	ids := make([]int32, 0, 2)
	for _, p := range paths {
		ids = append(ids, v.root(p[len(p)-1]))
	}
	sp.o.status = StatusValid
	sp.o.anchors = v.anchorSet(ids)
	return sp
}

func classify(err error) Status {
	var inv x509.CertificateInvalidError
	if errors.As(err, &inv) && inv.Reason == x509.Expired {
		return StatusExpired
	}
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		return StatusUnknownAuthority
	}
	return StatusInvalid
}

// stableSpan returns the interval around t in which none of certs, nor any
// store root named as the issuer of one of them, starts or stops being
// valid.
func (v *verifier) stableSpan(certs []*x509.Certificate, t time.Time) (lo, hi time.Time) {
	consider := func(c *x509.Certificate) {
		// Valid on [NotBefore, NotAfter]: changes at NotBefore and just
		// after NotAfter.
		for _, b := range [2]time.Time{c.NotBefore, c.NotAfter.Add(time.Nanosecond)} {
			if !t.Before(b) {
				if lo.IsZero() || b.After(lo) {
					lo = b
				}
			} else if hi.IsZero() || b.Before(hi) {
				hi = b
			}
		}
	}
	for _, c := range certs {
		consider(c)
		for _, r := range v.store.bySubject[string(c.RawIssuer)] {
			consider(r)
		}
	}
	return lo, hi
}

func (v *verifier) root(c *x509.Certificate) int32 {
	sum := sha256.Sum256(c.Raw)
	v.mu.Lock()
	defer v.mu.Unlock()
	if id, ok := v.rootID[sum]; ok {
		return id
	}
	id := int32(len(v.roots))
	v.rootID[sum] = id
	v.roots = append(v.roots, c)
	return id
}

func (v *verifier) anchorSet(ids []int32) int32 {
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	u := ids[:0]
	for i, id := range ids {
		if i == 0 || id != ids[i-1] {
			u = append(u, id)
		}
	}
	var sb strings.Builder
	for _, id := range u {
		sb.WriteString(strconv.Itoa(int(id)))
		sb.WriteByte(',')
	}
	key := sb.String()
	v.mu.Lock()
	defer v.mu.Unlock()
	if id, ok := v.setID[key]; ok {
		return id
	}
	id := int32(len(v.sets))
	v.setID[key] = id
	v.sets = append(v.sets, append([]int32(nil), u...))
	return id
}
