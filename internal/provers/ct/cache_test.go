package ct

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/ctinclusion"
)

func key(b byte) evidenceKey { return evidenceKey{log: [32]byte{1}, leaf: [32]byte{b}} }

func ev(st ctinclusion.Status) *ctinclusion.Evidence {
	return &ctinclusion.Evidence{Status: st, Checkpoint: []byte("cp")}
}

// TestEvidenceCache: Included evidence is served until evicted and is
// stale (to be fetched again) after refresh; NotYet expires; LookupFailed
// is never stored; a NotYet never replaces an Included; the bound holds,
// least recently used first out.
func TestEvidenceCache(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := newEvidenceCache(3, time.Hour, 15*time.Second, func() time.Time { return now })
	c.put(key(1), ev(ctinclusion.Included))
	c.put(key(2), ev(ctinclusion.NotYet))
	c.put(key(3), &ctinclusion.Evidence{Status: ctinclusion.LookupFailed, Message: "down"})
	if c.len() != 2 {
		t.Fatalf("%d cached, want 2 (a failed lookup is not stored)", c.len())
	}
	if e, fresh := c.get(key(1)); e == nil || !fresh {
		t.Fatal("included evidence not served")
	}
	now = now.Add(16 * time.Second)
	if e, _ := c.get(key(2)); e != nil {
		t.Fatal("not-yet evidence served past its time")
	}
	c.put(key(1), ev(ctinclusion.NotYet))
	if e, _ := c.get(key(1)); e.Status != ctinclusion.Included {
		t.Fatal("a not-yet replaced an inclusion proof")
	}
	now = now.Add(time.Hour)
	if e, fresh := c.get(key(1)); e == nil || fresh {
		t.Fatalf("included evidence past refresh: %v, fresh %v; want it, stale", e, fresh)
	}
	for b := byte(4); b < 8; b++ {
		c.put(key(b), ev(ctinclusion.Included))
	}
	if c.len() != 3 {
		t.Fatalf("%d cached, bound 3", c.len())
	}
	if e, _ := c.get(key(1)); e != nil {
		t.Fatal("the least recently used entry was not evicted")
	}
}

// TestEvidenceCacheDo: concurrent callers for one key share one fetch; a
// caller whose context ends stops waiting while the fetch goes on and
// its result is stored for the next.
func TestEvidenceCacheDo(t *testing.T) {
	c := newEvidenceCache(10, time.Hour, time.Second, time.Now)
	var fetches atomic.Int32
	release := make(chan struct{})
	fetch := func() (*ctinclusion.Evidence, error) {
		fetches.Add(1)
		<-release
		return ev(ctinclusion.Included), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.do(ctx, key(1), fetch); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled caller: %v", err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if e, err := c.do(context.Background(), key(1), fetch); err != nil || e.Status != ctinclusion.Included {
				t.Errorf("%v, %v", e, err)
			}
		})
	}
	close(release)
	wg.Wait()
	if n := fetches.Load(); n > 2 {
		t.Errorf("%d fetches for one key", n)
	}
	if e, fresh := c.get(key(1)); e == nil || !fresh {
		t.Error("the fetched evidence was not stored")
	}
}

// TestEvidenceCacheBoundsLookups: no more than maxInflight lookups run at
// once, whoever asks; the next distinct one is refused at once, and a key
// already under way is still joined.
func TestEvidenceCacheBoundsLookups(t *testing.T) {
	c := newEvidenceCache(1000, time.Hour, time.Second, time.Now)
	release := make(chan struct{})
	var started sync.WaitGroup
	fetch := func() (*ctinclusion.Evidence, error) {
		started.Done()
		<-release
		return ev(ctinclusion.Included), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	for i := range maxInflight {
		started.Add(1)
		go c.do(ctx, key(byte(i)), fetch)
	}
	started.Wait()
	if _, err := c.do(context.Background(), key(byte(maxInflight)), fetch); !errors.Is(err, errLookupsFull) {
		t.Errorf("lookup %d: %v, want errLookupsFull", maxInflight+1, err)
	}
	cancel()
	joined := make(chan error, 1)
	go func() { _, err := c.do(context.Background(), key(0), fetch); joined <- err }()
	close(release)
	if err := <-joined; err != nil {
		t.Errorf("joining a lookup under way: %v", err)
	}
}
