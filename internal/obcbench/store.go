package obcbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pkie/pkie/obc"
)

// measureStore times first and return visits through obc.Store: without a
// pool a first visit generates a key, signs its certificate and commits
// both to SQLite; with a full pool it takes a key and only signs and
// commits; a return visit reads the cached certificate.
func measureStore(ctx context.Context, cfg *Config, row *GenRow) error {
	dir, err := os.MkdirTemp("", "pkie-obcbench-")
	if err != nil {
		return fmt.Errorf("obcbench: %w", err)
	}
	defer os.RemoveAll(dir)
	alg, err := obc.ParseAlg(row.Alg)
	if err != nil {
		return err
	}
	visit := func(st *obc.Store, name string, i int, wantCreated, wantPooled bool) (float64, error) {
		o, err := obc.ParseOrigin(fmt.Sprintf("https://%s%d.gen.test", name, i))
		if err != nil {
			return 0, err
		}
		t0 := time.Now()
		res, err := st.Get(ctx, o)
		d := time.Since(t0)
		if err != nil {
			return 0, fmt.Errorf("obcbench: store %s: %w", o, err)
		}
		if res.Created != wantCreated || (wantCreated && res.FromPool != wantPooled) || string(res.Alg) != row.Alg {
			return 0, fmt.Errorf("obcbench: store %s: created %v, from the pool %v, %s; want created %v, pooled %v, %s",
				o, res.Created, res.FromPool, res.Alg, wantCreated, wantPooled, row.Alg)
		}
		return ms(d), nil
	}
	n := cfg.GenSamples
	st, err := obc.Open(ctx, filepath.Join(dir, "nopool.db"), obc.StoreOptions{Alg: alg})
	if err != nil {
		return err
	}
	var first, back, pooled []float64
	for i := range n {
		d, err := visit(st, "a", i, true, false)
		if err != nil {
			st.Close()
			return err
		}
		first = append(first, d)
	}
	for i := range n {
		d, err := visit(st, "a", i, false, false)
		if err != nil {
			st.Close()
			return err
		}
		back = append(back, d)
	}
	if err := st.Close(); err != nil {
		return err
	}
	// A pool as large as the sample, full before the first visit: every
	// visit takes a precomputed key while the pool refills in the
	// background, as a browser's would between visits.
	cfg.logf("gen: %s, filling a pool of %d keys", row.Alg, n)
	st, err = obc.Open(ctx, filepath.Join(dir, "pool.db"), obc.StoreOptions{Alg: alg, PoolSize: n})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.WaitPool(ctx); err != nil {
		return fmt.Errorf("obcbench: filling the %s pool: %w", row.Alg, err)
	}
	for i := range n {
		d, err := visit(st, "p", i, true, true)
		if err != nil {
			return err
		}
		pooled = append(pooled, d)
	}
	f, b, p := summarize(first), summarize(back), summarize(pooled)
	row.StoreFirstMs, row.StoreReturnMs, row.StoreFirstPooledMs = &f, &b, &p
	return nil
}
