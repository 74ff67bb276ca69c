package roots

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/scan"
)

// pkiGen issues certificates for generated PKIs with crypto/x509 alone, so
// that a test controls every field x509.Verify reads.
type pkiGen struct {
	t      testing.TB
	serial int64
	epoch  time.Time
}

type genCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newPKIGen(t testing.TB) *pkiGen {
	return &pkiGen{t: t, epoch: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (g *pkiGen) key() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		g.t.Fatal(err)
	}
	return k
}

// issue signs tmpl (completed with a serial and, if unset, a validity
// around the epoch) for pub with parent's key; parent nil means
// self-signed with key.
func (g *pkiGen) issue(tmpl *x509.Certificate, pub *ecdsa.PublicKey, parent *genCA, key *ecdsa.PrivateKey) *x509.Certificate {
	g.t.Helper()
	g.serial++
	tmpl.SerialNumber = big.NewInt(g.serial)
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = g.epoch.AddDate(-1, 0, 0)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = g.epoch.AddDate(2, 0, 0)
	}
	signer, signerCert := key, tmpl
	if parent != nil {
		signer, signerCert = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, pub, signer)
	if err != nil {
		g.t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		g.t.Fatal(err)
	}
	return c
}

// ca issues a CA certificate for (name, key) under parent (nil: a root).
// edit, if not nil, adjusts the template.
func (g *pkiGen) ca(name string, key *ecdsa.PrivateKey, parent *genCA, edit func(*x509.Certificate)) *genCA {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLen:            -1,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	if edit != nil {
		edit(tmpl)
	}
	return &genCA{cert: g.issue(tmpl, &key.PublicKey, parent, key), key: key}
}

func (g *pkiGen) leaf(name string, under *genCA, edit func(*x509.Certificate)) *x509.Certificate {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    []string{name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	pub := &g.key().PublicKey
	if edit != nil {
		edit(tmpl)
		if k, ok := tmpl.PublicKey.(*ecdsa.PublicKey); ok {
			pub = k
		}
	}
	return g.issue(tmpl, pub, under, nil)
}

var (
	genPolicy    = x509.OID{}
	genAnyPolicy = x509.OID{}
)

func init() {
	genPolicy, _ = x509.OIDFromInts([]uint64{1, 3, 6, 1, 4, 1, 99999, 1})
	genAnyPolicy, _ = x509.OIDFromInts([]uint64{2, 5, 29, 32, 0})
}

// requireExplicitPolicy is a policyConstraints extension (RFC 5280
// 4.2.1.11) with requireExplicitPolicy 0, which crypto/x509 parses but
// does not write.
func requireExplicitPolicy() pkix.Extension {
	return pkix.Extension{Id: asn1.ObjectIdentifier{2, 5, 29, 36}, Critical: true, Value: []byte{0x30, 0x03, 0x80, 0x01, 0x00}}
}

// altPKI is a site's intermediates that reach two roots, A and B, by two
// paths that share the leaf's issuer: leaf → Issuing → Mid → A, and
// leaf → Issuing → Mid (cross-signed) → B, or through a further CA on the
// B side. special leaves are valid by the A path only, for a reason that
// lies on the B path; plain leaves by both.
type altPKI struct {
	name           string
	store          *Store
	inter          []*x509.Certificate // as the sites send them
	special, plain []*x509.Certificate
	at             time.Time
	bothForPlain   bool // plain leaves anchor at both roots
}

func buildAltPKI(t testing.TB, g *pkiGen, kind string, n int) *altPKI {
	p := &altPKI{name: kind, store: newStore(kind), at: g.epoch, bothForPlain: true}
	rootA := g.ca("Root A", g.key(), nil, nil)
	rootB := g.ca("Root B", g.key(), nil, nil)
	var bConstraint func([]*x509.Certificate) error
	midKey := g.key()
	midA := g.ca("Mid", midKey, rootA, nil)
	var issuingEdit func(*x509.Certificate)
	var specialEdit, plainEdit func(int) func(*x509.Certificate)
	var bSide []*x509.Certificate
	distrustAfter := g.epoch.AddDate(0, -6, 0)
	switch kind {
	case "cross-signed": // the common case: no leaf-dependent constraint
		bSide = []*x509.Certificate{g.ca("Mid", midKey, rootB, nil).cert}
	case "name-constraint":
		bSide = []*x509.Certificate{g.ca("Mid", midKey, rootB, func(c *x509.Certificate) {
			c.ExcludedDNSDomains = []string{"x.test"}
		}).cert}
		specialEdit = func(i int) func(*x509.Certificate) {
			return func(c *x509.Certificate) { c.DNSNames = []string{fmt.Sprintf("s%d.x.test", i)} }
		}
	case "policy":
		bSide = []*x509.Certificate{g.ca("Mid", midKey, rootB, func(c *x509.Certificate) {
			c.Policies = []x509.OID{genPolicy}
			c.ExtraExtensions = []pkix.Extension{requireExplicitPolicy()}
		}).cert}
		issuingEdit = func(c *x509.Certificate) { c.Policies = []x509.OID{genAnyPolicy} }
		plainEdit = func(int) func(*x509.Certificate) {
			return func(c *x509.Certificate) { c.Policies = []x509.OID{genPolicy} }
		}
	case "distrust-after":
		bSide = []*x509.Certificate{g.ca("Mid", midKey, rootB, nil).cert}
		bConstraint = func(chain []*x509.Certificate) error {
			if chain[0].NotBefore.After(distrustAfter) {
				return errors.New("issued after Root B's distrust date")
			}
			return nil
		}
		specialEdit = func(i int) func(*x509.Certificate) {
			return func(c *x509.Certificate) { c.NotBefore = distrustAfter.AddDate(0, 0, 1+i%30) }
		}
		plainEdit = func(i int) func(*x509.Certificate) {
			return func(c *x509.Certificate) { c.NotBefore = distrustAfter.AddDate(0, 0, -1-i%30) }
		}
	case "loop":
		// Mid is also signed by Loop CA, which Root B signed; a leaf with
		// Loop CA's subject and key (and, like it, no SANs) would repeat it.
		loopKey := g.key()
		loop := g.ca("Loop CA", loopKey, rootB, nil)
		bSide = []*x509.Certificate{g.ca("Mid", midKey, loop, nil).cert, loop.cert}
		specialEdit = func(int) func(*x509.Certificate) {
			return func(c *x509.Certificate) {
				c.Subject = pkix.Name{CommonName: "Loop CA"}
				c.DNSNames = nil
				c.PublicKey = &loopKey.PublicKey
			}
		}
	default:
		t.Fatalf("unknown PKI %q", kind)
	}
	issuing := g.ca("Issuing", g.key(), midA, issuingEdit)
	p.store.add(rootA.cert, nil)
	p.store.add(rootB.cert, bConstraint)
	p.inter = append([]*x509.Certificate{issuing.cert, midA.cert}, bSide...)
	for i := range n {
		if kind != "cross-signed" && i%2 == 0 {
			var e func(*x509.Certificate)
			if specialEdit != nil {
				e = specialEdit(i)
			}
			p.special = append(p.special, g.leaf(fmt.Sprintf("s%d.y.test", i), issuing, e))
		} else {
			var e func(*x509.Certificate)
			if plainEdit != nil {
				e = plainEdit(i)
			}
			p.plain = append(p.plain, g.leaf(fmt.Sprintf("p%d.y.test", i), issuing, e))
		}
	}
	return p
}

func b64Chain(leaf *x509.Certificate, inter []*x509.Certificate) [][]byte {
	out := [][]byte{[]byte(base64.StdEncoding.EncodeToString(leaf.Raw))}
	for _, c := range inter {
		out = append(out, []byte(base64.StdEncoding.EncodeToString(c.Raw)))
	}
	return out
}

func rootNames(roots []*x509.Certificate) string {
	var s []string
	for _, r := range roots {
		sum := sha256.Sum256(r.Raw)
		s = append(s, r.Subject.CommonName+":"+hex.EncodeToString(sum[:4]))
	}
	sort.Strings(s)
	return strings.Join(slices.Compact(s), ",")
}

// plainVerify is the reference: the roots of every chain x509.Verify
// returns for the leaf, or its error.
func plainVerify(store *Store, leaf *x509.Certificate, inter []*x509.Certificate, at time.Time) string {
	pool := x509.NewCertPool()
	for _, c := range inter {
		pool.AddCert(c)
	}
	paths, err := leaf.Verify(x509.VerifyOptions{Roots: store.pool, Intermediates: pool, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return classify(err).String()
	}
	var roots []*x509.Certificate
	for _, p := range paths {
		roots = append(roots, p[len(p)-1])
	}
	return "valid[" + rootNames(roots) + "]"
}

func (v *verifier) describe(o outcome) string {
	if o.status != StatusValid {
		return o.status.String()
	}
	var roots []*x509.Certificate
	for _, id := range v.sets[o.anchors] {
		roots = append(roots, v.roots[id])
	}
	return "valid[" + rootNames(roots) + "]"
}

// checkOrder verifies the leaves in the given order with a fresh group
// cache and compares each with x509.Verify; it returns how many leaves the
// group cache decided.
func checkOrder(t *testing.T, store *Store, inter []*x509.Certificate, at time.Time, leaves []*x509.Certificate, want map[*x509.Certificate]string, label string) int64 {
	t.Helper()
	v := newVerifier(store)
	for _, l := range leaves {
		if got := v.describe(v.verify(b64Chain(l, inter), at)); got != want[l] {
			t.Errorf("%s: leaf %q: group cache says %s, x509.Verify %s", label, l.Subject.CommonName, got, want[l])
			return v.leafOnly.Load()
		}
	}
	return v.leafOnly.Load()
}

func permutations(n int, yield func([]int)) {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	var rec func(k int)
	rec = func(k int) {
		if k == n {
			yield(p)
			return
		}
		for i := k; i < n; i++ {
			p[k], p[i] = p[i], p[k]
			rec(k + 1)
			p[k], p[i] = p[i], p[k]
		}
	}
	rec(0)
}

// TestGroupCacheAlternatePaths: when a site's intermediates reach two roots
// and some leaves are valid by one path only, for a reason that lies on the
// other path (a name constraint, an explicit-policy requirement, a root's
// distrust-after date, a loop), every leaf must get the roots x509.Verify
// gives it, whichever leaf is seen first. Small sets in every order, larger
// ones shuffled with fixed seeds.
func TestGroupCacheAlternatePaths(t *testing.T) {
	g := newPKIGen(t)
	for _, kind := range []string{"cross-signed", "name-constraint", "policy", "distrust-after", "loop"} {
		t.Run(kind, func(t *testing.T) {
			p := buildAltPKI(t, g, kind, 40)
			want := map[*x509.Certificate]string{}
			all := append(append([]*x509.Certificate(nil), p.special...), p.plain...)
			for _, l := range all {
				want[l] = plainVerify(p.store, l, p.inter, p.at)
			}
			// The PKI must really give the two kinds of leaf different
			// roots, or the test proves nothing.
			both := "valid[" + rootNames([]*x509.Certificate{p.store.Certs[0], p.store.Certs[1]}) + "]"
			onlyA := "valid[" + rootNames(p.store.Certs[:1]) + "]"
			for _, l := range p.plain {
				if want[l] != both {
					t.Fatalf("plain leaf %q: x509.Verify says %s, want %s", l.Subject.CommonName, want[l], both)
				}
			}
			for _, l := range p.special {
				if want[l] != onlyA {
					t.Fatalf("special leaf %q: x509.Verify says %s, want %s", l.Subject.CommonName, want[l], onlyA)
				}
			}

			small := all[:0:0]
			if len(p.special) > 0 {
				small = append(small, p.special[:2]...)
			}
			small = append(small, p.plain[:4-len(small)]...)
			permutations(len(small), func(idx []int) {
				order := make([]*x509.Certificate, len(idx))
				for i, j := range idx {
					order[i] = small[j]
				}
				checkOrder(t, p.store, p.inter, p.at, order, want, fmt.Sprintf("order %v", idx))
			})
			var cached int64
			for seed := range uint64(8) {
				order := slices.Clone(all)
				r := mrand.New(mrand.NewPCG(seed, 8))
				r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				cached += checkOrder(t, p.store, p.inter, p.at, order, want, fmt.Sprintf("seed %d", seed))
			}
			// The common case keeps its speed: all but each order's first
			// leaf are decided by the group cache.
			if kind == "cross-signed" && cached != 8*int64(len(all)-1) {
				t.Errorf("cross-signed: %d leaves decided by the group cache, want %d", cached, 8*(len(all)-1))
			}
		})
	}
}

// TestRankingWithAlternatePaths is the symptom the group cache caused:
// half the sites of a cross-signed hierarchy are valid under both roots,
// half (excluded by a name constraint on the cross-signature) under one
// only. Whatever the record order, the second root must be credited with
// exactly the sites x509.Verify anchors at it (half), and so must coverage
// and the minimal root set.
func TestRankingWithAlternatePaths(t *testing.T) {
	g := newPKIGen(t)
	p := buildAltPKI(t, g, "name-constraint", 120)
	all := append(append([]*x509.Certificate(nil), p.special...), p.plain...)
	for seed := range uint64(4) {
		order := slices.Clone(all)
		mrand.New(mrand.NewPCG(seed, 4)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		var file bytes.Buffer
		for i, l := range order {
			chain := [][]byte{l.Raw}
			for _, c := range p.inter {
				chain = append(chain, c.Raw)
			}
			b, err := json.Marshal(scan.Record{Rank: i + 1, Domain: fmt.Sprintf("site%d.test", i), Time: p.at, Chain: chain})
			if err != nil {
				t.Fatal(err)
			}
			file.Write(append(b, '\n'))
		}
		d, err := Load(context.Background(), []Input{{Name: "f", R: bytes.NewReader(file.Bytes())}}, LoadOptions{Store: p.store, Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		rep := d.Analyze(1)
		got := map[string]int{}
		for _, rc := range rep.Ranking {
			got[rc.Subject] = rc.Sites
		}
		if rep.SitesValid != len(all) || got["CN=Root A"] != len(all) || got["CN=Root B"] != len(p.plain) {
			t.Errorf("seed %d: %d valid, Root A %d, Root B %d sites; want %d, %d, %d (ranking %+v)",
				seed, rep.SitesValid, got["CN=Root A"], got["CN=Root B"], len(all), len(all), len(p.plain), rep.Ranking)
		}
		// Root A alone covers every site: the minimal set is one root.
		if rep.Minimal == nil || len(rep.Minimal.Roots) != 1 || rep.Minimal.Roots[0].Subject != "CN=Root A" {
			t.Errorf("seed %d: minimal set %+v, want Root A alone", seed, rep.Minimal)
		}
	}
}

// TestGroupCacheSignatureBudget: x509.Verify stops after 100 signature
// checks and returns the paths found so far, trying first the candidates
// whose key identifier matches the leaf's authority key identifier. Two
// certificates for Issuing with one key but different key identifiers,
// one under Root B directly and one under a web of 20 same-named
// cross-signatures to Root A: a leaf naming the first finds both roots, a
// leaf naming the second spends the budget under Root A and never tries
// Root B. The group cache must not carry the first leaf's answer to the
// second (24 certificates can lie on a path, so a bound on their number
// does not catch it).
func TestGroupCacheSignatureBudget(t *testing.T) {
	g := newPKIGen(t)
	rootA := g.ca("Root A", g.key(), nil, nil)
	rootB := g.ca("Root B", g.key(), nil, nil)
	kKey, jKey, iKey := g.key(), g.key(), g.key()
	var ks, js []*x509.Certificate
	for range 10 {
		ks = append(ks, g.ca("K", kKey, rootA, nil).cert)
	}
	kCA := &genCA{cert: ks[0], key: kKey}
	for range 10 {
		js = append(js, g.ca("J", jKey, kCA, nil).cert)
	}
	jCA := &genCA{cert: js[0], key: jKey}
	viaA := g.ca("Issuing", iKey, jCA, func(c *x509.Certificate) { c.SubjectKeyId = []byte{1} })
	viaB := g.ca("Issuing", iKey, rootB, func(c *x509.Certificate) { c.SubjectKeyId = []byte{2} })
	store := newStore("budget")
	store.add(rootA.cert, nil)
	store.add(rootB.cert, nil)
	inter := append(append([]*x509.Certificate{viaA.cert, viaB.cert}, js...), ks...)
	namingB := g.leaf("b.test", viaB, nil)
	namingA := g.leaf("a.test", viaA, nil)
	want := map[*x509.Certificate]string{}
	for _, l := range []*x509.Certificate{namingB, namingA} {
		want[l] = plainVerify(store, l, inter, g.epoch)
	}
	if want[namingB] == want[namingA] {
		t.Fatalf("x509.Verify gives both leaves %s: the PKI does not exercise the budget", want[namingA])
	}
	checkOrder(t, store, inter, g.epoch, []*x509.Certificate{namingB, namingA}, want, "leaf naming B first")
	checkOrder(t, store, inter, g.epoch, []*x509.Certificate{namingA, namingB}, want, "leaf naming A first")
}

// TestGroupCacheRandomWebs is a property test: random webs of CAs with a
// fixed seed (names shared by several keys, cross-signatures, roots with a
// distrust-after constraint, name constraints, explicit-policy
// requirements, path-length limits, restricted key usages, expired CAs),
// random leaves (names inside and outside the constraints, with and
// without the policy, issued before and after the distrust date, some
// named and keyed like a CA), the intermediates sent in random order, and
// the leaves verified in several orders: the group cache must agree with
// x509.Verify on every leaf.
func TestGroupCacheRandomWebs(t *testing.T) {
	g := newPKIGen(t)
	r := mrand.New(mrand.NewPCG(2026, 8))
	distrust := g.epoch.AddDate(0, -6, 0)
	distrustAfter := func(chain []*x509.Certificate) error {
		if chain[0].NotBefore.After(distrust) {
			return errors.New("distrusted")
		}
		return nil
	}
	var cached, multi, compared int64
	for trial := range 40 {
		store := newStore("random")
		type identity struct {
			name string
			key  *ecdsa.PrivateKey
			cas  []*genCA // certificates for this name and key
		}
		var roots, ids []*identity
		for i := range 1 + r.IntN(3) {
			k := g.key()
			ca := g.ca(fmt.Sprintf("Root %d", i), k, nil, nil)
			var c func([]*x509.Certificate) error
			if r.IntN(4) == 0 {
				c = distrustAfter
			}
			store.add(ca.cert, c)
			roots = append(roots, &identity{name: ca.cert.Subject.CommonName, key: k, cas: []*genCA{ca}})
		}
		// One key per name, so that cross-signatures share first hops,
		// and sometimes a second key for a name (a rollover).
		for i := range 3 {
			ids = append(ids, &identity{name: fmt.Sprintf("CA %d", i), key: g.key()})
		}
		if r.IntN(3) == 0 {
			ids = append(ids, &identity{name: "CA 0", key: g.key()})
		}
		var inter []*x509.Certificate
		for range 4 + r.IntN(6) {
			sub := ids[r.IntN(len(ids))]
			// The issuer: a root, or a CA that already has a certificate.
			var cands []*identity
			cands = append(cands, roots...)
			for _, id := range ids {
				if id != sub && len(id.cas) > 0 {
					cands = append(cands, id)
				}
			}
			iss := cands[r.IntN(len(cands))]
			parent := iss.cas[r.IntN(len(iss.cas))]
			ca := g.ca(sub.name, sub.key, parent, func(c *x509.Certificate) {
				c.SubjectKeyId = []byte{byte(r.IntN(3))}
				switch r.IntN(10) {
				case 0:
					c.ExcludedDNSDomains = []string{"x.test"}
				case 1:
					c.Policies = []x509.OID{genPolicy}
					c.ExtraExtensions = []pkix.Extension{requireExplicitPolicy()}
				case 2:
					c.MaxPathLen, c.MaxPathLenZero = 0, true
				case 3:
					c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
				case 4:
					c.NotAfter = g.epoch.AddDate(0, 0, -1)
				case 5:
					c.Policies = []x509.OID{genAnyPolicy}
				}
			})
			sub.cas = append(sub.cas, ca)
			inter = append(inter, ca.cert)
		}
		var issuers []*genCA
		for _, id := range ids {
			issuers = append(issuers, id.cas...)
		}
		if len(issuers) == 0 {
			continue
		}
		// Leaves under one issuer name, so that they share a group.
		first := issuers[r.IntN(len(issuers))]
		var leaves []*x509.Certificate
		for i := range 6 {
			var under []*genCA
			for _, c := range issuers {
				if c.cert.Subject.CommonName == first.cert.Subject.CommonName {
					under = append(under, c)
				}
			}
			parent := under[r.IntN(len(under))]
			leaves = append(leaves, g.leaf(fmt.Sprintf("l%d.%s.test", i, []string{"x", "y"}[r.IntN(2)]), parent, func(c *x509.Certificate) {
				if r.IntN(2) == 0 {
					c.Policies = []x509.OID{genPolicy}
				}
				c.NotBefore = distrust.AddDate(0, 0, r.IntN(60)-30)
				if r.IntN(6) == 0 {
					// Named and keyed like a CA of the web.
					id := ids[r.IntN(len(ids))]
					c.Subject = pkix.Name{CommonName: id.name}
					c.DNSNames = nil
					c.PublicKey = &id.key.PublicKey
				}
			}))
		}
		r.Shuffle(len(inter), func(i, j int) { inter[i], inter[j] = inter[j], inter[i] })
		want := map[*x509.Certificate]string{}
		for _, l := range leaves {
			want[l] = plainVerify(store, l, inter, g.epoch)
			if strings.Contains(want[l], ",") {
				multi++
			}
		}
		for o := range 4 {
			order := slices.Clone(leaves)
			r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			cached += checkOrder(t, store, inter, g.epoch, order, want, fmt.Sprintf("trial %d, order %d", trial, o))
			compared += int64(len(order))
		}
	}
	t.Logf("%d leaf verifications compared, %d decided by the group cache, %d leaves anchored at several roots", compared, cached, multi)
	if cached == 0 || multi == 0 {
		t.Errorf("the webs exercise too little: %d cached, %d multi-root", cached, multi)
	}
}
