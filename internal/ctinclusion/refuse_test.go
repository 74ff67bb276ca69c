package ctinclusion

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/loglist"
	"github.com/pkie/pkie/internal/sct"
	"github.com/pkie/pkie/internal/testpki"
)

// TestFetchAcrossTiles logs 600 certificates in pkie's log, so that the
// tree spans three data tiles and two levels of hash tiles, and proves
// entries at tile edges through both of the log's read APIs: audit paths
// built from hash tiles (nodes inside a tile hashed up from its bottom
// row, nodes in a level-1 tile), and get-proof-by-hash.
func TestFetchAcrossTiles(t *testing.T) {
	ctx := context.Background()
	static, rfc := startPKIELog(t, "pkie.tiles.test/log")
	const n = 600
	subs := submitMany(ctx, t, static, 0, n)
	for _, tl := range []*testLog{static, rfc} {
		f := &Fetcher{}
		for _, i := range []int{0, 1, 255, 256, 257, 511, 512, 598, 599} {
			e, err := f.Fetch(ctx, tl.log, subs[i].sct, subs[i].leafHash)
			if err != nil {
				t.Fatalf("%s: entry %d: Fetch: %v", tl.name, i, err)
			}
			r, err := Verify(roundTrip(t, e), tl.log, subs[i].leafHash)
			if err != nil || r.Status != Included || e.LeafIndex != uint64(i) || r.TreeSize != n {
				t.Fatalf("%s: entry %d: %+v at %d, %v; want included at %d in %d", tl.name, i, r, e.LeafIndex, err, i, n)
			}
		}
	}
}

// TestRefused checks that what does not prove inclusion is refused, and
// that only the log's signed word against an SCT is a *MismatchError:
//
//   - an SCT whose leaf_index names another certificate's entry: Fetch
//     returns the Conflict evidence and a *MismatchError, and so does
//     Verify of that evidence after the proof body carried it;
//   - a tampered audit path, a NotYet for a tree that covers the index,
//     a tree head signed by another log's key: ErrBadEvidence;
//   - a stopped log: a Fetch error that is neither (a failed lookup),
//     while a Fetcher that cached the log's tree head and tiles still
//     answers for what it had read.
func TestRefused(t *testing.T) {
	ctx := context.Background()
	for _, c := range testLogs {
		t.Run(c.name, func(t *testing.T) {
			tl := c.start(t)
			a := tl.submitCert(ctx, t, "a.refuse.test")
			b := tl.submitCert(ctx, t, "b.refuse.test")
			f := &Fetcher{}
			good, err := f.Fetch(ctx, tl.log, a.sct, a.leafHash)
			if err != nil {
				t.Fatal(err)
			}

			if tl.log.Kind == loglist.Static {
				// b's certificate, with the leaf index of a's entry.
				ia, _, _ := a.sct.LeafIndex()
				forged := withLeafIndex(t, b.sct, ia)
				// The x509_entry commits to the certificate, the timestamp
				// and the extensions: b's entry with the forged leaf_index.
				entry := b.entry.LeafHash(forged)
				e, err := f.Fetch(ctx, tl.log, forged, entry)
				var m *MismatchError
				if !errors.As(err, &m) || e == nil || e.Status != Conflict || e.Leaf != a.leafHash || m.LeafIndex != ia {
					t.Fatalf("SCT naming another entry: Fetch: %+v, %v; want Conflict evidence and a *MismatchError", e, err)
				}
				r, err := Verify(roundTrip(t, e), tl.log, entry)
				if !errors.As(err, &m) || r == nil || r.Status != Conflict {
					t.Fatalf("SCT naming another entry: Verify: %+v, %v; want a *MismatchError", r, err)
				}
				if !strings.Contains(err.Error(), tl.log.Description) {
					t.Errorf("the mismatch does not name the log: %v", err)
				}
			}

			bad := []struct {
				name   string
				mutate func(e *Evidence)
			}{
				{"tampered audit path", func(e *Evidence) { e.Proof[0][0] ^= 1 }},
				{"audit path one hash short", func(e *Evidence) { e.Proof = e.Proof[:len(e.Proof)-1] }},
				{"another leaf index", func(e *Evidence) { e.LeafIndex ^= 1 }},
				{"not yet, but the tree covers the index", func(e *Evidence) {
					e.Status, e.Proof = NotYet, nil
					if tl.log.Kind == loglist.RFC6962 {
						e.Status = Conflict // an RFC 6962 NotYet names no index: make it a conflict the proof does not back
						e.Proof, e.Leaf = good.Proof, [32]byte{7}
					}
				}},
				{"tampered tree head", func(e *Evidence) { e.Checkpoint[len(e.Checkpoint)/3] ^= 1 }},
			}
			for _, c := range bad {
				e := roundTrip(t, good)
				c.mutate(e)
				var m *MismatchError
				if _, err := Verify(e, tl.log, a.leafHash); !errors.Is(err, ErrBadEvidence) || errors.As(err, &m) {
					t.Errorf("%s: Verify: %v; want ErrBadEvidence", c.name, err)
				}
			}

			// The same evidence checked against another log of the same
			// origin and kind but another key.
			other := c.start(t)
			e := roundTrip(t, good)
			e.LogID = other.log.ID
			if _, err := Verify(e, other.log, a.leafHash); !errors.Is(err, ErrBadEvidence) {
				t.Errorf("tree head signed by another key: Verify: %v; want ErrBadEvidence", err)
			} else {
				t.Logf("tree head signed by another key: %v", err)
			}

			tl.stop()
			_, err = (&Fetcher{}).Fetch(ctx, tl.log, b.sct, b.leafHash)
			var m *MismatchError
			if err == nil || errors.Is(err, ErrBadEvidence) || errors.As(err, &m) {
				t.Errorf("stopped log: Fetch: %v; want a failed lookup", err)
			} else if !strings.Contains(err.Error(), tl.log.Description) {
				t.Errorf("stopped log: the error does not name the log: %v", err)
			}
			if tl.log.Kind == loglist.Static {
				if e, err := f.Fetch(ctx, tl.log, a.sct, a.leafHash); err != nil || e.Status != Included {
					t.Errorf("stopped log, cached tree head and tiles: Fetch: %v", err)
				}
			}
		})
	}
}

// submitMany logs n fresh certificates in pkie's log at once and returns
// them by leaf index, from first on.
func submitMany(ctx context.Context, t *testing.T, tl *testLog, first, n int) []submitted {
	t.Helper()
	subs := make([]submitted, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			leaf, err := tl.ca.Issue(testpki.LeafOptions{DNSNames: []string{fmt.Sprintf("c%d-%d.tiles.test", first, i)}})
			if err != nil {
				errs <- err
				return
			}
			r, err := tl.pkie.AddChain(ctx, append([][]byte{leaf.Cert.Raw}, tl.ca.Chain()...), false)
			if err != nil {
				errs <- err
				return
			}
			raw, err := r.JSON().ToSignedCertificateTimestamp()
			if err != nil {
				errs <- err
				return
			}
			s := parseSCT(t, raw, sct.TLSExtension)
			e, err := sct.EntryFor(s, leaf.Cert, nil)
			if err != nil {
				errs <- err
				return
			}
			if r.Index < uint64(first) || r.Index >= uint64(first+n) {
				errs <- fmt.Errorf("entry at %d, want %d to %d", r.Index, first, first+n-1)
				return
			}
			subs[int(r.Index)-first] = submitted{sct: s, entry: e, leafHash: e.LeafHash(s)}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return subs
}

// TestFetchPartialTileReplaced reads, for a tree head that was current
// when the tree had 300 entries, tiles that were partial then and are
// full now, through a web server that has dropped every partial tile
// whose full tile exists (tlog-tiles lets a log do so): the Fetcher reads
// the full tiles and takes what the older tree covered.
func TestFetchPartialTileReplaced(t *testing.T) {
	ctx := context.Background()
	tl, _ := startPKIELog(t, "pkie.partial.test/log")
	subs := submitMany(ctx, t, tl, 0, 300)
	upstream := tl.log.MonitoringURL
	var dropped atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if full, _, ok := strings.Cut(r.URL.Path, ".p/"); ok {
			if resp, err := http.Get(upstream + full); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					dropped.Add(1)
					http.NotFound(w, r)
					return
				}
			}
		}
		resp, err := http.Get(upstream + r.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(front.Close)
	l := *tl.log
	l.MonitoringURL = front.URL
	f := &Fetcher{Refresh: time.Hour, MinRefresh: time.Hour}
	if e, err := f.Fetch(ctx, &l, subs[0].sct, subs[0].leafHash); err != nil || e.Status != Included {
		t.Fatalf("entry 0 in the tree of 300: %v", err)
	}
	submitMany(ctx, t, tl, 300, 300)
	for _, i := range []int{256, 299} {
		e, err := f.Fetch(ctx, &l, subs[i].sct, subs[i].leafHash)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if r, err := Verify(e, &l, subs[i].leafHash); err != nil || r.TreeSize != 300 {
			t.Fatalf("entry %d: %+v, %v; want included in the cached tree of 300", i, r, err)
		}
	}
	if dropped.Load() == 0 {
		t.Fatal("no partial tile was replaced; the test proves nothing")
	}
}

// TestFetchCaches checks that a Fetcher asked again and again about the
// same static-ct-api log, as a cloud is on every request, asks the log
// only once within Refresh: the checkpoint is kept, the tiles too; and
// that concurrent Fetches while the log is down make one request.
func TestFetchCaches(t *testing.T) {
	ctx := context.Background()
	tl, _ := startPKIELog(t, "pkie.cache.test/log")
	a := tl.submitCert(ctx, t, "a.cache.test")
	b := tl.submitCert(ctx, t, "b.cache.test")
	u, err := url.Parse(tl.log.MonitoringURL)
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int64
	var down atomic.Bool
	proxy := httputil.NewSingleHostReverseProxy(u)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if down.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	l := *tl.log
	l.MonitoringURL = front.URL
	f := &Fetcher{Refresh: time.Hour}
	for i := range 20 {
		for _, s := range []submitted{a, b} {
			if e, err := f.Fetch(ctx, &l, s.sct, s.leafHash); err != nil || e.Status != Included {
				t.Fatalf("round %d: %v", i, err)
			}
		}
		if i == 0 {
			t.Logf("first round: %d requests", requests.Load())
		}
	}
	// The checkpoint, one data tile, one hash tile.
	if n := requests.Load(); n > 3 {
		t.Errorf("40 fetches of 2 SCTs made %d requests to the log; want at most 3", n)
	}

	// The log down: a Fetcher that has no tree head of it asks once,
	// and remembers the failure for MinRefresh.
	down.Store(true)
	requests.Store(0)
	f = &Fetcher{MinRefresh: time.Hour}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.Fetch(ctx, &l, a.sct, a.leafHash); err == nil || !strings.Contains(err.Error(), "503") {
				t.Errorf("log down: Fetch: %v; want its 503", err)
			}
		}()
	}
	wg.Wait()
	if n := requests.Load(); n != 1 {
		t.Errorf("20 fetches while the log was down made %d requests; want 1", n)
	}
}

// TestFetchEmptyDataTile: a log that answers a data tile with an empty
// body gets a clear error naming it, not a crash of the process that
// asked (a PEC cloud fetches in goroutines nothing recovers).
func TestFetchEmptyDataTile(t *testing.T) {
	ctx := context.Background()
	tl, _ := startPKIELog(t, "pkie.emptytile.test/log")
	subs := submitMany(ctx, t, tl, 0, 3)
	upstream := tl.log.MonitoringURL
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/tile/data/") {
			w.WriteHeader(http.StatusOK) // and no entry
			return
		}
		resp, err := http.Get(upstream + r.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(front.Close)
	l := *tl.log
	l.MonitoringURL = front.URL
	f := &Fetcher{}
	_, err := f.Fetch(ctx, &l, subs[0].sct, subs[0].leafHash)
	if err == nil || !strings.Contains(err.Error(), "data tile 0: ctwire: data tile: empty") {
		t.Fatalf("Fetch with an empty data tile: %v; want an error naming the empty tile", err)
	}
}
