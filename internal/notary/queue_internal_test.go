package notary

import (
	"errors"
	"runtime"
	"testing"
)

// TestProbeQueueHandsSlotsWithinShares checks the queue's hand-off: a freed
// slot goes to the oldest waiting probe whose client is within its share,
// passing over older waiters of a client already at its share, and a
// client beyond its share of the queue is refused at once.
func TestProbeQueueHandsSlotsWithinShares(t *testing.T) {
	q := newProbeQueue(2, 4, 1, 2) // 2 slots, 4 places; a client 1 slot and 2 places
	relA, err := q.acquire("A", "t1", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 4)
	wait := func(client, target string) {
		go func() {
			rel, err := q.acquire(client, target, nil)
			if err != nil {
				got <- client + " refused"
				return
			}
			got <- client
			rel()
		}()
	}
	waiting := func(n int) { // until n probes wait in the queue
		t.Helper()
		for {
			q.mu.Lock()
			w := len(q.waiting)
			q.mu.Unlock()
			if w == n {
				return
			}
			runtime.Gosched()
		}
	}
	wait("A", "t2") // A is at its share of slots: waits
	waiting(1)
	relB, err := q.acquire("B", "t3", nil) // a free slot, within B's share
	if err != nil {
		t.Fatal(err)
	}
	wait("C", "t4") // no free slot: waits behind A's probe
	waiting(2)
	wait("A", "t5")
	waiting(3)
	if _, err := q.acquire("A", "t6", nil); !errors.Is(err, errOverloaded) {
		t.Fatalf("a client beyond its share of the queue: %v", err)
	}
	relB() // the oldest waiter is A's, but A still holds its one slot: C goes
	if c := <-got; c != "C" {
		t.Fatalf("the freed slot went to %s, want C", c)
	}
	relA() // now A's waiters run, oldest first, one at a time
	for _, want := range []string{"A", "A"} {
		if c := <-got; c != want {
			t.Fatalf("got %s, want %s", c, want)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running != 0 || len(q.waiting) != 0 || len(q.clients) != 0 || len(q.targets) != 0 {
		t.Fatalf("queue not empty at the end: running %d waiting %d clients %v targets %v", q.running, len(q.waiting), q.clients, q.targets)
	}
}
