package verifybench

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

// ms renders d in milliseconds for tables and plots.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
