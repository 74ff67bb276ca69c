package notary

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/pkie/pkie/internal/httplimit"
	"github.com/pkie/pkie/probe"
)

// errOverloaded means a probe could neither start nor wait for a slot: the
// queue is full, or the requesting client or the target already holds its
// share of it. The notary answers 503 with Retry-After.
var errOverloaded = errors.New("notary overloaded")

// probeQueue bounds outbound probes and the probes waiting for a slot, and
// shares both among client addresses and targets: a client (or a target)
// holds at most a fixed share of the slots and of the queue, so one client
// flooding the notary with probes of a silent target, or many clients
// asking about names of one target, cannot take every slot or queue place.
// A freed slot goes to the longest-waiting probe whose client and target
// are below their shares.
type probeQueue struct {
	slots, queue             int // global bounds
	clientSlots, clientQueue int // per client address
	targetSlots, targetQueue int // per target

	mu      sync.Mutex
	running int
	waiting []*queued // oldest first
	clients map[string]*share
	targets map[string]*share
}

type share struct{ running, waiting int }

type queued struct {
	client, target string
	ready          chan struct{} // closed when the probe may start
}

func newProbeQueue(slots, queue, clientSlots, targetSlots int) *probeQueue {
	// A share of the queue in proportion to the share of the slots, and
	// never none: a client may always wait for at least one probe.
	scale := func(n int) int { return max(1, queue*n/slots) }
	return &probeQueue{
		slots: slots, queue: queue,
		clientSlots: clientSlots, clientQueue: scale(clientSlots),
		targetSlots: targetSlots, targetQueue: scale(targetSlots),
		clients: make(map[string]*share), targets: make(map[string]*share),
	}
}

func (q *probeQueue) shares(client, target string) (*share, *share) {
	c, t := q.clients[client], q.targets[target]
	if c == nil {
		c = new(share)
		q.clients[client] = c
	}
	if t == nil {
		t = new(share)
		q.targets[target] = t
	}
	return c, t
}

func (q *probeQueue) canRun(c, t *share) bool {
	return q.running < q.slots && c.running < q.clientSlots && t.running < q.targetSlots
}

// acquire waits for a probe slot for client's probe of target and returns
// the function that gives it back, or fails at once with errOverloaded
// when the probe may not even wait, or with errAbandoned when abandon is
// closed while it waits (its place and shares are then freed at once).
func (q *probeQueue) acquire(client, target string, abandon <-chan struct{}) (release func(), err error) {
	q.mu.Lock()
	c, t := q.shares(client, target)
	release = func() { q.release(client, target) }
	if q.canRun(c, t) {
		q.running++
		c.running++
		t.running++
		q.mu.Unlock()
		return release, nil
	}
	var why string
	switch {
	case len(q.waiting) >= q.queue:
		why = "probe queue full"
	case c.waiting >= q.clientQueue:
		why = "too many probes queued for this client address"
	case t.waiting >= q.targetQueue:
		why = "too many probes queued for this target"
	}
	if why != "" {
		q.tidy(client, target, c, t)
		q.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", errOverloaded, why)
	}
	w := &queued{client: client, target: target, ready: make(chan struct{})}
	q.waiting = append(q.waiting, w)
	c.waiting++
	t.waiting++
	q.mu.Unlock()
	// Slots are held only for one probe (bounded by the prober's timeout)
	// and its write to the history (bounded by RequestTimeout), so the
	// wait ends.
	select {
	case <-w.ready:
		return release, nil
	case <-abandon:
	}
	q.mu.Lock()
	for i, x := range q.waiting {
		if x == w {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			c.waiting--
			t.waiting--
			q.tidy(client, target, c, t)
			q.mu.Unlock()
			return nil, errAbandoned
		}
	}
	q.mu.Unlock()
	// release handed this probe a slot as it was abandoned: pass it on.
	release()
	return nil, errAbandoned
}

// release returns a slot and hands it to the oldest waiting probe that is
// within its client's and target's shares.
func (q *probeQueue) release(client, target string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	c, t := q.clients[client], q.targets[target]
	q.running--
	c.running--
	t.running--
	q.tidy(client, target, c, t)
	for i, w := range q.waiting {
		wc, wt := q.clients[w.client], q.targets[w.target]
		if !q.canRun(wc, wt) {
			continue
		}
		q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
		wc.waiting--
		wt.waiting--
		q.running++
		wc.running++
		wt.running++
		close(w.ready)
		return
	}
}

// tidy forgets shares that hold nothing, so the maps stay as small as the
// set of clients and targets with probes running or waiting.
func (q *probeQueue) tidy(client, target string, c, t *share) {
	if *c == (share{}) {
		delete(q.clients, client)
	}
	if *t == (share{}) {
		delete(q.targets, target)
	}
}

// clientKey is the client address a request's probes are counted against,
// as the request slots count it (httplimit.RequestClientKey).
func clientKey(r *http.Request) string { return httplimit.RequestClientKey(r).String() }

// targetKey is the target a probe is counted against: the pinned address
// when there is one, else the host name (SNI names of one host share it).
func targetKey(t probe.Target) string {
	if t.IP.IsValid() {
		return "ip " + t.IP.Unmap().String()
	}
	return "host " + strings.ToLower(t.Host)
}
