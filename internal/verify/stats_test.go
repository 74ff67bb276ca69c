package verify

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	seq := func(n int) []time.Duration {
		var d []time.Duration
		// Descending, so Summarize must sort.
		for i := n; i >= 1; i-- {
			d = append(d, time.Duration(i)*time.Microsecond)
		}
		return d
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want Summary
	}{
		{"empty", nil, Summary{}},
		{"one", []time.Duration{7}, Summary{N: 1, Mean: 7, P50: 7, P99: 7, Min: 7, Max: 7}},
		{"1..100µs", seq(100), Summary{N: 100, Mean: 50500 * time.Nanosecond, P50: 50 * time.Microsecond,
			P99: 99 * time.Microsecond, Min: time.Microsecond, Max: 100 * time.Microsecond}},
		{"1..10µs", seq(10), Summary{N: 10, Mean: 5500 * time.Nanosecond, P50: 5 * time.Microsecond,
			P99: 10 * time.Microsecond, Min: time.Microsecond, Max: 10 * time.Microsecond}},
		// One outlier moves the mean and p99 but not the median.
		{"outlier", []time.Duration{1, 1, 1, 1, 1, 1, 1, 1, 1, 91}, Summary{N: 10, Mean: 10, P50: 1, P99: 91, Min: 1, Max: 91}},
		{"1..200µs", seq(200), Summary{N: 200, Mean: 100500 * time.Nanosecond, P50: 100 * time.Microsecond,
			P99: 198 * time.Microsecond, Min: time.Microsecond, Max: 200 * time.Microsecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]time.Duration(nil), tc.in...)
			if got := Summarize(tc.in); got != tc.want {
				t.Errorf("Summarize = %+v, want %+v", got, tc.want)
			}
			for i := range in {
				if in[i] != tc.in[i] {
					t.Fatalf("Summarize reordered its input")
				}
			}
		})
	}
}
