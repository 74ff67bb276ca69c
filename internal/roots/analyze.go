// Package roots answers the thesis's question of how few root CAs the web
// needs. It loads chain scans (package scan), builds every valid path from
// each site's chain to a trust store — keeping all of them when
// cross-signing gives several, since a site then works under any of its
// anchors — and from the sites' anchor sets derives the ranking of roots
// and CA organisations, the top-k coverage curve, the smallest root set
// reaching a given coverage (greedy set cover, with a lower bound and, when
// the instance is small enough, an exhaustive check of optimality), the
// same after keeping one site per company, and a comparison of vantages.
//
// Sites, not records, are the unit: one site per domain in the main view
// (per domain and vantage in the vantage views). A site counts as valid when
// at least one path verifies at the time it was scanned, with no host name
// check; its anchors are the roots those paths end at.
package roots

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// RootCount is one root CA and the sites anchored at it.
type RootCount struct {
	Subject      string  `json:"subject"`
	Organisation string  `json:"organisation"`
	SHA256       string  `json:"sha256"`
	Sites        int     `json:"sites"`
	Share        float64 `json:"share"` // of sites_valid

	id int32
}

// OrgCount is one CA organisation (the root's subject O) and its sites. A
// site anchored at two roots of one organisation counts once.
type OrgCount struct {
	Organisation string  `json:"organisation"`
	Sites        int     `json:"sites"`
	Share        float64 `json:"share"`
	Roots        int     `json:"roots"`
}

// CoveragePoint is one point of the coverage curve: the sites that
// validate when only the k most popular roots are trusted.
type CoveragePoint struct {
	K     int     `json:"k"`
	Sites int     `json:"sites"`
	Share float64 `json:"share"` // of sites_valid
}

// MinimalSet is the smallest root set found reaching a target coverage.
type MinimalSet struct {
	Target    float64     `json:"target"`
	Needed    int         `json:"sites_needed"`
	Reachable bool        `json:"reachable"`
	Roots     []RootCount `json:"roots"` // in greedy order; Sites = sites it added
	Covered   int         `json:"sites_covered"`
	Share     float64     `json:"share"`
	// TopK is the smallest k whose top-k prefix of the ranking reaches
	// the target (the coverage curve's answer).
	TopK int `json:"top_k"`
	// LowerBound is the least k such that the k largest root counts sum
	// to the target: no k-root set can do better than the sum of its
	// members' counts.
	LowerBound int  `json:"lower_bound"`
	Optimal    bool `json:"optimal"`
	// Method says how optimality was decided.
	Method string `json:"method"`

	certs []*x509.Certificate
}

// View is the analysis of one population of sites.
type View struct {
	SitesTotal    int             `json:"sites_total"`    // distinct sites in the scans
	SitesAnswered int             `json:"sites_answered"` // handshake gave a chain
	SitesValid    int             `json:"sites_valid"`    // some path to the store
	Invalid       map[string]int  `json:"invalid"`        // answered but not valid, by reason
	Ranking       []RootCount     `json:"ranking"`
	Organisations []OrgCount      `json:"organisations"`
	Coverage      []CoveragePoint `json:"coverage"`
	Minimal       *MinimalSet     `json:"minimal,omitempty"`
}

// CompanyView is the view after keeping one site per company.
type CompanyView struct {
	View
	Removed int `json:"sites_removed"` // sites dropped as another of a company's
}

// VantageView is the view of one vantage's scan.
type VantageView struct {
	Vantage string `json:"vantage"`
	View
}

// Agreement compares what vantages saw of the sites they all answered.
type Agreement struct {
	Sites       int      `json:"sites"`        // domains answered by two or more vantages
	SameChain   int      `json:"same_chain"`   // every vantage got the same chain
	SameAnchors int      `json:"same_anchors"` // every vantage's chain had the same anchors
	Examples    []string `json:"differing_examples,omitempty"`
}

// Report is everything pkie roots prints.
type Report struct {
	TrustStore      string    `json:"trust_store"`
	TrustStoreRoots int       `json:"trust_store_roots"`
	Load            LoadStats `json:"load"`
	View
	Companies *CompanyView  `json:"company_dedupe"`
	Vantages  []VantageView `json:"vantages,omitempty"`
	Agreement *Agreement    `json:"agreement,omitempty"`
}

// Analyze derives the report. coverage is the target of the minimal set
// (0.8 in the thesis); 0 skips it.
func (d *Data) Analyze(coverage float64) *Report {
	rep := &Report{TrustStore: d.Store.Name, TrustStoreRoots: len(d.Store.Certs), Load: d.Stats}
	main := d.mainSites()
	rep.View = d.view(main, coverage)
	uniq, removed := d.dedupe(main)
	rep.Companies = &CompanyView{View: d.view(uniq, coverage), Removed: removed}
	if len(d.Vantages) > 1 {
		per := make([][]int32, len(d.Vantages))
		for i := range d.sites {
			per[d.sites[i].vantage] = append(per[d.sites[i].vantage], int32(i))
		}
		for _, vi := range d.sortedVantages() {
			rep.Vantages = append(rep.Vantages, VantageView{Vantage: d.Vantages[vi], View: d.view(per[vi], coverage)})
		}
		rep.Agreement = d.agreement()
	}
	return rep
}

// Certificates returns the roots of the set, for export.
func (m *MinimalSet) Certificates() []*x509.Certificate { return m.certs }

func (d *Data) sortedVantages() []uint16 {
	ids := make([]uint16, len(d.Vantages))
	for i := range ids {
		ids[i] = uint16(i)
	}
	sort.Slice(ids, func(a, b int) bool { return d.Vantages[ids[a]] < d.Vantages[ids[b]] })
	return ids
}

// mainSites picks one record per domain: with several vantages, the
// answered record of the first vantage by name (or the first one's failure).
func (d *Data) mainSites() []int32 {
	if len(d.Vantages) <= 1 {
		out := make([]int32, len(d.sites))
		for i := range out {
			out[i] = int32(i)
		}
		return out
	}
	order := make([]int, len(d.Vantages))
	for pos, vi := range d.sortedVantages() {
		order[vi] = pos
	}
	best := map[string]int32{}
	for i := range d.sites {
		s := &d.sites[i]
		j, ok := best[s.domain()]
		if !ok {
			best[s.domain()] = int32(i)
			continue
		}
		o := &d.sites[j]
		sOK, oOK := s.o.status != StatusFailed, o.o.status != StatusFailed
		if (sOK && !oOK) || (sOK == oOK && order[s.vantage] < order[o.vantage]) {
			best[s.domain()] = int32(i)
		}
	}
	out := make([]int32, 0, len(best))
	for _, i := range best {
		out = append(out, i)
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

// CompanyLabel names the company a domain belongs to: the label of its
// registrable domain left of the public suffix, so google.com and
// www.google.co.uk are both "google". IP literals and names the suffix
// list cannot split are their own company.
func CompanyLabel(domain string) string {
	etld1, err := publicsuffix.EffectiveTLDPlusOne(domain)
	if err != nil {
		return domain
	}
	suffix, _ := publicsuffix.PublicSuffix(etld1)
	label := strings.TrimSuffix(etld1, "."+suffix)
	if label == "" || label == etld1 {
		return etld1
	}
	return label
}

// dedupe keeps one site per company: the best-ranked one that answered
// (unranked sites last), or the best-ranked one if none did.
func (d *Data) dedupe(sites []int32) ([]int32, int) {
	best := map[string]int32{}
	better := func(a, b *site) bool {
		aOK, bOK := a.o.status != StatusFailed, b.o.status != StatusFailed
		if aOK != bOK {
			return aOK
		}
		ra, rb := uint32(a.rank-1), uint32(b.rank-1) // rank 0 (unknown) sorts last
		if ra != rb {
			return ra < rb
		}
		return a.domain() < b.domain()
	}
	for _, i := range sites {
		s := &d.sites[i]
		label := CompanyLabel(s.domain())
		j, ok := best[label]
		if !ok || better(s, &d.sites[j]) {
			best[label] = i
		}
	}
	out := make([]int32, 0, len(best))
	for _, i := range best {
		out = append(out, i)
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out, len(sites) - len(out)
}

func (d *Data) agreement() *Agreement {
	by := map[string][]int32{}
	for i := range d.sites {
		if d.sites[i].o.status != StatusFailed {
			by[d.sites[i].domain()] = append(by[d.sites[i].domain()], int32(i))
		}
	}
	a := &Agreement{}
	var differ []string
	for dom, idx := range by {
		if len(idx) < 2 {
			continue
		}
		a.Sites++
		sameChain, sameAnch := true, true
		first := d.sites[idx[0]].o
		for _, i := range idx[1:] {
			o := d.sites[i].o
			if o.chain != first.chain {
				sameChain = false
			}
			if o.status != first.status || o.anchors != first.anchors {
				sameAnch = false
			}
		}
		if sameChain {
			a.SameChain++
		}
		if sameAnch {
			a.SameAnchors++
		} else {
			differ = append(differ, dom)
		}
	}
	sort.Strings(differ)
	for _, dom := range differ[:min(len(differ), 10)] {
		var parts []string
		for _, i := range by[dom] {
			s := &d.sites[i]
			parts = append(parts, fmt.Sprintf("%s=%s", d.Vantages[s.vantage], d.describe(s.o)))
		}
		sort.Strings(parts)
		a.Examples = append(a.Examples, dom+": "+strings.Join(parts, ", "))
	}
	return a
}

func (d *Data) describe(o outcome) string {
	if o.status != StatusValid {
		return o.status.String()
	}
	var names []string
	for _, r := range d.v.sets[o.anchors] {
		names = append(names, d.v.roots[r].Subject.CommonName)
	}
	return strings.Join(names, "+")
}

func organisation(c *x509.Certificate) string {
	if len(c.Subject.Organization) > 0 && c.Subject.Organization[0] != "" {
		return c.Subject.Organization[0]
	}
	if c.Subject.CommonName != "" {
		return c.Subject.CommonName
	}
	return c.Subject.String()
}

func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// view computes the tables for a population of sites.
func (d *Data) view(sites []int32, coverage float64) View {
	v := View{SitesTotal: len(sites), Invalid: map[string]int{}}
	weight := make([]int, len(d.v.sets))
	for _, i := range sites {
		o := d.sites[i].o
		switch o.status {
		case StatusFailed:
			continue
		case StatusValid:
			v.SitesValid++
			weight[o.anchors]++
		default:
			v.Invalid[o.status.String()]++
		}
		v.SitesAnswered++
	}
	count := make([]int, len(d.v.roots))
	for set, w := range weight {
		for _, r := range d.v.sets[set] {
			count[r] += w
		}
	}
	for r, n := range count {
		if n == 0 {
			continue
		}
		c := d.v.roots[r]
		sum := sha256.Sum256(c.Raw)
		v.Ranking = append(v.Ranking, RootCount{
			Subject: c.Subject.String(), Organisation: organisation(c), SHA256: hex.EncodeToString(sum[:]),
			Sites: n, Share: share(n, v.SitesValid), id: int32(r),
		})
	}
	sort.Slice(v.Ranking, func(a, b int) bool {
		if v.Ranking[a].Sites != v.Ranking[b].Sites {
			return v.Ranking[a].Sites > v.Ranking[b].Sites
		}
		return v.Ranking[a].SHA256 < v.Ranking[b].SHA256
	})
	pos := make([]int, len(d.v.roots))
	for p, rc := range v.Ranking {
		pos[rc.id] = p
	}

	// Coverage: a site joins at the rank of its best-ranked anchor.
	joins := make([]int, len(v.Ranking)+1)
	orgSites := map[string]int{}
	orgRoots := map[string]int{}
	for set, w := range weight {
		if w == 0 || len(d.v.sets[set]) == 0 {
			continue
		}
		m := len(v.Ranking)
		seen := map[string]bool{}
		for _, r := range d.v.sets[set] {
			m = min(m, pos[r])
			org := organisation(d.v.roots[r])
			if !seen[org] {
				seen[org] = true
				orgSites[org] += w
			}
		}
		joins[m] += w
	}
	covered := 0
	for k := range v.Ranking {
		covered += joins[k]
		v.Coverage = append(v.Coverage, CoveragePoint{K: k + 1, Sites: covered, Share: share(covered, v.SitesValid)})
	}
	for _, rc := range v.Ranking {
		orgRoots[rc.Organisation]++
	}
	for org, n := range orgSites {
		v.Organisations = append(v.Organisations, OrgCount{Organisation: org, Sites: n, Share: share(n, v.SitesValid), Roots: orgRoots[org]})
	}
	sort.Slice(v.Organisations, func(a, b int) bool {
		if v.Organisations[a].Sites != v.Organisations[b].Sites {
			return v.Organisations[a].Sites > v.Organisations[b].Sites
		}
		return v.Organisations[a].Organisation < v.Organisations[b].Organisation
	})
	if coverage > 0 {
		v.Minimal = d.minimal(v, weight, coverage)
	}
	return v
}

// exhaustiveBudget bounds the nodes the optimality search may visit.
const exhaustiveBudget = 5_000_000

// minimal finds a small root set covering coverage×sites_valid sites by
// greedy partial set cover over the sites' anchor sets: repeatedly trust
// the root that validates the most not-yet-valid sites. Greedy is within a
// factor H(n) ≤ ln n + 1 of optimal in general; here it is compared with a
// lower bound and, when the gap is not closed by it, with a bounded
// exhaustive search.
func (d *Data) minimal(v View, weight []int, target float64) *MinimalSet {
	m := &MinimalSet{Target: target}
	m.Needed = int(math.Ceil(target*float64(v.SitesValid) - 1e-9))
	if m.Needed <= 0 {
		m.Reachable, m.Optimal, m.Method = true, true, "nothing to cover"
		return m
	}
	for _, p := range v.Coverage {
		if p.Sites >= m.Needed {
			m.TopK = p.K
			break
		}
	}
	sum := 0
	for k, rc := range v.Ranking {
		sum += rc.Sites
		if sum >= m.Needed {
			m.LowerBound = k + 1
			break
		}
	}
	type wset struct {
		roots []int32
		w     int
	}
	var sets []wset
	for s, w := range weight {
		if w > 0 && len(d.v.sets[s]) > 0 {
			sets = append(sets, wset{d.v.sets[s], w})
		}
	}
	pos := map[int32]int{}
	for p, rc := range v.Ranking {
		pos[rc.id] = p
	}
	covered := make([]bool, len(sets))
	chosen := map[int32]bool{}
	for m.Covered < m.Needed {
		gain := make([]int, len(v.Ranking))
		for i, s := range sets {
			if covered[i] {
				continue
			}
			for _, r := range s.roots {
				gain[pos[r]] += s.w
			}
		}
		best := -1
		for p, g := range gain {
			if g > 0 && !chosen[v.Ranking[p].id] && (best < 0 || g > gain[best]) {
				best = p
			}
		}
		if best < 0 {
			break
		}
		rc := v.Ranking[best]
		chosen[rc.id] = true
		for i, s := range sets {
			if covered[i] {
				continue
			}
			for _, r := range s.roots {
				if r == rc.id {
					covered[i] = true
					break
				}
			}
		}
		rc.Sites = gain[best]
		rc.Share = share(gain[best], v.SitesValid)
		m.Roots = append(m.Roots, rc)
		m.certs = append(m.certs, d.v.roots[rc.id])
		m.Covered += gain[best]
	}
	m.Share = share(m.Covered, v.SitesValid)
	m.Reachable = m.Covered >= m.Needed
	if !m.Reachable {
		m.Method = "target not reachable with the store's roots"
		return m
	}
	if len(m.Roots) == m.LowerBound {
		m.Optimal, m.Method = true, "greedy size equals the lower bound"
		return m
	}
	// Look for smaller sets than greedy's by branch and bound, shrinking
	// until none exists (optimal), the lower bound is met, or the budget
	// runs out.
	counts := make([]int, len(v.Ranking))
	hits := make([][]int, len(v.Ranking))
	for p, rc := range v.Ranking {
		counts[p] = rc.Sites
	}
	for i, s := range sets {
		for _, r := range s.roots {
			hits[pos[r]] = append(hits[pos[r]], i)
		}
	}
	weights := make([]int, len(sets))
	for i, s := range sets {
		weights[i] = s.w
	}
	greedy := len(m.Roots)
	m.Method = "greedy"
	for k := len(m.Roots) - 1; ; k-- {
		if k < m.LowerBound {
			m.Optimal = true
			m.Method = fmt.Sprintf("exhaustive search beat greedy (%d roots); the set meets the lower bound", greedy)
			break
		}
		picked, found, complete := smallerCover(k, m.Needed, counts, hits, weights)
		if !found {
			if complete {
				m.Optimal = true
				if len(m.Roots) == greedy {
					m.Method = fmt.Sprintf("greedy; exhaustive search: no set of %d roots reaches the target", k)
				} else {
					m.Method = fmt.Sprintf("exhaustive search beat greedy (%d roots); no set of %d reaches the target", greedy, k)
				}
			} else {
				m.Method += fmt.Sprintf("; optimum between %d and %d roots (search budget exhausted)", m.LowerBound, len(m.Roots))
			}
			break
		}
		m.Roots, m.certs, m.Covered = nil, nil, 0
		done := make([]bool, len(sets))
		for _, p := range picked {
			rc := v.Ranking[p]
			add := 0
			for _, i := range hits[p] {
				if !done[i] {
					done[i] = true
					add += weights[i]
				}
			}
			rc.Sites, rc.Share = add, share(add, v.SitesValid)
			m.Roots = append(m.Roots, rc)
			m.certs = append(m.certs, d.v.roots[rc.id])
			m.Covered += add
		}
		m.Share = share(m.Covered, v.SitesValid)
	}
	return m
}

// smallerCover looks for at most k candidates (indexed by rank, counts
// descending) whose hit sets cover need weight. complete is false when
// the node budget ran out before the search finished.
func smallerCover(k, need int, counts []int, hits [][]int, weights []int) (picked []int, found, complete bool) {
	n := len(counts)
	cover := make([]int, len(weights)) // chosen roots covering each set
	budget := exhaustiveBudget
	var stack []int
	var rec func(start, left, have int) bool
	rec = func(start, left, have int) bool {
		if have >= need {
			picked = append([]int(nil), stack...)
			return true
		}
		if left == 0 || budget <= 0 {
			return false
		}
		budget--
		// Bound: the remaining picks add at most the largest counts left.
		bound := have
		for p := start; p < n && p < start+left; p++ {
			bound += counts[p]
		}
		if bound < need {
			return false
		}
		for p := start; p < n; p++ {
			add := 0
			for _, i := range hits[p] {
				if cover[i] == 0 {
					add += weights[i]
				}
				cover[i]++
			}
			stack = append(stack, p)
			ok := rec(p+1, left-1, have+add)
			stack = stack[:len(stack)-1]
			for _, i := range hits[p] {
				cover[i]--
			}
			if ok {
				return true
			}
			// Candidates after p count at most counts[p+1] each.
			if p+1 < n && have+counts[p+1]*left < need {
				break
			}
		}
		return false
	}
	if k > 0 && rec(0, k, 0) {
		return picked, true, true
	}
	return nil, false, budget > 0
}

// Root returns the certificate of a ranked root by SHA-256 hex.
func (d *Data) Root(sha string) *x509.Certificate {
	for _, c := range d.v.roots {
		sum := sha256.Sum256(c.Raw)
		if hex.EncodeToString(sum[:]) == sha {
			return c
		}
	}
	return nil
}
