package notary_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pkie/pkie/internal/notary"
	"github.com/pkie/pkie/internal/pgtest"
	"github.com/pkie/pkie/internal/testbed"
)

// TestHealthzWithReadPoolFull holds every read slot with history reads
// stalled on a locked PostgreSQL history (an operator's open transaction
// or a stuck replica), from two client addresses each at its share, until
// a third address is refused for want of a slot. /healthz and /metrics
// must still answer 200, to the third address and to one whose share is
// taken: a health check that queued behind reads would report a notary
// that is up but slow as down, and a load balancer would pull every
// replica at once.
func TestHealthzWithReadPoolFull(t *testing.T) {
	const reads, share = 4, 2
	pg := pgtest.Start(t)
	w := newWorld(t, notary.Config{})
	n, err := testbed.StartNotary(testbed.NotaryOptions{Name: "pg", Path: w.path, DSN: pg.DSN,
		// The stalled reads must outlast the test; HistoryTTL -1 sends
		// every read to the store.
		Config: notary.Config{MaxReads: reads, MaxRequestsPerClient: share, RequestTimeout: time.Minute, HistoryTTL: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	base := "https://" + n.Addr.String()
	from := func(local string, timeout time.Duration) *http.Client {
		c := pinnedClient(n.Identity.Cert)
		c.Timeout = timeout
		c.Transport.(*http.Transport).DialContext = dialFrom(local).DialContext
		return c
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Released before the notary closes (cleanups run after this), so
	// the stalled reads end.
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "LOCK TABLE pkie_observations IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	// Each stalled read holds its slot while its client waits: a client
	// that gives up closes its connection, which ends the read. They wait
	// until the test ends.
	stalled, stop := context.WithCancel(ctx)
	defer stop()
	for _, local := range []string{"127.0.0.1", "127.0.0.2"} {
		c := from(local, 0)
		for range share {
			go func() {
				// Refused while the third address's probe below holds
				// a slot for its second: ask again.
				for stalled.Err() == nil {
					req, _ := http.NewRequestWithContext(stalled, http.MethodGet, base+"/target/site.test+443", nil)
					resp, err := c.Do(req)
					if err != nil {
						return
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusServiceUnavailable {
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}
	}
	// Full when a third address is refused as a whole pool's overflow,
	// not as its own share's. A probe that gets in before the others
	// stalls like them until its timeout frees its slot.
	third := from("127.0.0.3", time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := third.Get(base + "/target/site.test+443")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), "server overloaded") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the read pool of %d never filled (last: %v)", reads, err)
		}
	}

	for _, local := range []string{"127.0.0.3", "127.0.0.1"} {
		c := from(local, 10*time.Second)
		for _, path := range []string{"/healthz", "/metrics"} {
			resp, err := c.Get(base + path)
			if err != nil {
				t.Fatalf("%s from %s with every read slot held: %v", path, local, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s from %s with every read slot held: %d %s", path, local, resp.StatusCode, b)
			}
		}
	}
}
