package synth

import (
	"container/list"
	"net/netip"
	"time"

	"github.com/pkie/pkie/internal/replay"
)

// flowHeap is the reorder window: a min-heap of flows by start, ties in
// arrival order.
type flowHeap struct{ h []pending }

func (fh *flowHeap) Len() int      { return len(fh.h) }
func (fh *flowHeap) min() *pending { return &fh.h[0] }

func (fh *flowHeap) less(i, j int) bool {
	a, b := &fh.h[i], &fh.h[j]
	return a.start < b.start || a.start == b.start && a.seq < b.seq
}

func (fh *flowHeap) push(p pending) {
	fh.h = append(fh.h, p)
	for i := len(fh.h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !fh.less(i, parent) {
			break
		}
		fh.h[i], fh.h[parent] = fh.h[parent], fh.h[i]
		i = parent
	}
}

func (fh *flowHeap) pop() pending {
	top := fh.h[0]
	n := len(fh.h) - 1
	fh.h[0] = fh.h[n]
	fh.h[n] = pending{} // drop the host string for the collector
	fh.h = fh.h[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && fh.less(l, m) {
			m = l
		}
		if r < n && fh.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		fh.h[i], fh.h[m] = fh.h[m], fh.h[i]
		i = m
	}
	return top
}

// clientCache simulates every client's cache of notary answers, as the
// paper's replaying VMs kept one per source address (Forced Perspectives,
// IMC 2014, §3.2). An entry's lifetime runs from the request that filled
// it: a hit does not extend it, since a real client's cached fingerprint
// ages from when the notaries vouched for it.
type clientCache struct {
	lifetime time.Duration // 0: forever
	max      int
	m        map[cacheKey]*list.Element
	lru      list.List // of *cacheEntry, most recently used first
	evicted  int64
}

type cacheKey struct {
	client netip.Addr
	host   string
	port   uint16
}

type cacheEntry struct {
	key    cacheKey
	issued time.Duration
	// answered is false when the flow that filled the entry sent packets
	// and got none back.
	answered bool
}

func newClientCache(lifetime time.Duration, max int) *clientCache {
	return &clientCache{lifetime: lifetime, max: max, m: map[cacheKey]*list.Element{}}
}

func (c *clientCache) live(e *cacheEntry, t time.Duration) bool {
	return c.lifetime <= 0 || t-e.issued < c.lifetime
}

// hit reports whether k is cached at t; if not, a request is issued at t
// and the entry (re)filled. answered says whether the flow at hand got an
// answer from its server. While strict holds (the trace counts packets
// both ways), an entry filled by a flow nobody answered does not count as
// cached: the client's connection failed, so it could not have cached a
// certificate (Forced Perspectives, IMC 2014, Table 2: "failed requests
// cannot be cached"), and its next flow to the target asks again.
func (c *clientCache) hit(k cacheKey, t time.Duration, answered, strict bool) bool {
	if el, ok := c.m[k]; ok {
		e := el.Value.(*cacheEntry)
		c.lru.MoveToFront(el)
		if c.live(e, t) && (e.answered || !strict) {
			return true
		}
		e.issued, e.answered = t, answered
		return false
	}
	if len(c.m) >= c.max {
		el := c.lru.Back()
		e := el.Value.(*cacheEntry)
		if c.live(e, t) {
			c.evicted++
		}
		delete(c.m, e.key)
		c.lru.Remove(el)
	}
	c.m[k] = c.lru.PushFront(&cacheEntry{key: k, issued: t, answered: answered})
	return false
}

// series is the per-second series. Bytes of whole seconds inside a flow go
// through a difference array of rates, so a long flow costs no more than a
// short one.
type series struct {
	secs []replay.Second
	diff []float64 // rate added from second i on
}

func (s *series) grow(n int) {
	for len(s.secs) < n {
		s.secs = append(s.secs, replay.Second{})
	}
	for len(s.diff) < n+1 {
		s.diff = append(s.diff, 0)
	}
}

// at returns the second holding offset t (t >= 0).
func (s *series) at(t time.Duration) *replay.Second {
	i := int(t / time.Second)
	s.grow(i + 1)
	return &s.secs[i]
}

// addBytes spreads b evenly over [t, t+d): each second gets the share of
// its overlap with the flow, so the first and last seconds get fractions.
func (s *series) addBytes(t, d time.Duration, b float64) {
	if b == 0 {
		return
	}
	ks := int(t / time.Second)
	if d <= 0 {
		s.at(t).HTTPSBytes += b
		return
	}
	end := t + d
	ke := int(end / time.Second)
	if ke == ks {
		s.at(t).HTTPSBytes += b
		return
	}
	perNS := b / float64(d)
	rest := end - time.Duration(ke)*time.Second
	if rest > 0 {
		s.grow(ke + 1)
		s.secs[ke].HTTPSBytes += perNS * float64(rest)
	} else {
		s.grow(ke)
	}
	s.secs[ks].HTTPSBytes += perNS * float64(time.Duration(ks+1)*time.Second-t)
	if ke > ks+1 {
		s.diff[ks+1] += perNS * float64(time.Second)
		s.diff[ke] -= perNS * float64(time.Second)
	}
}

// done folds the whole seconds' rates in and returns the series.
func (s *series) done() []replay.Second {
	rate := 0.0
	for i := range s.secs {
		rate += s.diff[i]
		s.secs[i].HTTPSBytes += rate
	}
	if s.secs == nil {
		return []replay.Second{}
	}
	return s.secs
}
