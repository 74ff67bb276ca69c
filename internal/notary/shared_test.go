package notary_test

import (
	"net/http"
	"testing"

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
