package roots

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/scan"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/probe"
)

func hexSum(c *x509.Certificate) string {
	s := sha256.Sum256(c.Raw)
	return hex.EncodeToString(s[:])
}

func scanWeb(t *testing.T, w *testbed.SynthWeb, vantage string, limit int) []byte {
	t.Helper()
	var out bytes.Buffer
	l := scan.NewListReader(bytes.NewReader(w.SiteList()))
	l.Limit = limit
	_, err := scan.Run(context.Background(), l, &out, scan.Options{
		Probe:       probe.Options{Lookup: w.Resolver.Lookup, AllowPrivate: true, Vantage: vantage, Timeout: 5 * time.Second},
		Concurrency: 8,
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func load(t *testing.T, store *Store, files ...[]byte) *Data {
	t.Helper()
	var in []Input
	for i, f := range files {
		in = append(in, Input{Name: fmt.Sprintf("scan%d", i), R: bytes.NewReader(f)})
	}
	d, err := Load(context.Background(), in, LoadOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// expected computes, from the synthetic web's ground truth alone, what
// the analysis of sites must say.
type expected struct {
	valid    int
	counts   map[string]int // root sha256 → sites
	order    []string       // ranking
	coverage []int          // sites covered by the top k, k = 1…
	minimal  int            // smallest root set reaching the target (brute force)
	orgs     map[string]int
}

func expect(w *testbed.SynthWeb, sites []testbed.SynthSite, target float64) expected {
	e := expected{counts: map[string]int{}, orgs: map[string]int{}}
	shas := make([]string, len(w.Roots))
	for i, r := range w.Roots {
		shas[i] = hexSum(r.Cert)
	}
	for _, s := range sites {
		if len(s.Anchors) == 0 {
			continue
		}
		e.valid++
		orgs := map[string]bool{}
		for _, a := range s.Anchors {
			e.counts[shas[a]]++
			orgs[w.Roots[a].Cert.Subject.Organization[0]] = true
		}
		for o := range orgs {
			e.orgs[o]++
		}
	}
	for sha := range e.counts {
		e.order = append(e.order, sha)
	}
	sort.Slice(e.order, func(a, b int) bool {
		if e.counts[e.order[a]] != e.counts[e.order[b]] {
			return e.counts[e.order[a]] > e.counts[e.order[b]]
		}
		return e.order[a] < e.order[b]
	})
	for k := 1; k <= len(e.order); k++ {
		top := map[string]bool{}
		for _, sha := range e.order[:k] {
			top[sha] = true
		}
		n := 0
		for _, s := range sites {
			for _, a := range s.Anchors {
				if top[shas[a]] {
					n++
					break
				}
			}
		}
		e.coverage = append(e.coverage, n)
	}
	need := int(math.Ceil(target*float64(e.valid) - 1e-9))
	e.minimal = len(w.Roots) + 1
	for mask := 0; mask < 1<<len(w.Roots); mask++ {
		n := 0
		for _, s := range sites {
			for _, a := range s.Anchors {
				if mask&(1<<a) != 0 {
					n++
					break
				}
			}
		}
		if size := popcount(mask); n >= need && size < e.minimal {
			e.minimal = size
		}
	}
	return e
}

func popcount(x int) int {
	n := 0
	for ; x > 0; x &= x - 1 {
		n++
	}
	return n
}

func checkView(t *testing.T, name string, v View, e expected, total int) {
	t.Helper()
	if v.SitesTotal != total || v.SitesValid != e.valid {
		t.Errorf("%s: total %d valid %d, want %d and %d", name, v.SitesTotal, v.SitesValid, total, e.valid)
	}
	if len(v.Ranking) != len(e.order) {
		t.Fatalf("%s: ranking has %d roots, want %d", name, len(v.Ranking), len(e.order))
	}
	for i, rc := range v.Ranking {
		if rc.SHA256 != e.order[i] || rc.Sites != e.counts[e.order[i]] {
			t.Errorf("%s: ranking[%d] = %s %d sites, want %s %d", name, i, rc.SHA256[:8], rc.Sites, e.order[i][:8], e.counts[e.order[i]])
		}
	}
	for i, p := range v.Coverage {
		if p.K != i+1 || p.Sites != e.coverage[i] || math.Abs(p.Share-float64(e.coverage[i])/float64(e.valid)) > 1e-12 {
			t.Errorf("%s: coverage[%d] = %+v, want k=%d sites=%d", name, i, p, i+1, e.coverage[i])
		}
	}
	if len(v.Organisations) != len(e.orgs) {
		t.Errorf("%s: %d organisations, want %d", name, len(v.Organisations), len(e.orgs))
	}
	for _, o := range v.Organisations {
		if o.Sites != e.orgs[o.Organisation] {
			t.Errorf("%s: organisation %s has %d sites, want %d", name, o.Organisation, o.Sites, e.orgs[o.Organisation])
		}
	}
	m := v.Minimal
	if m == nil || !m.Reachable || len(m.Roots) != e.minimal || m.Covered < m.Needed || !m.Optimal {
		t.Errorf("%s: minimal set %+v, want %d roots, optimal", name, m, e.minimal)
	}
}

func TestRecoversSyntheticWebExactly(t *testing.T) {
	w, err := testbed.StartSynthWeb(testbed.SynthWebOptions{Sites: 160, Roots: 6, Listeners: 2, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	file := scanWeb(t, w, "lab", 0)
	store, err := ParsePEM("synthetic", w.RootsPEM())
	if err != nil {
		t.Fatal(err)
	}
	d := load(t, store, file)
	rep := d.Analyze(0.8)

	if rep.Load.Records != len(w.Sites) || rep.Load.Malformed != 0 {
		t.Errorf("load stats %+v", rep.Load)
	}
	if rep.SitesAnswered != len(w.Sites) {
		t.Errorf("answered %d of %d", rep.SitesAnswered, len(w.Sites))
	}
	kinds := map[testbed.SiteKind]int{}
	for _, s := range w.Sites {
		kinds[s.Kind]++
	}
	wantInvalid := map[string]int{"expired": kinds[testbed.KindExpired], "unknown_authority": kinds[testbed.KindLeafOnly] + kinds[testbed.KindUntrusted]}
	if fmt.Sprint(rep.Invalid) != fmt.Sprint(wantInvalid) {
		t.Errorf("invalid = %v, want %v", rep.Invalid, wantInvalid)
	}
	checkView(t, "all sites", rep.View, expect(w, w.Sites, 0.8), len(w.Sites))

	// Cross-signed sites are anchored at both roots.
	r0, r1 := hexSum(w.Roots[0].Cert), hexSum(w.Roots[1].Cert)
	for _, s := range d.sites {
		var truth testbed.SynthSite
		for _, ws := range w.Sites {
			if ws.Domain == s.domain() {
				truth = ws
			}
		}
		if truth.Kind != testbed.KindCrossSigned {
			continue
		}
		var got []string
		for _, r := range d.v.sets[s.o.anchors] {
			got = append(got, hexSum(d.v.roots[r]))
		}
		sort.Strings(got)
		want := []string{r0, r1}
		sort.Strings(want)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("cross-signed %s anchored at %v, want roots 0 and 1", s.domain(), got)
		}
	}

	// Company dedupe: one site per family, the best-ranked.
	best := map[string]testbed.SynthSite{}
	var uniq []testbed.SynthSite
	for _, s := range w.Sites {
		if s.Company == "" {
			uniq = append(uniq, s)
			continue
		}
		if b, ok := best[s.Company]; !ok || s.Rank < b.Rank {
			best[s.Company] = s
		}
	}
	for _, s := range best {
		uniq = append(uniq, s)
	}
	if rep.Companies.Removed != len(w.Sites)-len(uniq) || rep.Companies.Removed == 0 {
		t.Errorf("company dedupe removed %d, want %d", rep.Companies.Removed, len(w.Sites)-len(uniq))
	}
	checkView(t, "unique companies", rep.Companies.View, expect(w, uniq, 0.8), len(uniq))

	// The exported minimal store validates exactly the sites it covers.
	var pemBuf bytes.Buffer
	if err := WritePEM(&pemBuf, rep.Minimal.Certificates()); err != nil {
		t.Fatal(err)
	}
	small, err := ParsePEM("minimal", pemBuf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(small.Certs) != len(rep.Minimal.Roots) {
		t.Fatalf("exported %d roots, minimal set has %d", len(small.Certs), len(rep.Minimal.Roots))
	}
	again := load(t, small, file).Analyze(0)
	if again.SitesValid != rep.Minimal.Covered {
		t.Errorf("exported store validates %d sites, minimal set claims %d", again.SitesValid, rep.Minimal.Covered)
	}
}

func TestVantageComparison(t *testing.T) {
	w, err := testbed.StartSynthWeb(testbed.SynthWebOptions{Sites: 60, Listeners: 1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	a := scanWeb(t, w, "amsterdam", 0)
	b := scanWeb(t, w, "boston", 30)
	store, _ := ParsePEM("synthetic", w.RootsPEM())
	rep := load(t, store, a, b).Analyze(0.8)
	if len(rep.Vantages) != 2 || rep.Vantages[0].Vantage != "amsterdam" || rep.Vantages[1].Vantage != "boston" {
		t.Fatalf("vantages %+v", rep.Vantages)
	}
	if rep.SitesTotal != len(w.Sites) || rep.Vantages[1].SitesTotal != 30 {
		t.Errorf("main view %d sites, boston %d", rep.SitesTotal, rep.Vantages[1].SitesTotal)
	}
	ag := rep.Agreement
	if ag == nil || ag.Sites != 30 || ag.SameChain != 30 || ag.SameAnchors != 30 || len(ag.Examples) != 0 {
		t.Errorf("agreement %+v", ag)
	}
}

func TestLoadTruncatedAndMalformed(t *testing.T) {
	w, err := testbed.StartSynthWeb(testbed.SynthWebOptions{Sites: 40, Listeners: 1, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	file := scanWeb(t, w, "x", 10)
	lines := bytes.SplitAfter(file, []byte("\n"))
	var bad []byte
	bad = append(bad, lines[0]...)
	bad = append(bad, "{not json\n"...)
	bad = append(bad, `{"rank":1,"domain":"z.test","chain":["!!!"],"error":""}`+"\n"...)
	for _, l := range lines[1:9] {
		bad = append(bad, l...)
	}
	bad = append(bad, lines[9][:len(lines[9])/2]...) // cut mid-record
	store, _ := ParsePEM("synthetic", w.RootsPEM())
	d := load(t, store, bad)
	st := d.Stats
	if st.Records != 9 || st.Malformed != 2 || len(st.Truncated) != 1 {
		t.Errorf("stats %+v", st)
	}
	if len(st.Problems) != 3 || !bytes.Contains([]byte(st.Problems[0]), []byte("scan0:2:")) {
		t.Errorf("problems %q", st.Problems)
	}
}

func TestDuplicatesPreferAnsweredThenLater(t *testing.T) {
	w, err := testbed.StartSynthWeb(testbed.SynthWebOptions{Sites: 40, Listeners: 1, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ok := scanWeb(t, w, "", 1)
	dom := w.Sites[0].Domain
	failed := []byte(fmt.Sprintf(`{"rank":1,"domain":%q,"chain":[],"error":"timeout: x"}`+"\n", dom))
	store, _ := ParsePEM("synthetic", w.RootsPEM())
	for _, order := range [][][]byte{{failed, ok}, {ok, failed}} {
		d := load(t, store, append(append([]byte{}, order[0]...), order[1]...))
		if len(d.sites) != 1 || d.sites[0].o.status == StatusFailed || d.Stats.Duplicates != 1 {
			t.Errorf("kept %+v (dups %d); want the answered record", d.sites, d.Stats.Duplicates)
		}
	}
}

func TestCompanyLabel(t *testing.T) {
	tests := map[string]string{
		"google.com":      "google",
		"google.co.uk":    "google",
		"www.google.fr":   "google",
		"maps.google.com": "google",
		"site00012.test":  "site00012",
		"example.com.au":  "example",
		"127.0.0.1":       "127.0.0.1",
		"com":             "com",
	}
	for in, want := range tests {
		if got := CompanyLabel(in); got != want {
			t.Errorf("CompanyLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMozillaStore(t *testing.T) {
	s, err := Mozilla()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Certs) < 100 {
		t.Errorf("Mozilla store has %d roots", len(s.Certs))
	}
}

func TestParsePEMErrors(t *testing.T) {
	if _, err := ParsePEM("x", []byte("nothing")); err == nil {
		t.Error("no certificates: want error")
	}
	if _, err := ParsePEM("x", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")); err == nil {
		t.Error("bad certificate: want error")
	}
}

// anchorsOf renders each site's outcome by root fingerprints, comparable
// across loads.
func anchorsOf(d *Data) map[string]string {
	out := map[string]string{}
	for _, s := range d.sites {
		var roots []string
		for _, r := range d.v.sets[s.o.anchors] {
			roots = append(roots, hexSum(d.v.roots[r])[:12])
		}
		sort.Strings(roots)
		out[s.key] = s.o.status.String() + fmt.Sprint(roots)
	}
	return out
}

func TestGroupCacheAgreesWithFullVerify(t *testing.T) {
	w, err := testbed.StartSynthWeb(testbed.SynthWebOptions{Sites: 120, Roots: 4, Listeners: 2, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	file := scanWeb(t, w, "", 0)
	// A second copy of each record a year later: every leaf has expired
	// by then, and the cache must not carry the earlier answer over.
	var later bytes.Buffer
	for _, l := range bytes.Split(bytes.TrimSpace(file), []byte("\n")) {
		r, err := scan.ParseRecord(l)
		if err != nil {
			t.Fatal(err)
		}
		r.Domain = "later." + r.Domain
		r.Time = r.Time.AddDate(1, 0, 0)
		b, _ := json.Marshal(r)
		later.Write(append(b, '\n'))
	}
	// A leaf naming a real intermediate as issuer but signed by another key
	// (a forgery): same group as the real sites, and must not validate.
	forger, err := testbed.NewRootCA(w.Intermediates[0].Cert.Subject.CommonName, testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(forger.Cert.RawSubject, w.Intermediates[0].Cert.RawSubject) {
		t.Fatal("forger's subject differs from the intermediate's")
	}
	forged, err := forger.Issue(testbed.LeafOptions{DNSNames: []string{"forged.test"}})
	if err != nil {
		t.Fatal(err)
	}
	fb, _ := json.Marshal(scan.Record{Rank: 1, Domain: "forged.test", Time: time.Now(), Chain: [][]byte{forged.Cert.Raw, w.Intermediates[0].Cert.Raw}})
	all := append(append(append([]byte{}, file...), later.Bytes()...), append(fb, '\n')...)
	store, _ := ParsePEM("synthetic", w.RootsPEM())
	// One worker: records are decided in file order, so the forged leaf
	// meets its group's cached paths.
	fast, err := Load(context.Background(), []Input{{Name: "f", R: bytes.NewReader(all)}}, LoadOptions{Store: store, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	full, err := Load(context.Background(), []Input{{Name: "f", R: bytes.NewReader(all)}}, LoadOptions{Store: store, exact: true})
	if err != nil {
		t.Fatal(err)
	}
	if fast.Stats.LeafChecks == 0 || full.Stats.LeafChecks != 0 {
		t.Errorf("leaf checks: fast %d, full %d", fast.Stats.LeafChecks, full.Stats.LeafChecks)
	}
	a, b := anchorsOf(fast), anchorsOf(full)
	if len(a) != 2*len(w.Sites)+1 {
		t.Fatalf("%d sites loaded, want %d", len(a), 2*len(w.Sites)+1)
	}
	if got := a["\x00\x00forged.test"]; got != "unknown_authority[]" {
		t.Errorf("forged leaf: %s, want unknown_authority", got)
	}
	expiredLater := 0
	for k, v := range b {
		if a[k] != v {
			t.Errorf("%q: group cache says %s, x509.Verify %s", k[2:], a[k], v)
		}
		if strings.HasPrefix(k[2:], "later.") && strings.HasPrefix(v, "expired") {
			expiredLater++
		}
	}
	if expiredLater != len(w.Sites) {
		t.Errorf("%d of %d sites expired a year later", expiredLater, len(w.Sites))
	}
}

func TestSystemStoreFromSSLCertFile(t *testing.T) {
	ca, err := testbed.NewRootCA("System Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/bundle.pem"
	if err := os.WriteFile(path, ca.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := System(func(k string) string {
		if k == "SSL_CERT_FILE" {
			return path
		}
		return ""
	})
	if err != nil || len(s.Certs) != 1 || s.Name != "system" {
		t.Fatalf("System() = %v, %v", s, err)
	}
	if _, err := System(func(string) string { return path + ".missing" }); err == nil {
		t.Error("missing bundle: want an error")
	}
}
