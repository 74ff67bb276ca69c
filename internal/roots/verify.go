package roots

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"hash/maphash"
	"slices"
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

	// groups cache, per (intermediates sent, leaf issuer name), the paths
	// above the leaf: see verifyLeaf.
	groups [64]struct {
		mu sync.Mutex
		m  map[[2]uint64]*groupEntry
	}
	exact    bool // no group cache: every new chain gets a full x509.Verify
	leafOnly atomic.Int64
	nchains  atomic.Int32

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
		v.groups[i].m = map[[2]uint64]*groupEntry{}
	}
	// Anchor set 0 is the empty set, so a zero outcome means "no anchors".
	v.setID[""] = 0
	v.sets = append(v.sets, nil)
	return v
}

// chainKey identifies a chain by two 64-bit hashes of its base64 text
// (randomly seeded per process, so no input can be built to collide),
// which costs neither decoding nor a cryptographic hash per record.
func (v *verifier) chainKey(chain [][]byte) [2]uint64 { return v.key(chain, nil) }

// key hashes the certificates' text and, if issuer is not nil, a separator
// and the issuer name after them (group keys).
func (v *verifier) key(certs [][]byte, issuer []byte) [2]uint64 {
	var h1, h2 maphash.Hash
	h1.SetSeed(v.seed1)
	h2.SetSeed(v.seed2)
	for _, h := range []*maphash.Hash{&h1, &h2} {
		for _, c := range certs {
			h.Write(c)
			h.WriteByte(',')
		}
		if issuer != nil {
			h.WriteByte('|')
			h.Write(issuer)
		}
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
	// Every certificate must be base64 (or the line is not a record), but
	// only the leaf is parsed before the group cache is asked: for a new
	// leaf under known intermediates that is all the work there is.
	size := 0
	for _, b64 := range chain {
		size += base64.StdEncoding.DecodedLen(len(b64))
	}
	buf := make([]byte, size) // one allocation for the whole chain
	ders := make([][]byte, len(chain))
	for i, b64 := range chain {
		n, err := base64.StdEncoding.Decode(buf, b64)
		if err != nil {
			return span{o: outcome{status: statusMalformed}}
		}
		ders[i], buf = buf[:n:n], buf[n:]
	}
	leaf, err := x509.ParseCertificate(ders[0])
	if err != nil {
		return span{o: outcome{status: StatusUnparseable}}
	}
	var g *groupEntry
	if !v.exact && leafEligible(leaf, t) && !v.inStore(leaf) {
		g = v.group(chain[1:], leaf)
		if sp, ok := g.verifyLeaf(v, leaf, t); ok {
			v.leafOnly.Add(1)
			return sp
		}
	}
	certs := make([]*x509.Certificate, 0, len(chain))
	certs = append(certs, leaf)
	for _, der := range ders[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return span{o: outcome{status: StatusUnparseable}}
		}
		certs = append(certs, c)
	}
	v.verifs.Add(1)
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	paths, err := leaf.Verify(x509.VerifyOptions{
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
	if g != nil {
		g.learn(v, leaf, certs[1:], paths, t)
	}
	return sp
}

// A group is every chain that sends the same intermediates, in the same
// order, after a leaf from the same issuer name. Verifying a chain fully
// costs a signature check per edge of every path plus parsing every
// certificate; within a group only the leaf differs, so once one leaf of the
// group has been verified fully, another needs only its own certificate
// parsed, its validity and usage checked and its signature checked against
// the parents the paths start with.
//
// That is exactly what x509.Verify would conclude when, above the leaf,
// nothing depends on the leaf. groupEntry.learn establishes it over every
// certificate that could lie on any path (see reachable), not only those on
// the paths the first leaf's verification returned, for a path rejected for
// a leaf-specific reason is absent from them:
//   - no such certificate carries a name constraint or an explicit-policy
//     requirement, nor an unhandled critical extension, and no such root
//     carries a trust-store constraint (Mozilla's distrust-after dates
//     judge the leaf's NotBefore): these are the checks x509.Verify makes
//     of a path that read the leaf;
//   - no such certificate has the subject of the first leaf, nor of any leaf
//     decided from the cache: x509.Verify refuses a path that repeats a
//     certificate (subject, key and SANs), so a leaf named like a
//     certificate above it can lose a path that other leaves keep;
//   - every certificate that could be the leaf's parent is the first hop of
//     a returned path;
//   - the worst-case number of signature checks in x509.Verify's path
//     search stays within its limit of 100, past which it stops early with
//     whatever paths it has.
//
// The rest of x509.Verify's checks of a path (validity at the time, CA
// flags, path length, key usage given a leaf fit for server
// authentication, policy mapping without an explicit-policy requirement)
// do not read the leaf, so every leaf signed by a first hop has the same
// paths above it. Anything else takes the full verification.
type groupEntry struct {
	mu    sync.Mutex
	spans []groupSpan
}

type groupSpan struct {
	lo, hi   time.Time
	parents  []*x509.Certificate // first hops of the paths
	anchors  [][]int32           // roots reachable through each parent
	subjects map[string]bool     // of every certificate above the leaf
}

func (v *verifier) group(inter [][]byte, leaf *x509.Certificate) *groupEntry {
	k := v.key(inter, leaf.RawIssuer)
	sh := &v.groups[k[0]&63]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	g, ok := sh.m[k]
	if !ok {
		g = &groupEntry{}
		sh.m[k] = g
	}
	return g
}

// inStore reports whether c is itself one of the store's roots (then
// x509.Verify returns it as its own path).
func (v *verifier) inStore(c *x509.Certificate) bool {
	return slices.ContainsFunc(v.store.bySubject[string(c.RawSubject)], func(r *x509.Certificate) bool { return bytes.Equal(r.Raw, c.Raw) })
}

// leafEligible reports whether leaf itself passes what x509.Verify checks
// of a leaf alone: valid at t, no critical extension it does not know,
// usable for server authentication, not self-issued, and not requiring an
// explicit policy (which makes the policy check depend on the leaf).
func leafEligible(leaf *x509.Certificate, t time.Time) bool {
	if t.Before(leaf.NotBefore) || t.After(leaf.NotAfter) || len(leaf.UnhandledCriticalExtensions) > 0 {
		return false
	}
	if leaf.RequireExplicitPolicy > 0 || leaf.RequireExplicitPolicyZero {
		return false
	}
	if bytes.Equal(leaf.RawIssuer, leaf.RawSubject) {
		return false
	}
	if len(leaf.ExtKeyUsage) == 0 && len(leaf.UnknownExtKeyUsage) == 0 {
		return true
	}
	for _, u := range leaf.ExtKeyUsage {
		if u == x509.ExtKeyUsageServerAuth || u == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

// verifyLeaf decides a leaf from the group's cached paths, if a span
// covers t; ok is false when the full verification is needed.
func (g *groupEntry) verifyLeaf(v *verifier, leaf *x509.Certificate, t time.Time) (span, bool) {
	g.mu.Lock()
	var gs *groupSpan
	for i := range g.spans {
		s := &g.spans[i]
		if (s.lo.IsZero() || !t.Before(s.lo)) && (s.hi.IsZero() || t.Before(s.hi)) {
			gs = s
			break
		}
	}
	g.mu.Unlock()
	if gs == nil || gs.subjects[string(leaf.RawSubject)] {
		// A leaf named like a certificate above it could close a loop
		// that x509.Verify would refuse.
		return span{}, false
	}
	var ids []int32
	for i, p := range gs.parents {
		if leaf.CheckSignatureFrom(p) == nil {
			ids = append(ids, gs.anchors[i]...)
		}
	}
	if len(ids) == 0 {
		return span{}, false // let x509.Verify say what is wrong
	}
	sp := span{lo: gs.lo, hi: gs.hi, o: outcome{status: StatusValid, anchors: v.anchorSet(ids)}}
	if sp.lo.IsZero() || leaf.NotBefore.After(sp.lo) {
		sp.lo = leaf.NotBefore
	}
	if end := leaf.NotAfter.Add(time.Nanosecond); sp.hi.IsZero() || end.Before(sp.hi) {
		sp.hi = end
	}
	return sp, true
}

// learn records the paths above a fully verified leaf for its group, if
// they are safe to reuse for other leaves.
//
// Reuse is sound only if which paths above the leaf are valid cannot depend
// on the leaf. x509.Verify returns only the paths valid for this leaf; a
// path it rejected for a reason of this leaf's (a name constraint, a
// required policy, a root's extra constraint, a loop through a certificate
// named like it) is invisible in its answer, and another leaf of the group
// may be valid through it. So the test is not on the paths returned but on
// every certificate that could lie on any path: the closure of candidate
// issuers, by name, over what the site sent and the store. If none carries
// a leaf-dependent rule and the leaf is named like none of them, every path
// above a parent is valid for all leaves or for none, and the paths this
// leaf got are the paths every leaf signed by the same parent gets.
func (g *groupEntry) learn(v *verifier, leaf *x509.Certificate, inter []*x509.Certificate, paths [][]*x509.Certificate, t time.Time) {
	reach, ok := v.reachable(leaf.RawIssuer, inter)
	if !ok {
		return
	}
	gs := groupSpan{subjects: map[string]bool{}}
	for _, c := range reach {
		gs.subjects[string(c.RawSubject)] = true
	}
	if gs.subjects[string(leaf.RawSubject)] {
		return // a loop check may have removed paths for this leaf only
	}
	for _, p := range paths {
		parent := p[1]
		root := v.root(p[len(p)-1])
		i := slices.IndexFunc(gs.parents, func(c *x509.Certificate) bool { return bytes.Equal(c.Raw, parent.Raw) })
		if i < 0 {
			gs.parents = append(gs.parents, parent)
			gs.anchors = append(gs.anchors, nil)
			i = len(gs.parents) - 1
		}
		if !slices.Contains(gs.anchors[i], root) {
			gs.anchors[i] = append(gs.anchors[i], root)
		}
	}
	// Every certificate that could be the leaf's parent must be a first
	// hop already, or another leaf might verify through it differently
	// (one the first leaf's signature did not match, say).
	for _, c := range reach {
		if bytes.Equal(c.RawSubject, leaf.RawIssuer) && !slices.ContainsFunc(gs.parents, func(p *x509.Certificate) bool { return bytes.Equal(p.Raw, c.Raw) }) {
			return
		}
	}
	// Stable while nothing that could be on a path changes validity.
	gs.lo, gs.hi = v.stableSpan(reach, t)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.spans = append(g.spans, gs)
}

// maxSignatureChecks is x509.Verify's limit on signature checks in one
// path search (maxChainSignatureChecks in crypto/x509). Past it the search
// stops and returns the paths found so far, which depend on the order it
// tried candidates in, and that order depends on the leaf (candidates whose
// key identifier matches the leaf's authority key identifier come first).
const maxSignatureChecks = 100

// reachable returns every certificate that could lie on a path above a
// leaf issued by the name issuer: the intermediates sent and the store's
// roots whose subject is that name, then, for each intermediate, those
// named as its issuer, and so on. Roots end paths, as in x509.Verify. ok
// is false if any of them carries a rule that depends on the leaf (see
// hasLeafConstraints; for roots also the store's extra constraints, such
// as distrust-after dates), or if x509.Verify's search could reach its
// signature-check limit for some leaf of the group. The bound replays the
// search as x509.Verify runs it, counting a check for every candidate it
// would consider as if every signature verified and refusing only the
// repeats it refuses, so no leaf's search can count more.
func (v *verifier) reachable(issuer []byte, inter []*x509.Certificate) (reach []*x509.Certificate, ok bool) {
	seen := map[*x509.Certificate]bool{}
	add := func(c *x509.Certificate) bool {
		if !seen[c] {
			seen[c] = true
			if hasLeafConstraints(c) || v.store.constrained[string(c.Raw)] {
				return false
			}
			reach = append(reach, c)
		}
		return true
	}
	checks := 0
	var walk func(issuer []byte, chain []*x509.Certificate) bool
	walk = func(issuer []byte, chain []*x509.Certificate) bool {
		for _, r := range v.store.bySubject[string(issuer)] {
			if checks++; checks > maxSignatureChecks || !add(r) {
				return false
			}
		}
		for _, c := range inter {
			if !bytes.Equal(c.RawSubject, issuer) {
				continue
			}
			if checks++; checks > maxSignatureChecks || !add(c) {
				return false
			}
			if !repeats(c, chain) && !walk(c.RawIssuer, append(chain[:len(chain):len(chain)], c)) {
				return false
			}
		}
		return true
	}
	if !walk(issuer, nil) {
		return nil, false
	}
	return reach, true
}

// repeats reports whether x509.Verify would refuse c as already in chain
// (alreadyInChain in crypto/x509): the same subject, key and subject
// alternative names.
func repeats(c *x509.Certificate, chain []*x509.Certificate) bool {
	for _, o := range chain {
		if bytes.Equal(c.RawSubject, o.RawSubject) && bytes.Equal(c.RawSubjectPublicKeyInfo, o.RawSubjectPublicKeyInfo) && bytes.Equal(sanOf(c), sanOf(o)) {
			return true
		}
	}
	return false
}

func sanOf(c *x509.Certificate) []byte {
	for _, e := range c.Extensions {
		if e.Id.Equal(oidSAN) {
			return e.Value
		}
	}
	return nil
}

var oidSAN = asn1.ObjectIdentifier{2, 5, 29, 17}

// hasLeafConstraints reports whether a CA certificate constrains what its
// subordinates may contain, making a path's validity depend on the leaf.
func hasLeafConstraints(c *x509.Certificate) bool {
	return c.PermittedDNSDomainsCritical || len(c.PermittedDNSDomains) > 0 || len(c.ExcludedDNSDomains) > 0 ||
		len(c.PermittedIPRanges) > 0 || len(c.ExcludedIPRanges) > 0 ||
		len(c.PermittedEmailAddresses) > 0 || len(c.ExcludedEmailAddresses) > 0 ||
		len(c.PermittedURIDomains) > 0 || len(c.ExcludedURIDomains) > 0 ||
		c.RequireExplicitPolicy > 0 || c.RequireExplicitPolicyZero ||
		len(c.UnhandledCriticalExtensions) > 0
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
