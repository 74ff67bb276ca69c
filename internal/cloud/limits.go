package cloud

import (
	"time"
)

// tokenBucket limits a rate of events: rate tokens a second, at most burst
// saved up. A rate of zero or less means no limit.
type tokenBucket struct {
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

// refill brings the tokens up to now.
func (b *tokenBucket) refill(now time.Time) {
	if b.last.IsZero() {
		b.tokens = b.burst
	} else if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
	}
	b.last = now
}

// allow takes one token if there is one.
func (b *tokenBucket) allow(now time.Time) bool {
	if b.rate <= 0 {
		return true
	}
	b.refill(now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// full reports whether the bucket has refilled, so that forgetting it
// changes nothing.
func (b *tokenBucket) full(now time.Time) bool {
	if b.rate <= 0 {
		return true
	}
	b.refill(now)
	return b.tokens >= b.burst
}

// allowSubmit counts one submission, whatever becomes of it, against the
// session's rate and its address's, and reports whether it may proceed.
// Rejected and unanswered submissions count too: otherwise probing client
// identifiers or flooding a client's queue would cost nothing.
func (c *Cloud) allowSubmit(from *session) bool {
	now := time.Now()
	from.mu.Lock()
	ok := from.bucket.allow(now)
	from.mu.Unlock()
	if !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.submitBuckets[from.addr]
	if b == nil {
		b = &tokenBucket{rate: c.cfg.SubmitRate, burst: float64(c.cfg.SubmitBurst)}
		c.submitBuckets[from.addr] = b
	}
	return b.allow(now)
}

// sweepBucketsLocked forgets the buckets of addresses without sessions
// once they have refilled, so the map is bounded by the sessions and by
// the addresses seen within a burst's refill time. An address that leaves
// and comes back within it finds its bucket as it left it.
func (c *Cloud) sweepBucketsLocked() {
	if len(c.submitBuckets) <= 2*len(c.perAddr)+64 {
		return
	}
	now := time.Now()
	for a, b := range c.submitBuckets {
		if c.perAddr[a] == 0 && b.full(now) {
			delete(c.submitBuckets, a)
		}
	}
}

// remember records key as proved for duplicate suppression, forgetting
// first what is older than the window, then the oldest beyond the
// session's share (maxDone) or the cloud's total (MaxRemembered).
func (s *session) remember(key dupKey, window time.Duration) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now, window)
	for len(s.doneFIFO) >= maxDone {
		s.dropOldestLocked()
	}
	for !s.c.takeRemembered() {
		if len(s.doneFIFO) == 0 {
			// Other sessions hold the cloud's total: this submission is
			// not remembered, and a late copy is proved again.
			return
		}
		s.dropOldestLocked()
	}
	s.done[key] = now
	s.doneFIFO = append(s.doneFIFO, doneEntry{key, now})
}

// expireLocked forgets what was proved longer than window ago.
func (s *session) expireLocked(now time.Time, window time.Duration) {
	for len(s.doneFIFO) > 0 && now.Sub(s.doneFIFO[0].at) >= window {
		s.dropOldestLocked()
	}
}

func (s *session) dropOldestLocked() {
	e := s.doneFIFO[0]
	s.doneFIFO[0] = doneEntry{}
	s.doneFIFO = s.doneFIFO[1:]
	// A key proved again later has a newer entry further on.
	if s.done[e.key] == e.at {
		delete(s.done, e.key)
	}
	s.c.giveRemembered(1)
}

// forgetAll frees the session's memory of proved submissions when it ends.
func (s *session) forgetAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.giveRemembered(len(s.doneFIFO))
	s.doneFIFO = nil
	clear(s.done)
}

// takeRemembered counts one more remembered submission against
// MaxRemembered, or reports that the cloud holds that many.
func (c *Cloud) takeRemembered() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.remembered >= c.cfg.MaxRemembered {
		return false
	}
	c.remembered++
	return true
}

func (c *Cloud) giveRemembered(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remembered -= n
}
