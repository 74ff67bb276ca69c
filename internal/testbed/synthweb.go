package testbed

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"time"

	"github.com/pkie/pkie/internal/testpki"
)

// SiteKind says how a synthetic site presents its chain.
type SiteKind string

// Kinds of synthetic site.
const (
	// KindPlain sends leaf and intermediate: the common case.
	KindPlain SiteKind = "plain"
	// KindSendRoot also sends the root, as some servers do.
	KindSendRoot SiteKind = "send-root"
	// KindCrossSigned is issued under root 1 and also sends root 1's
	// certificate cross-signed by root 0, so it has a valid path to each.
	KindCrossSigned SiteKind = "cross-signed"
	// KindLeafOnly sends the leaf alone. The intermediate exists but is not
	// sent, and nothing fetches it (no AIA chasing: the thesis used what
	// servers sent), so the site does not validate.
	KindLeafOnly SiteKind = "leaf-only"
	// KindUntrusted chains to a root that is not in the trust store.
	KindUntrusted SiteKind = "untrusted"
	// KindExpired has a leaf that expired a day before the web started.
	KindExpired SiteKind = "expired"
)

// SynthWebOptions shape a synthetic web. Zero values pick the defaults.
type SynthWebOptions struct {
	Sites     int     // total sites, company families included (default 200)
	Roots     int     // trusted root CAs (default 6, at least 2)
	ZipfS     float64 // root popularity ∝ 1/rank^ZipfS (default 1)
	Listeners int     // TLS listeners the sites share by SNI (default 4)
	// Counts of special sites (defaults 5 each; -1 means none).
	CrossSigned, SendRoot, LeafOnly, Untrusted, Expired int
	// NoCompanies drops the company families (google.com, google.co.uk,
	// … sharing a root, for company dedupe).
	NoCompanies bool
	Seed        uint64 // for the assignment of roots and ranks
	Alg         KeyAlg // leaf and CA keys (default ECDSA P-256)
}

// SynthSite is one site of a synthetic web and the truth about it.
type SynthSite struct {
	Rank   int
	Domain string
	Kind   SiteKind
	// Issuer is the index in SynthWeb.Roots of the hierarchy that issued
	// the leaf, or -1 for the untrusted hierarchy.
	Issuer int
	// Anchors are the trusted roots (indices into Roots) at which a valid
	// path from what the site sends ends; empty when it must not validate.
	Anchors []int
	// Company is the family name of company sites ("google"), else "".
	Company string
	Addr    netip.AddrPort
}

// SynthWeb is a population of HTTPS sites on loopback under several CA
// hierarchies with a known root distribution, the ground truth against
// which the chain scanner and root analysis are tested. Sites share a few
// listeners, each picking the certificate by SNI, so thousands of sites
// cost a few sockets.
type SynthWeb struct {
	// Roots are the trusted roots, most popular first by construction
	// (Zipf weights); Intermediates[i] is the issuing CA under Roots[i].
	Roots         []*CA
	Intermediates []*CA
	// CrossCert is Roots[1] cross-signed by Roots[0].
	CrossCert *x509.Certificate
	// UntrustedRoot is a root absent from RootsPEM.
	UntrustedRoot *CA
	Sites         []SynthSite // by rank
	Resolver      *Resolver
	Listeners     []netip.AddrPort

	servers []*http.Server
}

// StartSynthWeb builds the hierarchies, issues every site's certificate and
// starts the listeners.
func StartSynthWeb(o SynthWebOptions) (w *SynthWeb, err error) {
	if o.Sites <= 0 {
		o.Sites = 200
	}
	if o.Roots <= 0 {
		o.Roots = 6
	}
	if o.Roots < 2 {
		return nil, errors.New("testbed: a synthetic web needs at least 2 roots (for cross-signing)")
	}
	if o.ZipfS <= 0 {
		o.ZipfS = 1
	}
	if o.Listeners <= 0 {
		o.Listeners = 4
	}
	special := []*int{&o.CrossSigned, &o.SendRoot, &o.LeafOnly, &o.Untrusted, &o.Expired}
	nSpecial := 0
	for _, p := range special {
		if *p == 0 {
			*p = 5
		}
		if *p < 0 {
			*p = 0
		}
		nSpecial += *p
	}
	families := synthFamilies
	if o.NoCompanies {
		families = nil
	}
	nFamily := 0
	for _, f := range families {
		nFamily += len(f.domains)
	}
	nPlain := o.Sites - nSpecial - nFamily
	if nPlain < o.Roots {
		return nil, fmt.Errorf("testbed: %d sites leave %d plain ones for %d roots; ask for more sites", o.Sites, nPlain, o.Roots)
	}

	w = &SynthWeb{Resolver: NewResolver()}
	for i := range o.Roots {
		org := synthOrgs[i%len(synthOrgs)]
		r, err := newSynthRoot(fmt.Sprintf("%s Root CA %d", org, i), org, o.Alg)
		if err != nil {
			return nil, err
		}
		in, err := r.NewIntermediate(fmt.Sprintf("%s Issuing CA %d", org, i), o.Alg)
		if err != nil {
			return nil, err
		}
		w.Roots = append(w.Roots, r)
		w.Intermediates = append(w.Intermediates, in)
	}
	if w.CrossCert, err = w.Roots[0].CrossSign(w.Roots[1]); err != nil {
		return nil, err
	}
	if w.UntrustedRoot, err = newSynthRoot("Synth Private Root CA", "Synth Private", o.Alg); err != nil {
		return nil, err
	}
	untrustedInt, err := w.UntrustedRoot.NewIntermediate("Synth Private Issuing CA", o.Alg)
	if err != nil {
		return nil, err
	}

	// Plain sites go to roots by largest remainder on Zipf weights, so the
	// counts are fixed by the options alone.
	weights := make([]float64, o.Roots)
	var sum float64
	for i := range weights {
		weights[i] = 1 / math.Pow(float64(i+1), o.ZipfS)
		sum += weights[i]
	}
	counts := make([]int, o.Roots)
	type rem struct {
		i int
		f float64
	}
	var rems []rem
	given := 0
	for i, wt := range weights {
		exact := float64(nPlain) * wt / sum
		counts[i] = int(exact)
		given += counts[i]
		rems = append(rems, rem{i, exact - float64(counts[i])})
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].f > rems[b].f })
	for j := 0; given < nPlain; j++ {
		counts[rems[j%len(rems)].i]++
		given++
	}

	var sites []SynthSite
	for i, n := range counts {
		for range n {
			sites = append(sites, SynthSite{Kind: KindPlain, Issuer: i, Anchors: []int{i}})
		}
	}
	rng := mrand.New(mrand.NewPCG(o.Seed, 0x5eed))
	for j := range o.SendRoot {
		i := j % o.Roots
		sites = append(sites, SynthSite{Kind: KindSendRoot, Issuer: i, Anchors: []int{i}})
	}
	for range o.CrossSigned {
		sites = append(sites, SynthSite{Kind: KindCrossSigned, Issuer: 1, Anchors: []int{0, 1}})
	}
	for j := range o.LeafOnly {
		sites = append(sites, SynthSite{Kind: KindLeafOnly, Issuer: j % o.Roots})
	}
	for range o.Untrusted {
		sites = append(sites, SynthSite{Kind: KindUntrusted, Issuer: -1})
	}
	for j := range o.Expired {
		sites = append(sites, SynthSite{Kind: KindExpired, Issuer: j % o.Roots})
	}
	for fi, f := range families {
		i := fi % o.Roots
		for _, d := range f.domains {
			sites = append(sites, SynthSite{Kind: KindPlain, Issuer: i, Anchors: []int{i}, Company: f.name, Domain: d})
		}
	}
	rng.Shuffle(len(sites), func(a, b int) { sites[a], sites[b] = sites[b], sites[a] })

	certs := make(map[string]*tls.Certificate, len(sites))
	for k := range sites {
		s := &sites[k]
		s.Rank = k + 1
		if s.Domain == "" {
			s.Domain = fmt.Sprintf("site%05d.test", s.Rank)
		}
		lo := LeafOptions{DNSNames: []string{s.Domain}, Alg: o.Alg}
		issuer := untrustedInt
		if s.Issuer >= 0 {
			issuer = w.Intermediates[s.Issuer]
		}
		switch s.Kind {
		case KindSendRoot:
			lo.SendRoot = true
		case KindLeafOnly:
			lo.OmitIntermediates = true
		case KindExpired:
			lo.NotBefore = time.Now().Add(-72 * time.Hour)
			lo.NotAfter = time.Now().Add(-24 * time.Hour)
		}
		leaf, err := issuer.Issue(lo)
		if err != nil {
			return nil, err
		}
		if s.Kind == KindCrossSigned {
			leaf.Chain = append(leaf.Chain, w.CrossCert.Raw)
		}
		c := leaf.TLSCertificate()
		certs[s.Domain] = &c
	}

	defer func() {
		if err != nil {
			w.Close()
		}
	}()
	getCert := func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if c, ok := certs[hi.ServerName]; ok {
			return c, nil
		}
		return nil, fmt.Errorf("synthetic web: no site %q", hi.ServerName)
	}
	for range o.Listeners {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("testbed: synthetic web: %w", err)
		}
		srv := &http.Server{
			Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(rw, "<html><body><h1>%s</h1></body></html>\n", r.TLS.ServerName)
			}),
			ReadHeaderTimeout: 5 * time.Second,
			ErrorLog:          discardLog(),
			TLSConfig:         &tls.Config{GetCertificate: getCert},
		}
		w.servers = append(w.servers, srv)
		w.Listeners = append(w.Listeners, ln.Addr().(*net.TCPAddr).AddrPort())
		go srv.ServeTLS(ln, "", "")
	}
	for k := range sites {
		sites[k].Addr = w.Listeners[k%len(w.Listeners)]
		w.Resolver.Set(sites[k].Domain, sites[k].Addr)
	}
	w.Sites = sites
	return w, nil
}

// synthOrgs name the CA organisations; roots beyond their number reuse
// them, so an organisation can own several roots.
var synthOrgs = []string{"Synth Alpha", "Synth Beta", "Synth Gamma", "Synth Delta", "Synth Epsilon"}

// synthFamilies are companies with one registrable domain per country, all
// under one root: the thesis's google.com and google.co.uk.
var synthFamilies = []struct {
	name    string
	domains []string
}{
	{"google", []string{"google.com", "google.co.uk", "google.de", "www.google.fr"}},
	{"amazon", []string{"amazon.com", "amazon.co.jp", "amazon.de"}},
}

// newSynthRoot makes a self-signed root whose subject has the given common
// name and organisation (CA organisation ranking groups by the latter).
func newSynthRoot(cn, org string, alg KeyAlg) (*CA, error) {
	return testpki.NewRootCAWithSubject(pkix.Name{CommonName: cn, Organization: []string{org}}, alg)
}

// RootsPEM returns the trusted roots as a PEM trust store.
func (w *SynthWeb) RootsPEM() []byte {
	var b bytes.Buffer
	for _, r := range w.Roots {
		pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Cert.Raw})
	}
	return b.Bytes()
}

// SiteList returns the sites as a Tranco-style CSV list ("rank,domain").
func (w *SynthWeb) SiteList() []byte {
	var b bytes.Buffer
	for _, s := range w.Sites {
		fmt.Fprintf(&b, "%d,%s\n", s.Rank, s.Domain)
	}
	return b.Bytes()
}

// ResolveFile returns "host address" lines mapping every site to its
// listener, for tools run outside this process ("pkie scan --resolve-file").
func (w *SynthWeb) ResolveFile() []byte {
	var b bytes.Buffer
	for _, s := range w.Sites {
		fmt.Fprintf(&b, "%s %s\n", s.Domain, s.Addr)
	}
	return b.Bytes()
}

// RootSiteCounts returns, for each trusted root, how many sites have a
// valid path ending at it (a cross-signed site counts for both roots).
func (w *SynthWeb) RootSiteCounts() []int {
	n := make([]int, len(w.Roots))
	for _, s := range w.Sites {
		for _, a := range s.Anchors {
			n[a]++
		}
	}
	return n
}

// ValidSites returns how many sites validate against the trusted roots.
func (w *SynthWeb) ValidSites() int {
	n := 0
	for _, s := range w.Sites {
		if len(s.Anchors) > 0 {
			n++
		}
	}
	return n
}

// Close stops every listener.
func (w *SynthWeb) Close() error {
	var errs []error
	for _, s := range w.servers {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
