package overhead

import (
	"math"
	"sort"
	"time"
)

// Summary describes a sample.
type Summary struct {
	N      int     `json:"n"`
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"`
	P75    float64 `json:"p75"`
	P90    float64 `json:"p90"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Summarize returns v's mean and quantiles (linear interpolation between
// order statistics). An empty sample gives the zero Summary.
func Summarize(v []float64) Summary {
	if len(v) == 0 {
		return Summary{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return Summary{
		N: len(s), Mean: sum / float64(len(s)),
		Median: Quantile(s, 0.5), P75: Quantile(s, 0.75), P90: Quantile(s, 0.9),
		Min: s[0], Max: s[len(s)-1],
	}
}

// Quantile returns the q-quantile of sorted, interpolating linearly.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	frac := pos - float64(lo)
	return sorted[lo] + frac*(sorted[hi]-sorted[lo])
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// SiteAggregate is one site's overhead in one mode.
type SiteAggregate struct {
	Site       string `json:"site"`
	Mode       Mode   `json:"mode"`
	Pairs      int    `json:"pairs"`      // runs that loaded over both schemes
	Failed     int    `json:"failed"`     // runs where either scheme failed
	Redirected bool   `json:"redirected"` // some load's page was reached through a redirect

	HTTPMS  Summary `json:"http_ms"`  // download time per load
	HTTPSMS Summary `json:"https_ms"` // download time per load

	// OverheadMS and OverheadPct are the per-run differences HTTPS − HTTP
	// (in % of the run's HTTP time) over the paired runs.
	OverheadMS  Summary `json:"overhead_ms"`
	OverheadPct Summary `json:"overhead_pct"`
	// MeanOverheadMS is mean(HTTPS) − mean(HTTP): the thesis's T[w].
	MeanOverheadMS  float64 `json:"mean_overhead_ms"`
	MeanOverheadPct float64 `json:"mean_overhead_pct"`

	Requests             float64 `json:"requests"`                // per HTTPS load (page, redirects and objects)
	CSSObjects           float64 `json:"css_objects"`             // per HTTPS load: objects found in CSS
	OverheadPerRequestMS float64 `json:"overhead_per_request_ms"` // MeanOverheadMS / Requests
	Handshakes           float64 `json:"handshakes"`              // TLS handshakes per HTTPS load
	Conns                float64 `json:"conns"`                   // TCP connections per HTTPS load
	TLSPerHandshakeMS    float64 `json:"tls_per_handshake_ms"`    // mean TLS phase of one handshake
	HTTPBytes            float64 `json:"http_bytes"`              // mean page size over HTTP
	HTTPSBytes           float64 `json:"https_bytes"`             // mean page size over HTTPS
}

// Overall summarises the sites of one mode.
type Overall struct {
	Sites int `json:"sites"`
	// HTTPMeanMS and HTTPSMeanMS average the sites' mean download times;
	// OverheadMS is their difference and OverheadPct that difference in %
	// of HTTPMeanMS (the thesis abstract's 436 ms, 16.1%).
	HTTPMeanMS  float64 `json:"http_mean_ms"`
	HTTPSMeanMS float64 `json:"https_mean_ms"`
	OverheadMS  float64 `json:"overhead_ms"`
	OverheadPct float64 `json:"overhead_pct"`
	// SiteOverhead* are the distributions over sites of their mean
	// overheads (thesis Figures 6, 7, 10, 13); RunOverhead* pool every
	// paired run of every site (Figures 2, 3, 8, 9, 11, 12).
	SiteOverheadMS  Summary `json:"site_overhead_ms"`
	SiteOverheadPct Summary `json:"site_overhead_pct"`
	RunOverheadMS   Summary `json:"run_overhead_ms"`
	RunOverheadPct  Summary `json:"run_overhead_pct"`
}

// ModeAggregate is the overall overhead in one mode, over all responsive
// sites and over the sites none of whose page loads was redirected (the
// thesis's Figure 6 "ignoring redirection").
type ModeAggregate struct {
	Mode             Mode    `json:"mode"`
	All              Overall `json:"all"`
	WithoutRedirects Overall `json:"without_redirects"`
}

// Aggregates are the per-site and overall overheads.
type Aggregates struct {
	Sites []SiteAggregate `json:"sites"`
	Modes []ModeAggregate `json:"modes"`
}

// Aggregate computes the overheads of sites' loads for each mode. Only runs
// that loaded over both schemes count.
func Aggregate(sites []SiteResult, modes []Mode) Aggregates {
	var ag Aggregates
	for _, mode := range modes {
		var all, noRedir []SiteAggregate
		var runsAll, runsAllPct, runsNR, runsNRPct []float64
		for _, s := range sites {
			sa, runMS, runPct, ok := aggregateSite(s, mode)
			if !ok {
				continue
			}
			ag.Sites = append(ag.Sites, sa)
			all = append(all, sa)
			runsAll = append(runsAll, runMS...)
			runsAllPct = append(runsAllPct, runPct...)
			if !sa.Redirected {
				noRedir = append(noRedir, sa)
				runsNR = append(runsNR, runMS...)
				runsNRPct = append(runsNRPct, runPct...)
			}
		}
		ag.Modes = append(ag.Modes, ModeAggregate{
			Mode:             mode,
			All:              overall(all, runsAll, runsAllPct),
			WithoutRedirects: overall(noRedir, runsNR, runsNRPct),
		})
	}
	return ag
}

func aggregateSite(s SiteResult, mode Mode) (sa SiteAggregate, runMS, runPct []float64, ok bool) {
	sa = SiteAggregate{Site: s.Site, Mode: mode}
	type pair struct{ http, https *Load }
	runs := map[int]*pair{}
	var order []int
	for i := range s.Loads {
		l := &s.Loads[i]
		if l.Mode != mode {
			continue
		}
		p := runs[l.Run]
		if p == nil {
			p = &pair{}
			runs[l.Run] = p
			order = append(order, l.Run)
		}
		if l.Scheme == "https" {
			p.https = l
		} else {
			p.http = l
		}
	}
	var httpMS, httpsMS []float64
	var reqs, css, hs, conns, tlsMS, hb, hsb float64
	for _, r := range order {
		p := runs[r]
		if p.http == nil || p.https == nil || !p.http.OK() || !p.https.OK() {
			sa.Failed++
			continue
		}
		sa.Pairs++
		h, hS := msOf(p.http.Duration), msOf(p.https.Duration)
		httpMS = append(httpMS, h)
		httpsMS = append(httpsMS, hS)
		runMS = append(runMS, hS-h)
		if h > 0 {
			runPct = append(runPct, 100*(hS-h)/h)
		}
		if len(p.http.Redirects) > 0 || len(p.https.Redirects) > 0 {
			sa.Redirected = true
		}
		reqs += float64(p.https.Requests)
		css += float64(p.https.CSSObjects)
		hs += float64(p.https.Handshakes)
		conns += float64(p.https.Conns)
		tlsMS += msOf(p.https.Phases.TLS)
		hb += float64(p.http.Bytes)
		hsb += float64(p.https.Bytes)
	}
	if sa.Pairs == 0 {
		return sa, nil, nil, false
	}
	n := float64(sa.Pairs)
	sa.HTTPMS, sa.HTTPSMS = Summarize(httpMS), Summarize(httpsMS)
	sa.OverheadMS, sa.OverheadPct = Summarize(runMS), Summarize(runPct)
	sa.MeanOverheadMS = sa.HTTPSMS.Mean - sa.HTTPMS.Mean
	if sa.HTTPMS.Mean > 0 {
		sa.MeanOverheadPct = 100 * sa.MeanOverheadMS / sa.HTTPMS.Mean
	}
	sa.Requests, sa.CSSObjects, sa.Handshakes, sa.Conns = reqs/n, css/n, hs/n, conns/n
	if sa.Requests > 0 {
		sa.OverheadPerRequestMS = sa.MeanOverheadMS / sa.Requests
	}
	if hs > 0 {
		sa.TLSPerHandshakeMS = tlsMS / hs
	}
	sa.HTTPBytes, sa.HTTPSBytes = hb/n, hsb/n
	return sa, runMS, runPct, true
}

func overall(sites []SiteAggregate, runMS, runPct []float64) Overall {
	o := Overall{Sites: len(sites)}
	if len(sites) == 0 {
		return o
	}
	var ms, pct []float64
	for _, s := range sites {
		o.HTTPMeanMS += s.HTTPMS.Mean
		o.HTTPSMeanMS += s.HTTPSMS.Mean
		ms = append(ms, s.MeanOverheadMS)
		pct = append(pct, s.MeanOverheadPct)
	}
	o.HTTPMeanMS /= float64(len(sites))
	o.HTTPSMeanMS /= float64(len(sites))
	o.OverheadMS = o.HTTPSMeanMS - o.HTTPMeanMS
	if o.HTTPMeanMS > 0 {
		o.OverheadPct = 100 * o.OverheadMS / o.HTTPMeanMS
	}
	o.SiteOverheadMS, o.SiteOverheadPct = Summarize(ms), Summarize(pct)
	o.RunOverheadMS, o.RunOverheadPct = Summarize(runMS), Summarize(runPct)
	return o
}
