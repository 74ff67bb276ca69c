package notary

import (
	"context"
	"errors"
	"sync"
)

// errAbandoned ends a probe that was still waiting for a slot when every
// request coalesced onto it had gone. Nobody receives it; it only frees the
// queue place.
var errAbandoned = errors.New("probe abandoned: every request waiting for it has gone")

// probeFlight coalesces identical concurrent probes into one, like
// singleflight, and also counts the requests waiting for each. A probe is
// detached from its requests (one giving up must not cancel it for the
// others), so without the count a flood of requests that time out would
// leave its probes queued, and then running against a silent target, long
// after every requester had gone, delaying everyone else's probes by up to
// a probe timeout per slot. A probe that has not started when its last
// waiter leaves is abandoned and its queue place freed at once; one that
// has started runs to completion and is recorded, since its answer may
// already be promised to a request that joined it.
type probeFlight[T any] struct {
	mu    sync.Mutex
	calls map[string]*flightCall[T]
}

type flightCall[T any] struct {
	waiters int
	started bool
	abandon chan struct{} // closed when the last waiter leaves before the probe started
	done    chan struct{} // closed when obs and err are set
	obs     T
	err     error
}

// do returns the result of fn for key, running fn once for all concurrent
// callers with that key. fn receives a channel closed when every caller has
// gone before fn called started; fn calls started when it is committed to
// finishing. When ctx ends first, do returns ctx's error and the call goes
// on for the others.
func (f *probeFlight[T]) do(ctx context.Context, key string, fn func(abandon <-chan struct{}, started func()) (T, error)) (T, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = make(map[string]*flightCall[T])
	}
	c := f.calls[key]
	if c == nil {
		c = &flightCall[T]{abandon: make(chan struct{}), done: make(chan struct{})}
		f.calls[key] = c
		started := func() {
			f.mu.Lock()
			c.started = true
			f.mu.Unlock()
		}
		go func() {
			obs, err := fn(c.abandon, started)
			f.mu.Lock()
			if f.calls[key] == c {
				delete(f.calls, key)
			}
			c.obs, c.err = obs, err
			f.mu.Unlock()
			close(c.done)
		}()
	}
	c.waiters++
	f.mu.Unlock()

	select {
	case <-c.done:
		return c.obs, c.err
	case <-ctx.Done():
		f.mu.Lock()
		c.waiters--
		if c.waiters == 0 && !c.started {
			select {
			case <-c.abandon:
			default:
				close(c.abandon)
			}
			// A request arriving now starts a probe of its own rather
			// than joining one that is about to give up.
			if f.calls[key] == c {
				delete(f.calls, key)
			}
		}
		f.mu.Unlock()
		var zero T
		return zero, ctx.Err()
	}
}
