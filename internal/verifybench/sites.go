package verifybench

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/internal/verify"
)

// Site is a testbed site shaped like one the Servo experiment opened.
// The experiment does not say what chains its sites served; each shape
// here is an assumption, typical of the site in early 2017 (docs/
// benchmarks.md, "Verification back ends", lists them): RSA-2048 leaves
// under RSA-2048 intermediates and roots for most, an ECDSA P-256 leaf
// under RSA CAs where the site served ECDSA to clients offering it, the
// issuing CA's usual hierarchy, and the root sent too where the site sent
// three certificates.
type Site struct {
	Name string `json:"name"`
	// Host is the name verified; Names are the leaf's first subject
	// alternative names, padded to SANs names in all (large shared
	// certificates carried dozens).
	Host  string   `json:"host"`
	Names []string `json:"-"`
	SANs  int      `json:"sans"`
	Shape Shape    `json:"shape"`
	// CAs name the testbed's CAs, root first (after the real ones
	// assumed); sites naming the same CA share it.
	CAs []string `json:"cas"`
}

func rsaShape(name string, sendRoot bool) Shape {
	return Shape{Name: name, Leaf: testbed.RSA2048, Intermediates: []testbed.KeyAlg{testbed.RSA2048}, Root: testbed.RSA2048, SendRoot: sendRoot}
}

// The assumed issuing hierarchies of 2017.
var (
	digicertSecure = []string{"DigiCert Global Root CA", "DigiCert SHA2 Secure Server CA"}
	digicertHA     = []string{"DigiCert High Assurance EV Root CA", "DigiCert SHA2 High Assurance Server CA"}
	digicertEV     = []string{"DigiCert High Assurance EV Root CA", "DigiCert SHA2 Extended Validation Server CA"}
	symantec       = []string{"VeriSign Class 3 Public Primary Certification Authority - G5", "Symantec Class 3 Secure Server CA - G4"}
	globalsign     = []string{"GlobalSign Root CA", "GlobalSign Organization Validation CA - SHA256 - G2"}
	googleCA       = []string{"GeoTrust Global CA", "Google Internet Authority G2"}
	comodo         = []string{"COMODO RSA Certification Authority", "COMODO RSA Domain Validation Secure Server CA"}
	letsencrypt    = []string{"DST Root CA X3", "Let's Encrypt Authority X3"}
)

// Sites are the Servo experiment's thirteen sites, in its order.
var Sites = []Site{
	{Name: "arstechnica", Host: "arstechnica.com", Names: []string{"arstechnica.com", "*.arstechnica.com"}, SANs: 2, Shape: rsaShape("rsa2048-3", false), CAs: symantec},
	{Name: "cnn", Host: "www.cnn.com", Names: []string{"*.cnn.com", "cnn.com"}, SANs: 40, Shape: rsaShape("rsa2048-3", false), CAs: globalsign},
	{Name: "duckduckgo", Host: "duckduckgo.com", Names: []string{"*.duckduckgo.com", "duckduckgo.com"}, SANs: 4, Shape: rsaShape("rsa2048-3", false), CAs: digicertSecure},
	{Name: "github", Host: "github.com", Names: []string{"github.com", "www.github.com"}, SANs: 2, Shape: rsaShape("rsa2048-3", false), CAs: digicertEV},
	{Name: "google", Host: "www.google.com", Names: []string{"*.google.com", "google.com"}, SANs: 60,
		Shape: Shape{Name: "p256-under-rsa", Leaf: testbed.ECDSAP256, Intermediates: []testbed.KeyAlg{testbed.RSA2048}, Root: testbed.RSA2048, SendRoot: true}, CAs: googleCA},
	{Name: "hackernews", Host: "news.ycombinator.com", Names: []string{"*.ycombinator.com", "ycombinator.com"}, SANs: 2,
		Shape: Shape{Name: "rsa4096-root", Leaf: testbed.RSA2048, Intermediates: []testbed.KeyAlg{testbed.RSA2048}, Root: RSA4096, SendRoot: true}, CAs: comodo},
	{Name: "reddit", Host: "www.reddit.com", Names: []string{"*.reddit.com", "reddit.com"}, SANs: 6, Shape: rsaShape("rsa2048-3", false), CAs: digicertSecure},
	{Name: "rust-lang", Host: "www.rust-lang.org", Names: []string{"www.rust-lang.org", "rust-lang.org"}, SANs: 2, Shape: rsaShape("rsa2048-3", false), CAs: letsencrypt},
	{Name: "servo", Host: "servo.org", Names: []string{"servo.org", "www.servo.org"}, SANs: 2, Shape: rsaShape("rsa2048-3", false), CAs: letsencrypt},
	{Name: "stackoverflow", Host: "stackoverflow.com", Names: []string{"*.stackexchange.com", "stackoverflow.com", "*.stackoverflow.com"}, SANs: 40, Shape: rsaShape("rsa2048-3", false), CAs: digicertHA},
	{Name: "twitter", Host: "twitter.com", Names: []string{"twitter.com", "www.twitter.com"}, SANs: 2, Shape: rsaShape("rsa2048-3", false), CAs: digicertHA},
	{Name: "washingtonpost", Host: "www.washingtonpost.com", Names: []string{"*.washingtonpost.com", "washingtonpost.com"}, SANs: 4, Shape: rsaShape("rsa2048-3", true), CAs: symantec},
	{Name: "wikipedia", Host: "en.wikipedia.org", Names: []string{"*.wikipedia.org", "wikipedia.org"}, SANs: 40,
		Shape: Shape{Name: "p256-under-rsa", Leaf: testbed.ECDSAP256, Intermediates: []testbed.KeyAlg{testbed.RSA2048}, Root: testbed.RSA2048}, CAs: globalsign},
}

// SiteNames lists the names of Sites.
func SiteNames() []string {
	var out []string
	for _, s := range Sites {
		out = append(out, s.Name)
	}
	return out
}

// LookupSite finds a site of Sites by name.
func LookupSite(name string) (Site, bool) {
	for _, s := range Sites {
		if s.Name == name {
			return s, true
		}
	}
	return Site{}, false
}

// dnsNames is the leaf's subject alternative names: Names, padded with
// further names under the site's domain to SANs in all.
func (s Site) dnsNames() []string {
	out := append([]string(nil), s.Names...)
	for i := len(out); i < s.SANs; i++ {
		out = append(out, fmt.Sprintf("s%d.%s", i, s.Names[len(s.Names)-1]))
	}
	return out
}

// testbedName marks a CA as the testbed's stand-in for a real one.
func testbedName(n string) string { return n + " (pkie testbed)" }

func runSites(ctx context.Context, c *Config, backends []verify.Backend, r *Report) error {
	h := newHierarchy()
	sites := make([]Site, 0, len(c.Sites))
	chains := make([]*Chain, 0, len(c.Sites))
	var extra [][]byte
	seen := map[string]bool{}
	for _, name := range c.Sites {
		s, _ := LookupSite(name)
		c.progress("site %s: issuing %s under %s", s.Name, s.Shape, s.CAs[len(s.CAs)-1])
		cas := make([]string, len(s.CAs))
		for i, n := range s.CAs {
			cas[i] = testbedName(n)
		}
		ch, err := h.issue(s.Shape, cas, s.dnsNames())
		if err != nil {
			return fmt.Errorf("verifybench: site %s: %w", s.Name, err)
		}
		if !seen[cas[0]] {
			seen[cas[0]] = true
			extra = append(extra, ch.Root.Cert.Raw)
		}
		sites = append(sites, s)
		chains = append(chains, ch)
	}
	// One store for every site, the testbed's roots added to the real
	// ones, as a browser's store holds every site's root.
	roots := c.Roots.With(extra...)
	r.RootCount = len(roots)
	for i, s := range sites {
		sr, err := runSite(ctx, c, backends, s, chains[i], roots)
		if err != nil {
			return fmt.Errorf("verifybench: site %s: %w", s.Name, err)
		}
		r.Sites = append(r.Sites, *sr)
	}
	return nil
}

func runSite(ctx context.Context, c *Config, backends []verify.Backend, s Site, ch *Chain, roots [][]byte) (*SiteResult, error) {
	o := testbed.SiteOptions{Leaves: []*testbed.Leaf{ch.Leaf}, MaxVersion: tls.VersionTLS12}
	if c.TLS13 {
		o.MaxVersion = 0
	}
	site, err := testbed.StartSiteWith(s.Host, o)
	if err != nil {
		return nil, err
	}
	defer site.Close()
	proxy, err := testbed.StartDelayProxy(site.Addr.String(), c.RTT)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	addr := proxy.Addr.String()

	sr := &SiteResult{Site: s.Name, Host: s.Host, Shape: s.Shape.String(), Sent: s.Shape.Sent(), Issuer: s.CAs[len(s.CAs)-1]}
	// One uncounted connection and verification per back end first: the
	// first use of a library (tables, decoders, a helper's pages) and of
	// the proxy's path is not what a site costs.
	_, first, err := connect(ctx, addr, s.Host, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting without verification: %w", err)
	}
	warmUp(ctx, backends, &verify.Request{Roots: roots, Chain: first, Host: s.Host, Time: time.Now(), Purpose: verify.Server})
	c.progress("site %s: %d connections per method over %v RTT", s.Name, c.Conns, c.RTT)
	// Methods in turn, each connection new: none (no verification, the
	// ceiling), then every back end verifying inside the handshake.
	var bare []time.Duration
	conns := make([][]time.Duration, len(backends))
	connErrs := make([]int, len(backends))
	firstErr := make([]string, len(backends))
	var captured [][]byte
	for range c.Conns {
		d, chain, err := connect(ctx, addr, s.Host, nil)
		if err != nil {
			return nil, fmt.Errorf("connecting without verification: %w", err)
		}
		bare = append(bare, d)
		captured = chain
		for i, b := range backends {
			d, _, err := connect(ctx, addr, s.Host, func(chain [][]byte) error {
				res, err := b.Verify(ctx, &verify.Request{Roots: roots, Chain: chain, Host: s.Host, Time: time.Now(), Purpose: verify.Server})
				if err != nil {
					return err
				}
				if !res.Valid {
					return fmt.Errorf("%s: %s: %s", b.Name(), res.Code, res.Reason)
				}
				return nil
			})
			if err != nil {
				if connErrs[i] == 0 {
					firstErr[i] = "connect: " + err.Error()
				}
				connErrs[i]++
				continue
			}
			conns[i] = append(conns[i], d)
		}
	}
	sr.Connect = verify.Summarize(bare)
	if len(captured) != s.Shape.Sent() {
		return nil, fmt.Errorf("the site sent %d certificates, its shape says %d", len(captured), s.Shape.Sent())
	}

	c.progress("site %s: %d verifications per back end", s.Name, c.N)
	req := &verify.Request{Roots: roots, Chain: captured, Host: s.Host, Time: time.Now(), Purpose: verify.Server}
	smp, err := verifyN(ctx, backends, req, c.N)
	if err != nil {
		return nil, err
	}
	for i, x := range smp {
		m := x.method()
		cs := verify.Summarize(conns[i])
		m.Connect = &cs
		if connErrs[i] > 0 {
			m.Errors += connErrs[i]
			if m.Error == "" {
				m.Error = firstErr[i]
			}
		}
		sr.Methods = append(sr.Methods, m)
	}
	return sr, nil
}

// connect opens a TCP connection to addr and completes a TLS handshake
// for host, check (if set) verifying the chain the server sent inside the
// handshake, where a client verifies it. It returns the time taken and
// the chain.
func connect(ctx context.Context, addr, host string, check func([][]byte) error) (time.Duration, [][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var chain [][]byte
	cfg := &tls.Config{
		ServerName: host,
		// Verification is check's, or none for the ceiling.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			for _, c := range cs.PeerCertificates {
				chain = append(chain, c.Raw)
			}
			if check != nil {
				return check(chain)
			}
			return nil
		},
	}
	start := time.Now()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, nil, err
	}
	tc := tls.Client(raw, cfg)
	err = tc.HandshakeContext(ctx)
	elapsed := time.Since(start)
	tc.Close()
	if err != nil {
		return 0, nil, err
	}
	return elapsed, chain, nil
}
