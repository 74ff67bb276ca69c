package roots

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// A PKI whose leaves share intermediates that reach two roots:
//
//	leaf ─▶ I ─▶ C (signed by root A) ─▶ A
//	          └▶ C (cross-signed by root B, carrying the variant's rule) ─▶ B
//
// Leaves named under a.test (or carrying the policy) are valid through both
// roots; the others only through A. The rule sits on the second path's
// cross certificate or root, never on a certificate the first leaf's own
// valid path contains, which is what the group cache used to look at.
type twoPathPKI struct {
	rootA, rootB *x509.Certificate
	inter        [][]byte // DER of I, C by A, C by B: what every site sends
	store        *Store
	leaves       []*x509.Certificate
	t            time.Time
}

var testPolicy = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}
var anyPolicy = asn1.ObjectIdentifier{2, 5, 29, 32, 0}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustCert(t testing.TB, tmpl, parent *x509.Certificate, pub any, signer *ecdsa.PrivateKey) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var serial int64

func caTemplate(cn string, now time.Time) *x509.Certificate {
	serial++
	return &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
}

func newTwoPathPKI(t testing.TB, variant string, nLeaves int) *twoPathPKI {
	now := time.Now()
	p := &twoPathPKI{t: now}
	kA, kB, kC, kI := newKey(t), newKey(t), newKey(t), newKey(t)
	p.rootA = mustCert(t, caTemplate("Root A", now), caTemplate("Root A", now), &kA.PublicKey, kA)
	tb := caTemplate("Root B", now)
	p.rootB = mustCert(t, tb, tb, &kB.PublicKey, kB)

	cA := caTemplate("Cross C", now)
	cB := caTemplate("Cross C", now)
	iT := caTemplate("Issuing I", now)
	switch variant {
	case "name constraint":
		cB.PermittedDNSDomains = []string{"a.test"}
	case "explicit policy":
		cB.Policies = []x509.OID{mustOID(t, anyPolicy)}
		// requireExplicitPolicy 0 (crypto/x509 parses policy
		// constraints but does not write them).
		cB.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 36}, Critical: true, Value: []byte{0x30, 0x03, 0x80, 0x01, 0x00}}}
		iT.Policies = []x509.OID{mustOID(t, anyPolicy)}
	case "root constraint", "none":
	default:
		t.Fatalf("unknown variant %q", variant)
	}
	ca := mustCert(t, cA, p.rootA, &kC.PublicKey, kA)
	cb := mustCert(t, cB, p.rootB, &kC.PublicKey, kB)
	ii := mustCert(t, iT, ca, &kI.PublicKey, kC)
	p.inter = [][]byte{ii.Raw, ca.Raw, cb.Raw}

	p.store = newStore("two paths")
	p.store.add(p.rootA, nil)
	if variant == "root constraint" {
		// A leaf-dependent rule of the kind Mozilla's distrust-after
		// dates are: here, by the leaf's name.
		p.store.add(p.rootB, func(chain []*x509.Certificate) error {
			if !strings.HasSuffix(chain[0].DNSNames[0], ".a.test") {
				return errors.New("root B does not vouch for this name")
			}
			return nil
		})
	} else {
		p.store.add(p.rootB, nil)
	}

	kL := newKey(t)
	for i := range nLeaves {
		serial++
		name := fmt.Sprintf("s%d.b.test", i)
		if i%2 == 0 {
			name = fmt.Sprintf("s%d.a.test", i)
		}
		lt := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			DNSNames:     []string{name},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(12 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		if variant == "explicit policy" && i%2 == 0 {
			lt.Policies = []x509.OID{mustOID(t, testPolicy)}
		}
		p.leaves = append(p.leaves, mustCert(t, lt, ii, &kL.PublicKey, kI))
	}
	return p
}

func mustOID(t testing.TB, o asn1.ObjectIdentifier) x509.OID {
	ints := make([]uint64, len(o))
	for i, v := range o {
		ints[i] = uint64(v)
	}
	oid, err := x509.OIDFromInts(ints)
	if err != nil {
		t.Fatal(err)
	}
	return oid
}

func (p *twoPathPKI) chain(i int) [][]byte {
	out := [][]byte{[]byte(base64.StdEncoding.EncodeToString(p.leaves[i].Raw))}
	for _, der := range p.inter {
		out = append(out, []byte(base64.StdEncoding.EncodeToString(der)))
	}
	return out
}

// rootsByVerify is what plain x509.Verify says of leaf i: the roots its
// verified chains end at, by common name.
func (p *twoPathPKI) rootsByVerify(t testing.TB, i int) []string {
	inter := x509.NewCertPool()
	for _, der := range p.inter {
		c, _ := x509.ParseCertificate(der)
		inter.AddCert(c)
	}
	chains, err := p.leaves[i].Verify(x509.VerifyOptions{Roots: p.store.pool, Intermediates: inter, CurrentTime: p.t, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return nil
	}
	var out []string
	for _, c := range chains {
		out = append(out, c[len(c)-1].Subject.CommonName)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (v *verifier) rootNames(o outcome) []string {
	if o.status != StatusValid {
		return nil
	}
	var out []string
	for _, id := range v.sets[o.anchors] {
		out = append(out, v.roots[id].Subject.CommonName)
	}
	slices.Sort(out)
	return out
}

// TestGroupCacheSecondPath decides the leaves of two-path PKIs in many
// orders and compares each leaf's roots with x509.Verify's. Before the
// cache looked at every certificate that could lie on a path, a first
// leaf valid by one path only made every later leaf lose the other root.
func TestGroupCacheSecondPath(t *testing.T) {
	const n = 12
	for _, tc := range []struct {
		variant string
		cached  bool // whether the group cache may answer at all
	}{
		{"none", true},
		{"name constraint", false},
		{"explicit policy", false},
		{"root constraint", false},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			p := newTwoPathPKI(t, tc.variant, n)
			want := make([][]string, n)
			both := 0
			for i := range n {
				want[i] = p.rootsByVerify(t, i)
				if len(want[i]) == 2 {
					both++
				}
				if len(want[i]) == 0 {
					t.Fatalf("leaf %d does not verify at all", i)
				}
			}
			if tc.variant == "none" && both != n || tc.variant != "none" && both != n/2 {
				t.Fatalf("%d of %d leaves valid through both roots: the PKI is not what the test needs", both, n)
			}
			rng := mrand.New(mrand.NewPCG(1, 2))
			for round := range 40 {
				order := rng.Perm(n)
				if round == 0 { // a leaf valid by one path only comes first
					slices.SortFunc(order, func(a, b int) int { return len(want[a]) - len(want[b]) })
				}
				v := newVerifier(p.store)
				for _, i := range order {
					got := v.rootNames(v.verify(p.chain(i), p.t))
					if !slices.Equal(got, want[i]) {
						t.Fatalf("order %v: leaf %d (%s): roots %v, x509.Verify %v", order, i, p.leaves[i].DNSNames[0], got, want[i])
					}
				}
				if tc.cached && v.leafOnly.Load() != n-1 {
					t.Fatalf("order %v: %d leaves decided by the group cache, want %d", order, v.leafOnly.Load(), n-1)
				}
			}
		})
	}
}

// TestGroupCacheSecondPathShares is the measurement: over shuffled
// records, half the sites are valid through root B as well, and B must be
// credited with exactly them.
func TestGroupCacheSecondPathShares(t *testing.T) {
	const n = 400
	p := newTwoPathPKI(t, "name constraint", n)
	v := newVerifier(p.store)
	rng := mrand.New(mrand.NewPCG(3, 4))
	credited := map[string]int{}
	for _, i := range rng.Perm(n) {
		for _, r := range v.rootNames(v.verify(p.chain(i), p.t)) {
			credited[r]++
		}
	}
	if credited["Root A"] != n || credited["Root B"] != n/2 {
		t.Fatalf("root A credited with %d of %d sites (want all), root B with %d (want %d)", credited["Root A"], n, credited["Root B"], n/2)
	}
}

// TestGroupCacheRandomPKIs is the property behind the group cache: over
// random webs of roots and cross-signed intermediates, some carrying name
// constraints, required policies, path-length limits or expiry, and roots
// with leaf-dependent constraints, every leaf gets, in any order, exactly
// the roots x509.Verify gives it.
func TestGroupCacheRandomPKIs(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(7, 8))
	now := time.Now()
	cached := 0
	for pki := range 30 {
		names := []string{"N0", "N1", "N2"}
		keys := map[string]*ecdsa.PrivateKey{}
		for _, n := range append([]string{"R0", "R1"}, names...) {
			keys[n] = newKey(t)
		}
		parent := func(n string) *x509.Certificate {
			return &x509.Certificate{Subject: pkix.Name{CommonName: n}, PublicKey: &keys[n].PublicKey}
		}
		store := newStore("random")
		for _, r := range []string{"R0", "R1"} {
			tmpl := caTemplate(r, now)
			c := mustCert(t, tmpl, tmpl, &keys[r].PublicKey, keys[r])
			if rng.IntN(4) == 0 {
				store.add(c, func(chain []*x509.Certificate) error {
					if !strings.HasSuffix(chain[0].DNSNames[0], ".a.test") {
						return errors.New("not for this name")
					}
					return nil
				})
			} else {
				store.add(c, nil)
			}
		}
		var inter [][]byte
		for range 3 + rng.IntN(4) {
			subj := names[rng.IntN(len(names))]
			iss := append([]string{"R0", "R1"}, names...)[rng.IntN(2+len(names))]
			if iss == subj {
				iss = "R0"
			}
			tmpl := caTemplate(subj, now)
			switch rng.IntN(8) {
			case 0:
				tmpl.PermittedDNSDomains = []string{"a.test"}
			case 1:
				tmpl.Policies = []x509.OID{mustOID(t, anyPolicy)}
				tmpl.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 36}, Critical: true, Value: []byte{0x30, 0x03, 0x80, 0x01, 0x00}}}
			case 2:
				tmpl.MaxPathLenZero = true
			case 3:
				tmpl.NotAfter = now.Add(-time.Minute)
			}
			if len(tmpl.Policies) == 0 && rng.IntN(3) > 0 {
				tmpl.Policies = []x509.OID{mustOID(t, anyPolicy)}
			}
			inter = append(inter, mustCert(t, tmpl, parent(iss), &keys[subj].PublicKey, keys[iss]).Raw)
		}
		kL := newKey(t)
		type leafCase struct {
			chain [][]byte
			want  []string
		}
		var cases []leafCase
		for i := range 16 {
			iss := names[i%len(names)]
			serial++
			name := fmt.Sprintf("l%d.%s.test", i, []string{"a", "b"}[rng.IntN(2)])
			lt := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
				NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			if rng.IntN(2) == 0 {
				lt.Policies = []x509.OID{mustOID(t, testPolicy)}
			}
			leaf := mustCert(t, lt, parent(iss), &kL.PublicKey, keys[iss])
			p := &twoPathPKI{inter: inter, store: store, leaves: []*x509.Certificate{leaf}, t: now}
			cases = append(cases, leafCase{p.chain(0), p.rootsByVerify(t, 0)})
		}
		for round := range 4 {
			v := newVerifier(store)
			for _, i := range rng.Perm(len(cases)) {
				if got := v.rootNames(v.verify(cases[i].chain, now)); !slices.Equal(got, cases[i].want) {
					t.Fatalf("PKI %d, round %d, leaf %d: roots %v, x509.Verify %v", pki, round, i, got, cases[i].want)
				}
			}
			cached += int(v.leafOnly.Load())
		}
	}
	if cached == 0 {
		t.Fatal("the group cache never answered: the property was not exercised")
	}
	t.Logf("%d leaves decided by the group cache", cached)
}
