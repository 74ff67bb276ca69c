package obcbench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pkie/pkie/obc"
)

// BenchmarkGenerate is a first visit without a key pool, less the store:
// generate a key and self-sign its certificate (the paper's Figure 8).
func BenchmarkGenerate(b *testing.B) {
	for _, alg := range Algs {
		b.Run(alg, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				k, err := newKey(alg)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := selfSigned(k, int64(i+1)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFirstVisitPooled is a first visit through obc.Store with a key
// pool: take a precomputed key, sign the certificate, commit both. The pool
// is filled before the timer runs; when b.N exceeds it, the visits that
// find it empty generate their key, so keep -benchtime at most the pool
// size (64) for RSA, as in -benchtime 64x.
func BenchmarkFirstVisitPooled(b *testing.B) {
	const poolSize = 64
	for _, alg := range Algs {
		b.Run(alg, func(b *testing.B) {
			a, err := obc.ParseAlg(alg)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			st, err := obc.Open(ctx, filepath.Join(b.TempDir(), "obc.db"), obc.StoreOptions{Alg: a, PoolSize: poolSize})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			if err := st.WaitPool(ctx); err != nil {
				b.Fatal(err)
			}
			pooled := 0
			for i := 0; b.Loop(); i++ {
				o, err := obc.ParseOrigin(fmt.Sprintf("https://s%d.bench.test", i))
				if err != nil {
					b.Fatal(err)
				}
				res, err := st.Get(ctx, o)
				if err != nil || !res.Created {
					b.Fatalf("%v: created %v, %v", o, res != nil && res.Created, err)
				}
				if res.FromPool {
					pooled++
				}
			}
			b.ReportMetric(float64(pooled)/float64(b.N), "pooled/op")
		})
	}
}
