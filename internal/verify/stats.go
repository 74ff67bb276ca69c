package verify

import (
	"slices"
	"time"
)

// Summary is a sample of durations reduced to the figures the report
// gives: its size, mean, median, 99th percentile and extremes.
type Summary struct {
	N    int           `json:"n"`
	Mean time.Duration `json:"mean_ns"`
	P50  time.Duration `json:"p50_ns"`
	P99  time.Duration `json:"p99_ns"`
	Min  time.Duration `json:"min_ns"`
	Max  time.Duration `json:"max_ns"`
}

// Summarize reduces d. Percentiles are nearest-rank (the smallest sample
// at or above the given share of the sample), so every figure reported is
// one that was measured. An empty sample gives the zero Summary.
func Summarize(d []time.Duration) Summary {
	if len(d) == 0 {
		return Summary{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return Summary{
		N:    len(s),
		Mean: sum / time.Duration(len(s)),
		P50:  percentile(s, 50),
		P99:  percentile(s, 99),
		Min:  s[0],
		Max:  s[len(s)-1],
	}
}

// percentile returns the nearest-rank p-th percentile of sorted s.
func percentile(s []time.Duration, p int) time.Duration {
	// rank = ceil(p/100 * n), 1-based.
	rank := (p*len(s) + 99) / 100
	if rank < 1 {
		rank = 1
	}
	return s[rank-1]
}

// PhaseSummary is a back end's phases summarized over repeated
// verifications of one request. Parallel is go-parallel's alone.
type PhaseSummary struct {
	Roots     Summary  `json:"roots"`
	Chain     Summary  `json:"chain"`
	Parallel  *Summary `json:"parallel,omitempty"`
	Verify    Summary  `json:"verify"`
	Hostname  Summary  `json:"hostname"`
	Total     Summary  `json:"total"`
	RoundTrip Summary  `json:"round_trip"`
}

// Samples collects the timings of repeated verifications, 56 bytes a
// result: the verdicts are the caller's to keep.
type Samples struct {
	roots, chain, parallel, verify, hostname, total, rtt []time.Duration
}

// Add records r's phases and round trip.
func (s *Samples) Add(r Result) {
	p := r.Phases
	s.roots = append(s.roots, p.Roots)
	s.chain = append(s.chain, p.Chain)
	s.parallel = append(s.parallel, p.Parallel)
	s.verify = append(s.verify, p.Verify)
	s.hostname = append(s.hostname, p.Hostname)
	s.total = append(s.total, p.Total())
	s.rtt = append(s.rtt, r.RoundTrip)
}

// Len is the number of results added.
func (s *Samples) Len() int { return len(s.roots) }

// Summary summarizes every phase; parallel says whether the back end has
// a parallel phase (go-parallel) to report.
func (s *Samples) Summary(parallel bool) PhaseSummary {
	ps := PhaseSummary{Roots: Summarize(s.roots), Chain: Summarize(s.chain), Verify: Summarize(s.verify),
		Hostname: Summarize(s.hostname), Total: Summarize(s.total), RoundTrip: Summarize(s.rtt)}
	if parallel {
		p := Summarize(s.parallel)
		ps.Parallel = &p
	}
	return ps
}
