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

// TestSharedPostgresHistory runs two notary replicas on one PostgreSQL
// history: what one observed, the other answers from history without a
// probe (the site is gone by then).
func TestSharedPostgresHistory(t *testing.T) {
	pg := pgtest.Start(t)
	w := newWorld(t, notary.Config{})
	replica := func(name string) *world {
		n, err := testbed.StartNotary(testbed.NotaryOptions{Name: name, Path: w.path, DSN: pg.DSN})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return &world{notary: n, client: pinnedClient(n.Identity.Cert)}
	}
	a, b := replica("a"), replica("b")
	good := "fingerprint=" + sha1Colon(w.site.Leaf().Cert.Raw)
	if code, body := a.post(t, "site.test+443", good); code != http.StatusOK {
		t.Fatalf("replica a: %d %s", code, body)
	}
	w.site.Close()
	code, body := b.post(t, "site.test+443", good)
	if code != http.StatusOK {
		t.Fatalf("replica b, site gone: %d %s (should answer from the shared history)", code, body)
	}
	if fps := convergenceVerify(t, body, b.notary.Identity.Cert); len(fps) != 1 {
		t.Fatalf("replica b history: %v", fps)
	}
}

// TestStalledHistoryIsBounded holds a lock on the PostgreSQL history table
// from another session, as an operator's open transaction or a stuck
// replica would, and checks that requests end with a 500 naming the
// storage failure after RequestTimeout instead of waiting for the lock
// forever (the 20 s client timeout only decides that they hung).
func TestStalledHistoryIsBounded(t *testing.T) {
	pg := pgtest.Start(t)
	w := newWorld(t, notary.Config{})
	n, err := testbed.StartNotary(testbed.NotaryOptions{Name: "pg", Path: w.path, DSN: pg.DSN,
		Config: notary.Config{RequestTimeout: 500 * time.Millisecond, HistoryTTL: -1, MaxProbes: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	c := pinnedClient(n.Identity.Cert)
	c.Timeout = 20 * time.Second
	base := "https://" + n.Addr.String()
	good := "fingerprint=" + sha1Colon(w.site.Leaf().Cert.Raw)

	for _, tt := range []struct {
		name, lock, method, body string
		code                     int
		want                     string
	}{
		// EXCLUSIVE lets reads through and blocks writes: the probe
		// succeeds and recording it stalls past the request's deadline.
		{"write stalls", "EXCLUSIVE", "POST", good, http.StatusServiceUnavailable, "timed out"},
		// ACCESS EXCLUSIVE blocks reads too: the history lookup stalls.
		{"read stalls", "ACCESS EXCLUSIVE", "GET", "", http.StatusInternalServerError, "history unavailable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
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
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "LOCK TABLE pkie_observations IN "+tt.lock+" MODE"); err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(tt.method, base+"/target/site.test+443", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("request hung on the locked history: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code || !strings.Contains(string(b), tt.want) {
				t.Errorf("status %d body %s; want %d with %q", resp.StatusCode, b, tt.code, tt.want)
			}
		})
	}
	// With the locks gone the notary answers again (MaxProbes is 1, so
	// its one probe slot is free).
	resp, err := c.Post(base+"/target/site.test+443", "application/x-www-form-urlencoded", strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("after the locks were released: %d", resp.StatusCode)
	}
}
