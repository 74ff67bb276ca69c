package obc

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// TestPoolFirstVisit: with a warm pool a first visit takes a pooled key
// and generates none itself; without a pool it generates one. Generations
// are counted by the store's hook, not timed.
func TestPoolFirstVisit(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		alg          Alg
		pool         int
		wantFromPool bool
		wantOnDemand int64
	}{
		{ECDSAP256, 0, false, 1},
		{ECDSAP256, 2, true, 0},
		{Ed25519, 1, true, 0},
		{RSA2048, 1, true, 0},
		{RSA1024, 0, false, 1},
		{RSA1024, 1, true, 0},
	} {
		t.Run(string(tc.alg), func(t *testing.T) {
			var onDemand, pooled atomic.Int64
			opts := StoreOptions{Alg: tc.alg, PoolSize: tc.pool, genHook: func(a Alg, fromPool bool) {
				if a != tc.alg {
					t.Errorf("generated %s, want %s", a, tc.alg)
				}
				if fromPool {
					pooled.Add(1)
				} else {
					onDemand.Add(1)
				}
			}}
			s := openStore(t, filepath.Join(t.TempDir(), "obc.db"), opts)
			if err := s.WaitPool(ctx); err != nil {
				t.Fatal(err)
			}
			if got := s.PoolReady(); got != tc.pool {
				t.Fatalf("PoolReady = %d after WaitPool, want %d", got, tc.pool)
			}
			r, err := s.Get(ctx, mustOrigin(t, "https://first.example"))
			if err != nil {
				t.Fatal(err)
			}
			if !r.Created || r.FromPool != tc.wantFromPool {
				t.Errorf("created %v from pool %v, want created, from pool %v (%+v, %s)", r.Created, r.FromPool, tc.wantFromPool, r, s.Path())
			}
			if got := onDemand.Load(); got != tc.wantOnDemand {
				t.Errorf("%d keys generated during the visit, want %d", got, tc.wantOnDemand)
			}
			if tc.wantFromPool && r.KeyTime != 0 {
				t.Errorf("KeyTime %s for a pooled key, want 0", r.KeyTime)
			}
			if tc.pool > 0 && pooled.Load() < int64(tc.pool) {
				t.Errorf("the pool generated %d keys, want at least %d", pooled.Load(), tc.pool)
			}
			if r.Alg != tc.alg || r.Cert.Leaf == nil {
				t.Errorf("alg %s leaf %v", r.Alg, r.Cert.Leaf)
			}
			// The pool refills what was taken.
			if err := s.WaitPool(ctx); err != nil {
				t.Fatal(err)
			}
			if got := s.PoolReady(); got != tc.pool {
				t.Errorf("PoolReady = %d after the refill, want %d", got, tc.pool)
			}
		})
	}
}

// TestPoolStopsOnClose: Close stops the filler (the race detector and
// goroutine leak would show otherwise) and a closed store refuses work.
func TestPoolStopsOnClose(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "obc.db"), StoreOptions{PoolSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.pool.done:
	default:
		t.Error("the pool's goroutine still runs after Close")
	}
	if _, err := s.Get(context.Background(), mustOrigin(t, "https://a.example")); err == nil {
		t.Error("Get on a closed store succeeded")
	}
}

// BenchmarkFirstVisit measures a first visit (key, certificate, stored)
// per algorithm, with the key generated during the visit or taken from a
// warm pool; BenchmarkReturnVisit a later visit (a cached certificate).
// pkie bench obc has the paper's Figure 8; these are the quick version.
func BenchmarkFirstVisit(b *testing.B) {
	ctx := context.Background()
	for _, alg := range Algs() {
		for _, pool := range []int{0, 1} {
			name := string(alg) + "/no-pool"
			if pool > 0 {
				name = string(alg) + "/warm-pool"
			}
			b.Run(name, func(b *testing.B) {
				s := openStore(b, filepath.Join(b.TempDir(), "obc.db"), StoreOptions{Alg: alg, PoolSize: pool})
				i := 0
				for b.Loop() {
					b.StopTimer()
					if err := s.WaitPool(ctx); err != nil {
						b.Fatal(err)
					}
					o := Origin{Scheme: "https", Host: "bench.example", Port: uint16(1 + i%65000)}
					i++
					b.StartTimer()
					if _, err := s.Get(ctx, o); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkReturnVisit(b *testing.B) {
	ctx := context.Background()
	s := openStore(b, filepath.Join(b.TempDir(), "obc.db"), StoreOptions{})
	o := Origin{Scheme: "https", Host: "bench.example", Port: 443}
	if _, err := s.Get(ctx, o); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Get(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
}
