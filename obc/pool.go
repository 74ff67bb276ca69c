package obc

import (
	"context"
	"crypto"
	"log/slog"
	"sync"
)

// pool keeps keys generated ahead of need: the paper (Origin-Bound
// Certificates, USENIX Security 2012, §6.1) measured key generation as the
// one noticeable cost of a first visit and advised precomputing keys with
// spare cycles. One goroutine fills it and blocks while it is full, so a
// taken key is replaced at once.
type pool struct {
	alg    Alg
	keys   chan crypto.Signer
	done   chan struct{}
	logger *slog.Logger

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever a key is added
	failed  error         // why the filler stopped, if it did
}

func newPool(ctx context.Context, alg Alg, size int, generate func() (crypto.Signer, error), logger *slog.Logger) *pool {
	p := &pool{alg: alg, keys: make(chan crypto.Signer, size), done: make(chan struct{}), logger: logger, changed: make(chan struct{})}
	go p.fill(ctx, generate)
	return p
}

func (p *pool) fill(ctx context.Context, generate func() (crypto.Signer, error)) {
	defer close(p.done)
	for ctx.Err() == nil {
		k, err := generate()
		if err != nil {
			// Generation fails for a setting (FIPS mode refusing RSA-1024),
			// not by chance: retrying would spin. Certificate then
			// generates on demand and reports the error itself.
			p.logger.Error("obc: key pool stopped", "alg", string(p.alg), "err", err)
			p.mu.Lock()
			p.failed = err
			p.signal()
			p.mu.Unlock()
			return
		}
		select {
		case p.keys <- k:
			p.mu.Lock()
			p.signal()
			p.mu.Unlock()
		case <-ctx.Done():
			return
		}
	}
}

// signal wakes waiters; p.mu is held.
func (p *pool) signal() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// take returns a pooled key, or nil if the pool is empty.
func (p *pool) take() crypto.Signer {
	select {
	case k := <-p.keys:
		return k
	default:
		return nil
	}
}

// giveBack returns an unused key to the pool, dropping it if full.
func (p *pool) giveBack(k crypto.Signer) {
	select {
	case p.keys <- k:
	default:
	}
}

// wait waits for the filler to stop after its context is cancelled.
func (p *pool) wait() { <-p.done }

// waitFull blocks until the pool holds size keys.
func (p *pool) waitFull(ctx context.Context) error {
	for {
		p.mu.Lock()
		ch, failed := p.changed, p.failed
		p.mu.Unlock()
		if len(p.keys) == cap(p.keys) {
			return nil
		}
		if failed != nil {
			return failed
		}
		select {
		case <-ch:
		case <-p.done:
			if len(p.keys) == cap(p.keys) {
				return nil
			}
			p.mu.Lock()
			failed = p.failed
			p.mu.Unlock()
			if failed != nil {
				return failed
			}
			return context.Canceled
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// PoolReady returns how many precomputed keys the pool holds now (0 when
// the store has no pool).
func (s *Store) PoolReady() int {
	if s.pool == nil {
		return 0
	}
	return len(s.pool.keys)
}

// WaitPool blocks until the pool is full (at once when the store has no
// pool), or returns why it cannot fill: key generation failed, or ctx ended.
// Benchmarks and tests use it to measure a first visit with a warm pool.
func (s *Store) WaitPool(ctx context.Context) error {
	if s.pool == nil {
		return nil
	}
	return s.pool.waitFull(ctx)
}
