package ct_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/ctfollow"
	"github.com/pkie/pkie/internal/ctlog"
	"github.com/pkie/pkie/internal/ctmirror"
	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/prover"
	ctprover "github.com/pkie/pkie/internal/provers/ct"
	"github.com/pkie/pkie/internal/testbed"
)

func openLog(t *testing.T, dir string) *ctlog.Log {
	t.Helper()
	l, err := ctlog.Open(context.Background(), dir, ctlog.Options{BatchMaxAge: 10 * time.Millisecond, CheckpointInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// waitSize waits until l's checkpoint covers n entries.
func waitSize(t *testing.T, l *ctlog.Log, n int) {
	t.Helper()
	for i := 0; i < 100; i++ {
		cp, err := l.Reader().ReadCheckpoint(context.Background())
		if err == nil && strings.Split(string(cp), "\n")[1] == itoa(n) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("log never reached %d entries", n)
}

func itoa(n int) string { return strconv.Itoa(n) }

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMirrorProverEndToEnd: a static-ct-api log on Tessera, served over
// loopback HTTP → the ct prover as the cloud builds it (follower and
// mirror, from its JSON configuration) → the client's ct verifier pinning
// the mirror's and the log's keys: presence for a logged chain, absence
// for another. Then the log forks (a copy of it, under the same key, takes
// other entries): the prover refuses it, counts it, and keeps serving the
// last good tree.
func TestMirrorProverEndToEnd(t *testing.T) {
	ctx := context.Background()
	root, _ := testbed.NewRootCA("Mirror Root", testbed.ECDSAP256)
	ca, _ := root.NewIntermediate("Mirror CA", testbed.ECDSAP256)
	leaf := func() *testbed.Leaf {
		l, err := ca.Issue(testbed.LeafOptions{DNSNames: []string{"www.example.test"}})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	dir := t.TempDir()
	ldir := filepath.Join(dir, "log")
	logKey, err := ctlog.Init(ctx, ldir, "log.mirror.pkie.test/2026", ctlog.InitOptions{Roots: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Cert.Raw})})
	if err != nil {
		t.Fatal(err)
	}
	// The fork: the same log (same key, same empty tree) copied before
	// anything is logged, which will take other entries.
	fdir := filepath.Join(dir, "fork")
	copyTree(t, ldir, fdir)
	honest, forked := openLog(t, ldir), openLog(t, fdir)
	var serveFork atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if serveFork.Load() {
			forked.Handler(ctlog.HandlerOptions{}).ServeHTTP(w, r)
			return
		}
		honest.Handler(ctlog.HandlerOptions{}).ServeHTTP(w, r)
	}))
	defer srv.Close()

	logged, other, never := leaf(), leaf(), leaf()
	if _, err := honest.AddChain(ctx, logged.Chain, false); err != nil {
		t.Fatal(err)
	}
	if _, err := forked.AddChain(ctx, other.Chain, false); err != nil {
		t.Fatal(err)
	}
	waitSize(t, honest, 1)
	waitSize(t, forked, 1)

	mkey, err := ctmirror.GenerateKey(dir, "mirror.pkie.test/ct")
	if err != nil {
		t.Fatal(err)
	}
	cfg := ctprover.ProverConfig{LogURL: srv.URL, LogKey: logKey, MirrorKeyFile: filepath.Join(dir, ctmirror.KeyFile)}
	if err := ctprover.CheckProverConfig(cfg.JSON()); err != nil {
		t.Fatal(err)
	}
	p, err := ctprover.NewProver(ctx, pkie.ProverEnv{DataDir: filepath.Join(dir, "prover")}, cfg.JSON())
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := p.(pkie.Healther); !ok || h.Health() != nil {
		t.Fatalf("prover not healthy after its first sync: %v", h.Health())
	}
	v, err := ct.NewVerifier(ct.VerifierConfig{Key: mkey, LogKey: logKey}.JSON())
	if err != nil {
		t.Fatal(err)
	}
	check := func(l *testbed.Leaf, want pkie.Status, reason string) {
		t.Helper()
		req := &pkie.ProveRequest{Subject: pkie.Subject{Chain: l.Chain}}
		proof, err := p.Prove(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		a := v.Verify(ctx, &pkie.VerifyRequest{Subject: req.Subject, Proof: proof})
		if a.Status != want || !strings.Contains(a.Reason, reason) {
			t.Fatalf("%s: %s %q, want %s with %q", l.Cert.Subject, a.Status, a.Reason, want, reason)
		}
	}
	check(logged, pkie.Pass, "logged: in the sorted tree under mirror.pkie.test/ct's head")
	check(never, pkie.Fail, "absent from the log's sorted tree")

	// The fork: refused, counted, and the last good tree still served.
	serveFork.Store(true)
	type syncer interface {
		Sync(context.Context) (*ctfollow.State, error)
		Status() prover.Status
	}
	ms := p.(syncer)
	before := ms.Status()
	if _, err := ms.Sync(ctx); err == nil {
		t.Fatal("a forked log was accepted")
	}
	if _, err := forked.AddChain(ctx, leaf().Chain, false); err != nil {
		t.Fatal(err)
	}
	waitSize(t, forked, 2)
	var fe *ctfollow.ForkError
	if _, err := ms.Sync(ctx); !errors.As(err, &fe) {
		t.Fatalf("a grown fork: %v, want a ForkError", err)
	}
	after := ms.Status()
	if after.RefusedTrees < 2 || after.Size != before.Size || after.LogSize != 1 || !strings.Contains(after.LastError, "fork") {
		t.Fatalf("status after the fork: %+v", after)
	}
	check(logged, pkie.Pass, "built from log log.mirror.pkie.test/2026's checkpoint of 1 entries")
	check(other, pkie.Fail, "absent")

	// Back to the honest log, grown: it is followed again.
	serveFork.Store(false)
	if _, err := honest.AddChain(ctx, other.Chain, false); err != nil {
		t.Fatal(err)
	}
	waitSize(t, honest, 2)
	if _, err := ms.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	check(other, pkie.Pass, "checkpoint of 2 entries")
}
