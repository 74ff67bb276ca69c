package sortedtree

import (
	"fmt"
	"path/filepath"
	"testing"
)

// The PEC paper's scales (ASIA CCS 2018, §8): Symantec's CT log (2,129,920 certificates) and
// Comodo's largest CRL (53,164 serials). Full figures: pkie bench proofs.
var benchSizes = []int{53164, 2129920}

func benchTree(b *testing.B, n int) *Tree {
	b.Helper()
	return Build(testKeys(n, 42)[:n])
}

func BenchmarkBuild(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			src := testKeys(n, 42)[:n]
			keys := make([][32]byte, n)
			b.SetBytes(int64(n) * HashSize)
			for b.Loop() {
				copy(keys, src)
				Build(keys)
			}
		})
	}
}

func BenchmarkSortKeys(b *testing.B) {
	n := 2129920
	src := testKeys(n, 42)[:n]
	keys := make([][32]byte, n)
	for b.Loop() {
		copy(keys, src)
		sortKeys(keys)
	}
}

func BenchmarkProve(b *testing.B) {
	for _, n := range benchSizes {
		tr := benchTree(b, n)
		b.Run(fmt.Sprintf("presence/%d", n), func(b *testing.B) {
			i := uint64(0)
			for b.Loop() {
				tr.Prove(tr.Key(i % tr.Size()))
				i += 7919
			}
		})
		b.Run(fmt.Sprintf("absence/%d", n), func(b *testing.B) {
			i := uint64(0)
			for b.Loop() {
				tr.Prove(next(tr.Key(i % tr.Size())))
				i += 7919
			}
		})
	}
}

func BenchmarkVerify(b *testing.B) {
	for _, n := range benchSizes {
		tr := benchTree(b, n)
		root := tr.Root()
		for _, kind := range []string{"presence", "absence"} {
			k := tr.Key(uint64(n / 3))
			if kind == "absence" {
				k = next(k)
			}
			p, _ := tr.Prove(k)
			enc, _ := p.MarshalBinary()
			b.Run(fmt.Sprintf("%s/%d", kind, n), func(b *testing.B) {
				for b.Loop() {
					var q Proof
					if err := q.UnmarshalBinary(enc); err != nil {
						b.Fatal(err)
					}
					if _, err := q.Verify(k, tr.Size(), root); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	tr := benchTree(b, 2129920)
	path := filepath.Join(b.TempDir(), "tree")
	if err := tr.WriteFile(path); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		o, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		o.Close()
	}
}

// BenchmarkMerge adds 1,000 keys to the PEC paper's CT-scale tree, a prover's
// incremental update; compare BenchmarkBuild/2129920.
func BenchmarkMerge(b *testing.B) {
	tr := benchTree(b, 2129920)
	add := testKeys(1000, 99)
	buf := make([][32]byte, len(add))
	for b.Loop() {
		copy(buf, add)
		tr.Merge(buf)
	}
}
