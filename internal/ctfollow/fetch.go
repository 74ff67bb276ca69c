package ctfollow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Bounds on what the follower reads from a log. A data tile holds at most
// 256 entries of at most 256 KiB each (Tessera's limit for static-ct-api
// entries); a hash tile 256 hashes.
const (
	maxCheckpoint   = 64 << 10
	maxHashTile     = 256 * 32
	maxDataTile     = 256 * (256 << 10)
	maxIssuer       = 64 << 10
	maxJSONSmall    = 64 << 10 // get-sth, get-sth-consistency
	maxJSONEntries  = 96 << 20 // get-entries: base64 inflates a data tile's worth by 4/3
	requestTimeout  = 2 * time.Minute
	maxAttempts     = 5
	firstBackoff    = 250 * time.Millisecond
	maxBackoff      = 10 * time.Second
	maxRetryAfter   = time.Minute
	defaultParallel = 8
)

// errTooLarge reports a response over its bound.
var errTooLarge = errors.New("response over its size bound")

// httpGetter fetches bounded resources over HTTP, retrying with
// exponential back-off on transport errors, 5xx and 429.
type httpGetter struct {
	c    *http.Client
	base *url.URL
}

// get fetches base+rel, at most limit bytes. A 404 wraps fs.ErrNotExist, as
// Tessera's fetcher functions must.
func (g *httpGetter) get(ctx context.Context, rel string, limit int64) ([]byte, error) {
	u, err := g.base.Parse(rel)
	if err != nil {
		return nil, fmt.Errorf("ctfollow: URL %q: %w", rel, err)
	}
	backoff := firstBackoff
	var last error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			backoff = min(2*backoff, maxBackoff)
		}
		b, wait, err := g.once(ctx, u.String(), limit)
		if err == nil {
			return b, nil
		}
		last = err
		if wait < 0 || ctx.Err() != nil {
			break
		}
		// A log that says when to come back (Retry-After on a 429 or
		// 503) is believed, up to maxRetryAfter.
		backoff = max(backoff, wait)
	}
	return nil, last
}

// retryAfter reads a Retry-After header given in seconds, capped at
// maxRetryAfter; 0 if absent or in another form.
func retryAfter(h http.Header) time.Duration {
	n, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || n <= 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, maxRetryAfter)
}

// once makes one request. wait is negative if the error is not worth
// retrying, else the least time to wait before retrying.
func (g *httpGetter) once(ctx context.Context, u string, limit int64) (body []byte, wait time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, -1, fmt.Errorf("ctfollow: GET %s: %w", u, err)
	}
	resp, err := g.c.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("ctfollow: GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusNotFound:
		return nil, -1, fmt.Errorf("ctfollow: GET %s: %s: %w", u, resp.Status, fs.ErrNotExist)
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return nil, retryAfter(resp.Header), fmt.Errorf("ctfollow: GET %s: %s", u, resp.Status)
	default:
		return nil, -1, fmt.Errorf("ctfollow: GET %s: %s", u, resp.Status)
	}
	if resp.ContentLength > limit {
		return nil, -1, fmt.Errorf("ctfollow: GET %s: %d bytes: %w (%d)", u, resp.ContentLength, errTooLarge, limit)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, 0, fmt.Errorf("ctfollow: GET %s: %w", u, err)
	}
	if int64(len(b)) > limit {
		return nil, -1, fmt.Errorf("ctfollow: GET %s: %w (%d bytes)", u, errTooLarge, limit)
	}
	return b, 0, nil
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// ordered runs fetch for jobs 0..n-1 on up to parallel goroutines and
// hands their results to use in job order, stopping at the first error.
// At most 2×parallel results wait in memory, so a sync of a whole log
// streams.
func ordered[T any](ctx context.Context, n uint64, parallel int, fetch func(ctx context.Context, job uint64) (T, error), use func(job uint64, v T) error) error {
	type result struct {
		v   T
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Every goroutine is done before ordered returns: none outlives the
	// sync that started it.
	defer wg.Wait()
	defer cancel()
	pending := make(chan chan result, 2*parallel)
	sem := make(chan struct{}, parallel)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(pending)
		for job := uint64(0); job < n; job++ {
			ch := make(chan result, 1)
			select {
			case pending <- ch:
			case <-ctx.Done():
				return
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func(job uint64) {
				defer wg.Done()
				defer func() { <-sem }()
				v, err := fetch(ctx, job)
				ch <- result{v, err}
			}(job)
		}
	}()
	job := uint64(0)
	for ch := range pending {
		var r result
		select {
		case r = <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.err != nil {
			return r.err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := use(job, r.v); err != nil {
			return err
		}
		job++
	}
	if job != n {
		return ctx.Err()
	}
	return nil
}
