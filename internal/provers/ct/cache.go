package ct

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pkie/pkie/internal/ctinclusion"
)

// evidenceKey names what an evidence is about: a log and the leaf hash of
// one SCT's entry (sct.Entry.LeafHash), computed by the prover from the
// request's own certificate and SCT. Nothing a client sends is a key on
// its own word: a client that sends another SCT gets another key.
type evidenceKey struct {
	log  [32]byte
	leaf [32]byte
}

// evidenceCache is a bounded LRU of evidence the Fetcher verified
// (Included, NotYet and Conflict; LookupFailed is never stored), with the
// in-flight fetches so that concurrent requests for one SCT fetch once.
//
// Included evidence never goes stale (an inclusion proof against a
// checkpoint the log signed stays true), so it is served until evicted;
// after refresh it is fetched again, against a newer checkpoint, and kept
// if that fails. NotYet is held for notYet only: the log publishes a
// checkpoint covering the entry within its merge delay. Conflict too, so
// that a log's correction is soon seen.
type evidenceCache struct {
	max     int
	refresh time.Duration
	notYet  time.Duration
	now     func() time.Time

	mu       sync.Mutex
	ll       *list.List // front: most recently used
	items    map[evidenceKey]*list.Element
	inflight map[evidenceKey]*call
}

// maxInflight bounds the lookups at logs under way at once, for all
// clients together: each distinct SCT starts its own, which outlives its
// request, so without a bound one client sending many real SCTs could hold
// the cloud's outbound connections and memory (and its standing with the
// logs) for everyone.
const maxInflight = 64

// errLookupsFull is do's answer when maxInflight lookups are under way:
// the cloud is busy, which says nothing about the log.
var errLookupsFull = fmt.Errorf("the cloud has %d lookups at logs under way and starts no more until one ends", maxInflight)

type cached struct {
	key     evidenceKey
	ev      *ctinclusion.Evidence
	fetched time.Time
}

type call struct {
	done chan struct{}
	ev   *ctinclusion.Evidence
	err  error
}

func newEvidenceCache(max int, refresh, notYet time.Duration, now func() time.Time) *evidenceCache {
	return &evidenceCache{max: max, refresh: refresh, notYet: notYet, now: now,
		ll: list.New(), items: map[evidenceKey]*list.Element{}, inflight: map[evidenceKey]*call{}}
}

// get returns the cached evidence for k and whether it is fresh. Stale
// Included evidence is returned with fresh false: the caller refetches and
// falls back on it. Expired NotYet evidence is dropped.
func (c *evidenceCache) get(k evidenceKey) (ev *ctinclusion.Evidence, fresh bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(k)
}

func (c *evidenceCache) getLocked(k evidenceKey) (ev *ctinclusion.Evidence, fresh bool) {
	el, ok := c.items[k]
	if !ok {
		return nil, false
	}
	e := el.Value.(*cached)
	age := c.now().Sub(e.fetched)
	if e.ev.Status != ctinclusion.Included {
		if age >= c.notYet {
			c.ll.Remove(el)
			delete(c.items, k)
			return nil, false
		}
		c.ll.MoveToFront(el)
		return e.ev, true
	}
	c.ll.MoveToFront(el)
	return e.ev, age < c.refresh
}

// put stores evidence the Fetcher verified; LookupFailed is not stored.
func (c *evidenceCache) put(k evidenceKey, ev *ctinclusion.Evidence) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(k, ev)
}

func (c *evidenceCache) putLocked(k evidenceKey, ev *ctinclusion.Evidence) {
	if ev == nil || ev.Status == ctinclusion.LookupFailed || c.max <= 0 {
		return
	}
	if el, ok := c.items[k]; ok {
		old := el.Value.(*cached)
		if old.ev.Status == ctinclusion.Included && ev.Status != ctinclusion.Included {
			// An inclusion proof stays true; a later NotYet (from a log
			// that went back on its tree) does not replace it.
			return
		}
		el.Value = &cached{key: k, ev: ev, fetched: c.now()}
		c.ll.MoveToFront(el)
		return
	}
	c.items[k] = c.ll.PushFront(&cached{key: k, ev: ev, fetched: c.now()})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*cached).key)
	}
}

// do runs fetch for k once however many callers ask at the same time, in
// a goroutine of its own, so that a caller whose deadline passes does not
// waste the fetch for the next one: each caller waits for the fetch or for
// its own ctx. What the fetch returns is stored (put) before anyone sees
// it. fetch must bound its own time.
func (c *evidenceCache) do(ctx context.Context, k evidenceKey, fetch func() (*ctinclusion.Evidence, error)) (*ctinclusion.Evidence, error) {
	c.mu.Lock()
	// A fetch that ended since the caller looked has stored its result.
	if e, fresh := c.getLocked(k); fresh {
		c.mu.Unlock()
		return e, nil
	}
	cl, ok := c.inflight[k]
	if !ok {
		if len(c.inflight) >= maxInflight {
			c.mu.Unlock()
			return nil, errLookupsFull
		}
		cl = &call{done: make(chan struct{})}
		c.inflight[k] = cl
		go func() {
			cl.ev, cl.err = fetch()
			c.mu.Lock()
			if cl.err == nil {
				c.putLocked(k, cl.ev)
			}
			delete(c.inflight, k)
			c.mu.Unlock()
			close(cl.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-cl.done:
		return cl.ev, cl.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// len returns how many evidences are cached.
func (c *evidenceCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// memoKey names an SCT of a certificate: the SCT's hash (sct.SCT.Hash),
// whether it was embedded (its entry is then the precertificate's), SHA-256
// of the leaf's DER and of its issuer's SubjectPublicKeyInfo (which the
// precertificate entry names). What it maps to, the SCT's evidenceKey, is
// a function of these alone.
type memoKey struct {
	sct, leaf, issuer [32]byte
	embedded          bool
}
