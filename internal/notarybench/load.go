// Package notarybench measures a notary the way the Convergence paper did —
// cached and uncached throughput, and client latency at continental and
// global distance — on loopback against testbed sites, with ceilings
// measured in the same run: a trivial HTTPS handler on the same server stack
// for cached throughput, and raw TLS handshakes per second to the same site
// for uncached throughput. The machine is shared and noisy, so the ratios to
// the ceilings are the figures to compare across runs.
package notarybench

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Stats summarise one load phase.
type Stats struct {
	Name        string         `json:"name"`
	Requests    int            `json:"requests"`
	Seconds     float64        `json:"seconds"`
	PerSecond   float64        `json:"per_second"`
	P50ms       float64        `json:"p50_ms"`
	P99ms       float64        `json:"p99_ms"`
	Codes       map[string]int `json:"codes"`
	Errors      int            `json:"errors"`
	ErrorSample string         `json:"error_sample,omitempty"`
	Rate503     float64        `json:"rate_503"`
	Concurrency int            `json:"concurrency"`
}

// op performs one request for worker w and returns an HTTP status (0 for
// non-HTTP operations that succeeded) or an error.
type op func(ctx context.Context, w int) (int, error)

// load runs op from concurrency workers for d and summarises. Workers stop
// starting operations after d; operations in flight then run to completion
// (under their own 30 s bound) and count, so the end of a phase never shows
// up as a burst of spurious errors.
func load(ctx context.Context, name string, concurrency int, d time.Duration, fn op) Stats {
	type result struct {
		lat  []time.Duration
		code map[int]int
		errs map[string]int
	}
	results := make([]result, concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := result{code: map[int]int{}, errs: map[string]int{}}
			for ctx.Err() == nil && time.Now().Before(stop) {
				octx, cancel := context.WithTimeout(ctx, 30*time.Second)
				t0 := time.Now()
				code, err := fn(octx, w)
				cancel()
				r.lat = append(r.lat, time.Since(t0))
				if err != nil {
					r.errs[err.Error()]++
					continue
				}
				r.code[code]++
			}
			results[w] = r
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	s := Stats{Name: name, Seconds: elapsed.Seconds(), Codes: map[string]int{}, Concurrency: concurrency}
	var all []time.Duration
	for _, r := range results {
		all = append(all, r.lat...)
		for e, n := range r.errs {
			s.Errors += n
			s.ErrorSample = e
		}
		for c, n := range r.code {
			s.Codes[codeName(c)] += n
		}
	}
	s.Requests = len(all)
	s.PerSecond = float64(s.Requests) / elapsed.Seconds()
	s.P50ms, s.P99ms = percentileMS(all, 0.50), percentileMS(all, 0.99)
	if s.Requests > 0 {
		s.Rate503 = float64(s.Codes["503"]) / float64(s.Requests)
	}
	return s
}

func codeName(c int) string {
	if c == 0 {
		return "ok"
	}
	return strconv.Itoa(c)
}

func percentileMS(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p*float64(len(s))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return float64(s[i]) / float64(time.Millisecond)
}
