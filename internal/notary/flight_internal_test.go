package notary

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pkie/pkie/probe"
)

// TestProbeFlightAbandon checks when a coalesced probe is abandoned: only
// when its last waiter leaves before it started; never while a waiter
// remains, and never once it started.
func TestProbeFlightAbandon(t *testing.T) {
	for _, tc := range []struct {
		name          string
		start         bool // the probe calls started before its waiters leave
		leave         int  // of two waiters, how many leave
		wantAbandoned bool
	}{
		{"one of two waiters leaves", false, 1, false},
		{"both waiters leave", false, 2, true},
		{"both leave after the probe started", true, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f probeFlight[*probe.Observation]
			finish := make(chan struct{})
			running := make(chan struct{})
			abandoned := make(chan bool, 1)
			fn := func(abandon <-chan struct{}, started func()) (*probe.Observation, error) {
				if tc.start {
					started()
				}
				close(running)
				select {
				case <-abandon:
					abandoned <- true
					return nil, errAbandoned
				case <-finish:
					abandoned <- false
					return &probe.Observation{}, nil
				}
			}
			type result struct {
				obs *probe.Observation
				err error
			}
			var cancels []context.CancelFunc
			results := make([]chan result, 2)
			for i := range results {
				ctx, cancel := context.WithCancel(context.Background())
				cancels = append(cancels, cancel)
				results[i] = make(chan result, 1)
				go func() {
					obs, err := f.do(ctx, "k", fn)
					results[i] <- result{obs, err}
				}()
				if i == 0 {
					<-running
				}
			}
			// Both callers have joined once the second is counted.
			for {
				f.mu.Lock()
				n := 0
				if c := f.calls["k"]; c != nil {
					n = c.waiters
				}
				f.mu.Unlock()
				if n == 2 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			for i := 0; i < tc.leave; i++ {
				cancels[i]()
				if r := <-results[i]; !errors.Is(r.err, context.Canceled) {
					t.Fatalf("waiter %d that left: %v", i, r.err)
				}
			}
			if !tc.wantAbandoned {
				close(finish)
			}
			if got := <-abandoned; got != tc.wantAbandoned {
				t.Fatalf("abandoned = %v, want %v", got, tc.wantAbandoned)
			}
			if tc.leave < 2 {
				if r := <-results[1]; r.err != nil || r.obs == nil {
					t.Fatalf("the waiter that stayed: %v", r.err)
				}
			}
		})
	}
}

// TestProbeQueueAbandon: a waiting probe whose abandon channel closes
// leaves the queue and frees its shares at once.
func TestProbeQueueAbandon(t *testing.T) {
	q := newProbeQueue(1, 4, 1, 1)
	rel, err := q.acquire("A", "t1", nil)
	if err != nil {
		t.Fatal(err)
	}
	abandon := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := q.acquire("B", "t2", abandon)
		done <- err
	}()
	for {
		q.mu.Lock()
		n := len(q.waiting)
		q.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(abandon)
	if err := <-done; !errors.Is(err, errAbandoned) {
		t.Fatalf("abandoned acquire: %v", err)
	}
	q.mu.Lock()
	if len(q.waiting) != 0 || q.clients["B"] != nil || q.targets["t2"] != nil {
		t.Errorf("abandoned probe still counted: waiting %d, B %v, t2 %v", len(q.waiting), q.clients["B"], q.targets["t2"])
	}
	q.mu.Unlock()
	rel()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running != 0 {
		t.Errorf("running = %d after release", q.running)
	}
}
