package sortedtree

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// TestGallop: from every starting place, gallop finds what a binary search
// over the whole array finds, on arrays with runs of equal entries, skewed
// ones and the edges of the uint64 range.
func TestGallop(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		name string
		f    []uint64
	}{
		{"empty", nil},
		{"one", []uint64{5}},
		{"runs", []uint64{1, 1, 1, 2, 2, 9, 9, 9, 9, 9, 10}},
		{"edges", []uint64{0, 0, 3, 1<<64 - 1, 1<<64 - 1}},
		{"skewed", func() []uint64 {
			f := make([]uint64, 300)
			for i := range f {
				f[i] = uint64(i % 7)
			}
			slices.Sort(f)
			return f
		}()},
		{"random", func() []uint64 {
			f := make([]uint64, 1000)
			for i := range f {
				f[i] = rng.Uint64()
			}
			slices.Sort(f)
			return f
		}()},
	} {
		probes := []uint64{0, 1, 2, 3, 9, 10, 11, 1<<64 - 1, 1<<64 - 2}
		for _, x := range tc.f {
			probes = append(probes, x, x-1, x+1)
		}
		for _, p := range probes {
			for _, strict := range []bool{false, true} {
				want := sort.Search(len(tc.f), func(i int) bool {
					if strict {
						return tc.f[i] > p
					}
					return tc.f[i] >= p
				})
				for g := -1; g <= len(tc.f)+1; g++ {
					if got := gallop(tc.f, p, strict, g); got != want {
						t.Fatalf("%s: gallop(%d, strict %v) from %d = %d, want %d", tc.name, p, strict, g, got, want)
					}
				}
			}
		}
	}
}
