package report

import (
	"math"
	"time"
)

// latency sums and bins latencies: the mean is exact, percentiles come
// from logarithmic bins 1% wide, so they are within 1% of the exact ones
// and the memory is fixed (some 2,600 bins up to 100 s) however many
// results a run has.
type latency struct {
	n    int64
	sum  float64 // ns; an int64 sum could overflow
	max  time.Duration
	bins []int64
}

const (
	binGrowth = 1.01
	// maxBin holds everything from about 100 s up.
	maxBin = 2546
)

func bin(d time.Duration) int {
	if d < time.Nanosecond {
		return 0
	}
	return min(maxBin, int(math.Ceil(math.Log(float64(d))/math.Log(binGrowth))))
}

func (l *latency) add(d time.Duration) {
	if l.bins == nil {
		l.bins = make([]int64, maxBin+1)
	}
	l.n++
	l.sum += float64(d)
	l.max = max(l.max, d)
	l.bins[bin(d)]++
}

func (l *latency) mean() time.Duration {
	if l.n == 0 {
		return 0
	}
	return time.Duration(l.sum / float64(l.n))
}

// quantile returns the upper edge of the bin holding the q-quantile,
// capped at the largest latency seen.
func (l *latency) quantile(q float64) time.Duration {
	if l.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(l.n)))
	rank = max(rank, 1)
	var seen int64
	for i, c := range l.bins {
		seen += c
		if seen >= rank {
			return min(l.max, time.Duration(math.Pow(binGrowth, float64(i))))
		}
	}
	return l.max
}
