package obcbench

import (
	"math"
	"slices"
)

// Stats summarizes a sample.
type Stats struct {
	N    int     `json:"n"`
	Min  float64 `json:"min"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// summarize returns v's order statistics (nearest rank).
func summarize(v []float64) Stats {
	if len(v) == 0 {
		return Stats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return Stats{N: len(s), Min: s[0], P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: s[len(s)-1], Mean: sum / float64(len(s))}
}
