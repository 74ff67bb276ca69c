package ctinterop

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/ctfollow"
	"github.com/pkie/pkie/internal/tesseracttest"
	"github.com/pkie/pkie/internal/testbed"
)

// tamperer serves a TesseraCT log's monitoring path as it is, or tampered
// with: data tiles with one byte flipped, or an older checkpoint the log
// really signed in place of the current one.
type tamperer struct {
	tl   *tesseracttest.Log
	mu   sync.Mutex
	mode string // "", "flip" or "old"
	old  []byte
}

func (p *tamperer) set(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
}

func (p *tamperer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	mode, old := p.mode, p.old
	p.mu.Unlock()
	if mode == "old" && r.URL.Path == "/checkpoint" {
		w.Write(old)
		return
	}
	req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, p.tl.MonitoringURL+r.URL.Path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if mode == "flip" && strings.HasPrefix(r.URL.Path, "/tile/data/") && len(b) > 0 {
		b[len(b)/2] ^= 1
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(b)
}

// TestFollowerRefusesTamperedTesseraCT puts a tampering proxy in front of
// TesseraCT's read path and checks that pkie's follower refuses what a
// monitor must refuse, keeping its last verified state: a data tile that
// does not hash to TesseraCT's signed checkpoint (EntriesError), and an
// older checkpoint TesseraCT really signed served after a newer one
// (RollbackError).
func TestFollowerRefusesTamperedTesseraCT(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root, err := testbed.NewRootCA("Interop Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	tl := tesseracttest.Start(t, tesseracttest.Options{Roots: []*x509.Certificate{root.Cert}})
	lc := logClient(t, tl.SubmissionURL, tl.PublicKey)
	c := newCorpus(t, root)
	if _, err := lc.AddChain(ctx, asn1Chain(c.plain.Chain)); err != nil {
		t.Fatal(err)
	}
	_, older, err := tl.WaitSize(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.AddChain(ctx, asn1Chain(c.direct.Chain)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tl.WaitSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	p := &tamperer{tl: tl, old: older}
	srv := httptest.NewServer(p)
	defer srv.Close()
	var refusals []string
	f, err := ctfollow.Open(ctx, ctfollow.Config{Kind: ctfollow.KindStatic, URL: srv.URL, Key: tl.VerifierKey, Dir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OnRefuse: func(reason string, _ error) { refusals = append(refusals, reason) }})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	p.set("flip")
	_, err = f.Sync(ctx, nil)
	var ee *ctfollow.EntriesError
	if !errors.As(err, &ee) || ctfollow.Reason(err) != "entries" {
		t.Fatalf("a flipped byte in TesseraCT's data tile: %v, want an EntriesError", err)
	}
	if st := f.State(); st.Size != 0 || st.KeyCount != 0 {
		t.Fatalf("after a refused sync the state holds %d entries, %d keys", st.Size, st.KeyCount)
	}

	p.set("")
	st, err := f.Sync(ctx, nil)
	if err != nil || st.Size != 2 {
		t.Fatalf("honest sync: %v, size %d", err, st.Size)
	}

	p.set("old")
	_, err = f.Sync(ctx, nil)
	var re *ctfollow.RollbackError
	if !errors.As(err, &re) || re.Verified != 2 || re.Got != 1 {
		t.Fatalf("TesseraCT's own older checkpoint served after a newer one: %v, want a RollbackError from 2 to 1", err)
	}
	if st := f.State(); st.Size != 2 {
		t.Fatalf("after a refused rollback the state holds %d entries, want 2", st.Size)
	}
	if strings.Join(refusals, ",") != "entries,rollback" {
		t.Fatalf("refusals reported: %v, want entries then rollback", refusals)
	}
}
